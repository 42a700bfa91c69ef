"""The digest stage: the native batch engine's face, record layout and flags, and the pure-Python
reference implementations."""
