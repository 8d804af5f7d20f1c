// Package golden compares what a test produced with a file under testdata,
// or rewrites the file when the test runs with -update. Only tests import
// it.
package golden

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// Check compares got with the file at path, or writes it there under
// -update.
func Check(t testing.TB, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("differs from %s:\n got:\n%s\nwant:\n%s", path, got, want)
	}
}

// HexRows dumps the 16-byte rows of b that are not all zero, each with its
// offset: a readable golden form of a binary structure.
func HexRows(b []byte) string {
	var sb strings.Builder
	for o := 0; o < len(b); o += 16 {
		row := b[o:min(o+16, len(b))]
		if strings.Trim(string(row), "\x00") != "" {
			fmt.Fprintf(&sb, "%04x: % x\n", o, row)
		}
	}
	return sb.String()
}
