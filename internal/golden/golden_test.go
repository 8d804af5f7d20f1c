package golden

import (
	"os"
	"path/filepath"
	"testing"
)

func TestHexRows(t *testing.T) {
	b := make([]byte, 40)
	b[1], b[33] = 0xab, 0x01
	want := "0000: 00 ab 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n0020: 00 01 00 00 00 00 00 00\n"
	if got := HexRows(b); got != want {
		t.Fatalf("got\n%swant\n%s", got, want)
	}
}

// fakeT records failures instead of ending the test.
type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Helper()               {}
func (f *fakeT) Errorf(string, ...any) { f.failed = true }
func (f *fakeT) Fatalf(string, ...any) { f.failed = true }

func TestCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g")
	if err := os.WriteFile(path, []byte("same\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, got string
		fail      bool
	}{{path, "same\n", false}, {path, "other\n", true}, {path + ".missing", "same\n", true}} {
		f := &fakeT{TB: t}
		Check(f, tc.path, tc.got)
		if f.failed != tc.fail {
			t.Errorf("Check(%s, %q): failed %v, want %v", tc.path, tc.got, f.failed, tc.fail)
		}
	}
}
