"""The device's protected state: what a signing key has signed, kept beside the key file, where the
custodian of the ledger's storage cannot write (docs/threat-model.md, "The device's protected
state").

A sealed v2 segment is byte for byte an authenticated open segment, and the chain head is read from
storage; without a memory of its own, a device shown an older copy of a ledger (a seal deleted, a
sealed file renamed back to `.open`) would sign a second, shorter history. So `KEYFILE.state/`
(mode 0700) holds one file per ledger id, `LEDGER_ID.json` (mode 0600, replaced atomically and
durably): per link the last seal the device signed (segment index, seal hash, last seq) and its
latest checkpoint (tree size and root), and the latest rotation statement the key signed (number
and hash). Before anything is signed for a ledger (a seal, a checkpoint, a rotation statement),
its seals in storage must reach that seal with that hash and give that checkpoint's root, and its
rotations must hold that statement (RollbackRefusedError otherwise); an open segment at or before
the remembered seal is refused. The entry is updated after what was signed is durable, so a crash
leaves storage at or ahead of it. A rotation carries the old key's entry into the new key's state:
the new key is protected from its first use.
`LEDGER_ID.lock` is held (flock) while a writer uses the entry: two copies of one ledger are never
extended at once with one key.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from .. import fsio
from ..errors import KeyFileError, LedgerLockedError, RollbackRefusedError
from ..plural import plural
from ..seal.checkpoint import Checkpoint, LinkTree
from ..seal.rotation import rotation_hash
from .checkpoints import link_tree
from .index import links, segment_files
from .layout import check_link_name, window_log_link
from .rotations import load_rotations
from .sealer import load_seal

STATE_FORMAT = "ledgertool-device-state-v1"
#: the state directory of KEYFILE is KEYFILE + this suffix, in the key file's directory
STATE_SUFFIX = ".state"
_MAX_STATE_BYTES = 1 << 20
_LEDGER_ID = re.compile(r"[0-9a-f]{32}")
_HASH = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class LinkMark:
    """What the device last signed on one link: its last seal and its latest checkpoint."""

    segment: int  # index of the last seal
    seal_hash: str  # hex SHA-256 of that seal (seal.document.seal_hash)
    last_seq: int  # of its last record
    checkpoint_size: int = 0  # segments the latest checkpoint covers (0: none signed yet)
    checkpoint_root: str = ""  # its root, hex

    def to_json(self) -> dict:
        return {
            "segment": self.segment,
            "seal_hash": self.seal_hash,
            "last_seq": str(self.last_seq),
            "checkpoint_size": self.checkpoint_size,
            "checkpoint_root": self.checkpoint_root,
        }

    @classmethod
    def from_json(cls, doc: object, where: str) -> LinkMark:
        """KeyFileError naming `where` for anything but the members to_json writes."""
        ok = (
            isinstance(doc, dict)
            and set(doc)
            == {"segment", "seal_hash", "last_seq", "checkpoint_size", "checkpoint_root"}
            and type(doc["segment"]) is int
            and 0 <= doc["segment"] < 1 << 32
            and isinstance(doc["seal_hash"], str)
            and _HASH.fullmatch(doc["seal_hash"])
            and isinstance(doc["last_seq"], str)
            and doc["last_seq"].isascii()
            and doc["last_seq"].isdigit()
            and type(doc["checkpoint_size"]) is int
            and 0 <= doc["checkpoint_size"] <= doc["segment"] + 1
            and isinstance(doc["checkpoint_root"], str)
            and (
                _HASH.fullmatch(doc["checkpoint_root"])
                or doc["checkpoint_root"] == ""
                and doc["checkpoint_size"] == 0
            )
        )
        if not ok:
            raise KeyFileError(f"{where}: not a link entry of {STATE_FORMAT}")
        return cls(
            doc["segment"],
            doc["seal_hash"],
            int(doc["last_seq"]),
            doc["checkpoint_size"],
            doc["checkpoint_root"],
        )


@dataclass(frozen=True)
class RotationMark:
    """The latest rotation statement the key signed for a ledger (as old key, new key, or signer
    of a digest-key rotation)."""

    number: int
    rotation_hash: str  # hex, seal.rotation.rotation_hash

    def to_json(self) -> dict:
        return {"number": self.number, "rotation_hash": self.rotation_hash}

    @classmethod
    def from_json(cls, doc: object, where: str) -> RotationMark:
        ok = (
            isinstance(doc, dict)
            and set(doc) == {"number", "rotation_hash"}
            and type(doc["number"]) is int
            and 1 <= doc["number"] < 1 << 32
            and isinstance(doc["rotation_hash"], str)
            and _HASH.fullmatch(doc["rotation_hash"])
        )
        if not ok:
            raise KeyFileError(f"{where}: not a rotation entry of {STATE_FORMAT}")
        return cls(doc["number"], doc["rotation_hash"])


class DeviceState:
    """A signing key's protected state directory (KEYFILE.state). `ledger` opens one ledger's
    entry."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)

    @classmethod
    def beside(cls, key_path: str | os.PathLike[str]) -> DeviceState:
        """The state of the signing key stored at `key_path`: `KEYFILE.state/` next to it."""
        p = Path(key_path)
        return cls(p.with_name(p.name + STATE_SUFFIX))

    def _make_dir(self) -> None:
        try:
            os.mkdir(self.directory, 0o700)
        except FileExistsError:
            pass
        except OSError as e:
            raise fsio.storage_error(
                e, self.directory, "create the signing key's state directory"
            ) from None
        # the key's directory is the operator's: a link there is theirs
        st = os.stat(self.directory)
        if not stat.S_ISDIR(st.st_mode):
            raise KeyFileError(
                f"{self.directory}: is not a directory (the signing key's protected state)"
            )
        if st.st_mode & 0o077:
            raise KeyFileError(
                f"{self.directory}: mode {stat.S_IMODE(st.st_mode):04o} lets group or others in; "
                f"the signing key's protected state must be the key holder's only (chmod 700)"
            )

    @contextmanager
    def ledger(self, ledger_id: str) -> Iterator[LedgerMarks]:
        """Ledger `ledger_id`'s entry with its lock held until the block ends. LedgerLockedError
        while another writer with this key holds it; KeyFileError for an entry that does not
        parse."""
        if not _LEDGER_ID.fullmatch(ledger_id):
            raise ValueError(f"ledger id {ledger_id!r} is not 32 lowercase hex digits")
        self._make_dir()
        lock_path = self.directory / f"{ledger_id}.lock"
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        except OSError as e:
            raise fsio.storage_error(e, lock_path, "open the signing key's state lock") from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise LedgerLockedError(
                    f"{lock_path}: another writer with this signing key is extending ledger "
                    f"{ledger_id} (a copy of it elsewhere?); wait for it to finish"
                ) from None
            yield LedgerMarks.load(self.directory / f"{ledger_id}.json", ledger_id)
        finally:
            os.close(fd)


class LedgerMarks:
    """One ledger's entry of the device state, its lock held (DeviceState.ledger). Writers call
    `check_link` before they sign for a link (`check_ledger` for every link), `check_open` before
    they seal an open segment, and `sealed` / `checkpointed` / `rotated` once what they signed is
    durable. `notes` says, once, that an entry was started from the storage (nothing to protect it
    from before)."""

    def __init__(
        self,
        path: Path,
        ledger_id: str,
        links: dict[str, LinkMark],
        rotation: RotationMark | None = None,
    ):
        self.path = path
        self.ledger_id = ledger_id
        self.links = links
        self.rotation = rotation
        self.notes: list[str] = []

    @classmethod
    def load(cls, path: Path, ledger_id: str) -> LedgerMarks:
        if not os.path.lexists(path):
            return cls(path, ledger_id, {})
        data = fsio.read_regular(path, _MAX_STATE_BYTES, what="the signing key's protected state")
        try:
            doc = json.loads(bytes(data))
        except ValueError:
            doc = None
        required = {"format", "ledger_id", "links"}
        if not (
            isinstance(doc, dict)
            and doc.get("format") == STATE_FORMAT
            and doc.get("ledger_id") == ledger_id
            and isinstance(doc.get("links"), dict)
            and required <= set(doc) <= required | {"rotation"}
        ):
            raise KeyFileError(
                f"{path}: not a {STATE_FORMAT} document of ledger {ledger_id}; restore it from the "
                "key holder's backup (docs/threat-model.md, \"The device's protected state\")"
            )
        links = {}
        for name, mark in doc["links"].items():
            if window_log_link(name) is None:  # a link, or a link's window log
                check_link_name(name)
            links[name] = LinkMark.from_json(mark, f"{path}: link {name}")
        rotation = None
        if "rotation" in doc:
            rotation = RotationMark.from_json(doc["rotation"], f"{path}: rotation")
        return cls(path, ledger_id, links, rotation)

    def _save(self) -> None:
        doc = {
            "format": STATE_FORMAT,
            "ledger_id": self.ledger_id,
            "links": {k: m.to_json() for k, m in sorted(self.links.items())},
        }
        if self.rotation is not None:
            doc["rotation"] = self.rotation.to_json()
        fsio.write_atomic(
            self.path,
            (json.dumps(doc, indent=1) + "\n").encode(),
            mode=0o600,
            what="the signing key's protected state",
        )

    def check_ledger(self, directory: Path, *, start: bool = True) -> None:
        """check_link for every link the storage holds or the key signed (a link gone whole is
        refused too), and check_rotation. With `start` false a link without an entry gets none."""
        self.check_rotation(directory)
        for link in sorted(set(self.links) | (set(links(directory)) if start else set())):
            self.check_link(directory, link)

    def check_rotation(self, directory: Path) -> None:
        """RollbackRefusedError unless the ledger's rotations in `directory` hold the statement the
        key signed last, with its hash: a device never signs over a rotation history cut or forked
        behind its own statement (the old key would sign again, or the new key sign twice)."""
        mark = self.rotation
        if mark is None:
            return
        rotations = load_rotations(directory)
        what = (
            f"{directory}: this signing key signed rotation statement {mark.number} of ledger "
            f"{self.ledger_id} (hash {mark.rotation_hash[:16]}…)"
        )
        have = plural(len(rotations), "rotation")
        if len(rotations) < mark.number:
            raise RollbackRefusedError(
                f"{what}, which the storage lacks (it holds {have}); it is behind what the device "
                "signed: restore the missing statements, nothing was signed"
            )
        if rotation_hash(rotations[mark.number - 1]) != mark.rotation_hash:
            raise RollbackRefusedError(
                f"{what}, and the storage holds another statement {mark.number}: a fork of what "
                "the device signed; nothing was signed"
            )

    def check_link(self, directory: Path, link: str, tree: LinkTree | None = None) -> None:
        """RollbackRefusedError unless the link's seals in `directory` (`tree`: as read from
        there) reach the remembered seal with its hash and give the remembered checkpoint's root,
        and the rotations hold the remembered statement (check_rotation). A link without an entry
        yet gets one from the storage (said in `notes`)."""
        self.check_rotation(directory)
        tree = link_tree(directory, link) if tree is None else tree
        mark, have = self.links.get(link), len(tree.seal_hashes)
        if mark is None:
            if have:
                self._start(directory, link, tree)
            return
        what = (
            f"{directory}: link {link}: this signing key signed seal {mark.segment} (up to seq "
            f"{mark.last_seq}, seal hash {mark.seal_hash[:16]}…)"
        )
        if have <= mark.segment:
            gone = (
                tree.stopped or f"the link holds seals 0..{have - 1} only"
                if have
                else "the link holds no seal"
            )
            raise RollbackRefusedError(
                f"{what}, which the storage lacks ({gone}); it is behind what the device "
                "signed: restore the missing seals, nothing was signed"
            )
        if tree.seal_hashes[mark.segment] != mark.seal_hash:
            raise RollbackRefusedError(
                f"{what}, and the storage holds another seal {mark.segment}: a fork of what "
                "the device signed; nothing was signed"
            )
        if mark.checkpoint_size and tree.root(mark.checkpoint_size).hex() != mark.checkpoint_root:
            raise RollbackRefusedError(
                f"{directory}: link {link}: the storage's seals 0..{mark.checkpoint_size - 1} "
                f"are not the ones this signing key's checkpoint of "
                f"{plural(mark.checkpoint_size, 'segment')} covered: a fork of what the device "
                "signed; nothing was signed"
            )

    def _start(self, directory: Path, link: str, tree: LinkTree) -> None:
        """An entry for a link this key has no record of, from its seals in storage."""
        last = len(tree.seal_hashes) - 1
        self.links[link] = LinkMark(
            last,
            tree.seal_hashes[last],
            _last_seq(directory, link, last),
            last + 1,
            tree.root().hex(),
        )
        self._save()
        self.notes.append(
            f"{self.path}: no record of link {link} of ledger {self.ledger_id} yet: started from "
            f"the {plural(last + 1, 'seal')} in storage; rollback protection of that link starts "
            "now"
        )

    def check_open(self, link: str, index: int, first_seq: int, path: Path) -> None:
        """RollbackRefusedError when an open segment at `path` (segment `index` from `first_seq`)
        lies at or before what the device sealed on the link: a sealed segment is never an open
        one."""
        mark = self.links.get(link)
        if mark is not None and (index <= mark.segment or first_seq <= mark.last_seq):
            raise RollbackRefusedError(
                f"{path}: open segment {index} from seq {first_seq} lies at or before seal "
                f"{mark.segment} (last seq {mark.last_seq}) that this signing key signed for link "
                f"{link}: a sealed segment is never sealed "
                "again as an open one; nothing was sealed"
            )

    def sealed(self, link: str, index: int, seal_hash: str, last_seq: int) -> None:
        """The device's seal `index` of `link` is durable: remember it."""
        old = self.links.get(link)
        self.links[link] = LinkMark(
            index,
            seal_hash,
            last_seq,
            old.checkpoint_size if old else 0,
            old.checkpoint_root if old else "",
        )
        self._save()

    def checkpointed(self, directory: Path, cp: Checkpoint) -> None:
        """The device's checkpoint `cp` of a link of the ledger in `directory` is durable (or
        handed out): remember it. Seals it covers past the remembered one (sealed with this key
        without its state) are vouched for by it, so the remembered seal moves up to its last."""
        if cp.size == 0:
            return  # a checkpoint before the link's first seal vouches for nothing to protect
        link, old = cp.link, self.links.get(cp.link)
        if old is None or old.segment < cp.size - 1:
            assert cp.last_seal is not None  # make_checkpoint names a non-empty tree's last seal
            old = LinkMark(cp.size - 1, cp.last_seal, _last_seq(directory, link, cp.size - 1))
        self.links[link] = replace(old, checkpoint_size=cp.size, checkpoint_root=cp.root.hex())
        self._save()

    def rotated(self, number: int, statement_hash: str) -> None:
        """The key signed rotation statement `number` (hash `statement_hash`), now in place."""
        self.rotation = RotationMark(number, statement_hash)
        self._save()

    def carry(self, old: LedgerMarks) -> None:
        """Take over what the old key of a rotation remembers (both checked against one storage,
        so the further of two marks implies the nearer): the new key is protected from its first
        use."""
        for link, theirs in old.links.items():
            mine = self.links.get(link)
            if mine is None:
                self.links[link] = theirs
                continue
            seal = theirs if theirs.segment > mine.segment else mine
            cp = theirs if theirs.checkpoint_size > mine.checkpoint_size else mine
            self.links[link] = replace(
                seal, checkpoint_size=cp.checkpoint_size, checkpoint_root=cp.checkpoint_root
            )
        self._save()


def _last_seq(directory: Path, link: str, index: int) -> int:
    """The last seq of the link's seal `index` in storage (its hash already taken into a tree)."""
    return int(load_seal(segment_files(directory, link)[index]["seal.json"], directory).last_seq)
