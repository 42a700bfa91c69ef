// A cross-check of the ledger's RFC 9162 trees with Go's golang.org/x/mod/sumdb/tlog, an
// implementation the project did not write (tests/system/test_rfc9162_go_tlog.py runs it when a Go
// toolchain and the x/mod sources are installed; .ci/run installs Debian's golang-go and
// golang-golang-x-mod-dev, used in GOPATH mode without a network).
//
// Reads one JSON case per line on stdin and prints one line per case: "ok" or "fail: REASON".
//
//	{"kind":"root","entries":[HEX...],"root":HEX}                      tree hash of the entries
//	{"kind":"inclusion","index":I,"size":N,"entry":HEX,"proof":[HEX...],"root":HEX}
//	{"kind":"consistency","old_size":M,"new_size":N,"old_root":HEX,"new_root":HEX,"proof":[HEX...]}
//
// An entry is the leaf's data: the leaf hash is tlog.RecordHash(entry) = SHA-256(0x00 || entry).
package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"golang.org/x/mod/sumdb/tlog"
)

type testCase struct {
	Kind    string   `json:"kind"`
	Entries []string `json:"entries"`
	Root    string   `json:"root"`
	Index   int64    `json:"index"`
	Size    int64    `json:"size"`
	Entry   string   `json:"entry"`
	Proof   []string `json:"proof"`
	OldSize int64    `json:"old_size"`
	NewSize int64    `json:"new_size"`
	OldRoot string   `json:"old_root"`
	NewRoot string   `json:"new_root"`
}

func hash(s string) (tlog.Hash, error) {
	var h tlog.Hash
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("bad hash %q", s)
	}
	copy(h[:], b)
	return h, nil
}

func hashes(ss []string) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(ss))
	for i, s := range ss {
		h, err := hash(s)
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}

// memReader holds the stored hashes tlog.StoredHashes produces, indexed as tlog.StoredHashIndex.
type memReader []tlog.Hash

func (r memReader) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		if x >= int64(len(r)) {
			return nil, errors.New("hash not stored")
		}
		out[i] = r[x]
	}
	return out, nil
}

func treeHash(entries []string) (tlog.Hash, error) {
	var stored memReader
	for n, e := range entries {
		data, err := hex.DecodeString(e)
		if err != nil {
			return tlog.Hash{}, err
		}
		hs, err := tlog.StoredHashes(int64(n), data, stored)
		if err != nil {
			return tlog.Hash{}, err
		}
		stored = append(stored, hs...)
	}
	return tlog.TreeHash(int64(len(entries)), stored)
}

func check(c testCase) error {
	switch c.Kind {
	case "root":
		want, err := hash(c.Root)
		if err != nil {
			return err
		}
		got, err := treeHash(c.Entries)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("tree hash %x, want %x", got, want)
		}
		return nil
	case "inclusion":
		root, err := hash(c.Root)
		if err != nil {
			return err
		}
		entry, err := hex.DecodeString(c.Entry)
		if err != nil {
			return err
		}
		p, err := hashes(c.Proof)
		if err != nil {
			return err
		}
		return tlog.CheckRecord(tlog.RecordProof(p), c.Size, root, c.Index, tlog.RecordHash(entry))
	case "consistency":
		oldRoot, err := hash(c.OldRoot)
		if err != nil {
			return err
		}
		newRoot, err := hash(c.NewRoot)
		if err != nil {
			return err
		}
		p, err := hashes(c.Proof)
		if err != nil {
			return err
		}
		return tlog.CheckTree(tlog.TreeProof(p), c.NewSize, newRoot, c.OldSize, oldRoot)
	}
	return fmt.Errorf("unknown kind %q", c.Kind)
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<26)
	for in.Scan() {
		var c testCase
		err := json.Unmarshal(in.Bytes(), &c)
		if err == nil {
			err = check(c)
		}
		if err != nil {
			fmt.Println("fail:", err)
		} else {
			fmt.Println("ok")
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}
