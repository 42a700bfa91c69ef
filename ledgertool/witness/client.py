"""Collecting cosignatures for a link's checkpoint from tlog-witnesses: the add-checkpoint
exchange (learn the size the witness holds from its 409, send the RFC 9162 consistency proof from
it, built from the ledger's seal hashes) and the check of the returned line against the witness's
vkey before it is added to the note."""

from __future__ import annotations

import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from ..errors import DiscrepancyError, HostError, LedgerFormatError
from ..ledger.checkpoints import link_tree
from ..plural import plural
from ..seal import merkle
from ..seal.checkpoint import parse_note, seal_leaf_hashes
from ..seal.witness import NoteKey, cosignatures, request_body, with_signatures

TIMEOUT_S = 30


@dataclass(frozen=True)
class WitnessSpec:
    url: str
    key: NoteKey


def _post(url: str, body: bytes) -> tuple[int, str, bytes]:
    req = urllib.request.Request(
        url.rstrip("/") + "/add-checkpoint",
        data=body,
        method="POST",
        headers={"Content-Type": "text/plain"},
    )
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as r:  # noqa: S310 (the user's URL)
            return r.status, r.headers.get("Content-Type", ""), r.read(1 << 16)
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read(1 << 16)
    except (urllib.error.URLError, OSError) as e:
        why = getattr(e, "reason", e)  # the OSError's words, not its "[Errno 111]" repr
        text = why.strerror if isinstance(why, OSError) and why.strerror else str(why)
        raise HostError(f"witness {url}: cannot reach it: {text}") from None


def _proof(directory: Path, link: str, old: int, new: int, root: bytes) -> list[bytes]:
    tree = link_tree(directory, link)
    if len(tree.seal_hashes) < new:
        raise LedgerFormatError(
            f"{directory}: link {link} holds {plural(len(tree.seal_hashes), 'segment')}, fewer "
            f"than the checkpoint's {new}"
        )
    leaves = seal_leaf_hashes(tree.seal_hashes[:new])
    if merkle.root_from_leaf_hashes(leaves) != root:
        raise LedgerFormatError(f"{directory}: the ledger's tree of link {link} is not the note's")
    return merkle.consistency_proof(old, leaves)


def cosign(directory: Path, note: bytes, w: WitnessSpec) -> str:
    """One witness's cosignature line for `note` (checked against its vkey). DiscrepancyError when
    the witness refuses (it holds a larger or another tree: a rollback or a fork), HostError when
    it cannot be reached."""
    cp = parse_note(note).checkpoint
    old = 0
    for _ in range(3):
        proof = [] if old in (0, cp.size) else _proof(directory, cp.link, old, cp.size, cp.root)
        status, ctype, body = _post(w.url, request_body(old, proof, note))
        text = body.decode("utf-8", "replace").strip()
        if status == 409 and ctype.startswith("text/x.tlog.size"):
            held = int(text) if text.isdigit() else -1
            if held > cp.size or held < 0:
                raise DiscrepancyError(
                    f"witness {w.url} holds {plural(held, 'segment')} of {cp.origin}, more than "
                    f"this checkpoint's {cp.size}: it is a rollback, not cosigned"
                )
            old = held
            continue
        if status != 200:
            raise DiscrepancyError(f"witness {w.url} refused the checkpoint ({status}: {text})")
        lines = [ln + "\n" for ln in body.decode("utf-8", "replace").split("\n") if ln]
        for line in lines:
            try:
                got = cosignatures(parse_note(with_signatures(note, [line])), [w.key])
            except LedgerFormatError:
                continue
            if any(c.valid for c in got):
                return line
        raise DiscrepancyError(
            f"witness {w.url} answered without a valid cosignature by {w.key.name}"
        )
    raise DiscrepancyError(f"witness {w.url}: its size kept changing; try again")
