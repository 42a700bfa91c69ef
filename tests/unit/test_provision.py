"""Digest-key provisioning: `keys device-init`, `keys provision`, `keys unwrap`.

The suite is pinned twice without trusting `cryptography`'s HPKE code: the X-Wing combiner written
out here reproduces the published draft-08 vector (tests/vectors/xwing_draft08.json), and an RFC
9180 key schedule written out here (hmac, hashlib, AES-GCM) opens a package made by the CLI, with
the ``info`` docs/devices.md defines. Every refusal `unwrap` documents runs through the CLI: one
line on stderr, exit 1 (the package was checked and failed) or 2 (wrong or unreadable input).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import stat
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import rfc8785
from conftest import TESTS, cli
from cryptography.hazmat.primitives.asymmetric import mlkem, x25519
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from test_schemas_reports import is_valid, validate

from ledgertool.device.provision import (
    ACCEPTED_FILE,
    CIPHERTEXT_BYTES,
    PUBLIC_KEY_BYTES,
    DeviceKey,
    DevicePublicKey,
    KeyPackage,
    PackageRefused,
    WrongDeviceError,
    device_id,
    provision,
    unwrap,
    write_package,
)
from ledgertool.keyfiles import DigestKey, SigningKey, TrustBundle, generate_keys

VECTOR = json.loads((TESTS / "vectors" / "xwing_draft08.json").read_text())["cases"][0]
XWING_LABEL = bytes.fromhex("5c2e2f2f5e5c")  # "\.//^\"
LEDGER_ID = "0123456789abcdef0123456789abcdef"


# ---- the suite, independently -------------------------------------------------------------------


def xwing_combiner(ss_m: bytes, ss_x: bytes, ct_x: bytes, pk_x: bytes) -> bytes:
    return hashlib.sha3_256(ss_m + ss_x + ct_x + pk_x + XWING_LABEL).digest()


def xwing_decap(mlkem_key, x_key, ct: bytes) -> bytes:
    ss_m = mlkem_key.decapsulate(ct[:1088])
    ct_x = ct[1088:]
    ss_x = x_key.exchange(x25519.X25519PublicKey.from_public_bytes(ct_x))
    return xwing_combiner(ss_m, ss_x, ct_x, x_key.public_key().public_bytes_raw())


def test_xwing_combiner_reproduces_draft08_vector():
    expanded = hashlib.shake_256(bytes.fromhex(VECTOR["seed"])).digest(96)
    mk = mlkem.MLKEM768PrivateKey.from_seed_bytes(expanded[:64])
    xk = x25519.X25519PrivateKey.from_private_bytes(expanded[64:])
    pk = (mk.public_key().public_bytes_raw() + xk.public_key().public_bytes_raw()).hex()
    assert len(pk) == 2 * PUBLIC_KEY_BYTES
    assert pk.startswith(VECTOR["pk_prefix"]) and pk.endswith(VECTOR["pk_suffix"])
    assert xwing_decap(mk, xk, bytes.fromhex(VECTOR["ct"])).hex() == VECTOR["ss"]
    # the label at the front (an earlier draft's order) gives another secret: the order is pinned
    ct = bytes.fromhex(VECTOR["ct"])
    other = hashlib.sha3_256(XWING_LABEL + mk.decapsulate(ct[:1088])).hexdigest()
    assert other != VECTOR["ss"]


def _labeled(suite_id: bytes):
    def extract(salt: bytes, label: bytes, ikm: bytes) -> bytes:
        return hmac.new(salt or bytes(32), b"HPKE-v1" + suite_id + label + ikm, "sha256").digest()

    def expand(prk: bytes, label: bytes, info: bytes, n: int) -> bytes:
        labeled = n.to_bytes(2, "big") + b"HPKE-v1" + suite_id + label + info
        out, t, i = b"", b"", 1
        while len(out) < n:
            t = hmac.new(prk, t + labeled + bytes([i]), "sha256").digest()
            out, i = out + t, i + 1
        return out[:n]

    return extract, expand


def rfc9180_open(
    device: DeviceKey, enc_ct: bytes, info: bytes, kem_id=0x647A, kdf_id=1, aead_id=2
) -> bytes:
    """RFC 9180 s5.1 KeySchedule (mode_base) + s6.1 single-shot Open, written from the RFC."""
    enc, ct = enc_ct[:1120], enc_ct[1120:]
    shared = xwing_decap(device._mlkem, device._x25519, enc)
    suite_id = (
        b"HPKE" + kem_id.to_bytes(2, "big") + kdf_id.to_bytes(2, "big") + aead_id.to_bytes(2, "big")
    )
    extract, expand = _labeled(suite_id)
    context = b"\x00" + extract(b"", b"psk_id_hash", b"") + extract(b"", b"info_hash", info)
    secret = extract(shared, b"secret", b"")
    key, nonce = expand(secret, b"key", context, 32), expand(secret, b"base_nonce", context, 12)
    return AESGCM(key).decrypt(nonce, ct, b"")  # sequence number 0: the nonce is base_nonce


# ---- fixtures
# -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A verifier (keys generate) and two devices (keys device-init), through the CLI."""
    tmp = tmp_path_factory.mktemp("prov")
    generate_keys(tmp / "verifier")
    generate_keys(tmp / "other-verifier")
    generate_keys(tmp / "ed-verifier", scheme="ed25519")
    reports = {}
    for dev in ("dev", "dev2"):
        r = cli("keys", "device-init", tmp / dev, "--json")
        assert r.returncode == 0, r.stderr
        reports[dev] = json.loads(r.stdout)
    return {"tmp": tmp, "init": reports}


def provision_cli(world, out: Path, *extra, device="dev", ok=True):
    t = world["tmp"]
    r = cli(
        "keys",
        "provision",
        "--digest-key",
        t / "verifier/digest.key",
        "--device",
        t / device / "device.pub",
        "--signing-key",
        t / "verifier/signing.key",
        "--ledger-id",
        LEDGER_ID,
        "--out",
        out,
        *extra,
    )
    if ok:
        assert r.returncode == 0, r.stderr
    return r


def unwrap_cli(world, pkg: Path, out: Path, device="dev", trust="verifier", *extra):
    t = world["tmp"]
    return cli(
        "keys",
        "unwrap",
        pkg,
        "--device-key",
        t / device / "device.key",
        "--trust",
        t / trust / "verifier.pub",
        "--out",
        out,
        *extra,
    )


def one_line_error(r, code: int, *needles: str) -> str:
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ledgertool: error: "), r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def fresh_device(tmp_path) -> Path:
    d = tmp_path / "device"
    assert cli("keys", "device-init", d).returncode == 0
    return d


def make_package(
    world, tmp_path, name="pkg.json", device_dir: Path | None = None, **kw
) -> tuple[Path, KeyPackage]:
    t = world["tmp"]
    pub = DevicePublicKey.load((device_dir or t / "dev") / "device.pub")
    pkg = provision(
        DigestKey.load(t / "verifier/digest.key"),
        pub,
        SigningKey.load(t / "verifier/signing.key"),
        LEDGER_ID,
        **kw,
    )
    path = tmp_path / name
    write_package(pkg, path)
    return path, pkg


def edit(path: Path, out: Path, fn) -> Path:
    doc = json.loads(path.read_text())
    fn(doc)
    out.write_text(json.dumps(doc, indent=2))
    return out


# ---- device-init --------------------------------------------------------------------------------


def test_device_init_writes_modes_and_derived_id(world):
    t, rep = world["tmp"], world["init"]["dev"]
    validate(rep, "keys-device-init-report.schema.json")
    assert stat.S_IMODE(os.stat(t / "dev/device.key").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(t / "dev/device.pub").st_mode) == 0o644
    pub = json.loads((t / "dev/device.pub").read_text())
    validate(pub, "device-pub.schema.json")
    validate(json.loads((t / "dev/device.key").read_text()), "device-key.schema.json")
    raw = base64.b64decode(pub["public_key"])
    want = hashlib.sha256(b"ledgertool device id v1\x00" + raw).digest()[:16].hex()
    assert (
        pub["device_id"]
        == rep["device_id"]
        == want
        == device_id(raw)
        == DeviceKey.load(t / "dev/device.key").device_id
    )
    assert rep["device_id"] != world["init"]["dev2"]["device_id"]
    assert rep["kem"] == "MLKEM768-X25519" and len(raw) == 1216
    # the public key is X-Wing's serialisation: ML-KEM-768 encapsulation key, then X25519
    key = DeviceKey.load(t / "dev/device.key")
    assert raw[:1184] == key._mlkem.public_key().public_bytes_raw()
    assert raw[1184:] == key._x25519.public_key().public_bytes_raw()
    assert "mlkem" not in repr(key) and key.device_id in repr(key)


def test_device_init_refuses_to_overwrite(world):
    before = (world["tmp"] / "dev/device.key").read_bytes()
    one_line_error(cli("keys", "device-init", world["tmp"] / "dev"), 2, "already exists")
    assert (world["tmp"] / "dev/device.key").read_bytes() == before


def test_device_pub_whose_id_does_not_match_is_refused(world, tmp_path):
    bad = edit(
        world["tmp"] / "dev/device.pub",
        tmp_path / "device.pub",
        lambda d: d.update(device_id=world["init"]["dev2"]["device_id"]),
    )
    r = cli(
        "keys",
        "provision",
        "--digest-key",
        world["tmp"] / "verifier/digest.key",
        "--device",
        bad,
        "--signing-key",
        world["tmp"] / "verifier/signing.key",
        "--ledger-id",
        LEDGER_ID,
        "--out",
        tmp_path / "p.json",
    )
    one_line_error(r, 2, str(bad), "does not match its public key")
    assert not (tmp_path / "p.json").exists()


def test_device_pub_with_non_canonical_base64_is_refused(tmp_path, world):
    def flip_padding_bits(d):
        # 1216 bytes end in "==": the last data character carries 4 unused bits; set the lowest one
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
        s = d["public_key"].rstrip("=")
        d["public_key"] = s[:-1] + alphabet[alphabet.index(s[-1]) ^ 1] + "=="

    bad = edit(world["tmp"] / "dev/device.pub", tmp_path / "device.pub", flip_padding_bits)
    with pytest.raises(Exception) as e:
        DevicePublicKey.load(bad)
    assert "canonical base64" in str(e.value) and getattr(e.value, "exit_code", None) == 2


def test_unprotected_device_key_is_refused(world, tmp_path):
    d = fresh_device(tmp_path)
    path, _ = make_package(world, tmp_path, device_dir=d)
    os.chmod(d / "device.key", 0o640)
    one_line_error(
        cli(
            "keys",
            "unwrap",
            path,
            "--device-key",
            d / "device.key",
            "--trust",
            world["tmp"] / "verifier/verifier.pub",
            "--out",
            d / "digest.key",
        ),
        2,
        "UNPROTECTED PRIVATE KEY FILE",
        "0640",
    )
    assert not (d / "digest.key").exists() and not (d / ACCEPTED_FILE).exists()


# ---- provision
# -------------------------------------------------------------------------------------


def test_provision_and_unwrap_round_trip(world, tmp_path):
    t = world["tmp"]
    d = fresh_device(tmp_path)
    r = cli(
        "keys",
        "provision",
        "--digest-key",
        t / "verifier/digest.key",
        "--device",
        d / "device.pub",
        "--signing-key",
        t / "verifier/signing.key",
        "--ledger-id",
        LEDGER_ID.upper(),
        "--out",
        tmp_path / "pkg.json",
        "--valid-for",
        "2h",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    prov = json.loads(r.stdout)
    validate(prov, "keys-provision-report.schema.json")
    doc = json.loads((tmp_path / "pkg.json").read_text())
    validate(doc, "key-package.schema.json")
    assert prov["ledger_id"] == doc["ledger_id"] == LEDGER_ID
    created, expires = (datetime.fromisoformat(doc[k]) for k in ("created_at", "expires_at"))
    assert expires - created == timedelta(hours=2)
    assert doc["hpke"] == {
        "mode": "base",
        "kem": "MLKEM768-X25519",
        "kem_id": 0x647A,
        "kdf": "HKDF-SHA256",
        "kdf_id": 1,
        "aead": "AES-256-GCM",
        "aead_id": 2,
    }
    assert len(base64.b64decode(doc["ciphertext"])) == CIPHERTEXT_BYTES == 1120 + 32 + 16
    master = (t / "verifier/digest.key").read_text().strip()
    assert master not in (tmp_path / "pkg.json").read_text()  # nothing of the key in the clear

    r = cli(
        "keys",
        "unwrap",
        tmp_path / "pkg.json",
        "--device-key",
        d / "device.key",
        "--trust",
        t / "verifier/verifier.pub",
        "--out",
        d / "digest.key",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    validate(rep, "keys-unwrap-report.schema.json")
    assert (d / "digest.key").read_text() == master + "\n"
    assert stat.S_IMODE(os.stat(d / "digest.key").st_mode) == 0o600
    assert rep["digest_key_ids"] == prov["digest_key_ids"]
    dk = DigestKey.load(t / "verifier/digest.key")
    assert rep["digest_key_ids"]["siphash-1-3-128"] == dk.key_id("siphash-1-3-128", 16)
    line = (d / ACCEPTED_FILE).read_text().splitlines()
    assert line == [f"{doc['package_id']} {LEDGER_ID} {doc['created_at']} {doc['expires_at']}"]
    assert stat.S_IMODE(os.stat(d / ACCEPTED_FILE).st_mode) == 0o600


def test_package_opens_with_an_independent_rfc9180_implementation(world, tmp_path):
    """docs/devices.md's info and signed bytes, computed from the file with rfc8785 alone."""
    path, _ = make_package(world, tmp_path)
    doc = json.loads(path.read_text())
    header = {k: v for k, v in doc.items() if k not in ("ciphertext", "signatures")}
    info = b"ledgertool key package info v1\n" + rfc8785.dumps(header)
    device = DeviceKey.load(world["tmp"] / "dev/device.key")
    plain = rfc9180_open(device, base64.b64decode(doc["ciphertext"]), info)
    assert plain == DigestKey.load(world["tmp"] / "verifier/digest.key").master
    with pytest.raises(Exception):  # noqa: B017 -- another KEM id in the suite id: the keys differ, the tag fails
        rfc9180_open(device, base64.b64decode(doc["ciphertext"]), info, kem_id=0x0041)
    signed = b"ledgertool key package v1\n" + rfc8785.dumps(
        {k: v for k, v in doc.items() if k != "signatures"}
    )
    assert (
        TrustBundle.load(world["tmp"] / "verifier/verifier.pub").verify(signed, doc["signatures"])
        == []
    )


def test_provision_refuses_a_non_hybrid_signing_key(world, tmp_path):
    t = world["tmp"]
    r = cli(
        "keys",
        "provision",
        "--digest-key",
        t / "verifier/digest.key",
        "--device",
        t / "dev/device.pub",
        "--signing-key",
        t / "ed-verifier/signing.key",
        "--ledger-id",
        LEDGER_ID,
        "--out",
        tmp_path / "p",
    )
    one_line_error(r, 2, "scheme ed25519", "hybrid")
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize(
    "args,needle",
    [
        (("--ledger-id", "not-a-ledger"), "--ledger-id"),
        (("--valid-for", "0s"), "--valid-for must be a positive"),
        (("--valid-for", "400d"), "366 days"),
        (("--device-id", "00" * 16), "not the expected"),
    ],
)
def test_provision_refuses_bad_options(world, tmp_path, args, needle):
    t = world["tmp"]
    base = {"--ledger-id": LEDGER_ID}
    opts = dict(base, **dict(zip(args[::2], args[1::2])))
    flat = [x for kv in opts.items() for x in kv]
    r = cli(
        "keys",
        "provision",
        "--digest-key",
        t / "verifier/digest.key",
        "--device",
        t / "dev/device.pub",
        "--signing-key",
        t / "verifier/signing.key",
        "--out",
        tmp_path / "p",
        *flat,
    )
    one_line_error(r, 2, needle)
    assert not (tmp_path / "p").exists()


def test_provision_refuses_to_overwrite_and_checks_the_expected_device_id(world, tmp_path):
    (tmp_path / "p").write_text("keep")
    one_line_error(provision_cli(world, tmp_path / "p", ok=False), 2, "already exists")
    assert (tmp_path / "p").read_text() == "keep"
    r = provision_cli(
        world, tmp_path / "q", "--device-id", world["init"]["dev"]["device_id"].upper()
    )
    assert r.returncode == 0


# ---- unwrap refusals
# -------------------------------------------------------------------------------


def _flip_ciphertext(d):
    raw = bytearray(base64.b64decode(d["ciphertext"]))
    raw[-1] ^= 1
    d["ciphertext"] = base64.b64encode(bytes(raw)).decode()


@pytest.mark.parametrize(
    "name,change",
    [
        ("ciphertext", _flip_ciphertext),
        ("ledger_id", lambda d: d.update(ledger_id="ff" * 16)),
        ("expires_at", lambda d: d.update(expires_at="2099-01-01T00:00:00+00:00")),
        ("digest_key_ids", lambda d: d["digest_key_ids"].update({"siphash-1-3-128": "00" * 16})),
        (
            "ed25519 signature",
            lambda d: d["signatures"].update(ed25519=base64.b64encode(bytes(64)).decode()),
        ),
    ],
)
def test_unwrap_refuses_a_tampered_package(world, tmp_path, name, change):
    d = fresh_device(tmp_path)
    path, _ = make_package(world, tmp_path, device_dir=d)
    bad = edit(path, tmp_path / "bad.json", change)
    one_line_error(
        cli(
            "keys",
            "unwrap",
            bad,
            "--device-key",
            d / "device.key",
            "--trust",
            world["tmp"] / "verifier/verifier.pub",
            "--out",
            d / "digest.key",
        ),
        1,
        str(bad),
        "signature check failed",
    )
    assert not (d / "digest.key").exists() and not (d / ACCEPTED_FILE).exists()


def test_unwrap_refuses_a_package_missing_one_hybrid_signature(world, tmp_path):
    d = fresh_device(tmp_path)
    path, _ = make_package(world, tmp_path, device_dir=d)
    bad = edit(path, tmp_path / "bad.json", lambda doc: doc["signatures"].pop("ml-dsa-65"))
    one_line_error(
        cli(
            "keys",
            "unwrap",
            bad,
            "--device-key",
            d / "device.key",
            "--trust",
            world["tmp"] / "verifier/verifier.pub",
            "--out",
            d / "digest.key",
        ),
        1,
        "ml-dsa-65 signature missing",
    )


def test_unwrap_refuses_another_verifiers_package(world, tmp_path):
    path, _ = make_package(world, tmp_path)
    line = one_line_error(
        unwrap_cli(world, path, tmp_path / "k", trust="other-verifier"),
        1,
        "not by the trusted keys",
    )
    assert "does not verify" in line


def test_unwrap_refuses_a_non_hybrid_trust_bundle(world, tmp_path):
    path, _ = make_package(world, tmp_path)
    one_line_error(
        unwrap_cli(world, path, tmp_path / "k", trust="ed-verifier"), 2, "scheme ed25519", "hybrid"
    )


def test_unwrap_refuses_another_devices_package(world, tmp_path):
    path, pkg = make_package(world, tmp_path)  # sealed to dev
    line = one_line_error(
        unwrap_cli(world, path, tmp_path / "k", device="dev2"), 2, "sealed to device"
    )
    assert pkg.device_id in line and world["init"]["dev2"]["device_id"] in line
    assert not (world["tmp"] / "dev2" / ACCEPTED_FILE).exists()


def test_unwrap_refuses_an_expired_package(world, tmp_path):
    d = fresh_device(tmp_path)
    path, _ = make_package(world, tmp_path, device_dir=d, valid_for_s=1)
    time.sleep(1.2)
    one_line_error(
        cli(
            "keys",
            "unwrap",
            path,
            "--device-key",
            d / "device.key",
            "--trust",
            world["tmp"] / "verifier/verifier.pub",
            "--out",
            d / "digest.key",
        ),
        1,
        "expired at",
    )
    assert not (d / "digest.key").exists()


def test_unwrap_refuses_a_package_from_the_future(world, tmp_path):
    d = fresh_device(tmp_path)
    later = datetime.now(UTC) + timedelta(hours=1)
    path, _ = make_package(world, tmp_path, device_dir=d, now=later)
    one_line_error(
        cli(
            "keys",
            "unwrap",
            path,
            "--device-key",
            d / "device.key",
            "--trust",
            world["tmp"] / "verifier/verifier.pub",
            "--out",
            d / "digest.key",
        ),
        1,
        "not yet valid",
    )
    # within the documented clock skew it is accepted
    path, _ = make_package(
        world,
        tmp_path,
        "soon.json",
        device_dir=d,
        now=datetime.now(UTC) + timedelta(seconds=120),
    )
    assert (
        cli(
            "keys",
            "unwrap",
            path,
            "--device-key",
            d / "device.key",
            "--trust",
            world["tmp"] / "verifier/verifier.pub",
            "--out",
            d / "digest.key",
        ).returncode
        == 0
    )


def test_unwrap_refuses_a_replayed_package(world, tmp_path):
    d = fresh_device(tmp_path)
    path, pkg = make_package(world, tmp_path, device_dir=d)
    args = ["--device-key", d / "device.key", "--trust", world["tmp"] / "verifier/verifier.pub"]
    assert cli("keys", "unwrap", path, *args, "--out", d / "digest.key").returncode == 0
    one_line_error(
        cli("keys", "unwrap", path, *args, "--out", d / "again.key"),
        1,
        "already accepted",
        pkg.package_id,
    )
    assert not (d / "again.key").exists()
    assert len((d / ACCEPTED_FILE).read_text().splitlines()) == 1


def test_unwrap_refuses_a_package_older_than_an_accepted_one(world, tmp_path):
    d = fresh_device(tmp_path)
    now = datetime.now(UTC)
    old, _ = make_package(
        world, tmp_path, "old.json", device_dir=d, now=now - timedelta(minutes=10)
    )
    new, _ = make_package(world, tmp_path, "new.json", device_dir=d, now=now)
    args = ["--device-key", d / "device.key", "--trust", world["tmp"] / "verifier/verifier.pub"]
    assert cli("keys", "unwrap", new, *args, "--out", d / "new.key").returncode == 0
    one_line_error(cli("keys", "unwrap", old, *args, "--out", d / "old.key"), 1, "superseded")


def _signed(world, pkg: KeyPackage) -> KeyPackage:
    import dataclasses

    sk = SigningKey.load(world["tmp"] / "verifier/signing.key")
    return dataclasses.replace(pkg, signatures=sk.sign(pkg.signed_bytes()))


def test_unwrap_refuses_a_signed_package_whose_key_ids_do_not_match_its_key(world, tmp_path):
    """A verifier bug, correctly signed: the signed key ids commit to a key other than the sealed
    one."""
    import dataclasses

    d = fresh_device(tmp_path)
    _, pkg = make_package(world, tmp_path, device_dir=d)
    ids = {**pkg.digest_key_ids, "blake3-keyed-256": "ab" * 16}
    # seal the same master again under the changed header, so the ciphertext opens and only the ids
    # differ
    from ledgertool.device.provision import _SUITE

    changed = dataclasses.replace(pkg, digest_key_ids=ids)
    changed = dataclasses.replace(
        changed,
        ciphertext=_SUITE.encrypt(
            DigestKey.load(world["tmp"] / "verifier/digest.key").master,
            DevicePublicKey.load(d / "device.pub")._key,
            info=changed.info(),
        ),
    )
    write_package(_signed(world, changed), tmp_path / "ids.json")
    one_line_error(
        cli(
            "keys",
            "unwrap",
            tmp_path / "ids.json",
            "--device-key",
            d / "device.key",
            "--trust",
            world["tmp"] / "verifier/verifier.pub",
            "--out",
            d / "digest.key",
        ),
        1,
        "blake3-keyed-256 key id",
        "binding mismatch",
    )
    assert not (d / "digest.key").exists() and (d / ACCEPTED_FILE).read_text() == ""


def test_unwrap_refuses_a_signed_ciphertext_sealed_under_another_header(world, tmp_path):
    """The ciphertext of one package, re-signed inside another header: HPKE info no longer
    matches."""
    import dataclasses

    d = fresh_device(tmp_path)
    _, a = make_package(world, tmp_path, "a.json", device_dir=d)
    _, b = make_package(world, tmp_path, "b.json", device_dir=d)
    write_package(
        _signed(world, dataclasses.replace(b, ciphertext=a.ciphertext)), tmp_path / "swap.json"
    )
    one_line_error(
        cli(
            "keys",
            "unwrap",
            tmp_path / "swap.json",
            "--device-key",
            d / "device.key",
            "--trust",
            world["tmp"] / "verifier/verifier.pub",
            "--out",
            d / "digest.key",
        ),
        1,
        "does not open with this device key",
        "binding mismatch",
    )


@pytest.mark.parametrize(
    "name,data,needle",
    [
        ("not-json", b"{not json", "not JSON at byte 1"),
        ("duplicate", None, "duplicate member"),
        ("extra", None, "unexpected member(s) ['comment']"),
        ("float", None, "not an integer"),
        ("suite", None, "not the one suite"),
        ("suite-true-for-1", None, "not the one suite"),
        ("short-ciphertext", None, "canonical base64 of 1168 bytes"),
        ("time", None, "ISO 8601 UTC time"),
    ],
)
def test_unwrap_refuses_a_malformed_package(world, tmp_path, name, data, needle):
    path, _ = make_package(world, tmp_path)
    text = path.read_text()
    if name == "duplicate":
        data = text.replace('"format"', '"ledger_id": "00", "format"', 1).encode()
    elif name == "extra":
        data = text.replace('"format"', '"comment": "hi", "format"', 1).encode()
    elif name == "float":
        data = text.replace('"kem_id": 25722', '"kem_id": 25722.0').encode()
    elif name == "suite":
        data = (
            text.replace('"AES-256-GCM"', '"AES-128-GCM"')
            .replace('"aead_id": 2', '"aead_id": 1')
            .encode()
        )
    elif name == "suite-true-for-1":  # signed with 1; true must not read as the same value
        data = text.replace('"kdf_id": 1', '"kdf_id": true').encode()
    elif name == "short-ciphertext":
        doc = json.loads(text)
        doc["ciphertext"] = base64.b64encode(base64.b64decode(doc["ciphertext"])[:-1]).decode()
        data = json.dumps(doc).encode()
    elif name == "time":
        data = text.replace("+00:00", "Z", 1).encode()
    (tmp_path / "bad.json").write_bytes(data)
    one_line_error(
        unwrap_cli(world, tmp_path / "bad.json", tmp_path / "k"),
        2,
        str(tmp_path / "bad.json"),
        needle,
    )


def test_unwrap_refuses_to_overwrite_and_leaves_the_package_unused(world, tmp_path):
    d = fresh_device(tmp_path)
    path, _ = make_package(world, tmp_path, device_dir=d)
    (d / "digest.key").write_text("keep")
    args = ["--device-key", d / "device.key", "--trust", world["tmp"] / "verifier/verifier.pub"]
    one_line_error(
        cli("keys", "unwrap", path, *args, "--out", d / "digest.key"), 2, "already exists"
    )
    assert (d / "digest.key").read_text() == "keep" and not (d / ACCEPTED_FILE).exists()
    one_line_error(
        cli("keys", "unwrap", path, *args, "--out", d / "no" / "such" / "digest.key"),
        2,
        "directory does not exist",
    )
    # still unused
    assert cli("keys", "unwrap", path, *args, "--out", d / "other.key").returncode == 0


def test_unwrap_refuses_a_damaged_replay_state(world, tmp_path):
    d = fresh_device(tmp_path)
    path, _ = make_package(world, tmp_path, device_dir=d)
    (d / ACCEPTED_FILE).write_text("garbage\n")
    one_line_error(
        cli(
            "keys",
            "unwrap",
            path,
            "--device-key",
            d / "device.key",
            "--trust",
            world["tmp"] / "verifier/verifier.pub",
            "--out",
            d / "digest.key",
        ),
        2,
        "line 1",
        "damaged",
    )
    assert not (d / "digest.key").exists()


def test_library_refusals_carry_reasons_and_exit_codes(world, tmp_path):
    d = fresh_device(tmp_path)
    path, pkg = make_package(world, tmp_path, device_dir=d)
    key, trust = (
        DeviceKey.load(d / "device.key"),
        TrustBundle.load(world["tmp"] / "verifier/verifier.pub"),
    )
    with pytest.raises(PackageRefused) as e:
        unwrap(path, key, trust, d / "k", now=pkg.expires_at)
    assert (e.value.reason, e.value.exit_code) == ("expired", 1)
    with pytest.raises(WrongDeviceError) as e2:
        unwrap(path, DeviceKey.load(world["tmp"] / "dev2/device.key"), trust, d / "k")
    assert e2.value.exit_code == 2
    assert unwrap(path, key, trust, d / "k", now=pkg.expires_at - timedelta(seconds=1)).out == str(
        d / "k"
    )


def test_report_schemas_reject_wrong_shapes(world):
    rep = world["init"]["dev"]
    assert not is_valid({**rep, "device_id": "XY"}, "keys-device-init-report.schema.json")
    assert not is_valid({**rep, "extra": 1}, "keys-device-init-report.schema.json")
