// Checks witness cosignatures on ledgertool checkpoints with Go's golang.org/x/mod/sumdb/note,
// which parses the signed note, matches signature lines to keys by name and key hash, and calls
// the key's Verify; the cosignature/v1 verifier below is written from c2sp.org/tlog-cosignature
// (key hash SHA-256(name || 0x0A || 0x04 || key)[:4]; signature u64be timestamp || Ed25519 over
// "cosignature/v1\ntime <t>\n" || note text), importing no ledgertool code
// (tests/system/test_witness_go_note.py runs it where Go and the x/mod sources are installed).
//
// Reads one JSON case per line on stdin, {"log_vkey": STRING, "witness_vkey": STRING, "note":
// STRING}, and prints one line per case: "ok <names of the verified signers, comma-separated>
// <timestamp of the cosignature>" or "fail: REASON".
package main

import (
	"bufio"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

type cosigV1 struct {
	name string
	hash uint32
	key  ed25519.PublicKey
	last uint64
}

func (v *cosigV1) Name() string    { return v.name }
func (v *cosigV1) KeyHash() uint32 { return v.hash }
func (v *cosigV1) Verify(msg, sig []byte) bool {
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	t := binary.BigEndian.Uint64(sig[:8])
	m := append([]byte("cosignature/v1\ntime "+strconv.FormatUint(t, 10)+"\n"), msg...)
	if !ed25519.Verify(v.key, m, sig[8:]) {
		return false
	}
	v.last = t
	return true
}

func newCosigV1(vkey string) (*cosigV1, error) {
	name, rest, ok1 := strings.Cut(vkey, "+")
	hexHash, b64, ok2 := strings.Cut(rest, "+")
	if !ok1 || !ok2 {
		return nil, errors.New("malformed witness vkey")
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != 1+ed25519.PublicKeySize || raw[0] != 0x04 {
		return nil, errors.New("witness vkey is not a cosignature/v1 Ed25519 key")
	}
	h := sha256.Sum256(append(append([]byte(name+"\n"), 0x04), raw[1:]...))
	hash := binary.BigEndian.Uint32(h[:4])
	if fmt.Sprintf("%08x", hash) != hexHash {
		return nil, errors.New("witness vkey hash mismatch")
	}
	return &cosigV1{name: name, hash: hash, key: ed25519.PublicKey(raw[1:])}, nil
}

type testCase struct {
	LogVkey     string `json:"log_vkey"`
	WitnessVkey string `json:"witness_vkey"`
	Note        string `json:"note"`
}

func check(c testCase) (string, error) {
	lv, err := note.NewVerifier(c.LogVkey)
	if err != nil {
		return "", err
	}
	wv, err := newCosigV1(c.WitnessVkey)
	if err != nil {
		return "", err
	}
	n, err := note.Open([]byte(c.Note), note.VerifierList(lv, wv))
	if err != nil {
		return "", err
	}
	names := []string{}
	for _, s := range n.Sigs {
		names = append(names, s.Name)
	}
	return fmt.Sprintf("ok %s %d", strings.Join(names, ","), wv.last), nil
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<24)
	for in.Scan() {
		var c testCase
		line, err := "", json.Unmarshal(in.Bytes(), &c)
		if err == nil {
			line, err = check(c)
		}
		if err != nil {
			fmt.Println("fail:", err)
		} else {
			fmt.Println(line)
		}
	}
}
