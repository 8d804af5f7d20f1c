package fabric

import (
	"errors"
	"fmt"
	"sync"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// LoopTransport is an in-process transport: a host in the same process
// submits commands with data in ordinary buffers. It exercises the whole
// core without hardware, as nvme-loop does for the kernel target.
type LoopTransport struct {
	limits TransportLimits
	mu     sync.Mutex
	ports  map[string]*loopListener
}

// NewLoopTransport creates a loop transport whose ports have the limits l;
// zero fields take fabric's defaults. It carries no in-capsule data, so
// l.InCapsuleDataSize is only what Identify reports.
func NewLoopTransport(l TransportLimits) *LoopTransport {
	return &LoopTransport{limits: l, ports: map[string]*loopListener{}}
}

// Name is "loop".
func (lt *LoopTransport) Name() string { return "loop" }

// Limits implements Limiter.
func (lt *LoopTransport) Limits() TransportLimits { return lt.limits }

type loopListener struct {
	lt     *LoopTransport
	t      *Target
	p      *Port
	mu     sync.Mutex
	queues map[*LoopQueue]struct{}
}

// Listen registers the port under its address.
func (lt *LoopTransport) Listen(t *Target, p *Port) (Listener, error) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if _, ok := lt.ports[p.Address]; ok {
		return nil, fmt.Errorf("loop address %q in use", p.Address)
	}
	p.TRType = nvme.TRTypeLoop
	p.AdrFam = nvme.AdrFamLoop
	l := &loopListener{lt: lt, t: t, p: p, queues: map[*LoopQueue]struct{}{}}
	lt.ports[p.Address] = l
	return l, nil
}

func (l *loopListener) Close() error {
	l.lt.mu.Lock()
	delete(l.lt.ports, l.p.Address)
	l.lt.mu.Unlock()
	l.mu.Lock()
	qs := make([]*LoopQueue, 0, len(l.queues))
	for q := range l.queues {
		qs = append(qs, q)
	}
	l.mu.Unlock()
	for _, q := range qs {
		q.Close()
	}
	return nil
}

// ErrQueueClosed is returned by Submit on a queue the target disconnected.
var ErrQueueClosed = errors.New("fabric: loop queue closed")

// LoopQueue is the host side of one loop queue. Submit may be called from
// up to depth goroutines at once.
type LoopQueue struct {
	l    *loopListener
	q    *Queue
	reqs []loopReq
	free chan int

	mu     sync.Mutex
	closed bool
	// disconnected is closed when the target asks for a disconnect.
	disconnected chan struct{}
	// parsed, set by tests before the first Submit, sees every request
	// Parse accepted, before its data is mapped; executed sees each once
	// Execute returned (the command may still be running elsewhere).
	parsed, executed func(*Request)
}

type loopReq struct {
	r    Request
	cmd  [nvme.CommandSize]byte
	rsp  [nvme.CompletionSize]byte
	segs [1][]byte
	done chan struct{}
}

// Dial opens a queue on the loop port at address; qid is announced as the
// transport-level queue ID (as RDMA private data does), depth is its size.
func (lt *LoopTransport) Dial(address string, qid, depth int) (*LoopQueue, error) {
	return lt.DialFrom(address, "loop", qid, depth)
}

// DialFrom is Dial from the host address remote ("10.0.0.2:41234"), as a
// transport reports its peer.
func (lt *LoopTransport) DialFrom(address, remote string, qid, depth int) (*LoopQueue, error) {
	lt.mu.Lock()
	l := lt.ports[address]
	lt.mu.Unlock()
	if l == nil {
		return nil, fmt.Errorf("loop address %q: no listener", address)
	}
	lq := &LoopQueue{l: l, reqs: make([]loopReq, depth), free: make(chan int, depth), disconnected: make(chan struct{})}
	for i := range lq.reqs {
		lr := &lq.reqs[i]
		lr.r.Cmd = lr.cmd[:]
		lr.r.Rsp = lr.rsp[:]
		lr.r.Tag = uint32(i)
		lr.r.Data = lr.segs[:0]
		lr.done = make(chan struct{}, 1)
		lq.free <- i
	}
	lq.q = l.t.NewQueue(l.p, lq, QueueHint{QID: qid, Depth: depth, Remote: remote})
	l.mu.Lock()
	l.queues[lq] = struct{}{}
	l.mu.Unlock()
	return lq, nil
}

// QueueResponse implements Conn.
func (lq *LoopQueue) QueueResponse(r *Request) {
	lq.reqs[r.Tag].done <- struct{}{}
}

// Disconnect implements Conn.
func (lq *LoopQueue) Disconnect() {
	go lq.Close()
}

// Disconnected is closed once the target has torn the queue down.
func (lq *LoopQueue) Disconnected() <-chan struct{} { return lq.disconnected }

// Close tears the queue down.
func (lq *LoopQueue) Close() {
	lq.mu.Lock()
	if lq.closed {
		lq.mu.Unlock()
		return
	}
	lq.closed = true
	lq.mu.Unlock()
	lq.l.mu.Lock()
	delete(lq.l.queues, lq)
	lq.l.mu.Unlock()
	lq.q.Destroy()
	close(lq.disconnected)
}

// Submit sends one command. data must hold the command's whole transfer,
// in either direction; SGL1's length says how much the host offers, as an
// RDMA keyed SGL would. The completion is copied into rsp.
func (lq *LoopQueue) Submit(cmd nvme.Command, data []byte, rsp nvme.Completion) error {
	_, err := lq.SubmitN(cmd, data, rsp)
	return err
}

// SubmitN is Submit, and reports how many bytes of data the command moved
// (its DataLen once parsed, 0 when it failed before execution).
func (lq *LoopQueue) SubmitN(cmd nvme.Command, data []byte, rsp nvme.Completion) (int, error) {
	lq.mu.Lock()
	closed := lq.closed
	lq.mu.Unlock()
	if closed {
		return 0, ErrQueueClosed
	}
	i := <-lq.free
	defer func() { lq.free <- i }()
	lr := &lq.reqs[i]
	r := &lr.r
	copy(r.Cmd, cmd)
	r.state = reqIdle
	moved := 0
	st := lq.q.Parse(r)
	if st.IsSuccess() && lq.parsed != nil {
		lq.parsed(r)
	}
	if !st.IsSuccess() {
		lq.q.Fail(r, st)
	} else if r.DataLen > 0 && (int(r.Cmd.SGL1().Length()) < int(r.DataLen) || len(data) < int(r.DataLen)) {
		lq.q.Fail(r, nvme.StatusDataSGLLengthInvalid.WithDNR())
	} else {
		if r.DataLen > 0 {
			lr.segs[0] = data[:r.DataLen]
			r.Data = lr.segs[:]
		}
		moved = int(r.DataLen)
		lq.q.Execute(r)
		if lq.executed != nil {
			lq.executed(r)
		}
	}
	select {
	case <-lr.done:
	case <-lq.disconnected:
		return 0, ErrQueueClosed
	}
	copy(rsp, r.Rsp)
	return moved, nil
}
