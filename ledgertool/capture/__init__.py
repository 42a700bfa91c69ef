"""Capture runs: frames from a source through the engine into a ledger's segments."""
