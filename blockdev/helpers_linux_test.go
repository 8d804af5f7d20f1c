package blockdev

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// kind is one backend under test. open returns a fresh, zeroed device.
type kind struct {
	name string
	open func(t *testing.T, size int64, bs uint32) Device
}

func memoryKind() kind {
	return kind{"memory", func(t *testing.T, size int64, bs uint32) Device {
		t.Helper()
		d, err := NewMemory(size, bs)
		if err != nil {
			t.Fatalf("NewMemory: %v", err)
		}
		t.Cleanup(func() { _ = d.Close() })
		return d
	}}
}

func fileKind(name string, dir func(*testing.T) string, buffered bool) kind {
	return kind{name, func(t *testing.T, size int64, bs uint32) Device {
		t.Helper()
		d, err := OpenFile(Options{
			Path:      filepath.Join(dir(t), "ns.img"),
			Size:      size,
			BlockSize: bs,
			Buffered:  buffered,
		})
		if err != nil {
			t.Fatalf("OpenFile: %v", err)
		}
		t.Cleanup(func() { _ = d.Close() })
		return d
	}}
}

// shmDir returns a temporary directory on tmpfs, or "" if there is none.
func shmDir(t *testing.T) string {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &st); err != nil || st.Type != unix.TMPFS_MAGIC {
		return ""
	}
	dir, err := os.MkdirTemp("/dev/shm", "blockdev-test-")
	if err != nil {
		return ""
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// directFileKind is an O_DIRECT file in the test's temporary directory.
func directFileKind() kind {
	return fileKind("file", func(t *testing.T) string { return t.TempDir() }, false)
}

// kinds lists every backend. Block devices need a loop device.
func kinds(t *testing.T) []kind {
	t.Helper()
	ks := []kind{
		memoryKind(),
		directFileKind(),
		fileKind("file-buffered", func(t *testing.T) string { return t.TempDir() }, true),
	}
	if shmDir(t) != "" {
		ks = append(ks, fileKind("file-tmpfs", func(t *testing.T) string {
			d := shmDir(t)
			if d == "" {
				t.Fatal("tmpfs disappeared")
			}
			return d
		}, false))
	}
	// Subtests of this kind skip, with the reason, when no loop device can be
	// attached.
	ks = append(ks, blockDeviceKind())
	for _, k := range moreKinds {
		ks = append(ks, k())
	}
	return ks
}

// moreKinds are the backends of the build's optional parts (rbd).
var moreKinds []func() kind

var loopOnce = sync.OnceValues(func() (bool, string) {
	if os.Geteuid() != 0 {
		return false, "not root"
	}
	if _, err := exec.LookPath("losetup"); err != nil {
		return false, err.Error()
	}
	dir, err := os.MkdirTemp("", "blockdev-loop-probe-")
	if err != nil {
		return false, err.Error()
	}
	defer os.RemoveAll(dir)
	dev, err := attachLoop(filepath.Join(dir, "probe.img"), 1<<20, 512)
	if err != nil {
		return false, err.Error()
	}
	detachLoop(dev)
	return true, ""
})

// loopAvailable reports whether losetup can attach a loop device here.
func loopAvailable() (bool, string) { return loopOnce() }

func attachLoop(backing string, size int64, bs uint32) (string, error) {
	if err := os.WriteFile(backing, nil, 0o600); err != nil {
		return "", err
	}
	if err := os.Truncate(backing, size); err != nil {
		return "", err
	}
	out, err := exec.CommandContext(context.Background(), "losetup", "--find", "--show",
		"--sector-size", fmt.Sprint(bs), backing).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("losetup: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

func detachLoop(dev string) { _ = exec.Command("losetup", "--detach", dev).Run() }

// needLoop returns a fresh loop device of size bytes, or skips the test.
func needLoop(t *testing.T, size int64, bs uint32) string {
	t.Helper()
	if _, reason := loopAvailable(); reason != "" {
		t.Skipf("block device tests need a loop device, and losetup cannot attach one here: %s", reason)
	}
	dev, err := attachLoop(filepath.Join(t.TempDir(), "backing.img"), size, bs)
	if err != nil {
		t.Fatalf("attach loop device: %v", err)
	}
	t.Cleanup(func() { detachLoop(dev) })
	return dev
}

func blockDeviceKind() kind {
	return kind{"blockdev-loop", func(t *testing.T, size int64, bs uint32) Device {
		t.Helper()
		dev := needLoop(t, size, bs)
		d, err := OpenBlockDevice(Options{Path: dev})
		if err != nil {
			t.Fatalf("OpenBlockDevice: %v", err)
		}
		t.Cleanup(func() { _ = d.Close() })
		return d
	}}
}

// mmapBuf returns n page-aligned bytes from outside the Go heap, as callers
// of the package normally pass.
func mmapBuf(tb testing.TB, n int) []byte {
	tb.Helper()
	b, err := mmapAnon(n)
	if err != nil {
		tb.Fatalf("mmap: %v", err)
	}
	tb.Cleanup(func() { _ = unix.Munmap(b) })
	return b
}

// unalignedBuf returns n bytes that deliberately do not start on a page.
func unalignedBuf(n int) []byte {
	b := make([]byte, n+pageSize+8)
	for i := range pageSize {
		if !aligned(b[i:], 8) || aligned(b[i:], 512) {
			continue
		}
		return b[i : i+n]
	}
	panic("no unaligned offset")
}

// pattern fills p with bytes derived from seed and the device offset, so a
// read from the wrong place or a stale read is detected.
func pattern(p []byte, off int64, seed byte) {
	for i := range p {
		p[i] = byte(off+int64(i)) ^ byte((off+int64(i))>>9) ^ seed
	}
}

func wantPattern(t *testing.T, p []byte, off int64, seed byte) {
	t.Helper()
	want := make([]byte, len(p))
	pattern(want, off, seed)
	if i := firstDiff(p, want); i >= 0 {
		t.Fatalf("data at device offset %d: got %#x, want %#x", off+int64(i), p[i], want[i])
	}
}

func wantZeroes(t *testing.T, p []byte, off int64) {
	t.Helper()
	if i := firstDiff(p, make([]byte, len(p))); i >= 0 {
		t.Fatalf("data at device offset %d: got %#x, want 0", off+int64(i), p[i])
	}
}

func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return len(a)
}

// logRecorder collects log records for assertions.
type logRecorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec.Clone())
	return nil
}
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRecorder) WithGroup(string) slog.Handler      { return r }

func (r *logRecorder) at(level slog.Level) []slog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []slog.Record
	for _, rec := range r.records {
		if rec.Level == level {
			out = append(out, rec)
		}
	}
	return out
}

func attrs(rec slog.Record) map[string]string {
	m := map[string]string{}
	rec.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	return m
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if target == nil {
		if err != nil {
			t.Fatalf("%s: unexpected error %v", what, err)
		}
		return
	}
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}
