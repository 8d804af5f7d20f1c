//go:build linux && cgo && rbd

package rados

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/ceph/go-ceph/rados"

	"github.com/nvmeof-tgt/nvmeof-tgt/control/group"
)

// TestErrno: librados' codes are found through go-ceph's wrappings, an
// operation's included (it has no Unwrap): a missing object read by an
// operation is ENOENT, and a blocklisted client's error is ErrBlocklisted.
func TestErrno(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{rados.ErrNotFound, int(syscall.ENOENT)},
		{rados.OperationError{OpError: rados.ErrNotFound}, int(syscall.ENOENT)},
		{fmt.Errorf("read: %w", rados.OperationError{OpError: rados.ErrObjectExists}), int(syscall.EEXIST)},
		{errors.New("plain"), 0},
	}
	for _, tt := range tests {
		if got := errno(tt.err); got != tt.want {
			t.Errorf("errno(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
	if !notFound(rados.OperationError{OpError: rados.ErrNotFound}) {
		t.Error("an operation on a missing object is not notFound")
	}
	if err := wrap(rados.ErrNotConnected); errors.Is(err, group.ErrBlocklisted) {
		t.Errorf("ENOTCONN taken for a blocklisting: %v", err)
	}
}
