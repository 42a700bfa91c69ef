"""Verification: the ledger walk and inclusion proofs."""
