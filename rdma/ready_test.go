package rdma

import (
	"errors"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestReadWhenReady: the helper both event readers use returns what get
// returns once the descriptor is readable, and reports a closed descriptor.
func TestReadWhenReady(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name       string
		write      bool // write a byte before waiting
		writeLater bool // write it while waiting: get sees EAGAIN first
		closeFirst bool // close the read end before waiting
		getErr     error
		wantClosed bool
		wantErr    error
		wantV      int
	}{
		{name: "readable", write: true, wantV: 1},
		{name: "readable later", writeLater: true, wantV: 1},
		{name: "get fails", write: true, getErr: boom, wantErr: boom},
		{name: "closed", closeFirst: true, wantClosed: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			rc, err := r.SyscallConn()
			if err != nil {
				t.Fatal(err)
			}
			calls := 0
			get := func() (int, error) {
				calls++
				var fd int
				_ = rc.Control(func(f uintptr) { fd = int(f) })
				var b [1]byte
				n, err := syscall.Read(fd, b[:])
				if err != nil {
					return 0, err // EAGAIN until the byte is there
				}
				if tc.getErr != nil {
					return 0, tc.getErr
				}
				return n, nil
			}
			if tc.write {
				if _, err := w.Write([]byte{7}); err != nil {
					t.Fatal(err)
				}
			}
			if tc.writeLater {
				go func() {
					time.Sleep(20 * time.Millisecond)
					w.Write([]byte{7})
				}()
			}
			if tc.closeFirst {
				r.Close()
			} else {
				defer r.Close()
			}
			v, closed, err := readWhenReady(rc, get)
			if closed != tc.wantClosed || !errors.Is(err, tc.wantErr) || v != tc.wantV {
				t.Fatalf("got v=%d closed=%v err=%v (get called %d times), want v=%d closed=%v err=%v",
					v, closed, err, calls, tc.wantV, tc.wantClosed, tc.wantErr)
			}
		})
	}
}
