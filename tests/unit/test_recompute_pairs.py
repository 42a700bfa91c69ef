"""recompute over many ledgers in one run: `recompute --pairs FILE.toml`.

Real ledgers captured from samples/ and real captures (the run on a LocalCluster of worker
processes: tests/system/test_recompute_pairs_cluster.py).
Every pair's report is compared with a single recompute of that pair, and the cluster's run with
the single-machine run (JSON, --details file, text)."""

from __future__ import annotations

import json
import shutil

import jsonschema
import pytest
from conftest import REPO, SAMPLES, cli, load_keys
from test_digest_rotation import captures, keys, pristine  # noqa: F401  (the rotated ledger's fixtures)
from test_recompute_cluster import write_pcap

from ledgertool.capture.run import capture_file
from ledgertool.digest.reference import read_pcap
from ledgertool.errors import KeyFileError, UsageError
from ledgertool.reconcile.pairs import (
    PairSpec,
    parse_pairs,
    plan_pairs,
    read_pairs,
    reconcile_pairs,
)
from ledgertool.reconcile.recompute import reconcile

SAMPLE = SAMPLES / "sample.pcap"


@pytest.fixture(scope="module")
def links(tmp_path_factory, keydir, other_keydir):
    """Three ledgers of sample.pcap: `a` (keydir's keys), `b` (other_keydir's keys: another device),
    `t` (keydir's keys, segment 1's seal chain broken: it does not verify); `short.pcap` is
    sample.pcap without frame 290; and a pairs file naming them with relative paths."""
    d = tmp_path_factory.mktemp("pairs")
    for name, kd in (("a", keydir), ("b", other_keydir), ("t", keydir)):
        dk, sk, _ = load_keys(kd)
        capture_file(
            SAMPLE, d / "ledgers" / name, digest_key=dk, signing_key=sk, segment_records=100
        )
    seal = d / "ledgers" / "t" / "link=link0" / "seg-00000001.seal.json"
    doc = json.loads(seal.read_text())
    doc["prev_seal_hash"] = "00" * 32
    seal.write_text(json.dumps(doc))
    frames = [(ts, wire, data) for ts, _cap, wire, data in read_pcap(SAMPLE.read_bytes())]
    (d / "caps").mkdir()
    write_pcap(d / "caps" / "short.pcap", frames[:290] + frames[291:])
    shutil.copy(SAMPLE, d / "caps" / "sample.pcap")
    (d / "pairs.toml").write_text(f"""
[[pair]]
ledger = "ledgers/a"
captures = ["caps/sample.pcap"]

[[pair]]
ledger = "ledgers/b"
captures = ["caps/short.pcap"]
trust = "{other_keydir / "verifier.pub"}"

[[pair]]
ledger = "ledgers/t"
captures = ["caps/sample.pcap"]
link = ["link0"]
""")
    return d


def _keys_args(keydir, other_keydir):
    return (
        "--digest-key",
        keydir / "digest.key",
        "--digest-key",
        other_keydir / "digest.key",
        "--trust",
        keydir / "verifier.pub",
    )


def test_pairs_report_per_pair_and_total(links, keydir, other_keydir, tmp_path):
    d = links
    details = tmp_path / "details.jsonl"
    r = cli(
        "recompute",
        "--pairs",
        d / "pairs.toml",
        *_keys_args(keydir, other_keydir),
        "--json",
        "--details",
        details,
        cwd=tmp_path,
    )  # (relative paths are the pairs file's, not the cwd's)
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    schema = json.loads((REPO / "schemas" / "recompute-pairs-report.schema.json").read_text())
    one = json.loads((REPO / "schemas" / "recompute-report.schema.json").read_text())
    registry = (
        __import__("referencing")
        .Registry()
        .with_resources(
            [(s["$id"], __import__("referencing").Resource.from_contents(s)) for s in (schema, one)]
        )
    )
    jsonschema.Draft202012Validator(schema, registry=registry).validate(doc)
    a, b, t = doc["pairs"]
    # each pair's report is the one a single recompute of that pair prints
    for got, ledger, cap, kd in (
        (a, "a", "sample.pcap", keydir),
        (b, "b", "short.pcap", other_keydir),
    ):
        single = cli(
            "recompute",
            d / "caps" / cap,
            "--ledger",
            d / "ledgers" / ledger,
            "--digest-key",
            kd / "digest.key",
            "--trust",
            kd / "verifier.pub",
            "--json",
            "--details",
            tmp_path / "one.jsonl",
        )
        want = json.loads(single.stdout)
        want.pop("elapsed_s"), got.pop("elapsed_s")
        want["details_file"] = str(details)
        assert got == want
    assert (a["ok"], a["matched"], a["ledger_only"]) == (True, 294, 0)
    assert (b["ok"], b["matched"], b["ledger_only"], b["examples_ledger_only"][0]["seq"]) == (
        False,
        293,
        1,
        "290",
    )
    assert t == {
        "ok": False,
        "ledger": str(d / "ledgers" / "t"),
        "source": str(d / "caps" / "sample.pcap"),
        "exit_code": 1,
        "error": t["error"],
    }
    assert (
        t["error"].startswith(
            f"{d / 'ledgers' / 't'}: the ledger does not verify, so it is not reconciled: "
            "link link0 segment 1: "
        )
        and "more problems" in t["error"]
    )
    assert doc["total"] == {
        "pairs": 3,
        "ok_pairs": 1,
        "failed_pairs": 1,
        "error_pairs": 1,
        "frames": 587,
        "ledger_records": 588,
        "matched": 587,
        "ledger_only": 1,
        "capture_only": 0,
        "details_written": 1,
        "exit_code": 1,
    }
    assert doc["ok"] is False
    # one details file, each line carrying its pair and ledger
    assert [json.loads(x) for x in details.read_text().splitlines()] == [
        {
            "pair": 1,
            "ledger": str(d / "ledgers" / "b"),
            "status": "ledger_only",
            "digest": b["examples_ledger_only"][0]["digest"],
            "link": "link0",
            "seq": "290",
            "ts_ns": b["examples_ledger_only"][0]["ts_ns"],
            "wire_len": b["examples_ledger_only"][0]["wire_len"],
        }
    ]
    text = cli("recompute", "--pairs", d / "pairs.toml", *_keys_args(keydir, other_keydir))
    assert text.returncode == 1
    lines = text.stdout.splitlines()
    assert lines[0].startswith(
        f"MATCH: 294 frames recomputed from {d / 'caps' / 'sample.pcap'}, 294 frame records "
        f"in {d / 'ledgers' / 'a'}: matched 294"
    )
    assert lines[1].startswith("DIFFER: 293 frames") and lines[3].startswith(
        "  ledger-only  link link0 seq 290 "
    )
    assert lines[-1] == (
        "total: DIFFER: 3 pairs (1 OK, 1 not OK, 1 not reconciled), 587 frames recomputed, 588 "
        "frame records: matched 587, ledger-only 1, capture-only 0"
    )
    assert f"error: pair 2 (ledger {d / 'ledgers' / 't'}): {t['error']}" in text.stderr.splitlines()


def test_each_ledger_takes_its_keys_from_the_pool(pristine, captures, keys, tmp_path, other_keydir):  # noqa: F811
    """A ledger whose digest key was rotated takes both of its keys from the pool, in the pool's
    order; another device's key in the pool is not given to it. The report is reconcile's with
    exactly its keys."""
    other = load_keys(other_keydir)[0]
    pool = [keys["B"], other, keys["A"]]
    specs = parse_pairs(
        {"pair": [{"ledger": str(pristine), "captures": [str(captures["dir"] / "full.pcap")]}]},
        str(tmp_path / "p.toml"),
    )
    (plan,) = plan_pairs(specs, pool, keys["trust"])
    assert plan.keys == (keys["B"], keys["A"]) and plan.trust == keys["trust"]
    many = reconcile_pairs([plan], reconcile)
    want = reconcile(
        captures["dir"] / "full.pcap", pristine, [keys["A"], keys["B"]], trust=keys["trust"]
    )
    got = many.outcomes[0].result
    a, b = want.to_json(), got.to_json()
    a.pop("elapsed_s"), b.pop("elapsed_s")
    assert b == a and got.ok and len(got.digest_keys) == 2 and many.exit_code == 0
    with pytest.raises(
        KeyFileError,
        match=f"^{pristine}: none of the 1 digest key\\(s\\) given is a digest key of "
        "this ledger \\(its key ids: [0-9a-f]{32}, [0-9a-f]{32}\\)$",
    ):
        plan_pairs(specs, [other])
    with pytest.raises(UsageError, match="the same digest key as"):
        plan_pairs(specs, [keys["A"], keys["A"]])


def test_no_matching_key_is_exit_2_before_any_pair_runs(links, keydir, tmp_path):
    d = links
    details = tmp_path / "d.jsonl"
    r = cli(
        "recompute",
        "--pairs",
        d / "pairs.toml",
        "--digest-key",
        keydir / "digest.key",
        "--trust",
        keydir / "verifier.pub",
        "--details",
        details,
    )
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith(
        f"ledgertool: error: {d / 'ledgers' / 'b'}: none of the 1 digest key(s) given is a "
        "digest key of this ledger (its key ids: "
    )
    assert not details.exists()


@pytest.mark.parametrize(
    "body, message",
    [
        ("", "expected one or more [[pair]] tables"),
        ("[[pair]]\nledger = 'x'\n", "pair[0]: no 'captures'"),
        (
            "[[pair]]\nledger = 'x'\ncaptures = []\n",
            "pair[0].captures: expected a non-empty list of strings",
        ),
        (
            "[[pair]]\nledger = 'x'\ncaptures = ['-']\n",
            "pair[0].captures: standard input ('-') cannot be",
        ),
        (
            "[[pair]]\nledger = 'x'\ncaptures = ['c']\nlinks = ['l']\n",
            "pair[0].links: unknown field",
        ),
        (
            "[[pair]]\nledger = 1\ncaptures = ['c']\n",
            "pair[0].ledger: expected a non-empty string, got int",
        ),
        ("ledger = 'x'\n", "unknown key 'ledger'"),
        ("[[pair]\n", "not valid TOML"),
    ],
)
def test_bad_pairs_file_is_one_line_exit_2(tmp_path, keydir, body, message):
    f = tmp_path / "p.toml"
    f.write_text(body)
    with pytest.raises(UsageError) as e:
        read_pairs(f)
    assert str(e.value).startswith(f"{f}: ") and message in str(e.value)
    r = cli("recompute", "--pairs", f, "--digest-key", keydir / "digest.key")
    assert r.returncode == 2 and r.stderr == f"ledgertool: error: {e.value}\n"


def test_pairs_excludes_the_single_pair_options(links, keydir):
    r = cli(
        "recompute", SAMPLE, "--pairs", links / "pairs.toml", "--digest-key", keydir / "digest.key"
    )
    assert r.returncode == 2 and "--pairs FILE names every ledger" in r.stderr
    r = cli("recompute", "--digest-key", keydir / "digest.key", "--ledger", links / "ledgers" / "a")
    assert (
        r.returncode == 2
        and "recompute needs CAPTURE (one or more), or --pairs FILE.toml" in r.stderr
    )


def test_pairs_paths_are_data(tmp_path, keydir):
    """A path of the pairs file is the user's: taken as written (no glob), relative to the file,
    printed as text (no markup, no terminal control)."""
    dk, sk, _ = load_keys(keydir)
    name = "L[bold]x[/bold]*"
    capture_file(SAMPLE, tmp_path / name, digest_key=dk, signing_key=sk, segment_records=100)
    (tmp_path / "p.toml").write_text(f'[[pair]]\nledger = "{name}"\ncaptures = ["{SAMPLE}"]\n')
    assert read_pairs(tmp_path / "p.toml") == (PairSpec(str(tmp_path / name), (str(SAMPLE),)),)
    r = cli(
        "recompute",
        "--pairs",
        tmp_path / "p.toml",
        "--digest-key",
        keydir / "digest.key",
        "--trust",
        keydir / "verifier.pub",
    )
    assert r.returncode == 0, r.stderr
    assert f"294 frame records in {tmp_path / name}: matched 294" in r.stdout


def test_pairs_in_flight_give_the_same_reports_in_order(links, keydir, other_keydir, tmp_path):
    """Pairs run three at a time (as --cluster runs them) give the reports and the --details file
    of the pairs run one after another, in the file's order."""
    from functools import partial

    pool = [load_keys(keydir)[0], load_keys(other_keydir)[0]]
    plans = plan_pairs(read_pairs(links / "pairs.toml"), pool, load_keys(keydir)[2])
    assert [len(p.keys) for p in plans] == [1, 1, 1] and plans[1].keys == (pool[1],)
    runs = {}
    for k in (1, 3):
        many = reconcile_pairs(
            plans, partial(reconcile, workers=1), details=tmp_path / f"d{k}.jsonl", in_flight=k
        )
        docs = many.to_json()
        for p in docs["pairs"]:
            p.pop("elapsed_s", None), p.pop("details_file", None)
        runs[k] = (docs, (tmp_path / f"d{k}.jsonl").read_text(), many.exit_code)
    assert runs[3] == runs[1] and runs[1][2] == 1
    assert [o["ok"] for o in runs[1][0]["pairs"]] == [True, False, False] and runs[1][1].count(
        "\n"
    ) == 1
