//go:build linux && (amd64 || arm64)

package sockab

import (
	"fmt"
	"net"
	"runtime"
	"strconv"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

const (
	// ringEntries bounds the operations in flight: an accept, the wake-up
	// read, a cancel, and a receive and a send per connection.
	ringEntries = 64
	maxConns    = (ringEntries - 3) / 2
	// rbufSize is a connection's receive buffer: many commands a receive,
	// always room for a whole write capsule after compaction.
	rbufSize = 64 << 10
	// hdrStride is a slot's room for its response header.
	hdrStride = 32
)

// What a CQE's user data names, in its low byte; the connection's index
// is above it.
const (
	udAccept = iota + 1
	udWake
	udCancel
	udRecv
	udSend
)

// iovec and msghdr are the kernel's struct iovec and struct msghdr on a
// 64-bit Linux, addresses as integers: they live in mmap'd memory that the
// garbage collector never sees.
type iovec struct{ base, len uint64 }

type msghdr struct {
	name       uint64
	namelen    uint32
	_          uint32
	iov        uint64
	iovlen     uint64
	control    uint64
	controllen uint64
	flags      int32
	_          int32
}

// A connection's mmap'd memory, in order: the receive buffer, the slots'
// data, the slots' headers, the iovecs of a send, its msghdr.
const (
	memData = rbufSize
	memHdr  = memData + slots*BlockSize
	memIov  = memHdr + slots*hdrStride
	memMsg  = memIov + 2*slots*iovecSize
	memSize = memMsg + msghdrSize
)

// The kernel's sizes, checked at compile time against the Go types.
const (
	iovecSize  = 16
	msghdrSize = 56
)

var (
	_ [iovecSize - unsafe.Sizeof(iovec{})]byte
	_ [unsafe.Sizeof(iovec{}) - iovecSize]byte
	_ [msghdrSize - unsafe.Sizeof(msghdr{})]byte
	_ [unsafe.Sizeof(msghdr{}) - msghdrSize]byte
)

// urServer is the io_uring variant: one goroutine, locked to its thread,
// owns the ring and every connection; no goroutine per connection or I/O.
type urServer struct {
	ln, wake int
	addr     string
	sndbuf   int
	done     chan error

	r       *ring
	cq      [ringEntries * 2]cqe
	conns   [maxConns]*urConn
	dirty   []*urConn
	wakeBuf []byte // mmap'd: the eventfd's counter lands here
	// acceptOut: an accept is in flight; stopping: Close was called.
	acceptOut, stopping bool
	shortSends          atomic.Uint64 // for the test that makes some
}

// urConn is one connection: a receive and a send at most in flight. Its
// requests are slots: a command takes one, its response is sent from it,
// and the send's completion frees it.
type urConn struct {
	id, fd int
	mem    []byte // memSize bytes, mmap'd
	base   uintptr
	disk   []byte

	start, end       int // unparsed bytes of the receive buffer
	recvOut, sendOut bool
	failed, dirty    bool
	// stalled: parsing stopped for want of a free slot. resend: the last
	// send was short, its rest is to go before anything pending.
	stalled, resend bool

	free     []uint16
	withData [slots]bool
	pending  []uint16 // responses to send, in order
	inflight []uint16 // the responses of the send in flight
	iovAt    int      // the first iovec of the send not yet all sent
	iovN     int
}

func startUring(sndbuf int) (*urServer, error) {
	ln, addr, err := listenRaw()
	if err != nil {
		return nil, err
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(ln)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	s := &urServer{ln: ln, wake: wake, addr: addr, sndbuf: sndbuf, done: make(chan error, 1)}
	ready := make(chan error, 1)
	go s.run(ready)
	if err := <-ready; err != nil {
		unix.Close(ln)
		unix.Close(wake)
		return nil, err
	}
	return s, nil
}

// listenRaw is a blocking listening socket on an ephemeral port of
// 127.0.0.1, outside Go's netpoller.
func listenRaw() (int, string, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, "", fmt.Errorf("socket: %w", err)
	}
	sa := &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return -1, "", fmt.Errorf("bind: %w", err)
	}
	if err := unix.Listen(fd, 128); err != nil {
		unix.Close(fd)
		return -1, "", fmt.Errorf("listen: %w", err)
	}
	got, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return -1, "", fmt.Errorf("getsockname: %w", err)
	}
	port := got.(*unix.SockaddrInet4).Port
	return fd, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}

func (s *urServer) Addr() string { return s.addr }

func (s *urServer) shortSendCount() uint64 { return s.shortSends.Load() }

func (s *urServer) Describe() string {
	how := "no setup flags"
	if s.r.flags != 0 {
		how = "IORING_SETUP_SINGLE_ISSUER|IORING_SETUP_DEFER_TASKRUN"
	}
	return fmt.Sprintf("uring: one ring of %d entries on one locked thread, %s, IORING_OP_RECV and one IORING_OP_SENDMSG a batch", len(s.r.sqes), how)
}

// Close wakes the ring's goroutine through the eventfd and waits for it to
// close every connection.
func (s *urServer) Close() error {
	var one [8]byte
	one[0] = 1
	if _, err := unix.Write(s.wake, one[:]); err != nil {
		return fmt.Errorf("wake: %w", err)
	}
	err := <-s.done
	unix.Close(s.ln)
	unix.Close(s.wake)
	return err
}

// run owns the ring. The thread stays locked: it is the ring's single
// issuer, and ends with the goroutine.
func (s *urServer) run(ready chan<- error) {
	runtime.LockOSThread()
	r, err := newRing(ringEntries)
	if err == nil {
		s.wakeBuf, err = unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			r.close()
			err = fmt.Errorf("mmap: %w", err)
		}
	}
	if err != nil {
		ready <- err
		return
	}
	s.r = r
	ready <- nil
	err = s.loop()
	for _, c := range s.conns {
		if c != nil {
			s.closeConn(c)
		}
	}
	r.close()
	unix.Munmap(s.wakeBuf)
	s.done <- err
}

func ud(id, kind int) uint64 { return uint64(id)<<8 | uint64(kind) }

// loop submits, waits, and handles the completions of each round, then
// queues what they made possible: receives, sends, closes.
func (s *urServer) loop() error {
	s.prepAccept()
	s.r.prep(opRead, s.wake, addrOf(s.wakeBuf), 8, 0, ud(0, udWake))
	for {
		if err := s.r.enter(); err != nil {
			return err
		}
		for n := s.r.reap(s.cq[:]); n > 0; n = s.r.reap(s.cq[:]) {
			for _, e := range s.cq[:n] {
				s.complete(e)
			}
		}
		for i, c := range s.dirty {
			c.dirty = false
			s.progress(c)
			s.dirty[i] = nil
		}
		s.dirty = s.dirty[:0]
		if s.stopping && !s.acceptOut && s.live() == 0 {
			return nil
		}
	}
}

func (s *urServer) complete(e cqe) {
	id, kind := int(e.userData>>8), int(e.userData&0xff)
	switch kind {
	case udAccept:
		s.acceptOut = false
		if e.res >= 0 {
			s.accepted(int(e.res))
		}
		if !s.stopping {
			s.prepAccept()
		}
	case udWake:
		s.stop()
	case udCancel:
	case udRecv:
		c := s.conns[id]
		c.recvOut = false
		c.received(e.res)
		s.mark(c)
	case udSend:
		c := s.conns[id]
		c.sendOut = false
		c.sent(e.res)
		if c.resend {
			s.shortSends.Add(1)
		}
		s.mark(c)
	}
}

func (s *urServer) prepAccept() {
	s.r.prep(opAccept, s.ln, 0, 0, unix.SOCK_CLOEXEC, ud(0, udAccept))
	s.acceptOut = true
}

// stop cancels the accept and shuts every connection down, which ends
// their receives; loop returns once nothing is in flight.
func (s *urServer) stop() {
	s.stopping = true
	if s.acceptOut {
		s.r.prep(opCancel, -1, uintptr(ud(0, udAccept)), 0, 0, ud(0, udCancel))
	}
	for _, c := range s.conns {
		if c != nil {
			unix.Shutdown(c.fd, unix.SHUT_RDWR)
			c.failed = true
			s.mark(c)
		}
	}
}

func (s *urServer) live() int {
	n := 0
	for _, c := range s.conns {
		if c != nil {
			n++
		}
	}
	return n
}

func (s *urServer) mark(c *urConn) {
	if !c.dirty {
		c.dirty = true
		s.dirty = append(s.dirty, c)
	}
}

// accepted sets a new connection up: its memory, its slots, its first
// receive. Past maxConns it is closed.
func (s *urServer) accepted(fd int) {
	id := -1
	for i, c := range s.conns {
		if c == nil {
			id = i
			break
		}
	}
	if id < 0 || s.stopping {
		unix.Close(fd)
		return
	}
	// The client's side has TCP_NODELAY, as Go sets it; so does tcp/'s.
	unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	if s.sndbuf > 0 {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, s.sndbuf)
	}
	mem, err := unix.Mmap(-1, 0, memSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		unix.Close(fd)
		return
	}
	c := &urConn{id: id, fd: fd, mem: mem, base: addrOf(mem), disk: newDisk(),
		free: make([]uint16, 0, slots), pending: make([]uint16, 0, slots), inflight: make([]uint16, 0, slots)}
	for i := range slots {
		c.free = append(c.free, uint16(slots-1-i))
	}
	s.conns[id] = c
	s.mark(c)
}

// progress queues c's next receive and send, or closes c once it failed
// and nothing of it is in flight.
func (s *urServer) progress(c *urConn) {
	if c.failed {
		if !c.recvOut && !c.sendOut {
			s.closeConn(c)
		}
		return
	}
	if !c.sendOut && (c.resend || len(c.pending) > 0) {
		if !c.resend {
			c.prepSend()
		}
		c.resend = false
		s.r.prep(opSendmsg, c.fd, c.base+memMsg, 0, unix.MSG_NOSIGNAL, ud(c.id, udSend))
		c.sendOut = true
	}
	if !c.recvOut && c.end < rbufSize {
		s.r.prep(opRecv, c.fd, c.base+uintptr(c.end), uint32(rbufSize-c.end), 0, ud(c.id, udRecv))
		c.recvOut = true
	}
}

func (s *urServer) closeConn(c *urConn) {
	unix.Close(c.fd)
	unix.Munmap(c.mem)
	s.conns[c.id] = nil
}

func (c *urConn) hdr(slot uint16) []byte {
	return c.mem[memHdr+int(slot)*hdrStride:][:RespHdrSize]
}

func (c *urConn) data(slot uint16) []byte {
	return c.mem[memData+int(slot)*BlockSize:][:BlockSize]
}

func (c *urConn) iovs() []iovec {
	return unsafe.Slice((*iovec)(unsafe.Pointer(&c.mem[memIov])), 2*slots)
}

func (c *urConn) msg() *msghdr { return (*msghdr)(unsafe.Pointer(&c.mem[memMsg])) }

// received takes a receive's result: bytes to parse, or the end.
func (c *urConn) received(res int32) {
	switch {
	case res > 0:
		c.end += int(res)
		c.parse()
	case res == -int32(unix.EINTR) || res == -int32(unix.EAGAIN):
	default:
		c.failed = true
	}
}

// parse executes every whole command received, each into a free slot,
// queuing its response; then moves a partial command to the buffer's
// start if there might be no room left for the rest of it.
func (c *urConn) parse() {
	for c.end-c.start >= CmdSize {
		h := nvme.TCPHeader(c.mem[c.start:c.end])
		plen, err := checkCmd(h)
		if err != nil {
			c.failed = true
			return
		}
		if c.end-c.start < plen {
			break
		}
		if len(c.free) == 0 {
			c.stalled = true
			break
		}
		slot := c.free[len(c.free)-1]
		c.free = c.free[:len(c.free)-1]
		buf := c.data(slot)
		if plen == WriteCmdSize {
			copy(buf, c.mem[c.start+CmdSize:c.start+plen])
		}
		wd, err := execute(c.disk, h[:CmdSize], buf, c.hdr(slot))
		if err != nil {
			c.failed = true
			return
		}
		c.withData[slot] = wd
		c.pending = append(c.pending, slot)
		c.start += plen
	}
	switch {
	case c.start == c.end:
		c.start, c.end = 0, 0
	case rbufSize-c.end < WriteCmdSize:
		n := copy(c.mem[:rbufSize], c.mem[c.start:c.end])
		c.start, c.end = 0, n
	}
}

// prepSend fills the iovecs and the msghdr with every pending response, in
// order: one sendmsg for the batch, as the netpoller's writer has one
// writev.
func (c *urConn) prepSend() {
	iov := c.iovs()
	n := 0
	for _, slot := range c.pending {
		iov[n] = iovec{uint64(c.base) + memHdr + uint64(slot)*hdrStride, RespHdrSize}
		n++
		if c.withData[slot] {
			iov[n] = iovec{uint64(c.base) + memData + uint64(slot)*BlockSize, BlockSize}
			n++
		}
	}
	c.inflight, c.pending = c.pending, c.inflight[:0]
	c.iovAt, c.iovN = 0, n
	c.setMsg()
}

func (c *urConn) setMsg() {
	*c.msg() = msghdr{iov: uint64(c.base) + memIov + uint64(c.iovAt)*iovecSize, iovlen: uint64(c.iovN - c.iovAt)}
}

// sent takes a send's result: a short send leaves the rest queued again
// (pending stays behind it); a whole one frees its slots, and lets a
// stalled parse go on.
func (c *urConn) sent(res int32) {
	if res <= 0 {
		c.failed = true
		return
	}
	iov := c.iovs()
	for left := uint64(res); left > 0 && c.iovAt < c.iovN; {
		v := &iov[c.iovAt]
		if left < v.len {
			v.base += left
			v.len -= left
			break
		}
		left -= v.len
		c.iovAt++
	}
	if c.iovAt < c.iovN {
		c.setMsg()
		c.resend = true
		return
	}
	c.free = append(c.free, c.inflight...)
	c.inflight = c.inflight[:0]
	if c.stalled {
		c.stalled = false
		c.parse()
	}
}

func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
