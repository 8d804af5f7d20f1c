package dirlock

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAcquire: a second lock of a directory fails at once, naming the
// holder; once the first is closed it is taken; a lock file a holder
// never wrote (or one another program garbled) still refuses, holder
// unknown.
func TestAcquire(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state") // made by Acquire
	a, err := Acquire(dir, Holder{PID: 4242, Config: "/etc/a.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("the directory: %v %v", st, err)
	}
	_, err = Acquire(dir, Holder{PID: 1, Config: "/etc/b.yaml"})
	if !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), "pid 4242, config /etc/a.yaml") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("second lock: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := Acquire(dir, Holder{PID: 7})
	if err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	defer b.Close()
	// The holder's record garbled: still refused.
	if err := os.WriteFile(filepath.Join(dir, Name), []byte("{garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Acquire(dir, Holder{PID: 8}); !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), "not recorded") {
		t.Fatalf("a garbled record: %v", err)
	}
}
