package blockdev

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nvmeof-tgt/nvmeof-tgt/blockdev/internal/uring"
)

// sysOpen is unix.Open; tests replace it to simulate filesystems that
// refuse O_DIRECT.
var sysOpen = unix.Open

// probeRead is preadFull; tests replace it to simulate filesystems that
// accept O_DIRECT at open and refuse it on I/O.
var probeRead = preadFull

// fdDev holds what files and block devices share: positional I/O on one
// file descriptor, with or without O_DIRECT.
type fdDev struct {
	// mu is held shared by every call and exclusively by Close, so the fd
	// number is never reused by the kernel under an in-flight call.
	mu   closeLock
	fd   int // -1 once closed
	path string
	// size is read by every call and changed by Resize.
	size     atomic.Int64
	bs       uint32
	readOnly bool
	direct   bool
	memAlign uintptr // O_DIRECT buffer address alignment
	// inflight counts operations queued on a Ring and not yet reaped; Close
	// waits for them, so the fd stays valid under them.
	inflight atomic.Int64
}

func (d *fdDev) Size() int64       { return d.size.Load() }
func (d *fdDev) BlockSize() uint32 { return d.bs }

func (d *fdDev) ReadAt(p []byte, off int64) (int, error) {
	if err := checkRange("read", d.path, off, int64(len(p)), d.size.Load(), d.bs); err != nil {
		return 0, err
	}
	return d.transfer("read", p, off, false)
}

func (d *fdDev) WriteAt(p []byte, off int64) (int, error) {
	if err := d.checkModify("write", off, int64(len(p))); err != nil {
		return 0, err
	}
	return d.transfer("write", p, off, true)
}

// transfer moves p at off once the range has been checked, bouncing an O_DIRECT transfer whose
// buffer address the kernel would refuse.
func (d *fdDev) transfer(op string, p []byte, off int64, write bool) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	defer d.mu.rlock(ioHint(p, off)).RUnlock()
	if d.fd < 0 {
		return 0, fmt.Errorf("%s %s: %w", op, d.path, ErrClosed)
	}
	var n int
	var err error
	switch {
	case d.direct && !aligned(p, d.memAlign):
		n, err = d.bounced(p, off, write)
	case write:
		n, err = pwriteFull(d.fd, p, off)
	default:
		n, err = preadFull(d.fd, p, off)
	}
	if err != nil {
		return n, fmt.Errorf("%s %s at %d: %w", op, d.path, off, err)
	}
	return n, nil
}

// bounced does O_DIRECT I/O for a caller buffer whose address the kernel
// would refuse, through a pooled page-aligned buffer.
func (d *fdDev) bounced(p []byte, off int64, write bool) (int, error) {
	h, err := getBounce()
	if err != nil {
		return 0, err
	}
	defer bouncePool.Put(h)
	done := 0
	for done < len(p) {
		// bounceSize is a multiple of every block size, so chunks stay aligned.
		b := h.b[:min(len(p)-done, len(h.b))]
		var n int
		if write {
			copy(b, p[done:])
			n, err = pwriteFull(d.fd, b, off+int64(done))
		} else {
			n, err = preadFull(d.fd, b, off+int64(done))
			copy(p[done:], b[:n])
		}
		done += n
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

func (d *fdDev) Flush() error {
	defer d.mu.rlock(0).RUnlock()
	if d.fd < 0 {
		return fmt.Errorf("flush %s: %w", d.path, ErrClosed)
	}
	for {
		err := unix.Fdatasync(d.fd)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("flush %s: %w", d.path, err)
		}
		return nil
	}
}

// QueueRead queues a read of p at off on r. It returns ErrNotQueued when
// the ring is full or p is not aligned for O_DIRECT: the caller then uses
// ReadAt.
func (d *fdDev) QueueRead(r *Ring, p []byte, off int64, tag uint64) error {
	if err := checkRange("read", d.path, off, int64(len(p)), d.size.Load(), d.bs); err != nil {
		return err
	}
	return d.queue(r, ringOp{opc: uring.OpRead, p: p, off: off, tag: tag})
}

// QueueWrite queues a write of p at off on r, durable at completion
// (RWF_DSYNC) when durable is set. ErrNotQueued as for QueueRead.
func (d *fdDev) QueueWrite(r *Ring, p []byte, off int64, durable bool, tag uint64) error {
	if err := d.checkModify("write", off, int64(len(p))); err != nil {
		return err
	}
	op := ringOp{opc: uring.OpWrite, p: p, off: off, tag: tag}
	if durable {
		op.flags = unix.RWF_DSYNC
	}
	return d.queue(r, op)
}

// QueueFlush queues an fdatasync on r.
func (d *fdDev) QueueFlush(r *Ring, tag uint64) error {
	return d.queue(r, ringOp{opc: uring.OpFsync, flags: uring.FsyncDatasync, tag: tag})
}

func (d *fdDev) queue(r *Ring, op ringOp) error {
	if len(op.p) > 0 && d.direct && !aligned(op.p, d.memAlign) {
		return ErrNotQueued
	}
	defer d.mu.rlock(ioHint(op.p, op.off)).RUnlock()
	if d.fd < 0 {
		return fmt.Errorf("queue on %s: %w", d.path, ErrClosed)
	}
	op.dev, op.held = d, &d.inflight
	d.inflight.Add(1)
	if err := r.queue(op); err != nil {
		d.inflight.Add(-1)
		return err
	}
	return nil
}

// closeWait bounds how long Close waits for queued operations whose ring
// nobody reaps any more.
const closeWait = time.Minute

func (d *fdDev) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fd < 0 {
		return fmt.Errorf("close %s: %w", d.path, ErrClosed)
	}
	for start := time.Now(); d.inflight.Load() > 0 && time.Since(start) < closeWait; {
		time.Sleep(time.Millisecond)
	}
	err := unix.Close(d.fd)
	d.fd = -1
	if err != nil {
		return fmt.Errorf("close %s: %w", d.path, err)
	}
	return nil
}

// checkModify validates a write, discard or write-zeroes request.
func (d *fdDev) checkModify(op string, off, length int64) error {
	if d.readOnly {
		return fmt.Errorf("%s %s at %d: %w", op, d.path, off, ErrReadOnly)
	}
	return checkRange(op, d.path, off, length, d.size.Load(), d.bs)
}

// beginModify is the preamble of a call that changes [off, off+length)
// without a buffer (Discard, WriteZeroes): the range checked, the device
// held open (its close lock shared) with a valid descriptor. It returns the
// lock to release when done, or nil when there is nothing to do: an error,
// or an empty range (err nil).
func (d *fdDev) beginModify(op string, off, length int64) (*sync.RWMutex, error) {
	if err := d.checkModify(op, off, length); err != nil || length == 0 {
		return nil, err
	}
	l := d.mu.rlock(uintptr(off))
	if d.fd < 0 {
		l.RUnlock()
		return nil, fmt.Errorf("%s %s: %w", op, d.path, ErrClosed)
	}
	return l, nil
}

// writeZeroesSlow writes zeroes in bounded chunks, for backends that cannot
// zero a range any other way. The caller holds d.mu.
func (d *fdDev) writeZeroesSlow(off, length int64) error {
	z, err := zeroes()
	if err != nil {
		return err
	}
	for length > 0 {
		n := min(length, int64(len(z)))
		if _, err := pwriteFull(d.fd, z[:n], off); err != nil {
			return err
		}
		off += n
		length -= n
	}
	return nil
}

// setAlign records the O_DIRECT alignment of d.fd. It returns a reason when
// the kernel says O_DIRECT cannot work with this block size, else "".
func (d *fdDev) setAlign() string {
	d.memAlign = pageSize
	mem, off, known := dioAlign(d.fd)
	if !known {
		return ""
	}
	if off == 0 {
		return "statx reports no direct I/O support"
	}
	if off > d.bs {
		return fmt.Sprintf("direct I/O needs %d-byte offset alignment, block size is %d", off, d.bs)
	}
	if mem > 0 && mem&(mem-1) == 0 {
		d.memAlign = uintptr(mem)
	}
	return ""
}

// probeDirect reads the first block with O_DIRECT, because some filesystems
// accept the open flag and then fail every I/O with EINVAL.
func (d *fdDev) probeDirect() string {
	h, err := getBounce()
	if err != nil {
		return "" // Cannot tell; keep O_DIRECT and let I/O report errors.
	}
	defer bouncePool.Put(h)
	if _, err := probeRead(d.fd, h.b[:d.bs], 0); err == unix.EINVAL {
		return "aligned O_DIRECT read failed: " + err.Error()
	}
	return ""
}

func warnBuffered(log *slog.Logger, path, reason string) {
	log.Warn("O_DIRECT not supported, using buffered I/O", "path", path, "reason", reason)
}
