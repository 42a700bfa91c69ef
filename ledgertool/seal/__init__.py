"""Pure format code: canonical JSON, Merkle trees, seal documents, rotation statements,
checkpoint notes."""
