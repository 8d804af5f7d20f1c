//go:build linux && cgo && rbd

package blockdev

import (
	"errors"
	"syscall"
	"testing"
)

// TestWriteErrorUnsettled: a write librbd gave up on (ETIMEDOUT) is counted
// as one that may still land; a refused or failed one, or a read, is not.
func TestWriteErrorUnsettled(t *testing.T) {
	before := rbdUnsettled.Load()
	for _, err := range []error{syscall.EIO, syscall.ESHUTDOWN, syscall.ENOSPC} {
		if writeError(err); rbdUnsettled.Load() != before {
			t.Fatalf("%v counted as a write that may still land", err)
		}
	}
	if ioError(syscall.ETIMEDOUT); rbdUnsettled.Load() != before {
		t.Fatal("a read that timed out counted as a write that may still land")
	}
	if err := writeError(syscall.ETIMEDOUT); !errors.Is(err, ErrTimeout) || rbdUnsettled.Load() != before+1 || !RBDUnsettled() {
		t.Fatalf("a write that timed out: %v, counted %d", err, rbdUnsettled.Load()-before)
	}
}
