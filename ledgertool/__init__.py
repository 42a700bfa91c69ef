"""ledgertool: verifier-side tooling for network-traffic digest ledgers.

A hashing device behind a TAP computes a keyed digest of every Ethernet frame and appends it
to an append-only ledger; ledgertool builds such ledgers from captures (`capture`), checks them
(`verify`), reconciles them with recomputed traffic (`recompute`) and queries them (`query`).
"""

__version__ = "0.1.0"
