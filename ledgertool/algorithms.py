"""Registry of digest algorithms and strip modes: names, sizes, native ids, guarantees.

Names are the CLI contract (docs/cli.md); ids and sizes come from the native registry (LT_ALG_*,
LT_STRIP_*, lt_key_size / lt_digest_size of native/include/ledgertool.h). Each algorithm here has a
native implementation in native/src (one or more CPU paths, see engine.cpu_path) and an independent
reference used by the tests (tests/test_siphash.py, tests/test_digests.py). The guarantees are
spelled out with their sources in docs/algorithms.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._binding import lib
from .errors import AlgorithmError


@dataclass(frozen=True)
class Algorithm:
    """A keyed digest algorithm.

    key_size / digest_size are bytes. `ledger_ok` is False for 64-bit variants, which collide
    within seconds at 400GbE (birthday bound) and are accepted by `bench` only. `creation_warning`
    is printed whenever a ledger with this algorithm is created. `risk_opt_in` is the capture flag
    without which such a ledger is not created at all, and `caveat` the line `verify`, `recompute`
    and `check-proof` add to every verdict on one (both None for algorithms with no such risk).
    """

    name: str
    native_id: int
    key_size: int
    digest_size: int
    ledger_ok: bool
    secret_key: str
    known_key: str
    reference: str
    creation_warning: str | None = None
    risk_opt_in: str | None = None
    caveat: str | None = None


_SIP_SECRET = (
    "PRF: digests are unpredictable and unforgeable to anyone without the key "
    "(SipHash security claim, 128-bit output)"
)
_SIP64_SECRET = (
    "PRF with a 64-bit output: unforgeable without the key, but any 2^32 frames are likely to "
    "contain a collision (birthday bound); bench only"
)
_SIP_KNOWN = (
    "none: SipHash is not collision resistant; a prover who knows the key can "
    "construct colliding frames"
)

_GMAC_SECRET = (
    "MAC: unforgeable and unpredictable while the tags stay secret from the prover "
    "(NIST SP 800-38D); with the fixed all-zero IV, anyone who sees two (frame, tag) pairs "
    "can solve for the GHASH key H and forge tags for any frame"
)
_GMAC_KNOWN = (
    "none: with the key, GHASH is linear in the frame, so colliding frames are trivial to construct"
)
GMAC_WARNING = (
    "aes-128-gmac uses a fixed all-zero IV: anyone who sees two (frame, tag) pairs can "
    "solve for the GHASH key and forge tags, so this ledger is only sound while its "
    "digests stay secret from the prover (docs/algorithms.md)"
)
GMAC_OPT_IN = "--accept-gmac-forgery-risk"
GMAC_CAVEAT = (
    "aes-128-gmac with its fixed IV: anyone who has seen two (frame, tag) pairs of this ledger, "
    "as its holder has, can compute the tag of any frame without the key, so this verdict shows "
    "that frames were captured only if the tags never reached the prover (docs/algorithms.md, "
    '"GMAC with a fixed IV")'
)
_B3_SECRET = "PRF/MAC: unpredictable and unforgeable without the key (BLAKE3 keyed_hash)"
_B3_KNOWN = (
    "collision resistant: BLAKE3 stays a collision-resistant hash with a known key "
    "(~2^{} work for a collision at {}-bit output)"
)
_HMAC_SECRET = "PRF/MAC: unforgeable without the key (RFC 2104, RFC 4231; truncated to 128 bits)"
_HMAC_KNOWN = (
    "collision resistant: colliding frames need a SHA-256 collision; ~2^64 work at the "
    "128-bit truncation (birthday bound)"
)


def _algorithm(name: str, native_id: int, *args, **kwargs) -> Algorithm:
    """An Algorithm with its id (LT_ALG_*) and its key and digest sizes as the native registry
    has them."""
    return Algorithm(
        name, native_id, lib.lt_key_size(native_id), lib.lt_digest_size(native_id), *args, **kwargs
    )


ALGORITHMS: dict[str, Algorithm] = {
    a.name: a
    for a in (
        _algorithm(
            "siphash-1-3-128",
            lib.LT_ALG_SIPHASH_1_3_128,
            True,
            _SIP_SECRET,
            _SIP_KNOWN,
            "Aumasson & Bernstein, SipHash: a fast short-input PRF, INDOCRYPT 2012",
        ),
        _algorithm(
            "siphash-2-4-128",
            lib.LT_ALG_SIPHASH_2_4_128,
            True,
            _SIP_SECRET,
            _SIP_KNOWN,
            "Aumasson & Bernstein, SipHash: a fast short-input PRF, INDOCRYPT 2012",
        ),
        _algorithm(
            "siphash-1-3-64",
            lib.LT_ALG_SIPHASH_1_3_64,
            False,
            _SIP64_SECRET,
            _SIP_KNOWN,
            "bench only: 64-bit digests collide after ~2^32 frames",
        ),
        _algorithm(
            "siphash-2-4-64",
            lib.LT_ALG_SIPHASH_2_4_64,
            False,
            _SIP64_SECRET,
            _SIP_KNOWN,
            "bench only: 64-bit digests collide after ~2^32 frames",
        ),
        _algorithm(
            "aes-128-gmac",
            lib.LT_ALG_AES_128_GMAC,
            True,
            _GMAC_SECRET,
            _GMAC_KNOWN,
            "NIST SP 800-38D (GCM/GMAC), empty plaintext, frame as AAD, all-zero 96-bit IV",
            creation_warning=GMAC_WARNING,
            risk_opt_in=GMAC_OPT_IN,
            caveat=GMAC_CAVEAT,
        ),
        _algorithm(
            "blake3-keyed-128",
            lib.LT_ALG_BLAKE3_KEYED_128,
            True,
            _B3_SECRET,
            _B3_KNOWN.format(64, 128),
            "O'Connor, Aumasson, Neves, Wilcox-O'Hearn, BLAKE3 specification (2020), keyed_hash",
        ),
        _algorithm(
            "blake3-keyed-256",
            lib.LT_ALG_BLAKE3_KEYED_256,
            True,
            _B3_SECRET,
            _B3_KNOWN.format(128, 256),
            "O'Connor, Aumasson, Neves, Wilcox-O'Hearn, BLAKE3 specification (2020), keyed_hash",
        ),
        _algorithm(
            "hmac-sha256-128",
            lib.LT_ALG_HMAC_SHA256_128,
            True,
            _HMAC_SECRET,
            _HMAC_KNOWN,
            "RFC 2104 (HMAC), FIPS 180-4 (SHA-256), RFC 4231 (test cases, truncation)",
        ),
    )
}

# Strip modes: name -> native id (definitions in digest/strip.py, rules in docs/strip-modes.md).
STRIP_MODES: dict[str, int] = {
    "frame": lib.LT_STRIP_FRAME,
    "l3": lib.LT_STRIP_L3,
    "payload": lib.LT_STRIP_PAYLOAD,
    "rdma": lib.LT_STRIP_RDMA,
}


def get_algorithm(name: str, *, for_ledger: bool = True) -> Algorithm:
    """Look up an algorithm by its CLI name.

    Raises AlgorithmError for an unknown name, or (for_ledger=True) a 64-bit algorithm.
    """
    try:
        alg = ALGORITHMS[name]
    except KeyError:
        raise AlgorithmError(
            f"unknown algorithm {name!r}; known: "
            f"{', '.join(a for a in ALGORITHMS if ALGORITHMS[a].ledger_ok)}"
        ) from None
    if for_ledger and not alg.ledger_ok:
        raise AlgorithmError(
            f"{name} gives {alg.digest_size * 8}-bit digests, which a ledger refuses: by the "
            "birthday bound a 64-bit digest expects its first collision after ~5.4e9 frames, about "
            "9 s at 400GbE with 64-byte frames (595 Mframes/s)"
        )
    return alg


def get_strip_mode(name: str) -> int:
    """Native id of a strip mode; raises AlgorithmError for one not (yet) supported."""
    try:
        return STRIP_MODES[name]
    except KeyError:
        raise AlgorithmError(
            f"unsupported strip mode {name!r}; supported: {', '.join(STRIP_MODES)}"
        ) from None


def algorithm_caveat(name: object) -> str | None:
    """The caveat a verdict on a ledger (or proof) of algorithm `name` carries, None when there is
    none or the name is unknown (which the caller reports on its own)."""
    alg = ALGORITHMS.get(name) if isinstance(name, str) else None
    return alg.caveat if alg else None
