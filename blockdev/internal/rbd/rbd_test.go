//go:build linux && cgo && rbd

package rbd

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// These tests need a cluster: NVMEOF_TGT_TEST_CEPH_CONF names its
// configuration (tests/lab/ceph-up.sh writes one; the e2e suite runs them
// in the guest against its cluster, TestRBDUnit), with a pool "rbd".
// TestQueuePost and TestConnectErrors need none.
func testConn(t *testing.T) *Conn {
	t.Helper()
	conf := os.Getenv("NVMEOF_TGT_TEST_CEPH_CONF")
	if conf == "" {
		t.Skip("no cluster: set NVMEOF_TGT_TEST_CEPH_CONF (make unit-rbd)")
	}
	c, err := Connect(conf, "client.admin", 10*time.Second, 25*time.Second)
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
	t.Cleanup(func() { c.RemoveImage("rbd", name) })
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
	_, err := Connect(bad, "client.admin", 2*time.Second, 25*time.Second)
	if err == nil || !errors.Is(err, syscall.ETIMEDOUT) {
		t.Errorf("unreachable mon: %v, want ETIMEDOUT", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("unreachable mon took %v, want about 2s", d)
	}
	if _, err := Connect(dir+"/missing.conf", "client.admin", time.Second, 25*time.Second); err == nil || !errors.Is(err, syscall.ENOENT) {
		t.Errorf("missing conf: %v, want ENOENT", err)
	}
}

func TestImage(t *testing.T) {
	c := testConn(t)
	if _, err := c.OpenImage("no-such-pool", "x", false); !errors.Is(err, syscall.ENOENT) || !errors.Is(err, ErrNoPool) {
		t.Errorf("missing pool: %v", err)
	}
	if _, err := c.OpenImage("rbd", "no-such-image", false); !errors.Is(err, syscall.ENOENT) || !errors.Is(err, ErrNoImage) {
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
	// A discard inside an object reads back as zeroes: the connection
	// turns rbd_skip_partial_discard off (its default skips it).
	if err := im.Discard(8192, 4096); err != nil {
		t.Fatal(err)
	}
	if err := im.ReadAt(got[:4096], 8192); err != nil || !bytes.Equal(got[:4096], make([]byte, 4096)) {
		t.Errorf("after a partial discard: %v, zeroes %v", err, bytes.Equal(got[:4096], make([]byte, 4096)))
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
	// A completion is in the ring before its librbd thread drops the count
	// (the count is the callback's last touch of the queue, what Close waits
	// for), so the count reaches 0 shortly after the last reap, not with it.
	if n := waitInflightZero(q, 5*time.Second); n != 0 {
		t.Errorf("inflight %d 5s after the last completion", n)
	}
}

// waitInflightZero waits up to d for q's in-flight count to reach 0 and
// returns the count it saw last.
func waitInflightZero(q *Queue, d time.Duration) int {
	deadline := time.Now().Add(d)
	n := q.Inflight()
	for n != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
		n = q.Inflight()
	}
	return n
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
	// Changed stays readable between Unwatch and Free (a reader woken by the last callback).
	w.Changed()
	w.Free()
}

// TestQueuePost drives a Queue without a cluster: completions posted from
// many threads at once, as librbd's are, each reaped once with its result;
// Arm reports one waiting, and an armed queue writes the eventfd once.
func TestQueuePost(t *testing.T) {
	if _, err := NewQueue(48, -1); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("NewQueue(48): %v, want EINVAL", err)
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(efd)
	const entries = 256
	q, err := NewQueue(entries, efd)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := q.Close(time.Second); err != nil {
			t.Error(err)
		}
	}()
	evfdCount := func() uint64 {
		var b [8]byte
		if n, _ := unix.Read(efd, b[:]); n != 8 {
			return 0
		}
		return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16
	}

	// Not armed: posting writes no eventfd.
	if !q.Arm() {
		t.Fatal("Arm on an empty queue: want true")
	}
	q.arm.Store(0)
	q.post(7, -5)
	if n := evfdCount(); n != 0 {
		t.Errorf("eventfd %d after a completion on an unarmed queue", n)
	}
	if q.Arm() {
		t.Error("Arm with a completion waiting: want false")
	}
	out := make([]Completion, 4)
	if n := q.Reap(out); n != 1 || out[0] != (Completion{Slot: 7, Res: -5}) {
		t.Fatalf("reap: %d %+v", n, out[:n])
	}
	// Armed (the Arm above): the next completion writes it, once.
	q.post(8, 0)
	q.post(9, 0)
	if n := evfdCount(); n != 1 {
		t.Errorf("eventfd %d after two completions on an armed queue, want 1", n)
	}
	if n := q.Reap(out); n != 2 {
		t.Fatalf("reap: %d", n)
	}

	// Every slot from its own thread, many times over: the ring wraps.
	const rounds = 8
	for round := 0; round < rounds; round++ {
		var wg sync.WaitGroup
		for s := 0; s < entries; s++ {
			wg.Add(1)
			go func(s int) {
				defer wg.Done()
				q.post(uint32(s), int64(s*round))
			}(s)
		}
		seen := make(map[uint32]bool, entries)
		all := make([]Completion, 0, entries)
		for len(all) < entries {
			n := q.Reap(out)
			all = append(all, out[:n]...)
			if n == 0 {
				runtime.Gosched()
			}
		}
		wg.Wait()
		for _, c := range all {
			if seen[c.Slot] || c.Res != int64(c.Slot)*int64(round) {
				t.Fatalf("round %d: completion %+v (seen %v)", round, c, seen[c.Slot])
			}
			seen[c.Slot] = true
		}
		if n := q.Reap(out); n != 0 {
			t.Fatalf("round %d: %d completions more than posted", round, n)
		}
	}
	if n := q.Inflight(); n != 0 {
		t.Errorf("inflight %d", n)
	}
}

// BenchmarkQueueReap: reaping allocates nothing and makes no cgo call.
func BenchmarkQueueReap(b *testing.B) {
	q, err := NewQueue(64, -1)
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close(time.Second)
	out := make([]Completion, 32)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		q.Reap(out)
	}
}

// TestConnectConfig: the client Connect makes bounds connecting and
// monitor operations by one timeout and OSD operations by another
// (blockdev gives limits.RBDOSDOpTimeout: a stuck OSD operation becomes a
// status the host retries on another path, not a command the host aborts),
// whatever the configuration file says, with librbd's cache off and
// partial discards done. No cluster.
func TestConnectConfig(t *testing.T) {
	conf := t.TempDir() + "/ceph.conf"
	os.WriteFile(conf, []byte("[global]\nmon host = 127.0.0.1:1\nrados_osd_op_timeout = 90\nrbd_cache = true\n"), 0o600)
	for key, want := range map[string]string{
		"client_mount_timeout":     "7",
		"rados_mon_op_timeout":     "7",
		"rados_osd_op_timeout":     "25",
		"rbd_cache":                "false",
		"rbd_skip_partial_discard": "false",
	} {
		got, err := configValue(conf, "client.admin", 7*time.Second, 25*time.Second, key)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if got != want {
			t.Errorf("%s = %q, want %q", key, got, want)
		}
	}
}
