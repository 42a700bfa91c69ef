"""A local cluster (`--cluster local:N`) admits only the verifier's own processes: another local
user who connects to its scheduler or workers on 127.0.0.1 cannot run code there. The same
attacker, run against a plain-tcp LocalCluster, does run code (the control that the attack itself
works). And a plain tcp:// scheduler is refused unless `--insecure-cluster` says it is meant."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest

pytest.importorskip("distributed")

from conftest import cli_in_process  # noqa: E402
from distributed import LocalCluster  # noqa: E402

from ledgertool.errors import UsageError  # noqa: E402
from ledgertool.verify.cluster import ClusterAddress, connect, parse_address  # noqa: E402

NOBODY = 65534

# The other local user. The interpreter and its packages are under a directory only root may
# enter here, so `setpriv` cannot start it as uid 65534: it starts as root, imports what a
# connection needs (a first connection, as root, to the control cluster) and draws a certificate
# of its own, then drops to uid/gid 65534 with no supplementary groups (what `setpriv --reuid
# 65534 --regid 65534 --clear-groups` does) before any attack. One JSON line per attempt.
ATTACKER = r"""
import asyncio, json, os, sys
from distributed import Client
from distributed.core import rpc
from distributed.security import Security

control, target, workers = sys.argv[1], sys.argv[2], sys.argv[3:]
with Client(control, timeout=20) as c:
    c.run(os.getpid)
own = Security.temporary()
os.setgroups([])
os.setresgid(%(uid)d, %(uid)d, %(uid)d)
os.setresuid(%(uid)d, %(uid)d, %(uid)d)
assert os.getuid() == %(uid)d and os.getgroups() == []

def scheduler(addr, sec):
    with Client(addr, timeout=10, security=sec) as c:
        return sorted(c.run(os.getuid).values())

async def worker(addr, sec):
    args = sec.get_connection_args("client") if sec is not None else {}
    async with rpc(addr, connection_args=args, timeout=10) as r:
        return (await r.identity())["type"]

def attempt(what, fn):
    try:
        print(json.dumps({"what": what, "ran": True, "got": fn()}), flush=True)
    except BaseException as e:
        got = f"{type(e).__name__}: {e}"
        print(json.dumps({"what": what, "ran": False, "got": got}), flush=True)

attempt("control scheduler", lambda: scheduler(control, None))
for name, sec in (("no credentials", None), ("own certificate", own)):
    attempt(f"scheduler, {name}", lambda: scheduler(target, sec))
    for w in workers:
        attempt(f"worker, {name}", lambda: asyncio.run(worker(w, sec)))
""" % {"uid": NOBODY}  # noqa: UP031 (a program text with braces)


def test_other_local_user_cannot_run_code_in_a_local_cluster():
    with (
        LocalCluster(
            n_workers=1,
            processes=False,
            protocol="tcp://",
            host="127.0.0.1",
            dashboard_address=None,
            silence_logs=logging.ERROR,
        ) as control,
        connect(ClusterAddress(local_workers=1)) as client,
    ):
        client.wait_for_workers(1, timeout=60)
        target = client.scheduler.address
        workers = sorted(client.scheduler_info()["workers"])
        assert target.startswith("127.0.0.1") or "127.0.0.1" in target
        r = subprocess.run(
            [sys.executable, "-c", ATTACKER, control.scheduler_address, target, *workers],
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert client.run(lambda: 1)  # the verifier's own client still works
    got = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert got and got[0] == {"what": "control scheduler", "ran": True, "got": [0]}, (
        got,
        r.stderr[-2000:],
    )
    attacks = got[1:]
    assert len(attacks) == 2 * (1 + len(workers)), (got, r.stderr[-2000:])
    for a in attacks:
        assert not a["ran"], a
        # refused by TLS, not by something the drop of privileges broke
        assert "Permission" not in a["got"] and "ModuleNotFound" not in a["got"], a


def test_local_cluster_speaks_tls():
    with connect(ClusterAddress(local_workers=1)) as client:
        client.wait_for_workers(1, timeout=60)
        assert client.scheduler.address.startswith("tls://127.0.0.1:")
        assert all(w.startswith("tls://127.0.0.1:") for w in client.scheduler_info()["workers"])


def test_plain_tcp_scheduler_needs_insecure_cluster(tmp_path, keydir, monkeypatch, capsys):
    with pytest.raises(UsageError, match="plain_tcp on a network only you can reach"):
        with connect(parse_address("tcp://127.0.0.1:9")):
            pass
    code, out, err = cli_in_process(
        "verify",
        tmp_path,
        "--trust",
        keydir / "verifier.pub",
        "--cluster",
        "tcp://127.0.0.1:9",
    )
    assert code == 2 and out == ""
    assert err.startswith(
        "ledgertool: error: tcp://127.0.0.1:9: a tcp:// scheduler is Dask's plain protocol"
    )
    assert len(err.strip().splitlines()) == 1
    # with the flag it is tried (nothing listens on port 9: the connection error, not the refusal)
    monkeypatch.setattr("ledgertool.verify.cluster.CONNECT_TIMEOUT_S", 2)
    with pytest.raises(Exception, match="cannot reach the Dask scheduler at tcp://127.0.0.1:9"):
        with connect(parse_address("tcp://127.0.0.1:9", plain_tcp=True)):
            pass


def test_tls_scheduler_without_client_certificate_is_named(monkeypatch, capsys, tmp_path, keydir):
    import dask

    with dask.config.set(
        {"distributed.comm.tls.ca-file": None, "distributed.comm.tls.client.cert": None}
    ):
        with pytest.raises(
            UsageError, match="distributed.comm.tls.ca-file and distributed.comm.tls.client.cert"
        ):
            with connect(parse_address("tls://127.0.0.1:9")):
                pass


def test_insecure_cluster_goes_with_cluster(tmp_path, keydir, monkeypatch, capsys):
    code, out, err = cli_in_process(
        "verify",
        tmp_path,
        "--trust",
        keydir / "verifier.pub",
        "--insecure-cluster",
    )
    assert code == 2 and "--insecure-cluster goes with --cluster" in err
