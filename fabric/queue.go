package fabric

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Queue is one host submission/completion queue pair. It is created by the
// transport when a host connects at transport level, and bound to a
// controller by the Fabrics Connect command.
type Queue struct {
	t    *Target
	port *Port
	conn Conn
	hint QueueHint
	log  *slog.Logger
	// io, when set, runs this queue's file and block I/O (see IOContext).
	io *IOContext

	// connectTimer disconnects the queue if no Connect binds it in time.
	connectTimer *time.Timer
	// connecting is set by the Connect that runs on the queue (and cleared
	// if it fails): a second one is refused.
	connecting atomic.Bool
	// ctrl is nil until Connect; qid is written before ctrl is published.
	ctrl atomic.Pointer[Controller]
	qid  nvme.QID
	// auth is set at Connect when the host must authenticate (auth.go);
	// authDone once it has.
	auth     atomic.Pointer[queueAuth]
	authDone atomic.Bool
	// sqFlowOff: the host disabled SQ flow control at Connect, on a port
	// whose transport allows it (TransportLimits.DisableSQFlow).
	sqFlowOff atomic.Bool

	mu sync.Mutex
	// size is the number of SQ entries (SQSIZE+1) granted at Connect.
	size uint32
	sqhd atomic.Uint32
	gone bool
	// hostClaim is where this queue counts against its host's cap
	// (hostQueues).
	hostClaim hostClaim
	// exec counts the queue's commands executing on each namespace: a
	// Preempt and Abort waits for those of the hosts it preempts on the
	// namespace it names, and no others (waitHosts). Copy-on-write, so
	// that the I/O path reads it with no lock; execMu orders its writers.
	exec   atomic.Pointer[map[*Namespace]*execCount]
	execMu sync.Mutex
	// lastExec is the count execCounter found last: most queues' commands
	// go to one namespace, found so with no hashing.
	lastExec atomic.Pointer[execCount]
	// held counts the queue's commands a namespace's QoS holds (qos.go):
	// Destroy completes them.
	held atomic.Int32
}

// execCount is one queue's count of commands executing on one namespace,
// on a cache line of its own: queues run on different cores.
type execCount struct {
	n  atomic.Int64
	ns *Namespace
	_  [48]byte
}

// execCounter is the queue's count of commands on ns; it is made on the
// queue's first command on ns, so the I/O path allocates nothing after.
func (q *Queue) execCounter(ns *Namespace) *execCount {
	if c := q.lastExec.Load(); c != nil && c.ns == ns {
		return c
	}
	if m := q.exec.Load(); m != nil {
		if c := (*m)[ns]; c != nil {
			q.lastExec.Store(c)
			return c
		}
	}
	q.execMu.Lock()
	defer q.execMu.Unlock()
	old := q.exec.Load()
	if old != nil {
		if c := (*old)[ns]; c != nil {
			return c
		}
	}
	m := make(map[*Namespace]*execCount, 1)
	if old != nil {
		for n, c := range *old {
			// Namespaces removed and drained are forgotten, so that
			// the table stays as small as the namespaces served.
			if !n.removed.Load() || c.n.Load() != 0 {
				m[n] = c
			}
		}
	}
	c := &execCount{ns: ns}
	m[ns] = c
	q.exec.Store(&m)
	q.lastExec.Store(c)
	return c
}

// executing is how many of the queue's commands execute on ns.
func (q *Queue) executing(ns *Namespace) int64 {
	if m := q.exec.Load(); m != nil {
		if c := (*m)[ns]; c != nil {
			return c.n.Load()
		}
	}
	return 0
}

// NewQueue registers a transport queue with the target.
func (t *Target) NewQueue(p *Port, c Conn, hint QueueHint) *Queue {
	q := &Queue{t: t, port: p, conn: c, hint: hint, log: t.log}
	q.t.stats.queues.Add(1)
	q.connectTimer = time.AfterFunc(t.opts.ConnectTimeout, q.connectTimedOut)
	return q
}

// connectTimedOut disconnects a queue that was given no Fabrics Connect in
// time: a peer that opens connections and stays silent would otherwise hold
// their resources (a receive pool each) for ever.
func (q *Queue) connectTimedOut() {
	q.mu.Lock()
	idle := !q.gone && q.ctrl.Load() == nil
	q.mu.Unlock()
	if idle {
		q.t.stats.connectTimeouts.Add(1)
		q.log.Warn("no Fabrics Connect in time: disconnecting", "remote", q.hint.Remote, "timeout", q.t.opts.ConnectTimeout)
		q.conn.Disconnect()
	}
}

// SQFlowDisabled reports whether the host disabled SQ flow control at
// Connect (CATTR bit 2), on a port whose transport allows it: the
// transport may then leave out the response capsule of a command whose
// data stands for it (NVMe/TCP's C2HData SUCCESS flag).
func (q *Queue) SQFlowDisabled() bool { return q.sqFlowOff.Load() }

// QID is the queue ID bound at Connect (0 before).
func (q *Queue) QID() nvme.QID { return q.qid }

// Size is the number of SQ entries (SQSIZE+1) granted at Connect, or 0
// before: the most commands the host may have out on the queue. size is
// written before ctrl is published, and never again.
func (q *Queue) Size() int {
	if q.ctrl.Load() == nil {
		return 0
	}
	return int(q.size)
}

// Controller is the queue's controller, or nil before Connect.
func (q *Queue) Controller() *Controller {
	return q.ctrl.Load()
}

// Parse validates r.Cmd, binds its handler and sets r.DataLen and r.Dir.
// A non-success status must be sent with Fail.
func (q *Queue) Parse(r *Request) nvme.Status {
	r.q = q
	r.ns = nil
	r.handle = nil
	r.errLoc = nvme.ErrLocNone
	r.errLBA = 0
	r.DataLen = 0
	r.Dir = DirNone
	r.Data = r.Data[:0]
	r.dataWritten = false
	r.offOwner = false
	r.Rsp.Reset()
	r.state = reqParsed
	q.advanceSQHD()

	if r.Cmd.FUSE() != 0 {
		return r.invalidField(nvme.ErrLocFlags)
	}
	if r.Cmd.Opcode() == nvme.OpFabrics {
		return q.parseFabrics(r)
	}
	ctrl := q.ctrl.Load()
	if ctrl == nil {
		// Only Connect may come before Connect (NVMe-oF 1.1 §3.3).
		return nvme.StatusCommandSequenceError.WithDNR()
	}
	if !q.authorized() {
		return nvme.StatusAuthRequired.WithDNR()
	}
	// Fabrics transfer data with SGLs only (NVMe-oF 1.1 §2.1).
	if r.Cmd.PSDT() == nvme.PSDTPRP {
		return r.invalidField(nvme.ErrLocFlags)
	}
	if q.qid == 0 {
		return ctrl.parseAdmin(r)
	}
	r.start = nanotime()
	return ctrl.parseIO(r)
}

// advanceSQHD consumes one submission queue entry.
func (q *Queue) advanceSQHD() {
	size := q.size
	if size == 0 {
		size = 1 << 16
	}
	for {
		old := q.sqhd.Load()
		if q.sqhd.CompareAndSwap(old, (old+1)%size) {
			return
		}
	}
}

// Execute runs a parsed request whose data, if any, is in r.Data. It
// completes through Conn.QueueResponse, now or later.
func (q *Queue) Execute(r *Request) {
	if r.state != reqParsed || r.handle == nil {
		q.log.Error("execute of a request that was not parsed", "qid", q.qid, "cid", r.Cmd.CID(), "state", r.state)
		r.complete(nvme.StatusInternalError)
		return
	}
	r.state = reqExecuting
	if r.ns != nil {
		// Held over a QoS limit before it counts as executing: a
		// namespace removed or a Preempt and Abort does not wait for it,
		// and it meets them when it goes (executeHeld).
		if qs := r.ns.qos.Load(); qs != nil {
			if c, ok := costOf(r); ok && !qs.admit(r, q.ctrl.Load().hostNQN, c) {
				return
			}
		}
	}
	q.run(r)
}

// executeHeld runs a request a namespace's QoS held, on the goroutine that
// let it go: not the transport's.
func (q *Queue) executeHeld(r *Request) {
	q.mu.Lock()
	gone := q.gone
	q.mu.Unlock()
	if gone {
		r.complete(nvme.StatusAbortSQDeleted)
		return
	}
	r.offOwner = true
	q.run(r)
}

// run is Execute once the request may go.
func (q *Queue) run(r *Request) {
	if r.ns != nil {
		ec := q.execCounter(r.ns)
		ec.n.Add(1)
		if !r.ns.enter(r) {
			// Removed since Parse: as if it had been gone then.
			ec.n.Add(-1)
			r.complete(nvme.StatusInvalidNamespace.WithDNR())
			return
		}
		r.exec = ec
		// Checked again once counted: a gateway that marks the
		// namespace's shared state unknown then waits for the count to
		// drain, and a command parsed before the mark must not slip past.
		if r.ns.sharedUnknown.Load() {
			r.complete(nvme.StatusANAInaccessible)
			return
		}
		// Checked once counted, at Execute: a Preempt and Abort publishes
		// the new state, then waits for the counts of the hosts it
		// preempted (waitHosts).
		if !r.ns.resvAllows(r) {
			r.complete(nvme.StatusReservationConflict.WithDNR())
			return
		}
	}
	if st := r.handle(r); st != statusPending {
		r.complete(st)
	}
}

// Fail completes r with a status found by the transport or by Parse.
func (q *Queue) Fail(r *Request, st nvme.Status) {
	if r.state == reqIdle {
		r.Rsp.Reset()
	}
	r.q = q
	r.complete(st)
}

// complete is the one place every command ends: fill the completion, count
// errors, hand it to the transport.
func (r *Request) complete(st nvme.Status) {
	q := r.q
	if r.state == reqCompleted {
		q.log.Error("double completion dropped", "qid", q.qid, "cid", r.Cmd.CID())
		return
	}
	if r.ns != nil && r.state == reqExecuting {
		// Only I/O commands that ran: parse failures were never timed
		// against a backend.
		r.ns.stats.observe(r, r.Cmd.Opcode(), nanotime()-r.start)
	}
	r.state = reqCompleted
	if st.IsSuccess() && r.Dir == DirCtrlToHost && !r.dataWritten && len(r.Data) > 0 {
		r.unwrittenData()
	}
	if ec := r.exec; ec != nil {
		r.exec = nil
		r.ns.exit(r)
		ec.n.Add(-1)
	}
	r.Rsp.SetCID(r.Cmd.CID())
	r.Rsp.SetSQID(q.qid)
	r.Rsp.SetSQHD(uint16(q.sqhd.Load()))
	r.Rsp.SetStatus(st)
	if !st.IsSuccess() {
		q.t.stats.errors.Add(1)
		if c := q.ctrl.Load(); c != nil {
			c.recordError(r, st)
		}
	}
	q.conn.QueueResponse(r)
}

// setResult sets completion dword 0 for the handler's reply.
func (r *Request) setResult(dw0 uint32) { r.Rsp.SetDW0(dw0) }

// Destroy tells the core the transport queue is gone. Requests the core
// holds (Async Event Requests, on the admin queue) are completed through QueueResponse so the
// transport can free them; the queue's controller is torn down with its
// admin queue.
func (q *Queue) Destroy() {
	q.mu.Lock()
	if q.gone {
		q.mu.Unlock()
		return
	}
	q.gone = true
	q.connectTimer.Stop()
	if a := q.auth.Load(); a != nil {
		a.stopTimers()
	}
	ctrl := q.ctrl.Load()
	q.mu.Unlock()
	q.t.stats.queues.Add(-1)
	q.releaseHost()
	// The commands QoS holds for it.
	q.dropHeld(ctrl)
	if ctrl != nil && q.qid == 0 {
		// The Asynchronous Event Requests it held.
		for _, r := range ctrl.events.close() {
			r.complete(nvme.StatusAbortSQDeleted)
		}
	}
	if ctrl != nil {
		ctrl.queueGone(q)
	}
}

// unwrittenData zeroes the data of a command that succeeded without writing
// it: whatever an earlier command left in the transport's buffers, possibly
// another host's data, must not reach this host. It is a handler's bug;
// counted, and logged once.
func (r *Request) unwrittenData() {
	for _, seg := range r.Data {
		clear(seg)
	}
	t := r.q.t
	if t.stats.unwrittenData.Add(1) == 1 {
		r.q.log.Error("a command succeeded without writing its data: zeroes sent instead (logged once)",
			"opcode", r.Cmd.Opcode(), "cdw10", r.Cmd.CDW(10))
	}
}
