// Checks ledgertool checkpoints with Go's golang.org/x/mod/sumdb/note, a signed-note verifier the
// project did not write, given nothing but the C2SP vkey string `ledgertool keys vkey` prints
// (tests/system/test_vkey_go_note.py runs it when a Go toolchain and the x/mod sources are
// installed; .ci/run installs Debian's golang-go and golang-golang-x-mod-dev, used in GOPATH mode
// without a network).
//
// Reads one JSON case per line on stdin, {"vkey": STRING, "note": STRING}, and prints one line per
// case: "ok <key name> <key hash, 8 hex> <number of signatures it could not check>" followed by the
// note text's first line, or "fail: REASON".
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

type testCase struct {
	Vkey string `json:"vkey"`
	Note string `json:"note"`
}

func check(c testCase) (string, error) {
	v, err := note.NewVerifier(c.Vkey)
	if err != nil {
		return "", err
	}
	n, err := note.Open([]byte(c.Note), note.VerifierList(v))
	if err != nil {
		return "", err
	}
	origin, _, _ := strings.Cut(n.Text, "\n")
	return fmt.Sprintf("ok %s %08x %d %s", n.Sigs[0].Name, n.Sigs[0].Hash, len(n.UnverifiedSigs), origin), nil
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
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}
