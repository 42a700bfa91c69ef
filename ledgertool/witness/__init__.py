"""A C2SP tlog-witness for ledgertool checkpoints (server: state and HTTP), and the client side
that collects cosignatures (docs/transparency.md, "Witnesses"). Formats: ledgertool.seal.witness."""
