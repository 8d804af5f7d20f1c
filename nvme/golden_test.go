package nvme

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// checkGolden compares b with testdata/name, a dump of b's non-zero 16-byte
// rows, or rewrites it under -update.
func checkGolden(t *testing.T, name string, b []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	got := hexRows(b)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s:\n got:\n%s\nwant:\n%s", name, path, got, want)
	}
}

// hexRows dumps the 16-byte rows of b that are not all zero.
func hexRows(b []byte) string {
	var sb strings.Builder
	for o := 0; o < len(b); o += 16 {
		row := b[o:min(o+16, len(b))]
		if strings.Trim(string(row), "\x00") != "" {
			fmt.Fprintf(&sb, "%04x: % x\n", o, row)
		}
	}
	return sb.String()
}
