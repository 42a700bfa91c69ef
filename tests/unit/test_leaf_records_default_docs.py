"""The default records per Merkle leaf that the docs state is the one `capture` writes: 256 for a
v2 ledger (the default format), 64 for v1 (the docs once said 64 for every new ledger)."""

from __future__ import annotations

import json
import re

import pytest
from conftest import REPO, SAMPLES, cli


@pytest.fixture(scope="module")
def defaults(tmp_path_factory, keydir) -> dict[str, int]:
    out = {}
    for fmt in ("v1", "v2"):
        led = tmp_path_factory.mktemp(f"leaf-{fmt}") / "L"
        r = cli(
            "capture", SAMPLES / "sample.pcap", "--ledger", led, "--ledger-format", fmt,
            "--digest-key", keydir / "digest.key", "--signing-key", keydir / "signing.key", "-q",
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        out[fmt] = json.loads((led / "ledger.json").read_text())["leaf_records"]
    return out


def test_capture_defaults(defaults):
    assert defaults == {"v1": 64, "v2": 256}


def test_every_stated_default_names_the_v2_one(defaults):
    """Wherever a doc says what `leaf_records` / `--leaf-records` defaults to, the default format's
    value is in the phrase ("default 256", "256 by default")."""
    seen = 0
    for doc in sorted((REPO / "docs").glob("*.md")):
        text = " ".join(doc.read_text().split())
        for m in re.finditer(
            r"(?:`leaf_records`|`--leaf-records`)(?:(?!\. ).){0,120}?\bdefault\b", text
        ):
            seen += 1
            said = text[m.start() : m.end() + 40]
            assert str(defaults["v2"]) in said, f"{doc.name}: {said!r}"
    assert seen >= 3


def test_capture_synopsis_shows_the_default(defaults):
    text = (REPO / "docs" / "cli.md").read_text()
    section = text[text.index("## capture\n") : text.index("### Records computed elsewhere")]
    assert re.findall(r"\[--leaf-records (\d+)\]", section) == [str(defaults["v2"])]
