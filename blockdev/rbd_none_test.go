//go:build !(linux && cgo && rbd)

package blockdev

import (
	"errors"
	"strings"
	"testing"
)

// A build without librbd refuses the rbd backend and names the one that
// serves it.
func TestOpenRBDNotSupported(t *testing.T) {
	_, err := OpenRBD(RBDOptions{Pool: "rbd", Image: "disk1", Size: 1 << 20})
	if !errors.Is(err, ErrNotSupported) {
		t.Fatalf("OpenRBD: %v, want ErrNotSupported", err)
	}
	if !strings.Contains(err.Error(), "nvmeof-tgt-rbd") || !strings.Contains(err.Error(), "rbd/disk1") {
		t.Errorf("error %q: want the image and the binary that serves it", err)
	}
	if RBDSupported {
		t.Error("RBDSupported in a build without librbd")
	}
}
