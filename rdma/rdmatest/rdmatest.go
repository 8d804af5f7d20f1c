// Package rdmatest is a raw NVMe-oF/RDMA initiator, for tests only, as
// net/http/httptest is for HTTP servers. It connects one queue pair to a
// target with whatever RDMA_CM private data it is given, sends any bytes as a
// command capsule, and hands back the response capsules as they come, so that
// a test can do what no well-behaved host does: random capsules, bad SGLs,
// duplicate CIDs, pipelined Connects, a queue that never posts receives, a
// host that vanishes. It checks nothing it sends.
//
// A Conn is used by one goroutine. Its memory (capsules, responses and a data
// buffer the target reaches with RDMA READ and WRITE) is one mmap-ed region,
// registered once. Without RDMA (no cgo, no device) Dial fails with an error
// matching ErrNotSupported or ErrNoDevice.
package rdmatest

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma/internal/verbs"
	"golang.org/x/sys/unix"
)

// Sentinel errors.
var (
	// ErrNotSupported: the binary has no RDMA (built without cgo).
	ErrNotSupported = verbs.ErrNotSupported
	// ErrNoDevice: no RDMA device serves the address.
	ErrNoDevice = verbs.ErrNoDevice
	// ErrClosed: the connection is gone (the target disconnected, a work
	// request failed or was flushed, or Close was called).
	ErrClosed = errors.New("rdmatest: connection closed")
	// ErrTimeout: nothing arrived in time.
	ErrTimeout = errors.New("rdmatest: timed out")
)

// RejectError is a connection the target refused.
type RejectError struct {
	// Event is the rdma_cm event that ended the attempt (REJECTED,
	// UNREACHABLE, CONNECT_ERROR, ...).
	Event string
	// Status is the NVMe/RDMA reject status, when the target sent one
	// (HasStatus).
	Status    nvme.RDMACMRejectStatus
	HasStatus bool
}

func (e *RejectError) Error() string {
	if e.HasStatus {
		return fmt.Sprintf("rdmatest: connection %s: %s", e.Event, e.Status)
	}
	return "rdmatest: connection " + e.Event
}

// Defaults of Options.
const (
	DefaultDepth     = 32
	DefaultDataSize  = 1 << 20
	DefaultICDSize   = 8 << 10
	DefaultReadDepth = 16
	DefaultTimeout   = 10 * time.Second
)

// Options say how to connect.
type Options struct {
	Addr string // the target's IP address
	Port int
	// PrivateData is sent as it is in the connection request; nil sends a
	// valid NVMe/RDMA request for QID and Depth (NVMe-oF 1.1 §7.3.1). At
	// most 56 bytes fit an RC connection request.
	PrivateData []byte
	QID         uint16
	// Depth is the queue's depth: HRQSIZE, HSQSIZE+1, and the receives
	// posted for responses (DefaultDepth when 0).
	Depth int
	// Recvs is how many receives are posted at the start: Depth when 0,
	// none when negative (the target's responses then meet RNR NAKs).
	Recvs int
	// NoRepost leaves a receive that took a response unposted: once the
	// first Recvs responses arrived, the queue never posts receives again.
	NoRepost bool
	// DataSize is the size of the buffer the target may read and write
	// (DefaultDataSize when 0); ICDSize the most in-capsule data a capsule
	// carries (DefaultICDSize when 0).
	DataSize, ICDSize int
	// ReadDepth is the RDMA READs the target may have outstanding against
	// this host (our responder resources): DefaultReadDepth when 0, none
	// when negative.
	ReadDepth int
	// Timeout bounds address and route resolution and the connection
	// (DefaultTimeout when 0).
	Timeout time.Duration
}

// ValidPrivateData is the RDMA_CM request private data of a well-behaved
// host for queue qid of depth commands.
func ValidPrivateData(qid uint16, depth int) []byte {
	pd := make([]byte, nvme.RDMACMRequestSize)
	r := nvme.RDMACMRequest(pd)
	r.SetRECFMT(nvme.RDMACMRecFmt10)
	r.SetQID(qid)
	r.SetHRQSIZE(uint16(depth))
	r.SetHSQSIZE(uint16(depth - 1))
	return pd
}

// Conn is one connected queue pair.
type Conn struct {
	o   Options
	ec  *verbs.EventChannel
	id  verbs.CMID
	pd  *verbs.PD
	cq  *verbs.CQ
	qp  *verbs.QP
	mr  *verbs.MR
	mem []byte

	recvBuf  []byte // Depth × recvSlot
	sendBuf  []byte // sendSlots × (64 + ICDSize)
	data     []byte
	sendFree []int
	capsule  int // bytes of one send slot

	batch *verbs.Batch
	wcs   []verbs.WC
	// pending are responses received and not yet taken.
	pending []nvme.Completion
	// accept is the target's RDMA_CM accept private data.
	accept []byte
	// dead is why the connection can no longer be used, once it cannot.
	dead error
	// disconnected: the target sent a DREQ.
	disconnected bool
	closed       bool

	// Sent and Received count capsules.
	Sent, Received int
}

const (
	recvSlot  = 64 // bytes per response receive (a response is 16)
	sendSlots = 16
	sendTag   = 1 << 32 // wr_id bit of sends; the low bits are the slot
)

// Dial connects a queue pair. A refused connection is a *RejectError.
func Dial(o Options) (*Conn, error) {
	if o.Depth == 0 {
		o.Depth = DefaultDepth
	}
	if o.DataSize == 0 {
		o.DataSize = DefaultDataSize
	}
	if o.ICDSize == 0 {
		o.ICDSize = DefaultICDSize
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Recvs == 0 {
		o.Recvs = o.Depth
	}
	if o.Depth < 1 || o.Depth > 4096 {
		return nil, fmt.Errorf("rdmatest: depth %d", o.Depth)
	}
	ip := net.ParseIP(o.Addr)
	if ip == nil {
		return nil, fmt.Errorf("rdmatest: bad address %q", o.Addr)
	}
	pd := o.PrivateData
	if pd == nil {
		pd = ValidPrivateData(o.QID, o.Depth)
	}
	c := &Conn{o: o, capsule: nvme.CommandSize + o.ICDSize, wcs: make([]verbs.WC, verbs.MaxBatch)}
	if err := c.dial(ip, pd); err != nil {
		c.free()
		return nil, err
	}
	return c, nil
}

func (c *Conn) dial(ip net.IP, privateData []byte) error {
	var err error
	if c.ec, err = verbs.NewEventChannel(); err != nil {
		return err
	}
	if c.id, err = c.ec.CreateID(); err != nil {
		return err
	}
	if err := c.id.ResolveAddr(ip, c.o.Port, c.o.Timeout); err != nil {
		return err
	}
	if _, err := c.expect(verbs.EventAddrResolved); err != nil {
		return err
	}
	if err := c.id.ResolveRoute(c.o.Timeout); err != nil {
		return err
	}
	if _, err := c.expect(verbs.EventRouteResolved); err != nil {
		return err
	}
	ctx := c.id.Context()
	if ctx == nil {
		return fmt.Errorf("rdmatest: %w for %s", ErrNoDevice, ip)
	}
	if c.pd, err = ctx.AllocPD(); err != nil {
		return err
	}
	recvLen := c.o.Depth * recvSlot
	sendLen := sendSlots * c.capsule
	size := recvLen + sendLen + c.o.DataSize
	if c.mem, err = syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE); err != nil {
		return fmt.Errorf("rdmatest: mmap %d bytes: %w", size, err)
	}
	c.recvBuf = c.mem[:recvLen]
	c.sendBuf = c.mem[recvLen : recvLen+sendLen]
	c.data = c.mem[recvLen+sendLen:]
	if c.mr, err = c.pd.RegMRRemote(c.mem); err != nil {
		return err
	}
	if c.cq, err = ctx.CreateCQ(c.o.Depth+sendSlots+1, nil); err != nil {
		return err
	}
	if c.qp, err = c.id.CreateQP(c.pd, verbs.QPInit{SendCQ: c.cq, RecvCQ: c.cq, MaxSendWR: sendSlots,
		MaxRecvWR: uint32(c.o.Depth), MaxSendSGE: 1, MaxRecvSGE: 1}); err != nil {
		return err
	}
	c.batch = verbs.NewBatch(sendSlots, c.o.Depth, 1)
	for i := range sendSlots {
		c.sendFree = append(c.sendFree, i)
	}
	if c.o.Recvs > 0 {
		for i := 0; i < min(c.o.Recvs, c.o.Depth); i++ {
			c.stageRecv(i)
		}
		if err := c.post(); err != nil {
			return err
		}
	}
	rr := uint8(DefaultReadDepth)
	if c.o.ReadDepth > 0 {
		rr = uint8(min(c.o.ReadDepth, 255))
	} else if c.o.ReadDepth < 0 {
		rr = 0
	}
	if err := c.id.Connect(verbs.ConnParam{PrivateData: privateData, ResponderResources: rr, InitiatorDepth: rr, RNRRetryCount: 7}); err != nil {
		return err
	}
	ev, err := c.expect(verbs.EventEstablished)
	if err != nil {
		return err
	}
	c.accept = ev.PrivateData
	return nil
}

// expect waits for the next rdma_cm event and wants it to be want; a
// rejection is a *RejectError.
func (c *Conn) expect(want verbs.EventType) (ev verbs.CMEvent, err error) {
	e, err := c.nextEvent(c.o.Timeout)
	if err != nil {
		return ev, err
	}
	switch {
	case e.Type == want:
		return e, nil
	case e.Type == verbs.EventRejected:
		re := &RejectError{Event: e.Type.String()}
		if len(e.PrivateData) >= nvme.RDMACMRejectSize {
			rj := nvme.RDMACMReject(e.PrivateData)
			re.Status, re.HasStatus = rj.STS(), rj.RECFMT() == nvme.RDMACMRecFmt10
		}
		return ev, re
	case e.Type == verbs.EventConnectError || e.Type == verbs.EventUnreachable ||
		e.Type == verbs.EventAddrError || e.Type == verbs.EventRouteError:
		return ev, &RejectError{Event: e.Type.String()}
	}
	return ev, fmt.Errorf("rdmatest: rdma_cm event %s (status %d), want %s", e.Type, e.Status, want)
}

// nextEvent waits up to timeout for an rdma_cm event and acknowledges it.
func (c *Conn) nextEvent(timeout time.Duration) (verbs.CMEvent, error) {
	deadline := time.Now().Add(timeout)
	for {
		e, err := c.ec.GetEvent()
		if err == nil {
			ev := *e
			e.Ack()
			return ev, nil
		}
		if !errors.Is(err, syscall.EAGAIN) {
			return verbs.CMEvent{}, fmt.Errorf("rdma_get_cm_event: %w", err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return verbs.CMEvent{}, fmt.Errorf("rdma_cm event: %w", ErrTimeout)
		}
		fds := []unix.PollFd{{Fd: int32(c.ec.Fd()), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, int(min(left, 100*time.Millisecond).Milliseconds())+1); err != nil && !errors.Is(err, syscall.EINTR) {
			return verbs.CMEvent{}, fmt.Errorf("poll rdma_cm channel: %w", err)
		}
	}
}

// CRQSIZE is the controller receive queue size the target accepted with.
func (c *Conn) CRQSIZE() int {
	if len(c.accept) < nvme.RDMACMAcceptSize {
		return 0
	}
	return int(nvme.RDMACMAccept(c.accept).CRQSIZE())
}

// Data is the buffer the target reaches through Keyed descriptors.
func (c *Conn) Data() []byte { return c.data }

// Keyed makes sgl a keyed data block descriptor for Data()[off:off+n]. n
// is cut to 24 bits, as the descriptor holds it.
func (c *Conn) Keyed(sgl nvme.SGLDescriptor, off, n int, invalidate bool) {
	sgl.SetKeyed(verbs.Addr(c.data)+uint64(off), uint32(n), c.mr.RKey(), invalidate)
}

// RKey is the key of the data buffer.
func (c *Conn) RKey() uint32 { return c.mr.RKey() }

// Addr is the address of Data()[off], for hand-made descriptors.
func (c *Conn) Addr(off int) uint64 { return verbs.Addr(c.data) + uint64(off) }

// Alive reports whether the connection can still be used, and if not why.
func (c *Conn) Alive() error {
	c.reap()
	return c.dead
}

// Disconnected reports whether the target disconnected (a DREQ arrived).
func (c *Conn) Disconnected() bool {
	c.reap()
	return c.disconnected
}

// Send posts capsule (a command and in-capsule data, up to 64+ICDSize
// bytes, or fewer than 64: it checks nothing) as one SEND.
func (c *Conn) Send(capsule []byte) error {
	if len(capsule) == 0 || len(capsule) > c.capsule {
		return fmt.Errorf("rdmatest: capsule of %d bytes (1..%d)", len(capsule), c.capsule)
	}
	deadline := time.Now().Add(c.o.Timeout)
	for len(c.sendFree) == 0 {
		if c.reap(); c.dead != nil {
			return c.dead
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("send slot: %w", ErrTimeout)
		}
		time.Sleep(20 * time.Microsecond)
	}
	if c.dead != nil {
		return c.dead
	}
	slot := c.sendFree[len(c.sendFree)-1]
	c.sendFree = c.sendFree[:len(c.sendFree)-1]
	buf := c.sendBuf[slot*c.capsule : slot*c.capsule+len(capsule)]
	copy(buf, capsule)
	w := c.batch.Send(c.qp)
	w.WRID = sendTag | uint64(slot)
	w.Opcode = verbs.WRSend
	w.Flags = verbs.SendSignaled
	w.NumSGE = 1
	w.SGE[0] = verbs.SGE{Addr: verbs.Addr(buf), Length: uint32(len(buf)), LKey: c.mr.LKey()}
	if err := c.post(); err != nil {
		return err
	}
	c.Sent++
	return nil
}

// SendRoom is how many capsules Send takes now without waiting for a send
// slot (a SEND of ours the target has not yet taken: an empty shared
// receive queue keeps it retrying).
func (c *Conn) SendRoom() int {
	c.reap()
	return len(c.sendFree)
}

// Recv returns the next response capsule, waiting up to timeout.
func (c *Conn) Recv(timeout time.Duration) (nvme.Completion, error) {
	return c.RecvCID(-1, timeout)
}

// RecvCID returns the next response for command identifier cid (any when
// cid is negative), keeping the others for later calls.
func (c *Conn) RecvCID(cid int, timeout time.Duration) (nvme.Completion, error) {
	deadline := time.Now().Add(timeout)
	for {
		c.reap()
		for i, rsp := range c.pending {
			if cid < 0 || int(rsp.CID()) == cid {
				c.pending = append(c.pending[:i], c.pending[i+1:]...)
				return rsp, nil
			}
		}
		if c.dead != nil {
			return nil, c.dead
		}
		if time.Now().After(deadline) {
			return nil, ErrTimeout
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// Do sends capsule and waits for the response with its CID.
func (c *Conn) Do(capsule []byte, timeout time.Duration) (nvme.Completion, error) {
	if len(capsule) < nvme.CommandSize {
		return nil, fmt.Errorf("rdmatest: Do needs a whole command, not %d bytes", len(capsule))
	}
	if err := c.Send(capsule); err != nil {
		return nil, err
	}
	return c.RecvCID(int(nvme.Command(capsule).CID()), timeout)
}

// Pending is how many responses have arrived and not been taken.
func (c *Conn) Pending() int {
	c.reap()
	return len(c.pending)
}

// reap polls the CQ and the rdma_cm channel without waiting.
func (c *Conn) reap() {
	if c.closed {
		return
	}
	for {
		n, err := c.cq.Poll(c.wcs)
		if err != nil {
			c.fail(err)
			return
		}
		for i := range c.wcs[:n] {
			c.completed(&c.wcs[i])
		}
		if n < len(c.wcs) {
			break
		}
	}
	for {
		e, err := c.ec.GetEvent()
		if err != nil {
			break
		}
		typ := e.Type
		e.Ack()
		if typ == verbs.EventDisconnected || typ == verbs.EventDeviceRemoval {
			c.disconnected = true
			c.fail(fmt.Errorf("%w: target disconnected (%s)", ErrClosed, typ))
		}
	}
}

func (c *Conn) completed(wc *verbs.WC) {
	if wc.WRID&sendTag != 0 {
		c.sendFree = append(c.sendFree, int(wc.WRID&^sendTag))
		if wc.Status != verbs.WCSuccess {
			c.fail(fmt.Errorf("%w: send completed with %s", ErrClosed, wc.StatusString()))
		}
		return
	}
	if wc.Status != verbs.WCSuccess {
		c.fail(fmt.Errorf("%w: receive completed with %s", ErrClosed, wc.StatusString()))
		return
	}
	slot := int(wc.WRID)
	b := c.recvBuf[slot*recvSlot : slot*recvSlot+recvSlot]
	rsp := make(nvme.Completion, nvme.CompletionSize)
	copy(rsp, b)
	c.pending = append(c.pending, rsp)
	c.Received++
	if wc.ByteLen != nvme.CompletionSize {
		c.fail(fmt.Errorf("rdmatest: a response of %d bytes", wc.ByteLen))
		return
	}
	if c.dead == nil && !c.o.NoRepost {
		c.stageRecv(slot)
		if err := c.post(); err != nil {
			c.fail(err)
		}
	}
}

func (c *Conn) fail(err error) {
	if c.dead == nil {
		c.dead = err
	}
}

func (c *Conn) stageRecv(slot int) {
	w := c.batch.Recv(c.qp)
	w.WRID = uint64(slot)
	w.NumSGE = 1
	w.SGE[0] = verbs.SGE{Addr: verbs.Addr(c.recvBuf[slot*recvSlot:]), Length: recvSlot, LKey: c.mr.LKey()}
}

func (c *Conn) post() error {
	c.batch.Post()
	_, _, err := c.batch.Result(0)
	c.batch.Reset()
	if err != nil {
		c.fail(fmt.Errorf("%w: %v", ErrClosed, err))
		return c.dead
	}
	return nil
}

// Close disconnects at once, whatever is in flight, and frees everything.
func (c *Conn) Close() error {
	if c.closed {
		return nil
	}
	if c.id.Valid() && c.qp != nil {
		_ = c.id.Disconnect()
	}
	c.free()
	return nil
}

func (c *Conn) free() {
	c.closed = true
	if c.dead == nil {
		c.dead = ErrClosed
	}
	if c.qp != nil {
		c.id.DestroyQP()
		c.qp = nil
	}
	if c.cq != nil {
		c.cq.Destroy()
		c.cq = nil
	}
	if c.mr != nil {
		c.mr.Dereg()
		c.mr = nil
	}
	if c.mem != nil {
		syscall.Munmap(c.mem)
		c.mem = nil
	}
	if c.pd != nil {
		c.pd.Dealloc()
		c.pd = nil
	}
	if c.id.Valid() {
		// Pending events hold the ID: acknowledge them first.
		for {
			e, err := c.ec.GetEvent()
			if err != nil {
				break
			}
			e.Ack()
		}
		c.id.Destroy()
		c.id = verbs.CMID{}
	}
	if c.ec != nil {
		c.ec.Close()
		c.ec = nil
	}
}
