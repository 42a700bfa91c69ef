"""Digest keys (HKDF subkeys, key ids), signing keys, trust bundles, key files."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import stat

import pytest

from ledgertool.errors import AlgorithmError, KeyFileError
from ledgertool.keyfiles import (
    SCHEMES,
    DigestKey,
    SigningKey,
    TrustBundle,
    generate_keys,
    seal_message,
)

# --------------------------------------------------------------------------- helpers


def hkdf_sha256(ikm: bytes, salt: bytes, info: bytes, length: int) -> bytes:
    """RFC 5869 written out with the hmac module, independent of `cryptography`."""
    prk = hmac.new(salt or bytes(32), ikm, hashlib.sha256).digest()
    okm, t, i = b"", b"", 1
    while len(okm) < length:
        t = hmac.new(prk, t + info + bytes([i]), hashlib.sha256).digest()
        okm += t
        i += 1
    return okm[:length]


def mode_of(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def b64flip(sig: str) -> str:
    raw = bytearray(base64.b64decode(sig))
    raw[len(raw) // 2] ^= 1
    return base64.b64encode(bytes(raw)).decode()


@pytest.fixture(scope="module")
def hybrid():
    return SigningKey.generate("hybrid")


@pytest.fixture
def keydir(tmp_path):
    return generate_keys(tmp_path / "keys")


# --------------------------------------------------------------------------- HKDF / digest key


def test_independent_hkdf_matches_rfc5869_case3():
    # RFC 5869 Appendix A.3: SHA-256, zero-length salt and info.
    okm = hkdf_sha256(b"\x0b" * 22, b"", b"", 42)
    assert okm.hex() == (
        "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"
    )


@pytest.mark.parametrize(
    "algorithm,length",
    [
        ("siphash-1-3-128", 16),
        ("aes-128-gmac", 16),
        ("blake3-keyed-256", 32),
        ("hmac-sha256-128", 64),
    ],
)
def test_subkey_matches_independent_hkdf(algorithm, length):
    master = bytes(range(32))
    key = DigestKey(master)
    expected = hkdf_sha256(master, b"", b"ledgertool digest v1 " + algorithm.encode(), length)
    assert key.subkey(algorithm, length) == expected


def test_subkeys_differ_per_algorithm_and_key():
    a, b = DigestKey(bytes(32)), DigestKey(b"\x01" * 32)
    assert a.subkey("siphash-1-3-128", 16) != a.subkey("siphash-2-4-128", 16)
    assert a.subkey("siphash-1-3-128", 16) != b.subkey("siphash-1-3-128", 16)


def test_key_id_is_one_way_hash_of_subkey():
    key = DigestKey(bytes(range(32)))
    sub = key.subkey("siphash-1-3-128", 16)
    kid = key.key_id("siphash-1-3-128", 16)
    assert kid == hashlib.sha256(b"ledgertool key id v1\x00" + sub).hexdigest()[:32]
    assert len(kid) == 32 and kid == kid.lower()
    assert sub.hex() not in kid and key.master.hex() not in kid
    assert kid != key.key_id("siphash-2-4-128", 16)


@pytest.mark.parametrize("algorithm,length", [("", 16), ("x", 0), ("x", 8161), ("x", True)])
def test_subkey_rejects_bad_arguments(algorithm, length):
    with pytest.raises(ValueError):
        DigestKey(bytes(32)).subkey(algorithm, length)


def test_digest_key_rejects_wrong_size():
    with pytest.raises(ValueError):
        DigestKey(b"short")


def test_digest_key_round_trip_and_file_format(tmp_path):
    key = DigestKey.generate()
    path = tmp_path / "digest.key"
    key.save(path)
    text = path.read_text()
    assert text == key.master.hex() + "\n"
    assert len(text) == 65 and text[:64] == text[:64].lower()
    assert mode_of(path) == 0o600
    loaded = DigestKey.load(path)
    assert loaded.master == key.master and loaded.path == str(path)


def test_digest_key_is_0600_even_with_open_umask(tmp_path):
    old = os.umask(0)
    try:
        DigestKey.generate().save(tmp_path / "d.key")
    finally:
        os.umask(old)
    assert mode_of(tmp_path / "d.key") == 0o600


def test_digest_key_repr_hides_secret():
    key = DigestKey(bytes(range(32)))
    assert bytes(range(32)).hex() not in repr(key)
    assert "master" not in repr(key)


def test_digest_key_save_refuses_overwrite(tmp_path):
    path = tmp_path / "digest.key"
    path.write_text("keep me\n")
    with pytest.raises(KeyFileError, match="already exists") as e:
        DigestKey.generate().save(path)
    assert str(path) in str(e.value)
    assert path.read_text() == "keep me\n"


def test_digest_key_load_accepts_missing_newline_and_uppercase(tmp_path):
    path = tmp_path / "k"
    path.write_text("AB" * 32)
    path.chmod(0o600)
    assert DigestKey.load(path).master == b"\xab" * 32


@pytest.mark.parametrize(
    "content,match",
    [
        (b"", "empty"),
        (b"\n", "empty"),
        (b"ab" * 31 + b"\n", "found 62 characters"),
        (b"ab" * 33 + b"\n", "found 66 characters"),
        (b"zz" * 32 + b"\n", "non-hex"),
        (b"\xff\xfe" * 32, "not a digest key"),
        (b"ab" * 16 + b" " + b"ab" * 16, "characters"),
    ],
)
def test_digest_key_load_errors_name_the_file(tmp_path, content, match):
    path = tmp_path / "bad.key"
    path.write_bytes(content)
    path.chmod(0o600)
    with pytest.raises(KeyFileError, match=match) as e:
        DigestKey.load(path)
    assert str(path) in str(e.value)
    assert "\n" not in str(e.value)


def test_digest_key_missing_file_and_directory(tmp_path):
    with pytest.raises(KeyFileError, match="not found") as e:
        DigestKey.load(tmp_path / "nope.key")
    assert str(tmp_path / "nope.key") in str(e.value)
    with pytest.raises(KeyFileError, match="directory"):
        DigestKey.load(tmp_path)


# --------------------------------------------------------------------------- signing keys


def test_ed25519_rfc8032_test1():
    # RFC 8032 s7.1 TEST 1 (empty message).
    secret = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
    public = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
    signature = bytes.fromhex(
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
    )
    key = SigningKey.from_raw("ed25519", ed25519_private=secret)
    bundle = key.trust_bundle()
    assert bundle.public_keys == {"ed25519": public}
    assert bundle.key_ids == {"ed25519": hashlib.sha256(public).hexdigest()[:32]}
    sigs = key.sign(b"")
    assert base64.b64decode(sigs["ed25519"]) == signature
    assert bundle.verify(b"", {"ed25519": base64.b64encode(signature).decode()}) == []


def test_mldsa_seed_determines_key():
    seed = bytes(range(32))
    a = SigningKey.from_raw("mldsa65", mldsa65_seed=seed).trust_bundle()
    b = SigningKey.from_raw("mldsa65", mldsa65_seed=seed).trust_bundle()
    assert a == b and len(a.public_keys["ml-dsa-65"]) == 1952


@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_signing_key_round_trip(tmp_path, scheme):
    key = SigningKey.generate(scheme)
    path = tmp_path / "signing.key"
    key.save(path)
    assert mode_of(path) == 0o600
    doc = json.loads(path.read_text())
    assert doc["format"] == "ledgertool-signing-key-v1" and doc["scheme"] == scheme
    assert ("ed25519_private" in doc) == (scheme != "mldsa65")
    assert ("mldsa65_seed" in doc) == (scheme != "ed25519")
    loaded = SigningKey.load(path)
    assert loaded.scheme == scheme and loaded.path == str(path)
    assert loaded.trust_bundle() == key.trust_bundle()
    sigs = loaded.sign(b"message")
    assert set(sigs) == set(SCHEMES[scheme])
    assert key.trust_bundle().verify(b"message", sigs) == []


def test_signing_key_repr_hides_secret(hybrid):
    text = repr(hybrid)
    doc = hybrid._to_dict()
    assert doc["ed25519_private"] not in text and doc["mldsa65_seed"] not in text


def test_signing_key_save_refuses_overwrite(tmp_path, hybrid):
    path = tmp_path / "signing.key"
    hybrid.save(path)
    before = path.read_bytes()
    with pytest.raises(KeyFileError, match="already exists"):
        SigningKey.generate("hybrid").save(path)
    assert path.read_bytes() == before


def test_unknown_scheme():
    with pytest.raises(AlgorithmError, match="unknown signing scheme"):
        SigningKey.generate("rsa")


@pytest.mark.parametrize(
    "edit,match",
    [
        (lambda d: d.update(scheme="rsa"), "unknown signing scheme"),
        (lambda d: d.pop("mldsa65_seed"), "missing"),
        (lambda d: d.update(extra="x"), "unexpected"),
        (lambda d: d.update(ed25519_private="zz" * 32), "not 64 hex"),
        (lambda d: d.update(ed25519_private="ab" * 31), "not 64 hex"),
        (lambda d: d.update(format="ledgertool-signing-key-v2"), "format"),
    ],
)
def test_signing_key_load_rejects_malformed(tmp_path, hybrid, edit, match):
    doc = hybrid._to_dict()
    edit(doc)
    path = tmp_path / "signing.key"
    path.write_text(json.dumps(doc))
    path.chmod(0o600)
    with pytest.raises(KeyFileError, match=match) as e:
        SigningKey.load(path)
    assert str(path) in str(e.value)


def test_signing_key_load_rejects_non_json(tmp_path):
    path = tmp_path / "signing.key"
    path.write_text("{not json")
    path.chmod(0o600)
    with pytest.raises(KeyFileError, match="not JSON at byte 1") as e:
        SigningKey.load(path)
    assert str(path) in str(e.value)


# --------------------------------------------------------------------------- trust bundle


def test_trust_bundle_file(tmp_path, hybrid):
    bundle = hybrid.trust_bundle()
    path = tmp_path / "verifier.pub"
    bundle.save(path)
    assert mode_of(path) == 0o644
    doc = json.loads(path.read_text())
    assert doc == json.loads(bundle.to_json()) == bundle.to_dict()
    assert doc["format"] == "ledgertool-verifier-v1" and doc["scheme"] == "hybrid"
    assert [k["algorithm"] for k in doc["keys"]] == ["ed25519", "ml-dsa-65"]
    for k in doc["keys"]:
        raw = base64.b64decode(k["public_key"])
        assert k["key_id"] == hashlib.sha256(raw).hexdigest()[:32]
    loaded = TrustBundle.load(path)
    assert loaded == bundle and loaded.key_ids == bundle.key_ids
    with pytest.raises(KeyFileError, match="already exists"):
        bundle.save(path)


def _bundle_doc(key):
    return key.trust_bundle().to_dict()


@pytest.mark.parametrize(
    "edit,match",
    [
        (lambda d: d["keys"][0].update(key_id="00" * 16), "does not match"),
        (lambda d: d.update(scheme="triple"), "unknown signing scheme"),
        (lambda d: d["keys"].pop(), "needs a ml-dsa-65 key"),
        (lambda d: d["keys"].append(dict(d["keys"][0])), "duplicate"),
        (lambda d: d["keys"][0].update(public_key="AAAA"), "3 bytes"),
        (lambda d: d["keys"][0].update(public_key="not base64!"), "base64"),
        (lambda d: d["keys"][0].update(algorithm="rsa"), "unknown algorithm"),
        (lambda d: d.update(comment="x"), "unknown field"),
        (lambda d: d.update(keys={}), "not a list"),
        (lambda d: d.update(scheme="ed25519"), "does not belong"),
    ],
)
def test_trust_bundle_load_rejects_malformed(tmp_path, hybrid, edit, match):
    doc = _bundle_doc(hybrid)
    edit(doc)
    path = tmp_path / "verifier.pub"
    path.write_text(json.dumps(doc))
    with pytest.raises(KeyFileError, match=match) as e:
        TrustBundle.load(path)
    assert str(path) in str(e.value)
    assert "\n" not in str(e.value)


# --------------------------------------------------------------------------- wrong kind of file


@pytest.mark.parametrize(
    "file,loader,match",
    [
        (
            "verifier",
            SigningKey.load,
            "is a verifier trust bundle.*expected a ledgertool signing key",
        ),
        ("digest_key", SigningKey.load, "is a digest key.*expected a ledgertool signing key"),
        ("digest_key", TrustBundle.load, "is a digest key.*expected a verifier trust bundle"),
        ("signing_key", TrustBundle.load, "is a ledgertool signing key.*expected a verifier"),
        ("signing_key", DigestKey.load, "is a ledgertool signing key.*expected a digest key"),
        ("verifier", DigestKey.load, "is a verifier trust bundle.*expected a digest key"),
    ],
)
def test_wrong_kind_of_file_rejected(keydir, file, loader, match):
    with pytest.raises(KeyFileError, match=match) as e:
        loader(keydir[file])
    assert str(e.value).startswith(keydir[file] + ":")


def test_random_json_is_not_a_trust_bundle(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"hello": 1}')
    with pytest.raises(KeyFileError, match="format") as e:
        TrustBundle.load(path)
    assert str(path) in str(e.value)


# --------------------------------------------------------------------------- verification problems


def test_hybrid_signatures_verify(hybrid):
    bundle = hybrid.trust_bundle()
    sigs = hybrid.sign(b"seal bytes")
    assert set(sigs) == {"ed25519", "ml-dsa-65"}
    assert bundle.verify(b"seal bytes", sigs) == []


def test_tampered_message_fails_both(hybrid):
    bundle = hybrid.trust_bundle()
    ids = bundle.key_ids
    problems = bundle.verify(b"seal bytez", hybrid.sign(b"seal bytes"))
    assert problems == [
        f"ed25519 signature does not verify with key {ids['ed25519']}",
        f"ml-dsa-65 signature does not verify with key {ids['ml-dsa-65']}",
    ]


def test_missing_mldsa_signature_is_a_problem(hybrid):
    sigs = hybrid.sign(b"m")
    del sigs["ml-dsa-65"]
    assert hybrid.trust_bundle().verify(b"m", sigs) == ["ml-dsa-65 signature missing"]


def test_missing_both_signatures(hybrid):
    assert hybrid.trust_bundle().verify(b"m", {}) == [
        "ed25519 signature missing",
        "ml-dsa-65 signature missing",
    ]


def test_swapped_signatures_fail(hybrid):
    sigs = hybrid.sign(b"m")
    swapped = {"ed25519": sigs["ml-dsa-65"], "ml-dsa-65": sigs["ed25519"]}
    problems = hybrid.trust_bundle().verify(b"m", swapped)
    assert len(problems) == 2
    assert problems[0].startswith("ed25519 signature does not verify")
    assert problems[1].startswith("ml-dsa-65 signature does not verify")


def test_one_wrong_signature_is_one_problem(hybrid):
    sigs = hybrid.sign(b"m")
    sigs["ed25519"] = b64flip(sigs["ed25519"])
    assert hybrid.trust_bundle().verify(b"m", sigs) == [
        f"ed25519 signature does not verify with key {hybrid.trust_bundle().key_ids['ed25519']}"
    ]


def test_signature_from_another_key_fails(hybrid):
    other = SigningKey.generate("hybrid")
    problems = hybrid.trust_bundle().verify(b"m", other.sign(b"m"))
    assert len(problems) == 2 and all("does not verify" in p for p in problems)


def test_one_signature_from_another_key_fails(hybrid):
    other = SigningKey.generate("hybrid")
    sigs = hybrid.sign(b"m")
    sigs["ml-dsa-65"] = other.sign(b"m")["ml-dsa-65"]
    problems = hybrid.trust_bundle().verify(b"m", sigs)
    assert problems == [
        f"ml-dsa-65 signature does not verify with key {hybrid.trust_bundle().key_ids['ml-dsa-65']}"
    ]


@pytest.mark.parametrize("bad", ["***", "", 5, None])
def test_malformed_signature_values(hybrid, bad):
    sigs = hybrid.sign(b"m")
    sigs["ed25519"] = bad
    problems = hybrid.trust_bundle().verify(b"m", sigs)
    assert len(problems) == 1 and problems[0].startswith("ed25519 signature")


def test_signatures_not_a_mapping(hybrid):
    problems = hybrid.trust_bundle().verify(b"m", ["x"])
    assert len(problems) == 1 and "object" in problems[0]


def test_unexpected_algorithm_reported(hybrid):
    ed = SigningKey.generate("ed25519")
    problems = ed.trust_bundle().verify(
        b"m", {**ed.sign(b"m"), "ml-dsa-65": hybrid.sign(b"m")["ml-dsa-65"]}
    )
    assert problems == [
        "unexpected 'ml-dsa-65' signature: trust bundle (scheme ed25519) has no such key"
    ]


def test_ed25519_only_bundle_cannot_be_satisfied_by_mldsa():
    ed = SigningKey.generate("ed25519").trust_bundle()
    ml = SigningKey.generate("mldsa65")
    problems = ed.verify(b"m", ml.sign(b"m"))
    assert "ed25519 signature missing" in problems


# --------------------------------------------------------------------------- seal message,
# generate_keys


def test_seal_message_prefix():
    assert seal_message(b'{"a":1}') == b'ledgertool seal v1\n{"a":1}'
    with pytest.raises(TypeError):
        seal_message('{"a":1}')


def test_generate_keys(tmp_path):
    out = tmp_path / "new" / "keys"
    result = generate_keys(out)
    assert result["scheme"] == "hybrid"
    assert sorted(os.listdir(out)) == ["digest.key", "signing.key", "verifier.pub"]
    assert mode_of(result["digest_key"]) == 0o600
    assert mode_of(result["signing_key"]) == 0o600
    assert mode_of(result["verifier"]) == 0o644
    signing = SigningKey.load(result["signing_key"])
    bundle = TrustBundle.load(result["verifier"])
    assert signing.trust_bundle() == bundle
    assert result["key_ids"] == bundle.key_ids
    assert bundle.verify(b"m", signing.sign(b"m")) == []
    DigestKey.load(result["digest_key"])


@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_generate_keys_schemes(tmp_path, scheme):
    result = generate_keys(tmp_path, scheme=scheme)
    assert TrustBundle.load(result["verifier"]).scheme == scheme
    assert set(result["key_ids"]) == set(SCHEMES[scheme])


def test_generate_keys_refuses_to_overwrite_and_writes_nothing(tmp_path):
    (tmp_path / "verifier.pub").write_text("existing\n")
    with pytest.raises(KeyFileError, match="already exists") as e:
        generate_keys(tmp_path)
    assert str(tmp_path / "verifier.pub") in str(e.value)
    assert sorted(os.listdir(tmp_path)) == ["verifier.pub"]


def test_generate_keys_unknown_scheme(tmp_path):
    with pytest.raises(AlgorithmError):
        generate_keys(tmp_path, scheme="rsa")
    assert os.listdir(tmp_path) == []


def test_generate_keys_outdir_is_a_file(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(KeyFileError) as e:
        generate_keys(f)
    assert str(f) in str(e.value)
