//go:build !(linux && cgo)

package verbs

import (
	"net"
	"syscall"
	"time"
)

func wcStatusString(s uint32) string { return "unknown" }

// EventChannel is unavailable in this build.
type EventChannel struct{}

// CMID is unavailable in this build.
type CMID struct{}

// CMEvent is unavailable in this build.
type CMEvent struct {
	Type                               EventType
	ID, ListenID                       CMID
	Status                             int
	PrivateData                        []byte
	InitiatorDepth, ResponderResources uint8
}

// Context is unavailable in this build.
type Context struct{}

// PD is unavailable in this build.
type PD struct{}

// MR is unavailable in this build.
type MR struct{}

// CompChannel is unavailable in this build.
type CompChannel struct{}

// CQ is unavailable in this build.
type CQ struct{}

// QP is unavailable in this build.
type QP struct{ _ byte } // not zero-size: Batch tells QPs apart by address

// SRQ is unavailable in this build.
type SRQ struct{}

func SyncDevices() (int, error)                           { return 0, ErrNotSupported }
func NewEventChannel() (*EventChannel, error)             { return nil, ErrNotSupported }
func (*EventChannel) Fd() int                             { return -1 }
func (*EventChannel) GetEvent() (*CMEvent, error)         { return nil, ErrNotSupported }
func (*EventChannel) Close() error                        { return nil }
func (*EventChannel) CreateID() (CMID, error)             { return CMID{}, ErrNotSupported }
func (*CMEvent) Ack()                                     {}
func (CMID) Handle() uintptr                              { return 0 }
func (CMID) Valid() bool                                  { return false }
func (CMID) Bind(net.IP, int) error                       { return ErrNotSupported }
func (CMID) Listen(int) error                             { return ErrNotSupported }
func (CMID) Context() *Context                            { return nil }
func (CMID) Accept(ConnParam) error                       { return ErrNotSupported }
func (CMID) Reject([]byte) error                          { return ErrNotSupported }
func (CMID) ResolveAddr(net.IP, int, time.Duration) error { return ErrNotSupported }
func (CMID) ResolveRoute(time.Duration) error             { return ErrNotSupported }
func (CMID) Connect(ConnParam) error                      { return ErrNotSupported }
func (CMID) Disconnect() error                            { return ErrNotSupported }
func (CMID) CreateQP(*PD, QPInit) (*QP, error)            { return nil, ErrNotSupported }
func (CMID) DestroyQP()                                   {}
func (CMID) Destroy() error                               { return nil }
func (CMID) PeerAddr() string                             { return "" }
func (CMID) LocalAddr() string                            { return "" }
func (*Context) Handle() uintptr                          { return 0 }
func (*Context) Query() (DeviceAttr, error)               { return DeviceAttr{}, ErrNotSupported }
func (*Context) AsyncEventFD() (int, error)               { return -1, ErrNotSupported }
func (*Context) GetAsyncEvent() (AsyncEvent, error)       { return AsyncEvent{}, ErrNotSupported }
func (AsyncEvent) String() string                         { return "unknown" }
func (AsyncEvent) Fatal() bool                            { return false }
func (AsyncEvent) DeviceFatal() bool                      { return false }
func (*Context) AllocPD() (*PD, error)                    { return nil, ErrNotSupported }
func (*Context) NewCompChannel() (*CompChannel, error)    { return nil, ErrNotSupported }
func (*Context) CreateCQ(int, *CompChannel) (*CQ, error)  { return nil, ErrNotSupported }
func (*PD) RegMR([]byte) (*MR, error)                     { return nil, ErrNotSupported }
func (*PD) Dealloc() error                                { return nil }
func (*PD) RegMRRemote([]byte) (*MR, error)               { return nil, ErrNotSupported }
func (*MR) LKey() uint32                                  { return 0 }
func (*MR) RKey() uint32                                  { return 0 }
func (*MR) Dereg() error                                  { return nil }
func (*CompChannel) Wait(int) error                       { return ErrNotSupported }
func (*CompChannel) Close() error                         { return nil }
func (*CQ) Poll([]WC) (int, error)                        { return 0, ErrNotSupported }
func (*CQ) ReqNotify() error                              { return ErrNotSupported }
func (*CQ) Destroy() error                                { return nil }
func (*QP) Num() uint32                                   { return 0 }
func (*QP) SetError() error                               { return ErrNotSupported }
func (*QP) InError() (bool, error)                        { return false, ErrNotSupported }
func (*QP) SetMinRNRTimer(uint8) error                    { return ErrNotSupported }
func (*PD) CreateSRQ(int, int) (*SRQ, error)              { return nil, ErrNotSupported }
func (*SRQ) MaxWR() int                                   { return 0 }
func (*SRQ) Handle() uintptr                              { return 0 }
func (*SRQ) Arm(int) error                                { return ErrNotSupported }
func (*SRQ) Destroy() error                               { return nil }
func (AsyncEvent) SRQLimit() bool                         { return false }
func (AsyncEvent) SRQErr() bool                           { return false }
func (AsyncEvent) LastWQEReached() bool                   { return false }

// Post fails every group: nothing can be posted in this build.
func (b *Batch) Post() {
	b.sp = srqPost{n: uint32(b.nsr), rc: -int32(syscall.ENOSYS)}
	for i := range b.qps {
		g := &b.groups[i]
		g.recvRC, g.recvsPosted = -int32(syscall.ENOSYS), 0
		g.sendRC, g.sendsPosted = -int32(syscall.ENOSYS), 0
	}
}

// DeviceCount is always 0 in this build.
func DeviceCount() (int, error) { return 0, ErrNotSupported }

// SetupFaults does nothing: this build has no fault injection.
func SetupFaults() (string, error) { return "", nil }

// SRQDepthFault is 0: this build has no fault injection.
func SRQDepthFault() int { return 0 }

// SRQStartFault is 0: this build has no fault injection.
func SRQStartFault() int { return 0 }
