"""The part of every `--help` after the options: what a command reads and writes, its exit codes and
one example (docs/cli.md has the whole story). Plain text, so `--help` loads no library code: the
algorithm and strip-mode names are written out here and tests/test_cli_habits.py checks them
against ledgertool.algorithms."""

from __future__ import annotations

#: ledger algorithms and strip modes, as ledgertool.algorithms names them
LEDGER_ALGORITHMS = ("siphash-1-3-128", "siphash-2-4-128", "aes-128-gmac", "blake3-keyed-128",
                     "blake3-keyed-256", "hmac-sha256-128")
STRIP_MODES = ("frame", "l3", "payload", "rdma")

EXIT_CHECK = "Exit codes: 0 consistent, 1 a discrepancy was found, 2 bad input or usage, 130 interrupted."
EXIT_PLAIN = "Exit codes: 0 done, 2 bad input or usage, 130 interrupted."

#: command path -> (reads, writes, exit codes, example)
COMMANDS: dict[str, tuple[str, str, str, str]] = {
    "capture": ("SOURCE (a capture, workload or interface), the two keys",
                "DIR: segments, seals, checkpoint (created or appended to)",
                EXIT_PLAIN + " The first Ctrl-C seals the open segment (exit 0), a second abandons it.",
                "ledgertool capture samples/sample.pcapng --ledger L --digest-key keys/digest.key "
                "--signing-key keys/signing.key"),
    "verify": ("DIR, verifier.pub, a checkpoint", "nothing", EXIT_CHECK,
               "ledgertool verify L --trust keys/verifier.pub"),
    "recompute": ("SOURCE, digest.key, the ledger DIR", "--out FILE.parquet, --details FILE", EXIT_CHECK,
                  "ledgertool recompute samples/sample.pcapng --digest-key keys/digest.key --ledger L "
                  "--trust keys/verifier.pub"),
    "query": ("DIR (verified first), verifier.pub", "stdout or --output FILE", EXIT_PLAIN.replace(
        "0 done", "0 done, 1 the ledger does not verify"),
              "ledgertool query L \"SELECT count(*) FROM records\" --format csv"),
    "recover": ("DIR, signing.key", "seals of the torn open segments in DIR", EXIT_PLAIN,
                "ledgertool recover L --signing-key keys/signing.key"),
    "compact": ("DIR: v2 segments' raw record files (seg-N.rec) and their seals",
                "seg-N.parquet for each, then removes the seg-N.rec (under the writer lock)",
                "Exit codes: 0 done, 1 a raw record file does not match its seal (named; nothing of it is "
                "written), 2 bad input or usage (another writer holds the lock), 130 interrupted.",
                "ledgertool compact L"),
    "checkpoint": ("DIR (signing.key for a fresh one)", "--out FILE", EXIT_PLAIN,
                   "ledgertool checkpoint L --out cp1"),
    "check-consistency": ("OLD, NEW, DIR, verifier.pub", "nothing",
                          EXIT_CHECK + " OLD and NEW swapped: 2, with the right order.",
                          "ledgertool check-consistency cp1 cp2 --ledger L --trust keys/verifier.pub"),
    "prove": ("DIR, a checkpoint", "--out PROOF.json", "Exit codes: 0 written, 1 the segment differs from its "
              "seal, 2 bad input or usage.", "ledgertool prove L --seq 17 --out proof.json"),
    "check-proof": ("PROOF.json, verifier.pub, a checkpoint", "nothing",
                    "Exit codes: 0 valid, 1 invalid, 2 unreadable.",
                    "ledgertool check-proof proof.json --trust keys/verifier.pub"),
    "keys generate": ("nothing", "OUTDIR/digest.key, signing.key (mode 0600), verifier.pub", EXIT_PLAIN,
                      "ledgertool keys generate keys"),
    "algorithms": ("nothing", "stdout", EXIT_PLAIN, "ledgertool algorithms --json"),
}


def epilog(path: str) -> str | None:
    """The text after the options of `ledgertool PATH --help`; click keeps lines after \\b as they are."""
    entry = COMMANDS.get(path)
    if entry is None:
        return None
    reads, writes, codes, example = entry
    lines = [f"Reads: {reads}.", f"Writes: {writes}.", codes]
    if path == "capture":
        lines += [f"Algorithms (new ledger): {', '.join(LEDGER_ALGORITHMS)}.",
                  f"Strip modes (new ledger): {', '.join(STRIP_MODES)}."]
    return "\b\n" + "\n".join(lines) + "\n\n\b\nExample:\n  " + example
