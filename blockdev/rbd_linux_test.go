//go:build linux && cgo && rbd

package blockdev

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/blockdev/internal/rbd"
	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
)

// The tests of the rbd backend that need a cluster read its configuration
// from NVMEOF_TGT_TEST_CEPH_CONF, with a pool "rbd" (tests/lab/ceph-up.sh
// makes one; the e2e suite runs them in the guest against its cluster,
// TestRBDUnit). Without it they skip, saying so.
const testPool = "rbd"

func testCephConf(t *testing.T) string {
	t.Helper()
	conf := os.Getenv("NVMEOF_TGT_TEST_CEPH_CONF")
	if conf == "" {
		t.Skip("no cluster: set NVMEOF_TGT_TEST_CEPH_CONF (tests/lab/ceph-up.sh)")
	}
	return conf
}

// testRBDConn is a connection of the test's own, beside the backend's, as
// another client of the cluster would be.
func testRBDConn(t *testing.T) *rbd.Conn {
	t.Helper()
	c, err := rbd.Connect(testCephConf(t), "client.admin", 10*time.Second, limits.RBDOSDOpTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

var imageSeq atomic.Int64

// testImageName is a new image name, removed when the test ends.
func testImageName(t *testing.T, c *rbd.Conn) string {
	t.Helper()
	name := fmt.Sprintf("blockdev-%d-%d", os.Getpid(), imageSeq.Add(1))
	t.Cleanup(func() { _ = c.RemoveImage(testPool, name) })
	return name
}

func init() { moreKinds = append(moreKinds, rbdKind) }

// rbdKind is a new image per device.
func rbdKind() kind {
	return kind{"rbd", func(t *testing.T, size int64, bs uint32) Device {
		t.Helper()
		c := testRBDConn(t)
		d, err := OpenRBD(RBDOptions{Pool: testPool, Image: testImageName(t, c), Size: size, BlockSize: bs, CephConf: testCephConf(t)})
		if err != nil {
			t.Fatalf("OpenRBD: %v", err)
		}
		t.Cleanup(func() { _ = d.Close() })
		return d
	}}
}

func TestOpenRBD(t *testing.T) {
	c := testRBDConn(t)
	conf := testCephConf(t)
	existing := testImageName(t, c)
	if err := c.CreateImage(testPool, existing, 3<<20, rbd.FeatureLayering); err != nil {
		t.Fatal(err)
	}
	locked := testImageName(t, c)
	if err := c.CreateImage(testPool, locked, 1<<20, rbd.FeatureLayering|rbd.FeatureExclusiveLock|rbd.FeatureObjectMap|rbd.FeatureFastDiff); err != nil {
		t.Fatal(err)
	}
	created := testImageName(t, c)
	tests := []struct {
		name     string
		o        RBDOptions
		want     error
		says     string // in the error
		wantSize int64
	}{
		{"missing pool", RBDOptions{Pool: "no-such-pool", Image: "x", Size: 1 << 20}, ErrInvalidArgument, "pool no-such-pool does not exist", 0},
		{"missing image, no size", RBDOptions{Pool: testPool, Image: "no-such-image"}, ErrInvalidArgument, "no size is given", 0},
		{"missing image, read-only", RBDOptions{Pool: testPool, Image: "no-such-image", Size: 1 << 20, ReadOnly: true}, ErrInvalidArgument, "does not exist", 0},
		{"bad block size", RBDOptions{Pool: testPool, Image: existing, BlockSize: 1024}, ErrInvalidArgument, "block size", 0},
		{"created with size", RBDOptions{Pool: testPool, Image: created, Size: 2<<20 + 100}, nil, "", 2 << 20},
		{"created opens again", RBDOptions{Pool: testPool, Image: created}, nil, "", 2 << 20},
		{"existing at its own size", RBDOptions{Pool: testPool, Image: existing, Size: 8 << 20}, nil, "", 3 << 20},
		{"exclusive-lock refused", RBDOptions{Pool: testPool, Image: locked}, ErrExclusiveLock, "rbd feature disable rbd/" + locked + " fast-diff object-map exclusive-lock", 0},
		{"exclusive-lock read-only", RBDOptions{Pool: testPool, Image: locked, ReadOnly: true}, nil, "", 1 << 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.CephConf = conf
			d, err := OpenRBD(tc.o)
			if tc.want != nil {
				if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
					t.Fatalf("OpenRBD: %v; want %v saying %q", err, tc.want, tc.says)
				}
				return
			}
			if err != nil {
				t.Fatalf("OpenRBD: %v", err)
			}
			defer d.Close()
			if d.Size() != tc.wantSize {
				t.Errorf("size %d, want %d", d.Size(), tc.wantSize)
			}
		})
	}
	// What it creates can be written by several gateways at once.
	im, err := c.OpenImage(testPool, created, true)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	if f, _ := im.Features(); f&(rbd.FeatureExclusiveLock|rbd.FeatureObjectMap|rbd.FeatureFastDiff|rbd.FeatureJournaling) != 0 || f&rbd.FeatureLayering == 0 {
		t.Errorf("created with features %#x", f)
	}
	if n := rbdConnCount(); n != 0 {
		t.Errorf("%d connections left open with every image closed", n)
	}
}

// One connection per cluster and client, whatever the number of images;
// closed with the last of them.
func TestRBDSharedConnection(t *testing.T) {
	c := testRBDConn(t)
	conf := testCephConf(t)
	var devs []Device
	for i := 0; i < 3; i++ {
		d, err := OpenRBD(RBDOptions{Pool: testPool, Image: testImageName(t, c), Size: 1 << 20, CephConf: conf, Client: "admin"})
		if err != nil {
			t.Fatal(err)
		}
		devs = append(devs, d)
	}
	// Named the other way, the same client.
	d, err := OpenRBD(RBDOptions{Pool: testPool, Image: testImageName(t, c), Size: 1 << 20, CephConf: conf, Client: "client.admin"})
	if err != nil {
		t.Fatal(err)
	}
	devs = append(devs, d)
	if n := rbdConnCount(); n != 1 {
		t.Fatalf("%d connections for 4 images of one cluster and client, want 1", n)
	}
	for i, d := range devs {
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if want := min(1, len(devs)-1-i); rbdConnCount() != want {
			t.Fatalf("after closing %d of %d images: %d connections, want %d", i+1, len(devs), rbdConnCount(), want)
		}
	}
}

// An unreachable cluster is an error within the connect timeout, and the
// failed attempt is not kept: the next one tries again. No cluster needed.
func TestRBDUnreachable(t *testing.T) {
	old := rbdConnectTimeout
	rbdConnectTimeout = 2 * time.Second
	t.Cleanup(func() { rbdConnectTimeout = old })
	conf := filepath.Join(t.TempDir(), "ceph.conf")
	// Nothing listens on port 1; auth none so no keyring is looked for.
	if err := os.WriteFile(conf, []byte("[global]\nmon host = 127.0.0.1:1\nauth client required = none\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		start := time.Now()
		_, err := OpenRBD(RBDOptions{Pool: "rbd", Image: "x", Size: 1 << 20, CephConf: conf})
		if !errors.Is(err, syscall.ETIMEDOUT) || !strings.Contains(err.Error(), conf) {
			t.Fatalf("attempt %d: %v; want ETIMEDOUT naming %s", i+1, err, conf)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("attempt %d took %v with a 2s timeout", i+1, d)
		}
		if n := rbdConnCount(); n != 0 {
			t.Fatalf("%d connections kept after a failed attempt", n)
		}
	}
	_, err := OpenRBD(RBDOptions{Pool: "rbd", Image: "x", CephConf: filepath.Join(t.TempDir(), "missing.conf")})
	if !errors.Is(err, syscall.ENOENT) || !strings.Contains(err.Error(), "missing.conf") {
		t.Fatalf("missing ceph_conf: %v", err)
	}
}

// Every operation queued on a Ring, through librbd's asynchronous API, and
// its completion reaped by polling.
func TestRBDRing(t *testing.T) {
	const size = 4 << 20
	d := rbdKind().open(t, size, 512)
	q, zq := d.(Queuer), d.(ZeroQueuer)
	r := newTestRing(t, 16)
	var bufs [][]byte
	for i := 0; i < 8; i++ {
		p := mmapBuf(t, 128<<10)
		pattern(p, int64(i)*128<<10, byte(i+1))
		if err := q.QueueWrite(r, p, int64(i)*128<<10, i%2 == 0, uint64(i)); err != nil {
			t.Fatal(err)
		}
		bufs = append(bufs, p)
	}
	if err := q.QueueFlush(r, 8); err != nil {
		t.Fatal(err)
	}
	for _, c := range reapAll(t, r, 9) {
		if c.Err != nil {
			t.Fatalf("completion %d: %v", c.Tag, c.Err)
		}
	}
	for i := range bufs {
		p := mmapBuf(t, 128<<10)
		if err := q.QueueRead(r, p, int64(i)*128<<10, uint64(100+i)); err != nil {
			t.Fatal(err)
		}
		if c := reapAll(t, r, 1)[0]; c.Err != nil || c.Tag != uint64(100+i) {
			t.Fatalf("read %d: %+v", i, c)
		}
		wantPattern(t, p, int64(i)*128<<10, byte(i+1))
	}
	// Zeroes and a discard within one object (4 MiB): both read back as
	// zeroes.
	if err := zq.QueueWriteZeroes(r, 4096, 8192, false, 1); err != nil {
		t.Fatal(err)
	}
	if err := zq.QueueDiscard(r, 64<<10, 4096, 2); err != nil {
		t.Fatal(err)
	}
	for _, c := range reapAll(t, r, 2) {
		if c.Err != nil {
			t.Fatalf("completion %d: %v", c.Tag, c.Err)
		}
	}
	p := mmapBuf(t, 128<<10)
	if _, err := d.ReadAt(p, 0); err != nil {
		t.Fatal(err)
	}
	wantPattern(t, p[:4096], 0, 1)
	wantZeroes(t, p[4096:12288], 4096)
	wantPattern(t, p[12288:64<<10], 12288, 1)
	wantZeroes(t, p[64<<10:68<<10], 64<<10)
	wantPattern(t, p[68<<10:], 68<<10, 1)

	// Refused before anything is queued.
	wantErr(t, "read past the end", q.QueueRead(r, p[:4096], size, 3), ErrOutOfRange)
	wantErr(t, "unaligned discard", zq.QueueDiscard(r, 100, 512, 3), ErrInvalidArgument)
	if r.Pending() != 0 {
		t.Fatalf("%d pending after refusals", r.Pending())
	}
	// A full ring: the caller goes the blocking way.
	small := newTestRing(t, 1)
	if err := q.QueueFlush(small, 1); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "a full ring", q.QueueFlush(small, 2), ErrNotQueued)
	reapAll(t, small, 1)

	// Close waits for what is queued.
	if err := q.QueueRead(r, p, 0, 4); err != nil {
		t.Fatal(err)
	}
	closed := closeAsync(d)
	reapAll(t, r, 1)
	wantClosed(t, closed, "after the completion was reaped")
	wantErr(t, "QueueRead after Close", q.QueueRead(r, p, 0, 5), ErrClosed)
	if err := r.Close(); err != nil {
		t.Fatalf("ring Close: %v", err)
	}
}

// Queued I/O allocates nothing on the Go heap: not queueing, not reaping.
func TestRBDRingNoAllocs(t *testing.T) {
	d := rbdKind().open(t, 1<<20, 4096)
	q := d.(Queuer)
	r := newTestRing(t, 4)
	p := mmapBuf(t, 4096)
	out := make([]Completion, 4)
	if n := testing.AllocsPerRun(50, func() {
		if err := q.QueueWrite(r, p, 8192, false, 1); err != nil {
			t.Fatal(err)
		}
		if err := q.QueueRead(r, p, 8192, 2); err != nil {
			t.Fatal(err)
		}
		for got := 0; got < 2; {
			got += r.Reap(out[got:])
		}
	}); n != 0 {
		t.Fatalf("a queued write and read allocate %v times", n)
	}
}

// A resize by another client reaches the device through the update watch;
// its own Resize grows the image.
func TestRBDFollowsResize(t *testing.T) {
	c := testRBDConn(t)
	name := testImageName(t, c)
	d, err := OpenRBD(RBDOptions{Pool: testPool, Image: name, Size: 4 << 20, CephConf: testCephConf(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	resized := make(chan int64, 4)
	d.(ResizeNotifier).NotifyResize(func() { resized <- d.Size() })

	other, err := c.OpenImage(testPool, name, false)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Resize(12 << 20); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-resized:
		if n != 12<<20 {
			t.Fatalf("notified at size %d, want %d", n, 12<<20)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no notification within 10s of rbd resize; size %d", d.Size())
	}
	// Its own resize: the image grows; Size says so before the watch does,
	// so there is nothing to notify.
	rs := d.(Resizer)
	if err := rs.Resize(16 << 20); err != nil {
		t.Fatal(err)
	}
	if n, _ := other.Size(); n != 16<<20 || d.Size() != 16<<20 {
		t.Fatalf("after Resize: image %d, device %d", n, d.Size())
	}
	select {
	case n := <-resized:
		t.Fatalf("notified (%d) of its own resize", n)
	case <-time.After(500 * time.Millisecond):
	}
	// 0: the image's size now.
	if err := other.Resize(20 << 20); err != nil {
		t.Fatal(err)
	}
	d.(ResizeNotifier).NotifyResize(nil)
	if err := rs.Resize(0); err != nil || d.Size() != 20<<20 {
		t.Fatalf("Resize(0): %v, size %d", err, d.Size())
	}
	if n, err := rs.BackingSize(); err != nil || n != 20<<20 {
		t.Fatalf("BackingSize: %d %v", n, err)
	}
}

// TestRBDErrorSentinels: librbd's errors that say this client, not the
// data, failed carry ErrFenced (-EBLOCKLISTED, which is -ESHUTDOWN) or
// ErrTimeout (-ETIMEDOUT, an OSD operation past rados_osd_op_timeout),
// which fabric turns into a status the host retries on another path; the
// errno stays matchable, and other errors carry neither. No cluster: the
// errors are made as librbd's completions and calls return them.
func TestRBDErrorSentinels(t *testing.T) {
	d := &rbdDev{name: "rbd/img"}
	tests := []struct {
		errno syscall.Errno
		want  error
	}{
		{syscall.ESHUTDOWN, ErrFenced},
		{syscall.ETIMEDOUT, ErrTimeout},
		{syscall.EIO, nil},
		{syscall.ENOENT, nil},
		{syscall.EROFS, nil},
	}
	for _, tc := range tests {
		for _, op := range []rbd.Op{rbd.OpRead, rbd.OpWrite, rbd.OpFlush, rbd.OpDiscard, rbd.OpWriteZeroes} {
			err := d.opError(op, 4096, 512, -int64(tc.errno))
			if !errors.Is(err, tc.errno) || !strings.Contains(err.Error(), "rbd/img") {
				t.Errorf("op %d, -%v: %v lost the errno or the image", op, tc.errno, err)
			}
			for _, s := range []error{ErrFenced, ErrTimeout} {
				if errors.Is(err, s) != (s == tc.want) {
					t.Errorf("op %d, -%v: %v: errors.Is(err, %q) = %v", op, tc.errno, err, s, s != tc.want)
				}
			}
		}
		// The blocking calls' errors, as internal/rbd returns them.
		err := ioError(tc.errno)
		if !errors.Is(err, tc.errno) {
			t.Errorf("-%v: %v lost the errno", tc.errno, err)
		}
		for _, s := range []error{ErrFenced, ErrTimeout} {
			if errors.Is(err, s) != (s == tc.want) {
				t.Errorf("-%v: %v: errors.Is(err, %q) = %v", tc.errno, err, s, s != tc.want)
			}
		}
	}
}
