// Package fabric is the transport-independent NVMe over Fabrics target: ports,
// subsystems, the discovery subsystem, namespaces, controllers, queues,
// request dispatch and the mapping of backend errors to NVMe status. A
// transport (rdma, or the in-process loop transport used by tests) moves
// capsules and data; everything NVMe happens here.
//
// The life of a command, as the transport drives it:
//
//	st := q.Parse(r)         // validate, bind the handler, size the data
//	if !st.IsSuccess() { q.Fail(r, st) }
//	// the transport maps r.Data (DataLen bytes) and, for DirHostToCtrl, fetches it
//	q.Execute(r)             // runs; completes through Conn.QueueResponse exactly once
package fabric

import (
	"fmt"
	"math/bits"
	"sync/atomic"
	"time"
)

// Transport is one fabric's plug-in point.
type Transport interface {
	// Name is the configuration name ("rdma", "tcp", "loop").
	Name() string
	// Listen starts accepting host queues on p, handing them to t.
	Listen(t *Target, p *Port) (Listener, error)
}

// Limiter is the optional Transport method that states what the transport
// can serve, as nvmet's get_mdts and queue size transport ops do. A
// transport without it gets the Default* limits and no in-capsule data.
type Limiter interface {
	Limits() TransportLimits
}

// TransportLimits are the controller limits of one transport's ports.
// Target.AddPort reads them from the transport into Port.
type TransportLimits struct {
	// MDTS is the largest data transfer in bytes: 4096 * 2^n. 0 means
	// DefaultMDTS.
	MDTS uint32
	// MaxQueueDepth is the most entries of an I/O queue (CAP.MQES+1,
	// MAXCMD). 0 means DefaultMaxQueueDepth.
	MaxQueueDepth uint32
	// MaxIOQueues is the most I/O queues one controller grants, so the
	// highest I/O queue ID. 0 means DefaultMaxIOQueues.
	MaxIOQueues uint16
	// InCapsuleDataSize is the in-capsule data on I/O queues, reported as
	// IOCCSZ; a multiple of 16, 0 for none.
	InCapsuleDataSize uint32
	// DisableSQFlow: the transport serves queues whose host disabled SQ
	// flow control at Connect (CATTR bit 2; TREQ advertises it), as
	// NVMe/TCP needs for a read's data to stand for its response
	// (C2HData's SUCCESS flag, NVMe/TCP 1.0 §3.6.2.8). Queue.SQFlowDisabled
	// reports the host's choice.
	DisableSQFlow bool
	// TransportSGL: data moves with Transport SGL Data Block descriptors
	// (NVMe/TCP), not keyed ones (RDMA): Identify's SGLS leaves out the
	// keyed data block.
	TransportSGL bool
}

// limitsOf returns tr's limits with defaults for what it leaves unset.
func limitsOf(tr Transport) (TransportLimits, error) {
	var l TransportLimits
	if lt, ok := tr.(Limiter); ok {
		l = lt.Limits()
	}
	if l.MDTS == 0 {
		l.MDTS = DefaultMDTS
	}
	if l.MaxQueueDepth == 0 {
		l.MaxQueueDepth = DefaultMaxQueueDepth
	}
	if l.MaxIOQueues == 0 {
		l.MaxIOQueues = DefaultMaxIOQueues
	}
	switch {
	case l.MDTS < 4096 || bits.OnesCount32(l.MDTS) != 1:
		// Identify Controller reports MDTS as a power of two in 4KiB units.
		return l, fmt.Errorf("transport limits: MDTS %d is not 4KiB times a power of two", l.MDTS)
	case l.MaxQueueDepth < 2 || l.MaxQueueDepth > 1<<16:
		// CAP.MQES is a 16-bit 0's based count, and a queue of one entry
		// is always full.
		return l, fmt.Errorf("transport limits: queue depth %d is not in 2..65536", l.MaxQueueDepth)
	case l.InCapsuleDataSize%16 != 0:
		// IOCCSZ is in 16-byte units.
		return l, fmt.Errorf("transport limits: in-capsule data size %d is not a multiple of 16", l.InCapsuleDataSize)
	}
	return l, nil
}

// Listener is a port a transport is accepting on.
type Listener interface {
	// Close stops accepting, disconnects every queue of the port and
	// returns once they are torn down.
	Close() error
}

// PortState says whether a port accepts connections now.
type PortState struct {
	// Down: the port accepts no connection (its RDMA device was removed);
	// the transport keeps trying to listen again.
	Down bool
	// Reason is why the port is down, for the operator.
	Reason string
	// Since is when it went down.
	Since time.Time
}

// StateReporter is the optional Listener method that reports the port's
// state; a listener without it is always up.
type StateReporter interface {
	State() PortState
}

// Conn is the core's view of one transport queue: its ops table.
type Conn interface {
	// QueueResponse sends r.Rsp, preceded by r.Data for DirCtrlToHost.
	// The core calls it exactly once per executed or failed request, from
	// any goroutine. After the queue is destroyed the transport just frees r.
	QueueResponse(r *Request)
	// Disconnect asks the transport to tear the queue down (keep-alive
	// expiry, controller deletion). Asynchronous; any goroutine.
	Disconnect()
}

// Port is one transport address the target listens on. ID is the NVMe port
// ID (PORTID in the discovery log); AddPort gives one to a port without.
type Port struct {
	ID        uint16
	Transport string // "rdma", "tcp", "loop"
	TRType    uint8  // nvme.TRTypeRDMA ...
	AdrFam    uint8  // nvme.AdrFamIPv4 ...
	Address   string // TRADDR
	Service   string // TRSVCID
	TSAS      [256]byte
	// TransportLimits are the transport's, set by Target.AddPort.
	TransportLimits
	// ana is the state of each ANA group through the port (ana.go); nil:
	// every group optimized.
	ana atomic.Pointer[anaTable]
}

// QueueHint carries what the transport learned while connecting the queue.
type QueueHint struct {
	// QID is the queue ID the host announced at transport level, or -1.
	QID int
	// Depth is the number of commands the transport can hold, or 0.
	Depth int
	// Remote names the peer for logs.
	Remote string
	// LocalIP is the local address the host reached, used in the discovery
	// log when the port listens on every address.
	LocalIP string
}

// DataDir is a command's data direction.
type DataDir uint8

// Data directions.
const (
	DirNone       DataDir = iota
	DirHostToCtrl         // host writes: the transport fetches data before Execute
	DirCtrlToHost         // host reads: the transport sends data after completion
)

func (d DataDir) String() string {
	switch d {
	case DirHostToCtrl:
		return "host-to-controller"
	case DirCtrlToHost:
		return "controller-to-host"
	}
	return "none"
}
