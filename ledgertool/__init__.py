"""ledgertool: verifier-side tooling for network-traffic digest ledgers.

A hashing device behind a TAP computes a keyed digest of every Ethernet frame and appends it
to an append-only ledger; ledgertool builds such ledgers from captures (`capture`), checks them
(`verify`), reconciles them with recomputed traffic (`recompute`) and queries them (`query`).
"""

import os as _os

__version__ = "0.1.0"

# numpy's OpenBLAS starts one spinning thread per core on import; ledgertool does no BLAS work, and
# those threads took a core from the digest workers on a 2-core machine (docs/benchmarks.md).
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
