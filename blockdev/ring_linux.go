package blockdev

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nvmeof-tgt/nvmeof-tgt/blockdev/internal/uring"
)

// Ring is where a goroutine queues backend I/O without blocking and
// collects its completions by polling shared memory: an io_uring for reads,
// writes and flushes of files and block devices, and, in the rbd build, a
// queue librbd's threads post the completions of RBD images' operations to
// (rbd_linux.go). One goroutine owns a Ring; none of its methods is safe for
// concurrent use. Completions come back tagged with a caller's value, never
// a pointer.
type Ring struct {
	ring    *uring.Ring
	ops     []ringOp // by slot; a slot is the user data of its SQEs
	free    []uint32
	pending int // operations queued and not yet reaped
	// onRing is how many of them are io_uring's (the rest are librbd's).
	onRing int
	// failed holds operations the kernel refused to take, for Reap.
	failed []Completion
	cqes   [64]uring.CQE
	closed bool
	// evfd is the eventfd RegisterEventFD registered, -1 for none.
	evfd int
	rbd  ringRBD
}

// ringOp is one queued operation. A short transfer is continued from done.
type ringOp struct {
	dev *fdDev // nil for an operation that is not io_uring's
	// held is its device's count of queued operations, which Close waits
	// for (fdDev.inflight, rbdDev.inflight).
	held  *atomic.Int64
	opc   uring.Op
	flags uint32
	p     []byte
	off   int64
	done  int
	tag   uint64
}

// Completion is one finished queued operation.
type Completion struct {
	Tag uint64
	// Err is nil when the whole transfer (or the flush) succeeded.
	Err error
}

// NewRing sets up an io_uring for up to entries operations in flight (a power
// of two is used, at least entries). It fails with the kernel's error where
// io_uring is missing or forbidden (ENOSYS, EPERM), so callers can fall back
// to blocking calls.
func NewRing(entries int) (*Ring, error) {
	if entries < 1 || entries > uring.MaxEntries {
		return nil, fmt.Errorf("io_uring: %d entries: %w", entries, ErrInvalidArgument)
	}
	ring, err := uring.New(entries)
	if errors.Is(err, uring.ErrTooOld) {
		return nil, fmt.Errorf("%w: %w", err, ErrNotSupported)
	}
	if err != nil {
		return nil, err
	}
	n := ring.Entries()
	r := &Ring{ring: ring, ops: make([]ringOp, n), free: make([]uint32, n), evfd: -1}
	for i := range r.free {
		r.free[i] = uint32(n - 1 - i)
	}
	return r, nil
}

// RegisterEventFD makes the kernel signal fd (an eventfd) on every
// completion, so the owner can sleep in poll(2) until one arrives; librbd's
// completions signal it after Arm.
func (r *Ring) RegisterEventFD(fd int) error {
	if err := r.ring.RegisterEventFD(fd); err != nil {
		return err
	}
	r.evfd = fd
	return nil
}

// Arm prepares the owner's sleep on the eventfd: a completion from now on
// signals it. It reports false when one is waiting already: reap it rather
// than sleep. (io_uring signals every completion; librbd's signal only an
// armed ring, so that a busy owner costs its threads no write(2).)
func (r *Ring) Arm() bool { return r.rbd.arm() }

// Space is how many more operations can be queued now.
func (r *Ring) Space() int { return len(r.free) }

// Pending is the number of operations queued and not yet reaped.
func (r *Ring) Pending() int { return r.pending }

// queue takes a slot and fills an SQE for op. It fails with ErrNotQueued
// when the ring is full.
func (r *Ring) queue(op ringOp) error {
	slot, ok := r.take(op)
	if !ok {
		return ErrNotQueued
	}
	r.onRing++
	r.fill(slot)
	return nil
}

// take gives op a slot, unless the ring is full.
func (r *Ring) take(op ringOp) (uint32, bool) {
	if len(r.free) == 0 || r.closed {
		return 0, false
	}
	slot := r.free[len(r.free)-1]
	r.free = r.free[:len(r.free)-1]
	r.ops[slot] = op
	r.pending++
	return slot, true
}

// fill prepares the SQE for the rest of the operation in slot. A slot has
// at most one SQE at a time, so the SQ never holds more than it has room for.
func (r *Ring) fill(slot uint32) {
	op := &r.ops[slot]
	r.ring.Prep(op.opc, op.dev.fd, op.p[op.done:], op.off+int64(op.done), op.flags, uint64(slot))
}

// Submit hands the queued operations to the kernel. Operations it could not
// take now (EAGAIN, EBUSY) stay queued for the next Submit. When the kernel
// refuses the ring itself, Submit returns the error and the operations not
// taken complete with it, through Reap: none is left waiting forever.
func (r *Ring) Submit() error {
	// Inlined: the poller's rounds with nothing to submit make no call.
	if r.ring.Unsent() == 0 {
		return nil
	}
	return r.submit()
}

func (r *Ring) submit() error {
	err := r.ring.Submit()
	if err != nil {
		r.abandonUnsent(err)
	}
	return err
}

// abandonUnsent takes back the SQEs the kernel did not consume and fails
// their operations with err.
func (r *Ring) abandonUnsent(err error) {
	for {
		ud, ok := r.ring.Unprep()
		if !ok {
			return
		}
		slot := uint32(ud)
		op := &r.ops[slot]
		r.failed = append(r.failed, Completion{Tag: op.tag, Err: fmt.Errorf("%s: %w", op.dev.path, err)})
		r.onRing--
		r.finish(slot)
	}
}

// finish releases the slot of an operation that is over.
func (r *Ring) finish(slot uint32) {
	r.ops[slot].held.Add(-1)
	r.ops[slot] = ringOp{}
	r.free = append(r.free, slot)
	r.pending--
}

// Reap collects up to len(out) finished operations without blocking. A
// short transfer is continued rather than reported.
func (r *Ring) Reap(out []Completion) int {
	n := copy(out, r.failed)
	r.failed = r.failed[:copy(r.failed, r.failed[n:])]
	for n < len(out) {
		cqes := r.cqes[:min(len(out)-n, len(r.cqes))]
		k := r.ring.Reap(cqes)
		for _, cqe := range cqes[:k] {
			slot := uint32(cqe.UserData)
			if int(slot) >= len(r.ops) || r.ops[slot].dev == nil {
				continue
			}
			op := &r.ops[slot]
			err := op.result(cqe.Res)
			if err == errContinue {
				r.fill(slot)
				continue
			}
			out[n] = Completion{Tag: op.tag, Err: err}
			n++
			r.onRing--
			r.finish(slot)
		}
		if k < len(cqes) {
			break
		}
	}
	return n + r.rbd.reap(r, out[n:])
}

// errContinue marks a short transfer whose rest was queued again.
var errContinue = fmt.Errorf("continue")

// result accounts a completion of op; errContinue means the rest must be
// queued.
func (op *ringOp) result(res int32) error {
	name := "read"
	switch op.opc {
	case uring.OpWrite:
		name = "write"
	case uring.OpFsync:
		if res < 0 {
			return fmt.Errorf("flush %s: %w", op.dev.path, unix.Errno(-res))
		}
		return nil
	}
	var err error
	switch {
	case res == -int32(unix.EINTR) || res == -int32(unix.EAGAIN):
		return errContinue
	case res < 0:
		err = unix.Errno(-res)
	case res == 0 && op.opc == uring.OpWrite:
		err = io.ErrShortWrite
	case res == 0:
		err = io.ErrUnexpectedEOF // the file shrank under us
	}
	if err != nil {
		return fmt.Errorf("%s %s at %d: %w", name, op.dev.path, op.off+int64(op.done), err)
	}
	op.done += int(res)
	if op.done < len(op.p) {
		return errContinue
	}
	return nil
}

// Close waits for the operations in flight (librbd's up to closeWait),
// then releases the ring. Their completions are dropped.
func (r *Ring) Close() error {
	if r.closed {
		return fmt.Errorf("close io_uring: %w", ErrClosed)
	}
	var out [64]Completion
	for start := time.Now(); r.pending > 0; {
		if err := r.Submit(); err != nil {
			break
		}
		if r.Reap(out[:]) > 0 {
			continue
		}
		if r.onRing > 0 {
			if err := r.ring.Wait(); err != nil {
				break
			}
			continue
		}
		// Only librbd's: they complete on its threads.
		if time.Since(start) > closeWait {
			break
		}
		time.Sleep(time.Millisecond)
	}
	// Whatever could not be waited for is abandoned: the kernel holds its own
	// file references, and the devices must not wait for it forever.
	for i := range r.ops {
		if r.ops[i].held != nil {
			r.finish(uint32(i))
		}
	}
	r.closed = true
	rerr := r.rbd.close()
	if err := r.ring.Close(); err != nil {
		return fmt.Errorf("close io_uring: %w", err)
	}
	return rerr
}
