"""The part of every `--help` after the options: what a command reads and writes, its exit codes and
one example (docs/cli.md has the whole story). Plain text, so `--help` loads no library code: the
algorithm and strip-mode names are written out here and tests/test_cli_habits.py checks them
against ledgertool.algorithms."""

from __future__ import annotations

#: ledger algorithms and strip modes, as ledgertool.algorithms names them
LEDGER_ALGORITHMS = (
    "siphash-1-3-128",
    "siphash-2-4-128",
    "aes-128-gmac",
    "blake3-keyed-128",
    "blake3-keyed-256",
    "hmac-sha256-128",
)
STRIP_MODES = ("frame", "l3", "payload", "rdma")

EXIT_CHECK = (
    "Exit codes: 0 consistent, 1 a discrepancy was found, 2 bad input or usage, 130 interrupted."
)
EXIT_PLAIN = "Exit codes: 0 done, 2 bad input or usage, 130 interrupted."

#: command path -> (reads, writes, exit codes, example)
COMMANDS: dict[str, tuple[str, str, str, str]] = {
    "capture": (
        "SOURCE (a capture, workload or interface), the two keys",
        "DIR: segments, seals, checkpoint (created or appended to)",
        EXIT_PLAIN.replace(
            "0 done",
            "0 done, 1 a crash's open segment fails authentication (not sealed; nothing captured)",
        )
        + " The first Ctrl-C seals the open segment "
        "(exit 0), a second abandons it.",
        "ledgertool capture samples/sample.pcapng --ledger L --digest-key keys/digest.key "
        "--signing-key keys/signing.key",
    ),
    "verify": (
        "DIR, verifier.pub, a checkpoint",
        "nothing",
        EXIT_CHECK,
        "ledgertool verify L --trust keys/verifier.pub",
    ),
    "recompute": (
        "CAPTURE..., digest.key, the ledger DIR",
        "--out FILE.parquet, --details FILE",
        EXIT_CHECK,
        "ledgertool recompute samples/sample.pcapng --digest-key keys/digest.key --ledger L "
        "--trust keys/verifier.pub",
    ),
    "query": (
        "DIR (verified first), verifier.pub",
        "stdout or --output FILE",
        EXIT_PLAIN.replace("0 done", "0 done, 1 the ledger does not verify"),
        'ledgertool query L "SELECT count(*) FROM records" --format csv',
    ),
    "export": (
        "DIR (verified first), verifier.pub",
        "OUT/part-NNNNNNNN.parquet (OUT new or empty)",
        EXIT_PLAIN.replace("0 done", "0 done, 1 the ledger does not verify"),
        "ledgertool export L out --trust keys/verifier.pub",
    ),
    "recover": (
        "DIR, signing.key",
        "seals of the torn open segments in DIR",
        EXIT_PLAIN.replace(
            "0 done", "0 done, 1 an open segment fails authentication (nothing of it sealed)"
        ),
        "ledgertool recover L --signing-key keys/signing.key",
    ),
    "prune": (
        "DIR: seals and record files before the cut-off, the window log, signing.key",
        "DIR/pruned/prune-NNNN.json (signed), then removes those record files (seals stay)",
        EXIT_PLAIN.replace(
            "0 done",
            "0 done, 1 the ledger's prune statements do not follow one another",
        ).replace(
            "2 bad input or usage",
            "2 bad input or usage (records the window tier does not cover, without --force)",
        ),
        "ledgertool prune L --before 2026-01-01T00:00:00 --signing-key keys/signing.key",
    ),
    "compact": (
        "DIR: v2 segments' raw record files (seg-N.rec) and their seals",
        "seg-N.parquet for each, then removes the seg-N.rec (under the writer lock)",
        "Exit codes: 0 done, 1 a raw record file does not match its seal, is missing or is not a "
        "regular file (named; nothing of it is written), 2 bad input or usage (another writer "
        "holds the lock; a sealed seg-N.open that `recover` renames first), 130 interrupted.",
        "ledgertool compact L",
    ),
    "checkpoint": (
        "DIR (signing.key for a fresh one), the witnesses",
        "--out FILE",
        "Exit codes: 0 done, 1 a witness refused to cosign (a rollback or fork), 2 bad input or "
        "usage (a witness not reachable), 130 interrupted.",
        "ledgertool checkpoint L --out cp1",
    ),
    "challenge commit": (
        "the checkpoint (the nonce is fresh randomness)",
        "--out NONCE (0600; refused if it exists), the commitment on stdout",
        EXIT_PLAIN,
        "ledgertool challenge commit --checkpoint cp --out nonce",
    ),
    "challenge draw": (
        "DIR, a checkpoint, verifier.pub, both nonces or a beacon",
        "--out CHALLENGE.json",
        "Exit codes: 0 drawn, 1 the ledger does not verify against the checkpoint, 2 bad input or "
        "usage (a nonce that does not open its commitment).",
        "ledgertool challenge draw L --checkpoint cp --trust keys/verifier.pub -k 100 "
        "--verifier-nonce HEX --prover-nonce @nonce --prover-commitment HEX --out ch.json",
    ),
    "witness keygen": (
        "nothing",
        "--out KEY (0600), the vkey on stdout",
        EXIT_PLAIN,
        "ledgertool witness keygen --name witness.example/w1 --out witness.key",
    ),
    "witness vkey": (
        "KEY",
        "stdout",
        EXIT_PLAIN,
        "ledgertool witness vkey witness.key",
    ),
    "witness serve": (
        "KEY, the logs' vkeys, the state directory",
        "the state directory (the latest checkpoint cosigned per log)",
        "Exit codes: 0 stopped by SIGINT or SIGTERM, 2 bad input or usage (a state it cannot "
        "trust).",
        "ledgertool witness serve --key witness.key --state wstate --addr 127.0.0.1:8080 "
        "--log ORIGIN=VKEY",
    ),
    "check-consistency": (
        "OLD, NEW, DIR, verifier.pub",
        "nothing",
        EXIT_CHECK + " OLD and NEW swapped: 2, with the right order.",
        "ledgertool check-consistency cp1 cp2 --ledger L --trust keys/verifier.pub",
    ),
    "prove": (
        "DIR, a checkpoint",
        "--out PROOF.json",
        "Exit codes: 0 written, 1 the segment differs from its seal, 2 bad input or usage.",
        "ledgertool prove L --seq 17 --out proof.json",
    ),
    "check-proof": (
        "PROOF.json, verifier.pub, a checkpoint",
        "nothing",
        "Exit codes: 0 valid, 1 invalid, 2 unreadable.",
        "ledgertool check-proof proof.json --trust keys/verifier.pub",
    ),
    "keys generate": (
        "nothing",
        "OUTDIR/digest.key, signing.key (mode 0600), verifier.pub",
        EXIT_PLAIN,
        "ledgertool keys generate keys",
    ),
    "keys vkey": (
        "VERIFIER (verifier.pub), the ledger's id",
        "stdout",
        EXIT_PLAIN,
        "ledgertool keys vkey keys/verifier.pub --ledger L",
    ),
    "algorithms": ("nothing", "stdout", EXIT_PLAIN, "ledgertool algorithms --json"),
    "keys rotate": (
        "DIR, the current and the new signing.key",
        "DIR/rotations/rotation-NNNN.json",
        EXIT_PLAIN,
        "ledgertool keys rotate L --old keys/signing.key --new keys2/signing.key",
    ),
    "keys rotate-digest": (
        "DIR, signing.key, the current and the new digest.key",
        "DIR/rotations/rotation-NNNN.json",
        EXIT_PLAIN,
        "ledgertool keys rotate-digest L --signing-key keys/signing.key --old-digest-key "
        "keys/digest.key --new-digest-key keys2/digest.key",
    ),
    "keys device-init": (
        "nothing",
        "DIR/device.key (mode 0600), DIR/device.pub",
        EXIT_PLAIN,
        "ledgertool keys device-init device",
    ),
    "keys provision": (
        "digest.key, the device's device.pub, a hybrid signing.key",
        "--out PKG (a new file)",
        EXIT_PLAIN,
        "ledgertool keys provision --digest-key keys/digest.key --device device/device.pub "
        "--signing-key keys/signing.key --ledger-id LEDGER_ID --out pkg.json",
    ),
    "keys unwrap": (
        "PKG, device.key, verifier.pub",
        "--out digest.key (mode 0600), accepted-packages beside device.key",
        "Exit codes: 0 accepted, 1 refused (signature, validity, replay, binding), "
        "2 bad input or usage.",
        "ledgertool keys unwrap pkg.json --device-key device/device.key --trust keys/verifier.pub "
        "--out device/digest.key",
    ),
    "replay": (
        "FILE (pcap/pcapng, Ethernet)",
        "frames on the interface (needs CAP_NET_RAW)",
        EXIT_PLAIN,
        "ledgertool replay samples/sample.pcap --iface veth0 --pps 1000",
    ),
    "plan collision": (
        "nothing (pure math)",
        "stdout",
        EXIT_PLAIN,
        "ledgertool plan collision --bits 64 --bits 128 --rate 400G --frame 64",
    ),
    "plan storage": (
        "nothing, or --from-ledger DIR",
        "stdout",
        EXIT_PLAIN,
        "ledgertool plan storage --rate 400G --frame 64 --duration 1d",
    ),
    "bench": (
        "nothing (synthetic buffers and captures), or --from-csv FILE",
        "stdout; --csv FILE (appended), --html FILE, --markdown FILE, --png DIR",
        EXIT_PLAIN,
        "ledgertool bench --algorithm siphash-1-3-128 --sizes 64,1500 --html bench.html",
    ),
    "workload generate": (
        "SPEC.toml",
        "--out FILE.pcap (refused if it exists, unless --force)",
        EXIT_PLAIN,
        "ledgertool workload generate samples/workloads/imix.toml --out imix.pcap",
    ),
    "workload bench": (
        "SPEC.toml",
        "stdout",
        EXIT_PLAIN,
        "ledgertool workload bench samples/workloads/imix.toml --frames 100000",
    ),
    "conformance export": (
        "nothing",
        "DIR (absent or empty): captures, records, digests, a golden ledger",
        EXIT_PLAIN,
        "ledgertool conformance export kit",
    ),
    "conformance check": (
        "CAPTURE, the device's --records FILE, digest.key",
        "nothing",
        "Exit codes: 0 byte-exact, 1 the records differ, 2 bad input or usage, 130 interrupted.",
        "ledgertool conformance check kit/captures/ethernet.pcap --records device.records "
        "--digest-key kit/digest.key",
    ),
    "demo": (
        "the bundled sample",
        "--workdir DIR (default: a new temporary directory)",
        "Exit codes: 0 every step as expected, 1 a step did not match, 2 bad input or usage.",
        "ledgertool demo --workdir /tmp/ledgertool-demo",
    ),
}

#: groups: what their commands have in common, and one example
GROUPS: dict[str, str] = {
    "": "ledgertool capture samples/sample.pcapng --ledger L --digest-key keys/digest.key "
    "--signing-key keys/signing.key",
    "keys": "ledgertool keys generate keys",
    "plan": "ledgertool plan collision --bits 128 --rate 1.6T --frame 64",
    "workload": "ledgertool workload generate samples/workloads/imix.toml --out imix.pcap",
    "conformance": "ledgertool conformance export kit",
    "challenge": "ledgertool challenge commit --checkpoint cp --out nonce",
    "witness": "ledgertool witness keygen --name witness.example/w1 --out witness.key",
}


def epilog(path: str) -> str | None:
    """The text after the options of `ledgertool PATH --help`; click keeps lines after \\b as
    they are."""
    entry = COMMANDS.get(path)
    if entry is None:
        if path not in GROUPS:
            return None
        # wrapped as a command's epilog is: click keeps the lines after \b as they are
        lines = [
            "Every command's --help says what it reads, writes and its exit codes (docs/cli.md).",
            EXIT_CHECK,
        ]
        text = "\n".join(_wrapped(line) for line in lines)
        return "\b\n" + text + "\n\n\b\nExample:\n" + _wrapped_command(GROUPS[path])
    reads, writes, codes, example = entry
    lines = [f"Reads: {reads}.", f"Writes: {writes}.", codes]
    if path == "capture":
        lines += [
            f"Algorithms (new ledger): {', '.join(LEDGER_ALGORITHMS)}.",
            f"Strip modes (new ledger): {', '.join(STRIP_MODES)}.",
        ]
    text = "\n".join(_wrapped(line) for line in lines)
    return "\b\n" + text + "\n\n\b\nExample:\n" + _wrapped_command(example)


#: help text is kept within this many columns (click's own help is at most 80 wide)
WIDTH = 78


def _wrapped(line: str) -> str:
    """One paragraph of the epilog within WIDTH columns, continuation lines indented by two."""
    import textwrap

    return textwrap.fill(
        line, WIDTH, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
    )


def _wrapped_command(cmd: str) -> str:
    """An example command within WIDTH columns, indented by two, continued with a backslash as a
    shell reads it (so it can be pasted as shown); an option stays on the line of its value."""
    words, lines, line = [], [], "  "
    for w in cmd.split(" "):
        if words and words[-1].startswith("--") and " " not in words[-1] and not w.startswith("-"):
            words[-1] += " " + w  # `--digest-key keys/digest.key` is one piece
        else:
            words.append(w)
    for w in words:
        if line.strip() and len(line) + 1 + len(w) + 2 > WIDTH:
            lines.append(line + " \\")
            line = "    " + w
        else:
            line = f"{line} {w}" if line.strip() else line + w
    return "\n".join(lines + [line])
