package uring

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// io_uring ABI (include/uapi/linux/io_uring.h). golang.org/x/sys/unix has
// only the system call numbers.
const (
	offRings = 0 // SQ and CQ rings in one mapping (IORING_FEAT_SINGLE_MMAP)
	offSQEs  = 0x10000000

	featSingleMmap = 1 << 0

	enterGetEvents  = 1
	registerEventFD = 4
)

// Op is an io_uring opcode.
type Op uint8

// The opcodes blockdev issues.
const (
	OpFsync Op = 3  // IORING_OP_FSYNC
	OpRead  Op = 22 // IORING_OP_READ
	OpWrite Op = 23 // IORING_OP_WRITE
)

// FsyncDatasync makes an OpFsync an fdatasync (IORING_FSYNC_DATASYNC).
const FsyncDatasync = 1

// MaxEntries is the largest ring the kernel sets up (IORING_MAX_ENTRIES).
const MaxEntries = 32768

// ErrTooOld reports a kernel whose io_uring lacks a feature this package
// relies on.
var ErrTooOld = errors.New("io_uring: kernel too old (no single mmap)")

type sqe struct {
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

// CQE is one completion: the value the operation was prepared with, and the
// kernel's result (bytes moved, or a negated errno).
type CQE struct {
	UserData uint64
	Res      int32
	Flags    uint32
}

type sqOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqOffsets
	cqOff                                                                  cqOffsets
}

// Ring is one io_uring instance. One goroutine owns it; none of its methods
// is safe for concurrent use.
type Ring struct {
	fd      int
	ringMem []byte // the SQ and CQ rings
	sqeMem  []byte
	sqTail  *atomic.Uint32
	sqMask  uint32
	sqArray []uint32
	sqes    []sqe
	cqHead  *atomic.Uint32
	cqTail  *atomic.Uint32
	cqMask  uint32
	cqes    []CQE

	tail   uint32 // next SQE to fill; published to sqTail by Submit
	unsent uint32 // SQEs filled and not yet taken by the kernel
}

// New sets up a ring of at least entries SQEs (the kernel rounds up to a
// power of two). It fails with the kernel's error where io_uring is missing
// or forbidden (ENOSYS, EPERM), and with ErrTooOld.
func New(entries int) (*Ring, error) {
	var p params
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
	return r, nil
}

func (r *Ring) mapRings(p *params) error {
	if p.features&featSingleMmap == 0 {
		return ErrTooOld
	}
	sqSize := int(p.sqOff.array) + int(p.sqEntries)*4
	cqSize := int(p.cqOff.cqes) + int(p.cqEntries)*int(unsafe.Sizeof(CQE{}))
	size := max(sqSize, cqSize)
	var err error
	flags := unix.MAP_SHARED | unix.MAP_POPULATE
	if r.ringMem, err = unix.Mmap(r.fd, offRings, size, unix.PROT_READ|unix.PROT_WRITE, flags); err != nil {
		return fmt.Errorf("io_uring: mmap rings: %w", err)
	}
	sqeBytes := int(p.sqEntries) * int(unsafe.Sizeof(sqe{}))
	if r.sqeMem, err = unix.Mmap(r.fd, offSQEs, sqeBytes, unix.PROT_READ|unix.PROT_WRITE, flags); err != nil {
		return fmt.Errorf("io_uring: mmap SQEs: %w", err)
	}
	at := func(off uint32) unsafe.Pointer { return unsafe.Pointer(&r.ringMem[off]) }
	r.sqTail = (*atomic.Uint32)(at(p.sqOff.tail))
	r.sqMask = *(*uint32)(at(p.sqOff.ringMask))
	r.sqArray = unsafe.Slice((*uint32)(at(p.sqOff.array)), p.sqEntries)
	r.sqes = unsafe.Slice((*sqe)(unsafe.Pointer(&r.sqeMem[0])), p.sqEntries)
	r.cqHead, r.cqTail = (*atomic.Uint32)(at(p.cqOff.head)), (*atomic.Uint32)(at(p.cqOff.tail))
	r.cqMask = *(*uint32)(at(p.cqOff.ringMask))
	r.cqes = unsafe.Slice((*CQE)(at(p.cqOff.cqes)), p.cqEntries)
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

// Entries is the number of SQEs: the most operations the owner may have in
// flight at once.
func (r *Ring) Entries() int { return len(r.sqes) }

// FD is the ring's file descriptor.
func (r *Ring) FD() int { return r.fd }

// RegisterEventFD makes the kernel signal fd (an eventfd) on every
// completion, so the owner can sleep in poll(2) until one arrives.
func (r *Ring) RegisterEventFD(fd int) error {
	v := int32(fd)
	if _, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), registerEventFD, uintptr(unsafe.Pointer(&v)), 1, 0, 0); errno != 0 {
		return fmt.Errorf("io_uring register eventfd: %w", errno)
	}
	return nil
}

// Prep fills the next SQE: op on fd, of p at off (p and off are unused by
// OpFsync), with flags (rw_flags or fsync_flags) and userData, which comes
// back in its CQE. The kernel has it at the next Submit.
//
// The caller keeps p's memory alive and unmoved until the CQE is reaped, and
// keeps at most Entries() operations in flight, so that no SQE is filled
// again before the kernel has taken it.
func (r *Ring) Prep(op Op, fd int, p []byte, off int64, flags uint32, userData uint64) {
	idx := r.tail & r.sqMask
	s := &r.sqes[idx]
	*s = sqe{opcode: uint8(op), fd: int32(fd), opFlags: flags, userData: userData}
	if len(p) > 0 {
		s.addr = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(p))))
		s.len = uint32(len(p))
		s.off = uint64(off)
	}
	r.sqArray[idx] = idx
	r.tail++
	r.unsent++
}

// Unsent is the number of SQEs prepared and not yet taken by the kernel.
func (r *Ring) Unsent() int { return int(r.unsent) }

// Submit hands the prepared SQEs to the kernel without waiting. SQEs it
// cannot take now (EAGAIN, EBUSY) stay for the next Submit. Any other error
// is the kernel refusing the ring itself: the SQEs not taken stay, for the
// caller to take back with Unprep.
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
		return fmt.Errorf("io_uring_enter: %w", errno)
	}
}

// Unprep takes back the newest SQE the kernel has not taken and returns its
// userData; ok is false when there is none.
func (r *Ring) Unprep() (userData uint64, ok bool) {
	if r.unsent == 0 {
		return 0, false
	}
	r.unsent--
	r.tail--
	r.sqTail.Store(r.tail)
	return r.sqes[r.tail&r.sqMask].userData, true
}

// Reap moves up to len(out) completions into out without blocking and
// returns how many.
func (r *Ring) Reap(out []CQE) int {
	head := r.cqHead.Load()
	tail := r.cqTail.Load()
	n := 0
	for ; head != tail && n < len(out); n++ {
		out[n] = r.cqes[head&r.cqMask]
		head++
	}
	r.cqHead.Store(head)
	return n
}

// Wait blocks until a completion is posted. It returns nil early when a
// signal interrupts it; the caller reaps and waits again.
func (r *Ring) Wait() error {
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), 0, 1, enterGetEvents, 0, 0)
	if errno != 0 && errno != unix.EINTR {
		return fmt.Errorf("io_uring_enter: %w", errno)
	}
	return nil
}

// Close releases the ring. The owner reaps its operations first, or gives up
// on them.
func (r *Ring) Close() error {
	r.unmap()
	err := unix.Close(r.fd)
	r.fd = -1
	return err
}
