package blockdev

import (
	"fmt"
	"io"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// io_uring ABI (include/uapi/linux/io_uring.h). golang.org/x/sys/unix has
// only the system call numbers.
const (
	iouringOffRings = 0 // SQ and CQ rings in one mapping (IORING_FEAT_SINGLE_MMAP)
	iouringOffSQEs  = 0x10000000

	iouringFeatSingleMmap = 1 << 0

	iouringOpFsync = 3
	iouringOpRead  = 22
	iouringOpWrite = 23

	iouringFsyncDatasync   = 1
	iouringEnterGetEvents  = 1
	iouringRegisterEventFD = 4
)

type iouringSQE struct {
	opcode   uint8
	flags    uint8
	ioprio   uint16
	fd       int32
	off      uint64
	addr     uint64
	len      uint32
	opFlags  uint32 // rw_flags, fsync_flags
	userData uint64
	_        [3]uint64
}

type iouringCQE struct {
	userData uint64
	res      int32
	flags    uint32
}

type iouringSQOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type iouringCQOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

type iouringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  iouringSQOffsets
	cqOff                                                                  iouringCQOffsets
}

// Ring is an io_uring instance: reads, writes and flushes of files and
// block devices queued without blocking the caller, their completions
// collected by polling shared memory. One goroutine owns a Ring; none of its
// methods is safe for concurrent use. Completions come back tagged with a
// caller's value, never a pointer.
type Ring struct {
	fd      int
	ringMem []byte // the SQ and CQ rings
	sqeMem  []byte
	sqTail  *atomic.Uint32
	sqMask  uint32
	sqArray []uint32
	sqes    []iouringSQE
	cqHead  *atomic.Uint32
	cqTail  *atomic.Uint32
	cqMask  uint32
	cqes    []iouringCQE

	tail    uint32 // next SQE to fill; published to sqTail by Submit
	unsent  uint32 // SQEs filled and not yet taken by the kernel
	ops     []ringOp
	free    []uint32
	pending int // operations queued and not yet reaped
	// failed holds operations the kernel refused to take, for Reap.
	failed []Completion
}

// ringOp is one queued operation. A short transfer is continued from done.
type ringOp struct {
	dev   *fdDev
	opc   uint8
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
	if entries < 1 || entries > 32768 {
		return nil, fmt.Errorf("io_uring: %d entries: %w", entries, ErrInvalidArgument)
	}
	var p iouringParams
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	r := &Ring{fd: int(fd)}
	if err := r.mapRings(&p); err != nil {
		r.unmap()
		unix.Close(r.fd)
		return nil, err
	}
	n := int(p.sqEntries)
	r.ops = make([]ringOp, n)
	r.free = make([]uint32, n)
	for i := range r.free {
		r.free[i] = uint32(n - 1 - i)
	}
	return r, nil
}

func (r *Ring) mapRings(p *iouringParams) error {
	if p.features&iouringFeatSingleMmap == 0 {
		return fmt.Errorf("io_uring: kernel too old (no single mmap): %w", ErrNotSupported)
	}
	sqSize := int(p.sqOff.array) + int(p.sqEntries)*4
	cqSize := int(p.cqOff.cqes) + int(p.cqEntries)*int(unsafe.Sizeof(iouringCQE{}))
	size := max(sqSize, cqSize)
	var err error
	flags := unix.MAP_SHARED | unix.MAP_POPULATE
	if r.ringMem, err = unix.Mmap(r.fd, iouringOffRings, size, unix.PROT_READ|unix.PROT_WRITE, flags); err != nil {
		return fmt.Errorf("io_uring: mmap rings: %w", err)
	}
	sqeBytes := int(p.sqEntries) * int(unsafe.Sizeof(iouringSQE{}))
	if r.sqeMem, err = unix.Mmap(r.fd, iouringOffSQEs, sqeBytes, unix.PROT_READ|unix.PROT_WRITE, flags); err != nil {
		return fmt.Errorf("io_uring: mmap SQEs: %w", err)
	}
	at := func(off uint32) unsafe.Pointer { return unsafe.Pointer(&r.ringMem[off]) }
	r.sqTail = (*atomic.Uint32)(at(p.sqOff.tail))
	r.sqMask = *(*uint32)(at(p.sqOff.ringMask))
	r.sqArray = unsafe.Slice((*uint32)(at(p.sqOff.array)), p.sqEntries)
	r.sqes = unsafe.Slice((*iouringSQE)(unsafe.Pointer(&r.sqeMem[0])), p.sqEntries)
	r.cqHead, r.cqTail = (*atomic.Uint32)(at(p.cqOff.head)), (*atomic.Uint32)(at(p.cqOff.tail))
	r.cqMask = *(*uint32)(at(p.cqOff.ringMask))
	r.cqes = unsafe.Slice((*iouringCQE)(at(p.cqOff.cqes)), p.cqEntries)
	r.tail = r.sqTail.Load()
	return nil
}

func (r *Ring) unmap() {
	if r.sqeMem != nil {
		unix.Munmap(r.sqeMem)
		r.sqeMem = nil
	}
	if r.ringMem != nil {
		unix.Munmap(r.ringMem)
		r.ringMem = nil
	}
}

// RegisterEventFD makes the kernel signal fd (an eventfd) on every
// completion, so the owner can sleep in poll(2) until one arrives.
func (r *Ring) RegisterEventFD(fd int) error {
	v := int32(fd)
	if _, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), iouringRegisterEventFD, uintptr(unsafe.Pointer(&v)), 1, 0, 0); errno != 0 {
		return fmt.Errorf("io_uring register eventfd: %w", errno)
	}
	return nil
}

// Space is how many more operations can be queued now.
func (r *Ring) Space() int { return len(r.free) }

// Pending is the number of operations queued and not yet reaped.
func (r *Ring) Pending() int { return r.pending }

// queue takes a slot and fills an SQE for op. It fails with ErrNotQueued
// when the ring is full.
func (r *Ring) queue(op ringOp) error {
	if len(r.free) == 0 {
		return ErrNotQueued
	}
	slot := r.free[len(r.free)-1]
	r.free = r.free[:len(r.free)-1]
	r.ops[slot] = op
	r.pending++
	r.fill(slot)
	return nil
}

// fill writes the SQE for the rest of the operation in slot.
func (r *Ring) fill(slot uint32) {
	op := &r.ops[slot]
	idx := r.tail & r.sqMask
	sqe := &r.sqes[idx]
	*sqe = iouringSQE{opcode: op.opc, fd: int32(op.dev.fd), opFlags: op.flags, userData: uint64(slot)}
	if rest := op.p[op.done:]; len(rest) > 0 {
		sqe.addr = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(rest))))
		sqe.len = uint32(len(rest))
		sqe.off = uint64(op.off) + uint64(op.done)
	}
	r.sqArray[idx] = idx
	r.tail++
	r.unsent++
}

// Submit hands the queued operations to the kernel. Operations it could not
// take now (EAGAIN, EBUSY) stay queued for the next Submit. When the kernel
// refuses the ring itself, Submit returns the error and the operations not
// taken complete with it, through Reap: none is left waiting forever.
func (r *Ring) Submit() error {
	if r.unsent == 0 {
		return nil
	}
	r.sqTail.Store(r.tail)
	for {
		// Raw: a submit without IORING_ENTER_GETEVENTS does not wait (the
		// kernel issues what it can without blocking and hands the rest to
		// its workers), so the caller keeps its P through it; through the
		// scheduler's syscall path a caller that is a busy poller paid a
		// wake-up of another runtime thread per call.
		n, _, errno := unix.RawSyscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(r.unsent), 0, 0, 0, 0)
		switch errno {
		case 0:
			r.unsent -= uint32(n)
			return nil
		case unix.EINTR:
			continue
		case unix.EAGAIN, unix.EBUSY:
			return nil
		}
		err := fmt.Errorf("io_uring_enter: %w", errno)
		r.abandonUnsent(err)
		return err
	}
}

// abandonUnsent takes back the SQEs the kernel did not consume and fails
// their operations with err.
func (r *Ring) abandonUnsent(err error) {
	for ; r.unsent > 0; r.unsent-- {
		r.tail--
		slot := uint32(r.sqes[r.tail&r.sqMask].userData)
		op := &r.ops[slot]
		r.failed = append(r.failed, Completion{Tag: op.tag, Err: fmt.Errorf("%s: %w", op.dev.path, err)})
		r.finish(slot)
	}
	r.sqTail.Store(r.tail)
}

// finish releases the slot of an operation that is over.
func (r *Ring) finish(slot uint32) {
	r.ops[slot].dev.inflight.Add(-1)
	r.ops[slot] = ringOp{}
	r.free = append(r.free, slot)
	r.pending--
}

// Reap collects up to len(out) finished operations without blocking. A
// short transfer is continued rather than reported.
func (r *Ring) Reap(out []Completion) int {
	n := copy(out, r.failed)
	r.failed = r.failed[:copy(r.failed, r.failed[n:])]
	head := r.cqHead.Load()
	tail := r.cqTail.Load()
	for head != tail && n < len(out) {
		cqe := r.cqes[head&r.cqMask]
		head++
		slot := uint32(cqe.userData)
		if int(slot) >= len(r.ops) {
			continue
		}
		op := &r.ops[slot]
		err := op.result(cqe.res)
		if err == errContinue {
			r.fill(slot)
			continue
		}
		out[n] = Completion{Tag: op.tag, Err: err}
		n++
		r.finish(slot)
	}
	r.cqHead.Store(head)
	return n
}

// errContinue marks a short transfer whose rest was queued again.
var errContinue = fmt.Errorf("continue")

// result accounts a completion of op; errContinue means the rest must be
// queued.
func (op *ringOp) result(res int32) error {
	name := "read"
	switch op.opc {
	case iouringOpWrite:
		name = "write"
	case iouringOpFsync:
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
	case res == 0 && op.opc == iouringOpWrite:
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

// Close waits for the operations in flight, then releases the ring. Their
// completions are dropped.
func (r *Ring) Close() error {
	if r.fd < 0 {
		return fmt.Errorf("close io_uring: %w", ErrClosed)
	}
	var out [64]Completion
	for r.pending > 0 {
		if err := r.Submit(); err != nil {
			break
		}
		if r.Reap(out[:]) > 0 {
			continue
		}
		_, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), 0, 1, iouringEnterGetEvents, 0, 0)
		if errno != 0 && errno != unix.EINTR {
			break
		}
	}
	// Whatever could not be waited for is abandoned: the kernel holds its own
	// file references, and the devices must not wait for it forever.
	for i := range r.ops {
		if r.ops[i].dev != nil {
			r.finish(uint32(i))
		}
	}
	r.unmap()
	err := unix.Close(r.fd)
	r.fd = -1
	if err != nil {
		return fmt.Errorf("close io_uring: %w", err)
	}
	return nil
}
