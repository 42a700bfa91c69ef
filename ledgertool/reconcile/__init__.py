"""Reconciliation: recompute and multiset pairing, SQL over verified ledgers, dissection."""
