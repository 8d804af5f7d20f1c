package fabric

import (
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// reqState is the core's view of a request. The transport keeps its own,
// finer state machine around it (buffers, data transfer, send credits).
type reqState uint8

const (
	// reqIdle: owned by the transport, not yet parsed.
	reqIdle reqState = iota
	// reqParsed: validated and bound to a handler; the transport is
	// mapping or fetching data.
	reqParsed
	// reqExecuting: the handler runs, or backend I/O is in flight, or the
	// command is held (Async Event Request).
	reqExecuting
	// reqCompleted: the response was handed to the transport.
	reqCompleted
)

// statusPending is returned by handlers that complete later. It is not a
// valid 15-bit status field, so it never reaches a host.
const statusPending nvme.Status = 0xffff

type handler func(r *Request) nvme.Status

// Request is one command in flight. The transport owns its memory and reuses
// it; nothing here is allocated per I/O.
type Request struct {
	// Cmd is the 64-byte submission queue entry (set by the transport).
	Cmd nvme.Command
	// Rsp is the 16-byte completion, filled by the core.
	Rsp nvme.Completion
	// Data holds exactly DataLen bytes in one or more segments, mapped by
	// the transport between Parse and Execute.
	Data [][]byte
	// Tag is the transport's own index for the request.
	Tag uint32

	// DataLen and Dir are set by Parse.
	DataLen uint32
	Dir     DataDir

	q      *Queue
	ns     *Namespace
	handle handler
	io     handler // backend work run by a namespace worker
	// I/O queued on the queue's IOContext: the operation, how many parts
	// are still in flight, and the first error.
	ioOp   uint8
	ioLeft int
	ioErr  error
	state  reqState
	// exec, once the command is counted as executing on ns
	// (Namespace.enter), is the queue's count it is in (Queue.execCounter).
	exec *execCount
	// dataWritten: the command wrote every byte of its controller-to-host
	// data (fillData, a read that succeeded). complete zeroes the data of
	// a command that succeeded without, so a host never reads what an
	// earlier command left in a pool buffer.
	dataWritten bool
	errLoc      uint16 // parameter error location for the error log
	errLBA      uint64
	// start is when Parse took an I/O command (nanotime), the origin of the
	// latency histograms. Parse, not Execute, so that the time a command
	// waits for data buffers and, for writes, for the RDMA READ of its data
	// counts: the histogram is the time the target holds the command before
	// its response is queued. A read's RDMA WRITE and the response SEND
	// come after and are not in it.
	start int64
	// qosNext links the request in its host's FIFO on a namespace whose
	// QoS holds it (qos.go), qosHost is that host, qosCost what it takes
	// of the limits and qosSince when it was held (nanotime).
	qosNext  *Request
	qosHost  *qosHost
	qosCost  qosCost
	qosSince int64
	// offOwner: the request runs on a goroutine other than its
	// transport's (QoS let it go from the namespace's timer), so the
	// queue's IOContext, which only its owner may touch, is not used.
	offOwner bool
}

// Queue is the queue the request arrived on.
func (r *Request) Queue() *Queue { return r.q }

// copyFromData gathers the data segments into dst.
func (r *Request) copyFromData(dst []byte) int {
	n := 0
	for _, seg := range r.Data {
		if n >= len(dst) {
			break
		}
		n += copy(dst[n:], seg)
	}
	return n
}

// invalidOpcode is the status of an opcode the controller does not take.
func (r *Request) invalidOpcode() nvme.Status {
	r.errLoc = nvme.ErrLocOpcode
	return nvme.StatusInvalidOpcode.WithDNR()
}

// invalidField records where the bad field is and returns Invalid Field.
func (r *Request) invalidField(byteOffset uint16) nvme.Status {
	r.errLoc = byteOffset
	return nvme.StatusInvalidField.WithDNR()
}
