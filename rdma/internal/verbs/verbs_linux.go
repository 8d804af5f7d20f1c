//go:build linux && cgo

package verbs

/*
#cgo LDFLAGS: -libverbs -lrdmacm
#include <errno.h>
#include <stdlib.h>
#include "verbs_shim.h"
*/
import "C"

import (
	"fmt"
	"net"
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// The Go mirrors must match the C layouts byte for byte.
var (
	_ [unsafe.Sizeof(SendWR{}) - C.sizeof_nt_send_wr]byte
	_ [C.sizeof_nt_send_wr - unsafe.Sizeof(SendWR{})]byte
	_ [unsafe.Sizeof(RecvWR{}) - C.sizeof_nt_recv_wr]byte
	_ [C.sizeof_nt_recv_wr - unsafe.Sizeof(RecvWR{})]byte
	_ [unsafe.Sizeof(WC{}) - C.sizeof_nt_wc]byte
	_ [C.sizeof_nt_wc - unsafe.Sizeof(WC{})]byte
	_ [MaxSendSGE - C.NT_MAX_SEND_SGE]byte
	_ [C.NT_MAX_SEND_SGE - MaxSendSGE]byte
	_ [MaxBatch - C.NT_MAX_BATCH]byte
	_ [unsafe.Sizeof(postGroup{}) - C.sizeof_nt_group]byte
	_ [C.sizeof_nt_group - unsafe.Sizeof(postGroup{})]byte
	_ [unsafe.Sizeof(srqPost{}) - C.sizeof_nt_srq_post]byte
	_ [C.sizeof_nt_srq_post - unsafe.Sizeof(srqPost{})]byte
)

// cFieldOffsets returns the C offsets of the mirrored structures' fields,
// for the layout test.
func cFieldOffsets() []uintptr {
	var n C.int
	p := C.nt_field_offsets(&n)
	out := make([]uintptr, int(n))
	for i, o := range unsafe.Slice(p, int(n)) {
		out[i] = uintptr(o)
	}
	return out
}

func errno(rc C.int) error {
	if rc >= 0 {
		return nil
	}
	return syscall.Errno(-rc)
}

func wcStatusString(s uint32) string { return C.GoString(C.ibv_wc_status_str(C.enum_ibv_wc_status(s))) }

// DeviceCount returns how many RDMA devices libibverbs sees; zero is not an error.
func DeviceCount() (int, error) {
	n := C.nt_device_count()
	// A kernel without uverbs has no device list at all: that is zero devices.
	if n == -C.ENOSYS || n == -C.ENODEV || n == -C.ENOENT {
		return 0, nil
	}
	if n < 0 {
		return 0, fmt.Errorf("ibv_get_device_list: %w", errno(n))
	}
	return int(n), nil
}

// SyncDevices makes librdmacm compare the devices it knows with the
// machine's (rdma_get_devices): one that has left is marked dead, and its
// context is closed now, or when its last rdma_cm ID is destroyed. It
// returns how many devices are live. Side effect: librdmacm opens a
// context on every device it lists, kept until that device leaves too.
// librdmacm does not look when the machine has no device left (ENODEV).
func SyncDevices() (int, error) {
	n := C.nt_sync_devices()
	if n < 0 {
		return 0, fmt.Errorf("rdma_get_devices: %w", errno(n))
	}
	return int(n), nil
}

// EventChannel is an rdma_cm event channel with a non-blocking fd.
type EventChannel struct{ p *C.struct_rdma_event_channel }

// NewEventChannel creates a non-blocking rdma_cm event channel.
func NewEventChannel() (*EventChannel, error) {
	p, err := C.rdma_create_event_channel()
	if p == nil {
		if err == syscall.ENODEV || err == syscall.ENOENT {
			return nil, fmt.Errorf("rdma_create_event_channel: %w (%v)", ErrNoDevice, err)
		}
		return nil, fmt.Errorf("rdma_create_event_channel: %w", err)
	}
	if rc := C.nt_set_nonblock(p.fd); rc < 0 {
		C.rdma_destroy_event_channel(p)
		return nil, fmt.Errorf("event channel nonblock: %w", errno(rc))
	}
	return &EventChannel{p: p}, nil
}

// Fd is the channel's file descriptor, readable when an event is pending.
func (ec *EventChannel) Fd() int { return int(ec.p.fd) }

// Close destroys the channel; every ID on it must be destroyed first.
func (ec *EventChannel) Close() error {
	if ec.p != nil {
		C.rdma_destroy_event_channel(ec.p)
		ec.p = nil
	}
	return nil
}

// CreateID creates an RDMA_PS_TCP (reliable connected) ID on the channel.
func (ec *EventChannel) CreateID() (CMID, error) {
	var id *C.struct_rdma_cm_id
	if rc, err := C.rdma_create_id(ec.p, &id, nil, C.RDMA_PS_TCP); rc != 0 {
		return CMID{}, fmt.Errorf("rdma_create_id: %w", err)
	}
	return CMID{p: id}, nil
}

// CMEvent is one rdma_cm event; the caller must Ack it, after which
// PrivateData (a copy) stays valid.
type CMEvent struct {
	Type                               EventType
	ID, ListenID                       CMID
	Status                             int
	PrivateData                        []byte
	InitiatorDepth, ResponderResources uint8
	ev                                 *C.struct_rdma_cm_event
}

// GetEvent returns the next event, or syscall.EAGAIN when none is pending.
func (ec *EventChannel) GetEvent() (*CMEvent, error) {
	var ev *C.struct_rdma_cm_event
	if rc := C.nt_get_event(ec.p, &ev); rc < 0 {
		return nil, errno(rc)
	}
	e := &CMEvent{Type: EventType(ev.event), ID: CMID{p: ev.id}, ListenID: CMID{p: ev.listen_id}, Status: int(ev.status), ev: ev}
	conn := (*C.struct_rdma_conn_param)(unsafe.Pointer(&ev.param))
	if conn.private_data != nil && conn.private_data_len > 0 && (e.Type == EventConnectRequest || e.Type == EventEstablished || e.Type == EventRejected) {
		e.PrivateData = C.GoBytes(conn.private_data, C.int(conn.private_data_len))
	}
	e.InitiatorDepth = uint8(conn.initiator_depth)
	e.ResponderResources = uint8(conn.responder_resources)
	return e, nil
}

// Ack releases the event. IDs named by unacknowledged events cannot be destroyed.
func (e *CMEvent) Ack() {
	if e.ev != nil {
		C.rdma_ack_cm_event(e.ev)
		e.ev = nil
	}
}

// CMID is an rdma_cm identifier, comparable by Handle.
type CMID struct{ p *C.struct_rdma_cm_id }

// Handle is a stable key for the ID while it lives.
func (id CMID) Handle() uintptr { return uintptr(unsafe.Pointer(id.p)) }

// Valid reports whether the ID refers to anything.
func (id CMID) Valid() bool { return id.p != nil }

// Bind binds to a local IP (IPv4 or IPv6, unspecified = all) and port.
func (id CMID) Bind(ip net.IP, port int) error {
	var rc C.int
	if v4 := ip.To4(); v4 != nil {
		rc = C.nt_bind(id.p, 4, unsafe.Pointer(&v4[0]), C.int(port))
	} else if v6 := ip.To16(); v6 != nil {
		rc = C.nt_bind(id.p, 6, unsafe.Pointer(&v6[0]), C.int(port))
	} else {
		return fmt.Errorf("rdma_bind_addr: bad address %q", ip)
	}
	runtime.KeepAlive(ip)
	if rc < 0 {
		err := errno(rc)
		if err == syscall.ENODEV || err == syscall.EADDRNOTAVAIL {
			return fmt.Errorf("rdma_bind_addr %s: %w (%v)", ip, ErrNoDevice, err)
		}
		return fmt.Errorf("rdma_bind_addr %s:%d: %w", ip, port, err)
	}
	return nil
}

// Listen starts listening for connection requests.
func (id CMID) Listen(backlog int) error {
	if rc, err := C.rdma_listen(id.p, C.int(backlog)); rc != 0 {
		return fmt.Errorf("rdma_listen: %w", err)
	}
	return nil
}

// Context is the ID's device, or nil when it is bound to no single device.
func (id CMID) Context() *Context {
	if id.p == nil || id.p.verbs == nil {
		return nil
	}
	return &Context{p: id.p.verbs}
}

// Accept accepts a connection request.
func (id CMID) Accept(p ConnParam) error {
	var pd unsafe.Pointer
	if len(p.PrivateData) > 0 {
		pd = C.CBytes(p.PrivateData)
		defer C.free(pd)
	}
	if rc := C.nt_accept(id.p, pd, C.int(len(p.PrivateData)), C.int(p.ResponderResources), C.int(p.InitiatorDepth), C.int(p.RNRRetryCount)); rc < 0 {
		return fmt.Errorf("rdma_accept: %w", errno(rc))
	}
	return nil
}

// ResolveAddr starts resolving the destination IP and port to an RDMA
// device (the active side); EventAddrResolved or EventAddrError follows.
func (id CMID) ResolveAddr(ip net.IP, port int, timeout time.Duration) error {
	var rc C.int
	if v4 := ip.To4(); v4 != nil {
		rc = C.nt_resolve_addr(id.p, 4, unsafe.Pointer(&v4[0]), C.int(port), C.int(timeout.Milliseconds()))
	} else if v6 := ip.To16(); v6 != nil {
		rc = C.nt_resolve_addr(id.p, 6, unsafe.Pointer(&v6[0]), C.int(port), C.int(timeout.Milliseconds()))
	} else {
		return fmt.Errorf("rdma_resolve_addr: bad address %q", ip)
	}
	runtime.KeepAlive(ip)
	if rc < 0 {
		return fmt.Errorf("rdma_resolve_addr %s: %w", ip, errno(rc))
	}
	return nil
}

// ResolveRoute starts resolving the route to the resolved address;
// EventRouteResolved or EventRouteError follows.
func (id CMID) ResolveRoute(timeout time.Duration) error {
	if rc, err := C.rdma_resolve_route(id.p, C.int(timeout.Milliseconds())); rc != 0 {
		return fmt.Errorf("rdma_resolve_route: %w", err)
	}
	return nil
}

// Connect sends a connection request with p's private data (at most 56
// bytes on RC); EventEstablished, EventRejected or an error event follows.
func (id CMID) Connect(p ConnParam) error {
	var pd unsafe.Pointer
	if len(p.PrivateData) > 0 {
		pd = C.CBytes(p.PrivateData)
		defer C.free(pd)
	}
	if rc := C.nt_connect(id.p, pd, C.int(len(p.PrivateData)), C.int(p.ResponderResources), C.int(p.InitiatorDepth), C.int(p.RNRRetryCount)); rc < 0 {
		return fmt.Errorf("rdma_connect: %w", errno(rc))
	}
	return nil
}

// Reject refuses a connection request with private data.
func (id CMID) Reject(privateData []byte) error {
	var pd unsafe.Pointer
	if len(privateData) > 0 {
		pd = C.CBytes(privateData)
		defer C.free(pd)
	}
	if rc, err := C.rdma_reject(id.p, pd, C.uint8_t(len(privateData))); rc != 0 {
		return fmt.Errorf("rdma_reject: %w", err)
	}
	return nil
}

// Disconnect starts a disconnect; the QP moves to the error state.
func (id CMID) Disconnect() error {
	if rc, err := C.rdma_disconnect(id.p); rc != 0 {
		return fmt.Errorf("rdma_disconnect: %w", err)
	}
	return nil
}

// CreateQP creates the ID's RC queue pair.
func (id CMID) CreateQP(pd *PD, a QPInit) (*QP, error) {
	if createQPFault() {
		return nil, fmt.Errorf("rdma_create_qp: %w (injected)", syscall.ENOMEM)
	}
	var srq *C.struct_ibv_srq
	if a.SRQ != nil {
		srq = a.SRQ.p
	}
	if rc := C.nt_create_qp(id.p, pd.p, a.SendCQ.p, a.RecvCQ.p, srq, C.int(a.MaxSendWR), C.int(a.MaxRecvWR),
		C.int(a.MaxSendSGE), C.int(a.MaxRecvSGE), C.int(a.MaxInlineData)); rc < 0 {
		return nil, fmt.Errorf("rdma_create_qp: %w", errno(rc))
	}
	return &QP{p: id.p.qp}, nil
}

// SRQ is a shared receive queue: receives posted once, taken by whichever
// QP attached to it (QPInit.SRQ) gets a message first.
type SRQ struct {
	p     *C.struct_ibv_srq
	maxWR int
}

// CreateSRQ creates a shared receive queue of at least maxWR receives of
// maxSGE scatter/gather entries each.
func (pd *PD) CreateSRQ(maxWR, maxSGE int) (*SRQ, error) {
	var got C.int
	p, err := C.nt_create_srq(pd.p, C.int(maxWR), C.int(maxSGE), &got)
	if p == nil {
		return nil, fmt.Errorf("ibv_create_srq %d: %w", maxWR, err)
	}
	return &SRQ{p: p, maxWR: int(got)}, nil
}

// MaxWR is how many receives the SRQ holds.
func (s *SRQ) MaxWR() int { return s.maxWR }

// Handle is the SRQ's key in AsyncEvent.SRQ.
func (s *SRQ) Handle() uintptr { return uintptr(unsafe.Pointer(s.p)) }

// Arm arms the SRQ limit: one IBV_EVENT_SRQ_LIMIT_REACHED comes when fewer
// than limit receives are left in it, and the limit is then disarmed.
func (s *SRQ) Arm(limit int) error {
	if rc := C.nt_arm_srq(s.p, C.int(limit)); rc < 0 {
		return fmt.Errorf("ibv_modify_srq limit %d: %w", limit, errno(rc))
	}
	return nil
}

// Destroy frees the SRQ; every QP attached to it must be destroyed first.
func (s *SRQ) Destroy() error {
	if rc := C.ibv_destroy_srq(s.p); rc != 0 {
		return fmt.Errorf("ibv_destroy_srq: %w", syscall.Errno(rc))
	}
	return nil
}

// DestroyQP destroys the ID's queue pair, if any.
func (id CMID) DestroyQP() {
	if id.p != nil && id.p.qp != nil {
		C.rdma_destroy_qp(id.p)
	}
}

// Destroy frees the ID; its events must all be acknowledged.
func (id CMID) Destroy() error {
	if rc, err := C.rdma_destroy_id(id.p); rc != 0 {
		return fmt.Errorf("rdma_destroy_id: %w", err)
	}
	return nil
}

// PeerAddr formats the remote address as host:port.
func (id CMID) PeerAddr() string {
	var buf [64]C.char
	C.nt_fmt_addr(C.rdma_get_peer_addr(id.p), &buf[0], C.int(len(buf)))
	return C.GoString(&buf[0])
}

// LocalAddr formats the local address as host:port.
func (id CMID) LocalAddr() string {
	var buf [64]C.char
	C.nt_fmt_addr(C.rdma_get_local_addr(id.p), &buf[0], C.int(len(buf)))
	return C.GoString(&buf[0])
}

// Context is an opened RDMA device, owned by rdma_cm.
type Context struct{ p *C.struct_ibv_context }

// Handle is a stable key for the device.
func (c *Context) Handle() uintptr { return uintptr(unsafe.Pointer(c.p)) }

// AsyncEventFD makes the device's asynchronous event descriptor non-blocking
// and returns a duplicate of it, to wait on for readability; closing the
// duplicate leaves the device alone.
func (c *Context) AsyncEventFD() (int, error) {
	fd := int(c.p.async_fd)
	if err := syscall.SetNonblock(fd, true); err != nil {
		return -1, fmt.Errorf("async event fd: %w", err)
	}
	dup, err := syscall.Dup(fd)
	if err != nil {
		return -1, fmt.Errorf("async event fd: %w", err)
	}
	return dup, nil
}

// GetAsyncEvent reads and acknowledges one asynchronous event; EAGAIN when
// there is none (see AsyncEventFD).
func (c *Context) GetAsyncEvent() (AsyncEvent, error) {
	var typ, hasQP, hasSRQ C.int
	var qpn C.uint32_t
	var srq C.uintptr_t
	if rc := C.nt_get_async_event(c.p, &typ, &qpn, &hasQP, &srq, &hasSRQ); rc < 0 {
		return AsyncEvent{}, fmt.Errorf("ibv_get_async_event: %w", errno(rc))
	}
	return AsyncEvent{Type: int(typ), QPNum: uint32(qpn), HasQP: hasQP != 0, SRQ: uintptr(srq), HasSRQ: hasSRQ != 0}, nil
}

// SRQLimit reports IBV_EVENT_SRQ_LIMIT_REACHED: the SRQ holds fewer
// receives than its armed limit.
func (e AsyncEvent) SRQLimit() bool { return e.Type == C.IBV_EVENT_SRQ_LIMIT_REACHED }

// SRQErr reports IBV_EVENT_SRQ_ERR: the SRQ failed, and the QPs taking
// receives from it get none any more.
func (e AsyncEvent) SRQErr() bool { return e.Type == C.IBV_EVENT_SRQ_ERR }

// LastWQEReached reports IBV_EVENT_QP_LAST_WQE_REACHED: a QP of an SRQ, in
// the error state, will take no more receives from it (ibv_get_async_event(3)).
func (e AsyncEvent) LastWQEReached() bool { return e.Type == C.IBV_EVENT_QP_LAST_WQE_REACHED }

func (e AsyncEvent) String() string {
	return C.GoString(C.ibv_event_type_str(C.enum_ibv_event_type(e.Type)))
}

// Fatal reports whether the event means the QP (or the whole device, port
// or a CQ) can no longer be used.
func (e AsyncEvent) Fatal() bool {
	switch e.Type {
	case C.IBV_EVENT_QP_FATAL, C.IBV_EVENT_QP_REQ_ERR, C.IBV_EVENT_QP_ACCESS_ERR, C.IBV_EVENT_CQ_ERR,
		C.IBV_EVENT_PATH_MIG_ERR, C.IBV_EVENT_DEVICE_FATAL, C.IBV_EVENT_PORT_ERR:
		return true
	}
	return false
}

// DeviceFatal reports whether the event says the whole device is lost
// (IBV_EVENT_DEVICE_FATAL: a removal the driver disassociates, or a
// hardware failure): everything on it must be released.
func (e AsyncEvent) DeviceFatal() bool { return e.Type == C.IBV_EVENT_DEVICE_FATAL }

// Query reads the device limits.
func (c *Context) Query() (DeviceAttr, error) {
	var a C.struct_ibv_device_attr
	if rc := C.ibv_query_device(c.p, &a); rc != 0 {
		return DeviceAttr{}, fmt.Errorf("ibv_query_device: %w", syscall.Errno(rc))
	}
	return DeviceAttr{
		Name:             C.GoString(C.ibv_get_device_name(c.p.device)),
		MaxQPWR:          int(a.max_qp_wr),
		MaxSGE:           int(a.max_sge),
		MaxSGERd:         int(a.max_sge_rd),
		MaxCQE:           int(a.max_cqe),
		MaxQPRdAtom:      int(a.max_qp_rd_atom),
		MaxQPInitRdAtom:  int(a.max_qp_init_rd_atom),
		MaxMRSize:        uint64(a.max_mr_size),
		MemMgtExtensions: a.device_cap_flags&C.IBV_DEVICE_MEM_MGT_EXTENSIONS != 0,
		MaxSRQ:           int(a.max_srq),
		MaxSRQWR:         int(a.max_srq_wr),
		MaxSRQSGE:        int(a.max_srq_sge),
	}, nil
}

// PD is a protection domain.
type PD struct{ p *C.struct_ibv_pd }

// AllocPD allocates a protection domain.
func (c *Context) AllocPD() (*PD, error) {
	p, err := C.ibv_alloc_pd(c.p)
	if p == nil {
		return nil, fmt.Errorf("ibv_alloc_pd: %w", err)
	}
	return &PD{p: p}, nil
}

// Dealloc frees the protection domain.
func (pd *PD) Dealloc() error {
	if rc := C.ibv_dealloc_pd(pd.p); rc != 0 {
		return fmt.Errorf("ibv_dealloc_pd: %w", syscall.Errno(rc))
	}
	return nil
}

// MR is a registered memory region.
type MR struct{ p *C.struct_ibv_mr }

// RegMR registers buf, which must live outside the Go heap (mmap), for local
// write only: the target never hands out an rkey for its own memory.
func (pd *PD) RegMR(buf []byte) (*MR, error) {
	if len(buf) == 0 {
		return nil, fmt.Errorf("ibv_reg_mr: empty buffer")
	}
	p, err := C.ibv_reg_mr(pd.p, unsafe.Pointer(&buf[0]), C.size_t(len(buf)), C.IBV_ACCESS_LOCAL_WRITE)
	if p == nil {
		return nil, fmt.Errorf("ibv_reg_mr %d bytes: %w", len(buf), err)
	}
	return &MR{p: p}, nil
}

// RegMRRemote registers buf, which must live outside the Go heap, for
// local write and remote read and write: an initiator's buffer that the
// peer reaches with the region's RKey. The target itself never uses it.
func (pd *PD) RegMRRemote(buf []byte) (*MR, error) {
	if len(buf) == 0 {
		return nil, fmt.Errorf("ibv_reg_mr: empty buffer")
	}
	p, err := C.ibv_reg_mr(pd.p, unsafe.Pointer(&buf[0]), C.size_t(len(buf)),
		C.IBV_ACCESS_LOCAL_WRITE|C.IBV_ACCESS_REMOTE_READ|C.IBV_ACCESS_REMOTE_WRITE)
	if p == nil {
		return nil, fmt.Errorf("ibv_reg_mr %d bytes: %w", len(buf), err)
	}
	return &MR{p: p}, nil
}

// RKey is the region's remote key.
func (mr *MR) RKey() uint32 { return uint32(mr.p.rkey) }

// LKey is the region's local key.
func (mr *MR) LKey() uint32 { return uint32(mr.p.lkey) }

// Dereg deregisters the region.
func (mr *MR) Dereg() error {
	if rc := C.ibv_dereg_mr(mr.p); rc != 0 {
		return fmt.Errorf("ibv_dereg_mr: %w", syscall.Errno(rc))
	}
	return nil
}

// CompChannel is a completion event channel with a non-blocking fd.
type CompChannel struct{ p *C.struct_ibv_comp_channel }

// NewCompChannel creates a non-blocking completion channel.
func (c *Context) NewCompChannel() (*CompChannel, error) {
	p, err := C.ibv_create_comp_channel(c.p)
	if p == nil {
		return nil, fmt.Errorf("ibv_create_comp_channel: %w", err)
	}
	if rc := C.nt_set_nonblock(p.fd); rc < 0 {
		C.ibv_destroy_comp_channel(p)
		return nil, fmt.Errorf("comp channel nonblock: %w", errno(rc))
	}
	return &CompChannel{p: p}, nil
}

// Wait blocks the calling thread until a CQ on the channel raises an event
// (consumed and acknowledged) or eventfd evfd becomes readable (drained). One
// cgo call, so a poller sleeping in it wakes with one kernel wake-up.
func (ch *CompChannel) Wait(evfd int) error {
	if rc := C.nt_wait(ch.p, C.int(evfd)); rc < 0 {
		return fmt.Errorf("wait for completion event: %w", errno(rc))
	}
	return nil
}

// Close destroys the channel; its CQs must be destroyed first.
func (ch *CompChannel) Close() error {
	if rc := C.ibv_destroy_comp_channel(ch.p); rc != 0 {
		return fmt.Errorf("ibv_destroy_comp_channel: %w", syscall.Errno(rc))
	}
	return nil
}

// CQ is a completion queue.
type CQ struct{ p *C.struct_ibv_cq }

// CreateCQ creates a CQ with at least cqe entries, reporting events on ch.
func (c *Context) CreateCQ(cqe int, ch *CompChannel) (*CQ, error) {
	var chp *C.struct_ibv_comp_channel
	if ch != nil {
		chp = ch.p
	}
	p, err := C.ibv_create_cq(c.p, C.int(cqe), nil, chp, 0)
	if p == nil {
		return nil, fmt.Errorf("ibv_create_cq %d: %w", cqe, err)
	}
	return &CQ{p: p}, nil
}

// Poll reaps up to len(wcs) (at most MaxBatch) completions in one call.
func (cq *CQ) Poll(wcs []WC) (int, error) {
	if len(wcs) == 0 {
		return 0, nil
	}
	n := C.nt_poll(cq.p, (*C.nt_wc)(unsafe.Pointer(&wcs[0])), C.int(len(wcs)))
	if n < 0 {
		return 0, fmt.Errorf("ibv_poll_cq: %w", syscall.Errno(-n))
	}
	return int(n), nil
}

// ReqNotify arms the CQ: the next completion raises an event on its channel.
func (cq *CQ) ReqNotify() error {
	if rc := C.ibv_req_notify_cq(cq.p, 0); rc != 0 {
		return fmt.Errorf("ibv_req_notify_cq: %w", syscall.Errno(rc))
	}
	return nil
}

// Destroy frees the CQ; its QPs must be destroyed first.
func (cq *CQ) Destroy() error {
	if rc := C.ibv_destroy_cq(cq.p); rc != 0 {
		return fmt.Errorf("ibv_destroy_cq: %w", syscall.Errno(rc))
	}
	return nil
}

// QP is a reliable-connected queue pair created through rdma_cm.
type QP struct{ p *C.struct_ibv_qp }

// Num is the QP number.
func (qp *QP) Num() uint32 { return uint32(qp.p.qp_num) }

// Post posts everything staged, each QP's work as one or more chains, in
// one cgo call. Read the outcome with Result, then Reset.
func (b *Batch) Post() {
	if len(b.qps) == 0 && b.nsr == 0 {
		return
	}
	for i, qp := range b.qps {
		b.groups[i].qp = uintptr(unsafe.Pointer(qp.p))
	}
	b.sp = srqPost{n: uint32(b.nsr)}
	if b.nsr > 0 {
		b.sp.srq = uintptr(unsafe.Pointer(b.srq.p))
	}
	cut := postFault(b) // nothing, unless built with faultinject
	C.nt_post_batch((*C.nt_group)(unsafe.Pointer(&b.groups[0])), C.int(len(b.qps)),
		(*C.nt_send_wr)(unsafe.Pointer(&b.send[0])), (*C.nt_recv_wr)(unsafe.Pointer(&b.recv[0])),
		(*C.nt_srq_post)(unsafe.Pointer(&b.sp)), (*C.nt_recv_wr)(unsafe.Pointer(&b.srqRecv[0])))
	cut.apply(b.groups[:len(b.qps)], &b.sp)
}

// SetMinRNRTimer sets the RNR NAK timer the QP sends when a message finds
// no receive posted, in the IB encoding (1: 0.01 ms ... 12: 0.64 ms ...
// 31: 491.52 ms, 0: 655.36 ms). The QP must be connected (RTS).
func (qp *QP) SetMinRNRTimer(timer uint8) error {
	if rc := C.nt_qp_min_rnr_timer(qp.p, C.int(timer)); rc < 0 {
		return fmt.Errorf("ibv_modify_qp min_rnr_timer: %w", errno(rc))
	}
	return nil
}

// InError reports whether the QP is in the error state (ibv_query_qp(3)).
func (qp *QP) InError() (bool, error) {
	rc := C.nt_qp_in_error(qp.p)
	if rc < 0 {
		return false, fmt.Errorf("ibv_query_qp: %w", errno(rc))
	}
	return rc == 1, nil
}

// SetError moves the QP to the error state, flushing all outstanding work.
func (qp *QP) SetError() error {
	if rc := C.nt_qp_error(qp.p); rc < 0 {
		return fmt.Errorf("ibv_modify_qp ERR: %w", errno(rc))
	}
	return nil
}
