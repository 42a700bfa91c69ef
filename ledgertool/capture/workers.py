"""Several live capture workers on one interface (`capture iface:NAME --workers N`,
docs/capture.md "Workers and fanout").

Each worker is one `LiveReader` (its own TPACKET_V3 ring, all in the same PACKET_FANOUT hash group,
so a flow stays on one worker) with its own `DigestEngine`, read and digested on its own thread
(the native calls release the GIL). A worker appends its records to its own in-memory buffer.
At each segment boundary `capture_file` takes every worker's buffer and `merge_worker_records`
puts them into one per-link sequence ordered by (ts_ns, worker index, order within the worker).
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..digest.engine import DigestEngine
from ..digest.record import FLAG_GAP
from ..errors import InterfaceError, Setting, UsageError

if TYPE_CHECKING:  # imported where used (start-up: docs/benchmarks.md)
    import numpy as np


def merge_worker_records(
    parts: Sequence[np.ndarray], first_seq: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Merge per-worker record arrays (each in that worker's order) into one sequence.

    Order: ts_ns, then worker index (position in `parts`), then position within the worker; GAP
    records take their place by their ts_ns like frames. Returns (records, worker index of each
    record). With `first_seq`, `seq` is renumbered first_seq, first_seq + 1, ... For a given set of
    records with distinct timestamps the result does not depend on how they were spread over
    workers.
    """
    import numpy as np

    nonempty = [p for p in parts if len(p)]
    if not nonempty:
        dtype = parts[0].dtype if parts else None
        return np.empty(0, dtype=dtype), np.empty(0, dtype=np.int32)
    allrec = np.concatenate([p for p in parts if len(p)])
    wid = np.concatenate(
        [np.full(len(p), w, dtype=np.int32) for w, p in enumerate(parts) if len(p)]
    )
    # concatenated in (worker, position) order: a stable sort on ts_ns alone yields
    # (ts_ns, worker, position)
    order = np.argsort(allrec["ts_ns"], kind="stable")
    out, wid = allrec[order], wid[order]
    if first_seq is not None:
        out["seq"] = np.arange(first_seq, first_seq + len(out), dtype=np.uint64)
    return out, wid


def split_by_worker(records: np.ndarray, wid: np.ndarray, workers: int) -> list[np.ndarray]:
    """Inverse of the merge for a tail that is carried into the next segment: each worker's
    records, still in that worker's order."""
    return [records[wid == w] for w in range(workers)]


class LiveWorkers:
    """N reader threads, each digesting its own ring into its own buffer."""

    def __init__(
        self,
        engines: list[DigestEngine],
        *,
        max_frames: int | None = None,
        pin_cpus: list[int] | None = None,
    ):
        self.engines = engines
        self.n = len(engines)
        self.dtype = engines[0].dtype
        self.max_frames = max_frames
        self.pin_cpus = pin_cpus
        self.lock = threading.Lock()
        self.wake = threading.Event()  # something for the main thread to look at
        self.frames_reached = threading.Event()
        self._buf: list[list[np.ndarray]] = [[] for _ in engines]
        self.buffered = 0  # records in the buffers
        self.frames = 0  # frames kept (all workers)
        self.drops = 0  # drops declared in kept GAP records
        self.bytes = 0  # captured bytes hashed of kept frames
        self.per_worker_frames = [0] * self.n
        self.error: BaseException | None = None
        self._ended = [False] * self.n
        self._threads = [
            threading.Thread(target=self._run, args=(i,), name=f"ledgertool-live-{i}", daemon=True)
            for i in range(self.n)
        ]

    @staticmethod
    def check_pins(pin: int | None, workers: int) -> list[int] | None:
        """--pin P with N workers: worker i on CPU P + i (all must be usable by this process)."""
        if pin is None:
            return None
        cpus = list(range(pin, pin + workers))
        try:
            allowed = os.sched_getaffinity(0)
        except (AttributeError, OSError):  # pragma: no cover - non-Linux
            allowed = set(range(os.cpu_count() or 1))
        bad = [c for c in cpus if c not in allowed]
        if bad:
            raise UsageError(
                Setting("pin_cpu"),
                f" {pin} with ",
                Setting("workers"),
                f" {workers} pins worker i to "
                f"CPU {pin}+i, but CPU {bad[0]} is not available to this process",
            )
        return cpus

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def _run(self, i: int) -> None:
        import numpy as np

        eng = self.engines[i]
        try:
            if self.pin_cpus is not None:
                os.sched_setaffinity(0, {self.pin_cpus[i]})  # this thread only
            while True:
                recs, n, nbytes = eng.fill(0)  # seq is renumbered at the merge
                if n:
                    self._add(i, np.frombuffer(recs, dtype=self.dtype, count=n).copy(), nbytes)
                if eng.ended:
                    break
        except BaseException as e:  # noqa: BLE001 - handed to the main thread
            with self.lock:
                if self.error is None:
                    self.error = e
        finally:
            with self.lock:
                self._ended[i] = True
            self.wake.set()

    def _add(self, i: int, arr: np.ndarray, nbytes: int) -> None:
        import numpy as np

        gap = (arr["flags"] & FLAG_GAP) != 0
        with self.lock:
            nframes = int((~gap).sum())
            if self.max_frames is not None:
                # --frames N in total: frames after the N-th (in the order workers collected them)
                # are not recorded; GAP records (drops) always are
                take = max(0, min(nframes, self.max_frames - self.frames))
                if take < nframes:
                    keep = gap | (np.cumsum(~gap) <= take)
                    arr, gap = arr[keep], gap[keep]
                    nbytes = int(arr["cap_len"][~gap].sum())
                    nframes = take
                if self.frames + nframes >= self.max_frames:
                    self.frames_reached.set()
            if len(arr):
                self._buf[i].append(arr)
                self.buffered += len(arr)
            self.frames += nframes
            self.per_worker_frames[i] += nframes
            self.drops += int(arr["aux"][gap].sum())
            self.bytes += nbytes
        self.wake.set()

    def take(self) -> list[np.ndarray]:
        """Every worker's buffered records (in its order), emptying the buffers."""
        import numpy as np

        with self.lock:
            parts = [np.concatenate(b) if b else np.empty(0, dtype=self.dtype) for b in self._buf]
            self._buf = [[] for _ in range(self.n)]
            self.buffered = 0
        return parts

    @property
    def ended(self) -> bool:
        with self.lock:
            return all(self._ended)

    def join(self) -> None:
        for t in self._threads:
            if t.is_alive():
                t.join()


# linux/if_packet.h, linux/if_ether.h
_SOL_PACKET, _PACKET_STATISTICS, _ETH_P_ALL = 263, 6, 0x0003


class FanoutWitness:
    """Counts every frame the interface hands to packet sockets, from outside the fanout group, so
    that frames taken by a socket that is not ours are noticed (docs/capture.md "Workers and
    fanout").

    A PACKET_FANOUT group gives each frame to exactly one member. Anyone with CAP_NET_RAW in the
    network namespace may join a group whose id they find (16 bits), and then silently receives a
    share of the frames. The witness is a plain AF_PACKET socket on the same interface and
    protocol, outside the group, so the kernel shows it every frame the group sees, at the same
    point (after GRO, outgoing frames too). Its receive buffer is never read: after the first few
    frames each one is dropped at once and only counted (PACKET_STATISTICS, packets + drops).
    Between `start` (after every ring has joined) and `stop` (before the rings are told to stop),
    every frame it counted went to some member; what the rings of this capture did not receive
    went to a foreign member. The comparison leans towards zero: rings are read before the witness
    at the start and after it at the end, so a race can only hide a frame, never invent one.
    """

    def __init__(self, iface: str, group: int):
        try:
            self._sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(_ETH_P_ALL))
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 0)  # the kernel's minimum
            self._sock.bind((iface, _ETH_P_ALL))
        except OSError as e:
            raise InterfaceError(
                f"iface:{iface}: fanout witness socket: {e.strerror or e}", iface
            ) from None
        self.iface = iface
        self.group = group  # the PACKET_FANOUT group id watched (for messages)
        self.frames = 0  # counted between start and stop
        self._base: list[int] | None = None
        self._running = False

    def _read(self) -> int:
        packets, _drops = struct.unpack(
            "II", self._sock.getsockopt(_SOL_PACKET, _PACKET_STATISTICS, 8)
        )
        return packets  # the kernel resets its counters on every read; packets includes drops

    def start(self, readers) -> None:
        """Every ring has joined: take their counts, then start counting (in that order)."""
        self._base = [r.sync_stats().kernel_packets for r in readers]
        self._read()
        self._running = True

    def poll(self) -> None:
        """Fold the kernel's 32-bit counter in; call at least every few seconds."""
        if self._running:
            self.frames += self._read()

    def stop(self) -> None:
        """Before the rings are told to stop."""
        self.poll()
        self._running = False

    def foreign_frames(self, readers) -> int:
        """Frames the witness saw that no ring of ours received; call once the rings have
        stopped."""
        assert self._base is not None
        self.stop()
        ours = sum(r.stats().kernel_packets - b for r, b in zip(readers, self._base))
        return max(0, self.frames - ours)

    def close(self) -> None:
        self._sock.close()


def gap_records(dtype: np.dtype, frames: int, linktype: int) -> np.ndarray:
    """GAP records declaring `frames` frames that were not recorded (aux is a u32: several records
    for more), timestamped now."""
    import numpy as np

    counts = [min(frames - k, 0xFFFFFFFF) for k in range(0, frames, 0xFFFFFFFF)]
    out = np.zeros(len(counts), dtype=dtype)
    out["ts_ns"] = time.time_ns()
    out["flags"] = FLAG_GAP
    out["linktype"] = linktype
    out["aux"] = counts
    return out
