// Package verbs is the project's only cgo: a narrow Go API over libibverbs and
// librdmacm. Go types go out, never C types. Work requests and completions are
// passed in fixed-layout Go arrays so that one cgo call posts a whole chain or
// reaps a whole batch.
package verbs

import (
	"errors"
	"fmt"
	"syscall"
	"unsafe"
)

// Addr is the address of b's first byte, for scatter/gather entries. b must
// be memory outside the Go heap (a registered mmap region).
func Addr(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

// ErrNotSupported is returned by every constructor when the binary was built
// without cgo or for a platform without libibverbs.
var ErrNotSupported = errors.New("verbs: RDMA not supported in this build")

// ErrNoDevice is returned when rdma_cm finds no RDMA device for an address
// (or the machine has none at all).
var ErrNoDevice = errors.New("verbs: no RDMA device")

// MaxSendSGE is the most scatter/gather entries one SendWR carries.
const MaxSendSGE = 8

// MaxRecvSGE is the most scatter/gather entries one RecvWR carries: the
// 64-byte command and the in-capsule data land in separate, aligned buffers.
const MaxRecvSGE = 2

// MaxBatch is the most work requests posted, or completions reaped, by one call.
const MaxBatch = 64

// SGE mirrors struct ibv_sge.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// WROpcode is a send work request's operation.
type WROpcode uint32

// Send work request operations.
const (
	WRSend WROpcode = iota
	WRSendWithInv
	WRRDMAWrite
	WRRDMARead
)

// Send flags.
const (
	SendSignaled uint32 = 1 << 0
	SendInline   uint32 = 1 << 1
)

// SendWR is one send-queue work request. Its layout matches nt_send_wr in C.
type SendWR struct {
	WRID       uint64
	RemoteAddr uint64
	Opcode     WROpcode
	Flags      uint32
	RKey       uint32
	InvRKey    uint32
	NumSGE     uint32
	_          uint32
	SGE        [MaxSendSGE]SGE
}

// RecvWR is one receive work request. Its layout matches nt_recv_wr in C.
type RecvWR struct {
	WRID   uint64
	NumSGE uint32
	_      uint32
	SGE    [MaxRecvSGE]SGE
}

// WCOpcode is the kind of work a completion reports.
type WCOpcode uint32

// Completion kinds.
const (
	WCSend WCOpcode = iota
	WCRDMAWrite
	WCRDMARead
	WCRecv
	WCOther
)

// WC flags.
const (
	WCWithInv uint32 = 1 << 0
)

// WCSuccess is the only successful completion status; WCFlushErr marks work
// flushed from a queue pair in the error state.
const (
	WCSuccess  = 0
	WCFlushErr = 5
)

// WC is one work completion. Its layout matches nt_wc in C.
type WC struct {
	WRID      uint64
	Status    uint32
	Opcode    WCOpcode
	ByteLen   uint32
	Flags     uint32
	InvRKey   uint32
	QPNum     uint32
	VendorErr uint32
	_         uint32
}

// StatusString names a completion status as libibverbs does.
func (wc *WC) StatusString() string { return wcStatusString(wc.Status) }

// DeviceAttr holds the device limits the transport sizes queues from.
type DeviceAttr struct {
	Name             string
	MaxQPWR          int
	MaxSGE           int
	MaxSGERd         int // scatter/gather entries of an RDMA READ
	MaxCQE           int
	MaxQPRdAtom      int // responder resources per QP
	MaxQPInitRdAtom  int // RDMA READs a QP may have outstanding as initiator
	MaxMRSize        uint64
	MemMgtExtensions bool // send-with-invalidate and fast registration
	// MaxSRQ is how many shared receive queues the device has (0: none);
	// MaxSRQWR and MaxSRQSGE the receives and scatter/gather entries of one.
	MaxSRQ, MaxSRQWR, MaxSRQSGE int
}

// EventType is an rdma_cm event.
type EventType int

// rdma_cm events the transport handles; the values are librdmacm's.
const (
	EventAddrResolved EventType = iota
	EventAddrError
	EventRouteResolved
	EventRouteError
	EventConnectRequest
	EventConnectResponse
	EventConnectError
	EventUnreachable
	EventRejected
	EventEstablished
	EventDisconnected
	EventDeviceRemoval
	EventMulticastJoin
	EventMulticastError
	EventAddrChange
	EventTimewaitExit
)

var eventNames = [...]string{"ADDR_RESOLVED", "ADDR_ERROR", "ROUTE_RESOLVED", "ROUTE_ERROR",
	"CONNECT_REQUEST", "CONNECT_RESPONSE", "CONNECT_ERROR", "UNREACHABLE", "REJECTED",
	"ESTABLISHED", "DISCONNECTED", "DEVICE_REMOVAL", "MULTICAST_JOIN", "MULTICAST_ERROR",
	"ADDR_CHANGE", "TIMEWAIT_EXIT"}

func (e EventType) String() string {
	if e >= 0 && int(e) < len(eventNames) {
		return eventNames[e]
	}
	return fmt.Sprintf("EVENT_%d", int(e))
}

// ConnParam is what rdma_accept sends back, or rdma_connect sends (an
// initiator for tests, rdma/rdmatest).
type ConnParam struct {
	PrivateData        []byte
	ResponderResources uint8
	InitiatorDepth     uint8
	RNRRetryCount      uint8
}

// QPInit sizes a queue pair.
type QPInit struct {
	SendCQ, RecvCQ *CQ
	// SRQ, when set, is the shared receive queue the QP takes its receives
	// from; MaxRecvWR and MaxRecvSGE are then not used.
	SRQ           *SRQ
	MaxSendWR     uint32
	MaxRecvWR     uint32
	MaxSendSGE    uint32
	MaxRecvSGE    uint32
	MaxInlineData uint32
}

// AsyncEvent is an asynchronous event of a device (ibv_async_event), already
// acknowledged. QPNum is set when HasQP: the event is about that QP; SRQ
// when HasSRQ: it is about the shared receive queue of that Handle.
type AsyncEvent struct {
	Type   int
	QPNum  uint32
	HasQP  bool
	SRQ    uintptr
	HasSRQ bool
}

// srqPost is a Batch's receives for its shared receive queue. Its layout
// matches nt_srq_post in C: the C side reads srq and n and writes the rest.
type srqPost struct {
	srq        uintptr // struct ibv_srq *, filled in by Post
	n          uint32
	rc, posted int32
}

// postGroup is one QP's share of a Batch. Its layout matches nt_group in C:
// the C side reads the first five fields and writes the last four.
type postGroup struct {
	qp                  uintptr // struct ibv_qp *, filled in by Post
	sendOff, sends      uint32
	recvOff, recvs      uint32
	sendRC, sendsPosted int32
	recvRC, recvsPosted int32
}

// Batch stages send and receive work requests for any number of QPs, and
// receives for one shared receive queue, and posts them all with one call
// (Post), so a poller pays for one cgo call and, per QP, one doorbell per
// round however many responses it built. The SRQ's receives go first; then
// each QP's requests in the order they were staged, receives before sends.
// A Batch is used by one goroutine; it is allocated once and holds no Go
// pointers the C side sees.
type Batch struct {
	send   []SendWR
	recv   []RecvWR
	groups []postGroup
	qps    []*QP // the QP of each group
	ns, nr int
	// srqRecv are the SRQ's receives staged, nsr of them, for srq.
	srqRecv []RecvWR
	nsr     int
	srq     *SRQ
	sp      srqPost

	//lint:ignore U1000 used by faultinject builds (fault_on.go)
	faultPosts int // posts counted by a fault plan (faultinject builds)
}

// NewBatch makes a batch with room for the given numbers of send and
// receive work requests and of QP groups (each at least 1), and for as many
// SRQ receives as QP receives.
func NewBatch(sends, recvs, groups int) *Batch {
	return &Batch{
		send:    make([]SendWR, max(sends, 1)),
		recv:    make([]RecvWR, max(recvs, 1)),
		srqRecv: make([]RecvWR, max(recvs, 1)),
		groups:  make([]postGroup, max(groups, 1)),
		qps:     make([]*QP, 0, max(groups, 1)),
	}
}

// Room reports whether sends more send and recvs more receive work requests
// fit, for a QP that may need a new group.
func (b *Batch) Room(sends, recvs int) bool {
	return b.ns+sends <= len(b.send) && b.nr+recvs <= len(b.recv) && len(b.qps) < len(b.groups)
}

// Len is how many work requests are staged, SRQ receives included.
func (b *Batch) Len() int { return b.ns + b.nr + b.nsr }

// SRQRoom reports whether n more SRQ receives fit.
func (b *Batch) SRQRoom(n int) bool { return b.nsr+n <= len(b.srqRecv) }

// SRQRecv stages a receive for srq and returns it, zeroed, to fill in. A
// batch posts to one SRQ: every call until Reset names the same. Check
// SRQRoom first.
func (b *Batch) SRQRecv(srq *SRQ) *RecvWR {
	b.srq = srq
	w := &b.srqRecv[b.nsr]
	*w = RecvWR{}
	b.nsr++
	return w
}

// SRQResult reports what Post did with the SRQ's receives: how many were
// posted and, on failure, the error and those that were not.
func (b *Batch) SRQResult() (posted int, unposted []RecvWR, err error) {
	if b.sp.rc < 0 {
		unposted = b.srqRecv[b.sp.posted:b.nsr]
		err = fmt.Errorf("ibv_post_srq_recv: %w", syscall.Errno(-b.sp.rc))
	}
	return int(b.sp.posted), unposted, err
}

// Groups is how many QP groups are staged.
func (b *Batch) Groups() int { return len(b.qps) }

// group returns the group qp's next request goes to: the last one when it
// is qp's, else a new one (so each group's requests stay contiguous).
func (b *Batch) group(qp *QP) *postGroup {
	if n := len(b.qps); n > 0 && b.qps[n-1] == qp {
		return &b.groups[n-1]
	}
	b.qps = append(b.qps, qp)
	g := &b.groups[len(b.qps)-1]
	*g = postGroup{sendOff: uint32(b.ns), recvOff: uint32(b.nr)}
	return g
}

// Send stages a send work request for qp and returns it, zeroed, to fill
// in. Check Room first.
func (b *Batch) Send(qp *QP) *SendWR {
	b.group(qp).sends++
	w := &b.send[b.ns]
	*w = SendWR{}
	b.ns++
	return w
}

// Recv stages a receive work request for qp and returns it, zeroed, to fill
// in. Check Room first.
func (b *Batch) Recv(qp *QP) *RecvWR {
	b.group(qp).recvs++
	w := &b.recv[b.nr]
	*w = RecvWR{}
	b.nr++
	return w
}

// Result reports what Post did for group i: how many of its receives were
// posted, and on failure the error and the send work requests that were not
// posted (the failed one and every one after it).
func (b *Batch) Result(i int) (recvs int, unposted []SendWR, err error) {
	g := &b.groups[i]
	if g.recvRC < 0 {
		err = fmt.Errorf("ibv_post_recv: %w", syscall.Errno(-g.recvRC))
	}
	if g.sendRC < 0 {
		unposted = b.send[g.sendOff+uint32(g.sendsPosted) : g.sendOff+g.sends]
		err = errors.Join(err, fmt.Errorf("ibv_post_send: %w", syscall.Errno(-g.sendRC)))
	}
	return int(g.recvsPosted), unposted, err
}

// Reset empties the batch once its results are read.
func (b *Batch) Reset() {
	clear(b.qps)
	b.qps = b.qps[:0]
	b.ns, b.nr, b.nsr = 0, 0, 0
	b.srq, b.sp = nil, srqPost{}
}
