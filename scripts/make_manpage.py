"""Write the ledgertool(1) manual page (ledgertool.cli.manpage) to FILE (default ledgertool.1);
read it with `man -l ledgertool.1`, or install it under share/man/man1."""

import sys
from pathlib import Path

from ledgertool.cli.manpage import man_page

if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "ledgertool.1")
    out.write_text(man_page())
    print(f"wrote {out}")
