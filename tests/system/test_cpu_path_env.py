"""LEDGERTOOL_CPU_PATH, read once at start-up, forces the CPU path of every algorithm (a fresh
interpreter)."""

from __future__ import annotations

import json
import os

from test_digests import (  # noqa: F401  (shared with the in-process tests)
    B3_128,
    B3_256,
    GMAC,
    HMAC128,
    NEW,
)

from ledgertool.digest.engine import (
    cpu_paths,
)


def test_env_var_forces_paths_and_algorithms_reports_them():
    env = dict(os.environ, LEDGERTOOL_CPU_PATH="portable")
    import subprocess
    import sys

    def algorithms(env):
        r = subprocess.run(
            [
                sys.executable,
                "-c",
                "from ledgertool.cli.app import main; main()",
                "algorithms",
                "--json",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr
        return {a["name"]: a for a in json.loads(r.stdout)["algorithms"]}, r.stderr

    rows, _ = algorithms(env)
    assert {a["cpu_path"] for a in rows.values()} == {"portable"}
    rows, _ = algorithms(dict(os.environ, LEDGERTOOL_CPU_PATH="hmac-sha256-128=portable"))
    assert rows["hmac-sha256-128"]["cpu_path"] == "portable"
    assert rows["aes-128-gmac"]["cpu_path"] == cpu_paths(GMAC)[0]
    rows, err = algorithms(dict(os.environ, LEDGERTOOL_CPU_PATH="warp-drive"))
    assert "warp-drive" in err and rows["aes-128-gmac"]["cpu_path"] == cpu_paths(GMAC)[0]
    rows, _ = algorithms(dict(os.environ, LEDGERTOOL_CPU_PATH=""))
    for a in NEW:
        assert rows[a.name]["cpu_path"] == cpu_paths(a)[0]
        assert (
            rows[a.name]["key_bytes"] == a.key_size
            and rows[a.name]["digest_bytes"] == a.digest_size
        )
    assert "forge" in rows["aes-128-gmac"]["secret_key"] and rows["aes-128-gmac"]["warning"]
    assert rows["blake3-keyed-256"]["known_key"].startswith("collision resistant")
    assert rows["hmac-sha256-128"]["known_key"].startswith("collision resistant")
    assert rows["siphash-1-3-128"]["known_key"].startswith("none")
