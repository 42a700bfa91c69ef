"""The pruned_uncovered warning says how many pruned frames neither tier holds, in words."""

from __future__ import annotations

import shutil

from test_prune import CUT, built  # noqa: F401 - the fixture

from ledgertool.ledger.prune import prune_ledger
from ledgertool.verify.ledger import verify_ledger


def test_the_warning_counts_the_frames_held_by_neither_tier(built, tmp_path):  # noqa: F811
    lg = tmp_path / "F"
    shutil.copytree(built["frames"], lg)  # no window tier: nothing covers the pruned records
    prune_ledger(lg, CUT, built["sk"], force=True)
    v = verify_ledger(lg, built["trust"])
    (w,) = [w for w in v.warnings if w.kind == "pruned_uncovered"]
    assert w.detail.endswith(
        "pruned link link0's records through segment 2 (150 frames) with --force while its "
        "window tier held 0 frames: 150 frames of them are held by neither tier"
    )
