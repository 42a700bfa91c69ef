"""lt_merkle_lanes_force holds over LEDGERTOOL_MERKLE_LANES whenever it is called: a count forced
before the first hashing (when the variable is read) is not replaced by the variable's."""

from __future__ import annotations

import os
import subprocess
import sys

from ledgertool._binding import lib

PROBE = (
    "from ledgertool._binding import lib; "
    "print(lib.lt_merkle_lanes_force(int(sys.argv[1])), lib.lt_merkle_lanes())"
)


def test_a_count_forced_before_first_use_is_not_replaced_by_the_variable():
    env = dict(os.environ, LEDGERTOOL_MERKLE_LANES="1")
    for n in (4, 16):
        runs = lib.lt_merkle_lanes_force(n) == lib.LT_OK
        lib.lt_merkle_lanes_force(0)
        if not runs:
            continue
        out = subprocess.run(
            [sys.executable, "-c", "import sys; " + PROBE, str(n)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        assert out.stdout.split() == [str(lib.LT_OK), str(n)]
