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

// Transport is one fabric's plug-in point.
type Transport interface {
	// Name is the configuration name ("rdma", "loop").
	Name() string
	// Listen starts accepting host queues on p, handing them to t.
	Listen(t *Target, p *Port) (Listener, error)
}

// Listener is a port a transport is accepting on.
type Listener interface {
	// Close stops accepting, disconnects every queue of the port and
	// returns once they are torn down.
	Close() error
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

// Port is one transport address the target listens on.
type Port struct {
	ID        uint16
	Transport string // "rdma", "loop"
	TRType    uint8  // nvme.TRTypeRDMA ...
	AdrFam    uint8  // nvme.AdrFamIPv4 ...
	Address   string // TRADDR
	Service   string // TRSVCID
	TSAS      [256]byte
	// InCapsuleDataSize is the transport's in-capsule data on I/O queues,
	// reported as IOCCSZ.
	InCapsuleDataSize uint32
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
