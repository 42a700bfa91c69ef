"""The ledger directory: layout and header, open segments, the segment index and reader."""
