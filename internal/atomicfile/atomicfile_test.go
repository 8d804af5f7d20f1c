package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWrite: a crash at any point leaves the old file whole; without one
// the new file is in place with its mode and no temporary file is left.
func TestWrite(t *testing.T) {
	for _, point := range []string{"written", "synced", ""} {
		t.Run("crash at "+point, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f")
			if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			defer InjectCrash(func(p, at string) bool { return p == path && at == point })()
			err := Write(path, []byte("new"), 0o600)
			got, _ := os.ReadFile(path)
			ents, _ := os.ReadDir(dir)
			if point != "" {
				if err == nil || string(got) != "old" {
					t.Fatalf("crash at %s: err %v, file %q", point, err, got)
				}
				return
			}
			st, serr := os.Stat(path)
			if err != nil || serr != nil || string(got) != "new" || st.Mode().Perm() != 0o600 || len(ents) != 1 {
				t.Fatalf("err %v, file %q, mode %v, %d entries", err, got, st.Mode(), len(ents))
			}
		})
	}
}

func TestRemove(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // the second finds it gone, which is no error
		if err := Remove(path); err != nil {
			t.Fatalf("remove %d: %v", i, err)
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("still there: %v", err)
	}
}
