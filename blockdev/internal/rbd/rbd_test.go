//go:build linux && cgo && rbd

package rbd

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// These tests need a cluster: NVMEOF_TGT_TEST_CEPH_CONF names its
// configuration (tests/lab/ceph-up.sh writes one; `make unit-rbd` starts a
// cluster and runs them), with a pool "rbd".
func testConn(t *testing.T) *Conn {
	t.Helper()
	conf := os.Getenv("NVMEOF_TGT_TEST_CEPH_CONF")
	if conf == "" {
		t.Skip("no cluster: set NVMEOF_TGT_TEST_CEPH_CONF (make unit-rbd)")
	}
	c, err := Connect(conf, "client.admin", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func testImage(t *testing.T, c *Conn, size uint64) *Image {
	t.Helper()
	name := fmt.Sprintf("unit-%s-%d", t.Name(), time.Now().UnixNano())
	if err := c.CreateImage("rbd", name, size, FeatureLayering); err != nil {
		t.Fatal(err)
	}
	im, err := c.OpenImage("rbd", name, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { im.Close() })
	return im
}

func TestConnectErrors(t *testing.T) {
	dir := t.TempDir()
	bad := dir + "/bad.conf"
	os.WriteFile(bad, []byte("[global]\nmon host = 127.0.0.1:1\n"), 0o600)
	start := time.Now()
	_, err := Connect(bad, "client.admin", 2*time.Second)
	if err == nil || !errors.Is(err, syscall.ETIMEDOUT) {
		t.Errorf("unreachable mon: %v, want ETIMEDOUT", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("unreachable mon took %v, want about 2s", d)
	}
	if _, err := Connect(dir+"/missing.conf", "client.admin", time.Second); err == nil || !errors.Is(err, syscall.ENOENT) {
		t.Errorf("missing conf: %v, want ENOENT", err)
	}
}

func TestImage(t *testing.T) {
	c := testConn(t)
	if _, err := c.OpenImage("no-such-pool", "x", false); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("missing pool: %v", err)
	}
	if _, err := c.OpenImage("rbd", "no-such-image", false); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("missing image: %v", err)
	}
	im := testImage(t, c, 8<<20)
	if err := c.CreateImage("rbd", im.name[len("rbd/"):], 1<<20, FeatureLayering); !errors.Is(err, syscall.EEXIST) {
		t.Errorf("create twice: %v", err)
	}
	want := bytes.Repeat([]byte("0123456789abcdef"), 512)
	if err := im.WriteAt(want, 4096); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	if err := im.ReadAt(got, 4096); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read back: %v, equal %v", err, bytes.Equal(got, want))
	}
	if err := im.WriteZeroes(4096, 4096); err != nil {
		t.Fatal(err)
	}
	if err := im.Discard(0, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := im.Flush(); err != nil {
		t.Fatal(err)
	}
	f, _ := im.Features()
	if f&FeatureExclusiveLock != 0 {
		t.Errorf("features %#x", f)
	}
}

// TestQueue runs every asynchronous operation through a Queue and reaps
// them by polling and by sleeping on the eventfd after Arm.
func TestQueue(t *testing.T) {
	c := testConn(t)
	im := testImage(t, c, 8<<20)
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(efd)
	q, err := NewQueue(64, efd)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := q.Close(10 * time.Second); err != nil {
			t.Error(err)
		}
	}()
	buf, _ := unix.Mmap(-1, 0, 128<<10, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	defer unix.Munmap(buf)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	wait := func(n int) []Completion {
		var out []Completion
		comps := make([]Completion, 8)
		deadline := time.Now().Add(20 * time.Second)
		for len(out) < n {
			if k := q.Reap(comps); k > 0 {
				out = append(out, comps[:k]...)
				continue
			}
			if time.Now().After(deadline) {
				t.Fatalf("got %d completions of %d", len(out), n)
			}
			if q.Arm() {
				fds := []unix.PollFd{{Fd: int32(efd), Events: unix.POLLIN}}
				unix.Poll(fds, 1000)
				var b [8]byte
				unix.Read(efd, b[:])
			}
		}
		return out
	}
	for i := 0; i < 16; i++ {
		if err := q.Submit(OpWrite, im, uint32(i), buf[i*4096:(i+1)*4096], int64(i)*4096, 0); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[uint32]bool{}
	for _, c := range wait(16) {
		if c.Res < 0 {
			t.Errorf("write slot %d: %v", c.Slot, syscall.Errno(-c.Res))
		}
		seen[c.Slot] = true
	}
	if len(seen) != 16 {
		t.Errorf("slots %v", seen)
	}
	if err := q.Submit(OpFlush, im, 20, nil, 0, 0); err != nil {
		t.Fatal(err)
	}
	wait(1)
	rd := buf[64<<10 : 64<<10+16*4096]
	if err := q.Submit(OpRead, im, 1, rd, 0, 0); err != nil {
		t.Fatal(err)
	}
	if c := wait(1)[0]; c.Slot != 1 || c.Res != int64(len(rd)) {
		t.Errorf("read: %+v", c)
	}
	if !bytes.Equal(rd, buf[:len(rd)]) {
		t.Error("read back differs")
	}
	if err := q.Submit(OpWriteZeroes, im, 2, nil, 0, 4096); err != nil {
		t.Fatal(err)
	}
	if err := q.Submit(OpDiscard, im, 3, nil, 4096, 4096); err != nil {
		t.Fatal(err)
	}
	for _, c := range wait(2) {
		if c.Res < 0 {
			t.Errorf("slot %d: %v", c.Slot, syscall.Errno(-c.Res))
		}
	}
	z := make([]byte, 4096)
	if err := im.ReadAt(z, 0); err != nil || !bytes.Equal(z, make([]byte, 4096)) {
		t.Errorf("after write zeroes: %v", err)
	}
	// Past the end: the error comes through the completion.
	if err := q.Submit(OpRead, im, 4, rd[:4096], 16<<20, 0); err != nil {
		t.Fatal(err)
	}
	if c := wait(1)[0]; c.Res >= 0 {
		t.Errorf("read past the end: %+v", c)
	}
	if n := q.Inflight(); n != 0 {
		t.Errorf("inflight %d", n)
	}
}

func TestWatchResize(t *testing.T) {
	c := testConn(t)
	im := testImage(t, c, 8<<20)
	efd, _ := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	defer unix.Close(efd)
	w, err := im.WatchUpdates(efd)
	if err != nil {
		t.Fatal(err)
	}
	// Another client resizes it.
	other, err := c.OpenImage("rbd", im.name[len("rbd/"):], false)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Resize(16 << 20); err != nil {
		t.Fatal(err)
	}
	other.Close()
	fds := []unix.PollFd{{Fd: int32(efd), Events: unix.POLLIN}}
	if n, _ := unix.Poll(fds, 10000); n != 1 {
		t.Fatal("no wake-up within 10s of a resize")
	}
	if !w.Changed() || w.Changed() {
		t.Error("Changed: want true once")
	}
	if n, err := im.Size(); err != nil || n != 16<<20 {
		t.Errorf("size %d, %v", n, err)
	}
	if err := w.Unwatch(); err != nil {
		t.Error(err)
	}
}
