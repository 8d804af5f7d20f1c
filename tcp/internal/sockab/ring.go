//go:build linux && (amd64 || arm64)

package sockab

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The io_uring ABI (include/uapi/linux/io_uring.h) this server needs.
// blockdev/internal/uring is the product's ring, for files; Go's internal
// rule keeps it from tcp/, and this measurement leaves it where it is.
const (
	offRings = 0 // SQ and CQ rings in one mapping (IORING_FEAT_SINGLE_MMAP)
	offSQEs  = 0x10000000

	featSingleMmap = 1 << 0
	featNoDrop     = 1 << 1

	// One thread submits, and the kernel runs completion work only when
	// that thread asks for completions: no interrupting task work (6.1).
	setupSingleIssuer = 1 << 12
	setupDeferTaskrun = 1 << 13

	enterGetEvents = 1

	opSendmsg = 9  // IORING_OP_SENDMSG
	opAccept  = 13 // IORING_OP_ACCEPT
	opCancel  = 14 // IORING_OP_ASYNC_CANCEL
	opRead    = 22 // IORING_OP_READ
	opRecv    = 27 // IORING_OP_RECV
)

type sqe struct {
	opcode   uint8
	flags    uint8
	ioprio   uint16
	fd       int32
	off      uint64
	addr     uint64
	len      uint32
	opFlags  uint32 // msg_flags, accept_flags
	userData uint64
	_        [3]uint64
}

type cqe struct {
	userData uint64
	res      int32
	flags    uint32
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

// ring is one io_uring instance, owned by one goroutine locked to its
// thread (IORING_SETUP_SINGLE_ISSUER).
type ring struct {
	fd      int
	flags   uint32 // the setup flags the kernel took
	ringMem []byte
	sqeMem  []byte
	sqHead  *atomic.Uint32
	sqTail  *atomic.Uint32
	sqMask  uint32
	sqArray []uint32
	sqes    []sqe
	cqHead  *atomic.Uint32
	cqTail  *atomic.Uint32
	cqMask  uint32
	cqes    []cqe

	tail uint32 // next SQE to fill; published by enter
}

// newRing sets up a ring of entries SQEs, with single issuer and deferred
// task work where the kernel has them. The caller's thread is its issuer.
func newRing(entries int) (*ring, error) {
	r := &ring{fd: -1}
	for _, flags := range []uint32{setupSingleIssuer | setupDeferTaskrun, 0} {
		p := params{flags: flags}
		fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
		if errno == unix.EINVAL && flags != 0 {
			continue
		}
		if errno != 0 {
			return nil, fmt.Errorf("%w: io_uring_setup: %w", ErrNotSupported, errno)
		}
		r.fd, r.flags = int(fd), flags
		if err := r.mapRings(&p); err != nil {
			r.close()
			return nil, err
		}
		return r, nil
	}
	return nil, ErrNotSupported
}

func (r *ring) mapRings(p *params) error {
	if p.features&featSingleMmap == 0 || p.features&featNoDrop == 0 {
		return fmt.Errorf("%w: features %#x", ErrNotSupported, p.features)
	}
	sqSize := int(p.sqOff.array) + int(p.sqEntries)*4
	cqSize := int(p.cqOff.cqes) + int(p.cqEntries)*int(unsafe.Sizeof(cqe{}))
	var err error
	flags := unix.MAP_SHARED | unix.MAP_POPULATE
	if r.ringMem, err = unix.Mmap(r.fd, offRings, max(sqSize, cqSize), unix.PROT_READ|unix.PROT_WRITE, flags); err != nil {
		return fmt.Errorf("io_uring: mmap rings: %w", err)
	}
	if r.sqeMem, err = unix.Mmap(r.fd, offSQEs, int(p.sqEntries)*int(unsafe.Sizeof(sqe{})), unix.PROT_READ|unix.PROT_WRITE, flags); err != nil {
		return fmt.Errorf("io_uring: mmap SQEs: %w", err)
	}
	at := func(off uint32) unsafe.Pointer { return unsafe.Pointer(&r.ringMem[off]) }
	r.sqHead, r.sqTail = (*atomic.Uint32)(at(p.sqOff.head)), (*atomic.Uint32)(at(p.sqOff.tail))
	r.sqMask = *(*uint32)(at(p.sqOff.ringMask))
	r.sqArray = unsafe.Slice((*uint32)(at(p.sqOff.array)), p.sqEntries)
	r.sqes = unsafe.Slice((*sqe)(unsafe.Pointer(&r.sqeMem[0])), p.sqEntries)
	r.cqHead, r.cqTail = (*atomic.Uint32)(at(p.cqOff.head)), (*atomic.Uint32)(at(p.cqOff.tail))
	r.cqMask = *(*uint32)(at(p.cqOff.ringMask))
	r.cqes = unsafe.Slice((*cqe)(at(p.cqOff.cqes)), p.cqEntries)
	r.tail = r.sqTail.Load()
	return nil
}

// prep fills the next SQE. The caller keeps at most len(sqes) operations
// in flight, and addr's memory (mmap'd, never the Go heap) mapped until the
// CQE is reaped.
func (r *ring) prep(op uint8, fd int, addr uintptr, n uint32, opFlags uint32, userData uint64) {
	idx := r.tail & r.sqMask
	r.sqes[idx] = sqe{opcode: op, fd: int32(fd), addr: uint64(addr), len: n, opFlags: opFlags, userData: userData}
	r.sqArray[idx] = idx
	r.tail++
}

// enter submits what was prepared and waits for at least one completion:
// one system call per round of the owner's loop. Through the scheduler's
// syscall path, so that a wait hands the P over.
func (r *ring) enter() error {
	r.sqTail.Store(r.tail)
	unsent := r.tail - r.sqHead.Load()
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(unsent), 1, enterGetEvents, 0, 0)
	switch errno {
	case 0, unix.EINTR, unix.EAGAIN, unix.EBUSY:
		// What the kernel did not take stays for the next round.
		return nil
	}
	return fmt.Errorf("io_uring_enter: %w", errno)
}

// reap moves up to len(out) completions into out and returns how many.
func (r *ring) reap(out []cqe) int {
	head, tail := r.cqHead.Load(), r.cqTail.Load()
	n := 0
	for ; head != tail && n < len(out); n++ {
		out[n] = r.cqes[head&r.cqMask]
		head++
	}
	r.cqHead.Store(head)
	return n
}

// close releases the ring; the kernel cancels what is in flight.
func (r *ring) close() {
	if r.sqeMem != nil {
		unix.Munmap(r.sqeMem)
	}
	if r.ringMem != nil {
		unix.Munmap(r.ringMem)
	}
	if r.fd >= 0 {
		unix.Close(r.fd)
	}
	r.fd = -1
}
