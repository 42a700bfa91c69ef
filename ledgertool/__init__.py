"""ledgertool: verifier-side tooling for network-traffic digest ledgers.

A hashing device behind a TAP computes a keyed digest of every Ethernet frame and appends it
to an append-only ledger; ledgertool builds such ledgers from captures (`capture`), checks them
(`verify`), reconciles them with recomputed traffic (`recompute`) and queries them (`query`).

The Python API (docs/api.md) is the names in `__all__`, importable from here:

    import ledgertool
    bundle = ledgertool.TrustBundle.load("keys/verifier.pub")
    result = ledgertool.verify_ledger("ledger", bundle)

Each is resolved on first use (module `__getattr__`, PEP 562), so `import ledgertool` loads
no numpy, cffi, pyarrow or DuckDB until a script calls into them.
"""

import importlib as _importlib
import os as _os

from ._version import __version__
from .errors import DataError, HostError, LedgerError

# numpy's OpenBLAS starts one spinning thread per core on import; ledgertool does no BLAS work, and
# those threads took a core from the digest workers on a 2-core machine.
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

#: public name -> "module:attribute" that defines it (imported on first use)
_API = {
    # keys
    "DigestKey": "ledgertool.keyfiles:DigestKey",
    "SigningKey": "ledgertool.keyfiles:SigningKey",
    "TrustBundle": "ledgertool.keyfiles:TrustBundle",
    "generate_keys": "ledgertool.keyfiles:generate_keys",
    "DeviceState": "ledgertool.ledger.devstate:DeviceState",
    # capture and recovery
    "capture_file": "ledgertool.capture.run:capture_file",
    "recover_ledger": "ledgertool.ledger.recover:recover_ledger",
    "compact_ledger": "ledgertool.ledger.compact:compact_ledger",
    # a ledger: its header, verification, checkpoints, proofs
    "load_ledger": "ledgertool.ledger.header:load_ledger",
    "verify_ledger": "ledgertool.verify.ledger:verify_ledger",
    "export_checkpoint": "ledgertool.ledger.checkpoints:export_checkpoint",
    "check_consistency": "ledgertool.ledger.checkpoints:check_consistency",
    "build_proof": "ledgertool.verify.proof:build_proof",
    "build_window_proof": "ledgertool.verify.proof:build_window_proof",
    "load_proof": "ledgertool.verify.proof:load_proof",
    "check_proof": "ledgertool.verify.proof:check_proof",
    # recompute, reconcile, query
    "digests_to_parquet": "ledgertool.reconcile.recompute:digests_to_parquet",
    # `ledgertool recompute` (ledgertool.reconcile: the package)
    "recompute": "ledgertool.reconcile.recompute:reconcile",
    "run_query": "ledgertool.reconcile.query:run_query",
    # capacity planning
    "collision_table": "ledgertool.plan:collision_table",
    "storage_table": "ledgertool.plan:storage_table",
}

__all__ = ["__version__", "LedgerError", "DataError", "HostError", *_API]


def __getattr__(name: str):
    target = _API.get(name)
    if target is None:
        raise AttributeError(f"module 'ledgertool' has no attribute {name!r}")
    module, attr = target.split(":")
    value = getattr(_importlib.import_module(module), attr)
    globals()[name] = value  # resolved once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
