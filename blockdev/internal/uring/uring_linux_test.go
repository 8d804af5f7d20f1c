package uring

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func newTestRing(t *testing.T, entries int) *Ring {
	t.Helper()
	r, err := New(entries)
	if err != nil {
		// io_uring is part of every kernel this product supports; a host that
		// forbids it must not make the test pass silently.
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func tempFD(t *testing.T) int {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return int(f.Fd())
}

// reap submits and polls until want CQEs have arrived.
func reap(t *testing.T, r *Ring, want int) []CQE {
	t.Helper()
	var got []CQE
	buf := make([]CQE, 4)
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < want {
		if err := r.Submit(); err != nil {
			t.Fatalf("Submit: %v", err)
		}
		n := r.Reap(buf)
		got = append(got, buf[:n]...)
		if n == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d CQEs after 10s", len(got), want)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	return got
}

func TestNew(t *testing.T) {
	tests := []struct {
		entries     int
		wantEntries int // 0: New fails
	}{
		{0, 0},
		{1, 1},
		{5, 8},
		{MaxEntries, MaxEntries},
		{MaxEntries + 1, 0},
	}
	for _, tc := range tests {
		r, err := New(tc.entries)
		if tc.wantEntries == 0 {
			if !errors.Is(err, unix.EINVAL) {
				t.Errorf("New(%d): %v, want EINVAL", tc.entries, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("New(%d): %v", tc.entries, err)
		}
		if got := r.Entries(); got != tc.wantEntries {
			t.Errorf("New(%d).Entries() = %d, want %d", tc.entries, got, tc.wantEntries)
		}
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
}

// Each opcode reaches the kernel with its buffer, offset and flags, and its
// result comes back with the user data it was prepared with.
func TestOps(t *testing.T) {
	r := newTestRing(t, 4)
	fd := tempFD(t)
	data := bytes.Repeat([]byte("ring"), 1024)
	got := make([]byte, len(data))
	steps := []struct {
		name    string
		op      Op
		p       []byte
		off     int64
		flags   uint32
		wantRes int32
	}{
		{"write", OpWrite, data, 8192, unix.RWF_DSYNC, int32(len(data))},
		{"fdatasync", OpFsync, nil, 0, FsyncDatasync, 0},
		{"read", OpRead, got, 8192, 0, int32(len(data))},
		{"read past the end", OpRead, got, 1 << 20, 0, 0},
		{"read a bad fd", OpRead, got, 0, 0, -int32(unix.EBADF)},
	}
	for i, s := range steps {
		fd := fd
		if s.wantRes < 0 {
			fd = -1
		}
		ud := uint64(i)<<32 | 0xabcd
		r.Prep(s.op, fd, s.p, s.off, s.flags, ud)
		c := reap(t, r, 1)[0]
		if c.UserData != ud || c.Res != s.wantRes {
			t.Fatalf("%s: CQE %+v, want user data %#x, res %d", s.name, c, ud, s.wantRes)
		}
	}
	if !bytes.Equal(got, data) {
		t.Fatal("read back other bytes than were written")
	}
}

// Reap hands out no more than out holds; the rest waits for the next call.
func TestReapBounded(t *testing.T) {
	r := newTestRing(t, 8)
	fd := tempFD(t)
	for i := range 5 {
		r.Prep(OpFsync, fd, nil, 0, 0, uint64(i))
	}
	if err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	out := make([]CQE, 2)
	deadline := time.Now().Add(10 * time.Second)
	for len(seen) < 5 && time.Now().Before(deadline) {
		n := r.Reap(out)
		if n > len(out) {
			t.Fatalf("Reap returned %d into %d places", n, len(out))
		}
		for _, c := range out[:n] {
			seen[c.UserData] = true
		}
	}
	if len(seen) != 5 {
		t.Fatalf("saw %v, want user data 0-4", seen)
	}
	if n := r.Reap(out); n != 0 {
		t.Fatalf("Reap after all: %d CQEs", n)
	}
}

// When the kernel refuses the ring, every SQE it did not take comes back
// through Unprep, newest first, and the ring works again afterwards.
func TestUnprep(t *testing.T) {
	r := newTestRing(t, 4)
	fd := tempFD(t)
	if _, ok := r.Unprep(); ok {
		t.Fatal("Unprep on an empty ring reported an SQE")
	}
	for i := range 3 {
		r.Prep(OpFsync, fd, nil, 0, 0, uint64(10+i))
	}
	ringFD := r.fd
	r.fd = -1 // io_uring_enter fails with EBADF
	err := r.Submit()
	r.fd = ringFD
	if !errors.Is(err, unix.EBADF) {
		t.Fatalf("Submit on a bad ring: %v, want EBADF", err)
	}
	for want := uint64(12); want >= 10; want-- {
		ud, ok := r.Unprep()
		if !ok || ud != want {
			t.Fatalf("Unprep = %d, %v; want %d", ud, ok, want)
		}
	}
	if _, ok := r.Unprep(); ok {
		t.Fatal("Unprep returned more SQEs than were prepared")
	}
	r.Prep(OpFsync, fd, nil, 0, 0, 99)
	if c := reap(t, r, 1); c[0].UserData != 99 || c[0].Res != 0 {
		t.Fatalf("after the failure: %+v", c[0])
	}
}

// A registered eventfd is signalled when a completion is posted, so the
// owner can sleep in poll(2); Wait returns once one is there.
func TestRegisterEventFD(t *testing.T) {
	r := newTestRing(t, 2)
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(efd)
	if err := r.RegisterEventFD(efd); err != nil {
		t.Fatalf("RegisterEventFD: %v", err)
	}
	r.Prep(OpFsync, tempFD(t), nil, 0, 0, 7)
	if err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	if err := r.Wait(); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	pfd := []unix.PollFd{{Fd: int32(efd), Events: unix.POLLIN}}
	if n, err := unix.Poll(pfd, 5000); err != nil || n != 1 {
		t.Fatalf("poll eventfd: %d, %v; want it readable", n, err)
	}
	out := make([]CQE, 2)
	if n := r.Reap(out); n != 1 || out[0].UserData != 7 {
		t.Fatalf("Reap: %d %+v", n, out[0])
	}
}
