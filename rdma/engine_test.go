package rdma

import (
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma/internal/verbs"
)

// TestEngineCommand: the work requests each kind of command costs, and the
// request back on the free list at the end with its receive reposted.
func TestEngineCommand(t *testing.T) {
	forModes(t, func(t *testing.T, srq int) {
		tests := []struct {
			name      string
			cmd       nvme.Command
			icd       int
			wantReads int      // RDMA READs before execution
			wantSends []string // the response chain
			wantInv   bool
		}{
			{name: "no data", cmd: cmd(1, nvme.OpFlush, 0, false), wantSends: []string{"SEND"}},
			{name: "in-capsule write", cmd: cmd(2, nvme.OpWrite, 200, true), icd: 200, wantSends: []string{"SEND"}},
			{name: "keyed write", cmd: cmd(3, nvme.OpWrite, 3*testUnit, false), wantReads: 3, wantSends: []string{"SEND"}, wantInv: true},
			{name: "keyed read", cmd: cmd(4, nvme.OpRead, 2*testUnit+1, false), wantSends: []string{"WRITE", "WRITE", "WRITE", "SEND"}, wantInv: true},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				h := newBench(t, benchOpts{srq: srq})
				q, c, core := h.open(benchOpts{})
				h.capsule(q, c, tc.cmd, tc.icd)
				if got := kinds(c.sends); tc.wantReads > 0 {
					if want := slices.Repeat([]string{"READ"}, tc.wantReads); !slices.Equal(got, want) {
						t.Fatalf("posted %v, want %v", got, want)
					}
					for i, w := range c.sends {
						if signaled := w.Flags&verbs.SendSignaled != 0; signaled != (i == len(c.sends)-1) {
							t.Fatalf("READ %d signaled %v: only the last must be", i, signaled)
						}
					}
					if len(core.executed) != 0 {
						t.Fatal("executed before its data arrived")
					}
					h.finish(q, c, kindRead, verbs.WCSuccess)
				}
				if !slices.Equal(core.executed, []uint16{tc.cmd.CID()}) {
					t.Fatalf("executed %v, want [%d]", core.executed, tc.cmd.CID())
				}
				if got := kinds(c.sends); !slices.Equal(got, tc.wantSends) {
					t.Fatalf("response chain %v, want %v", got, tc.wantSends)
				}
				last := c.sends[len(c.sends)-1]
				if inv := last.Opcode == verbs.WRSendWithInv; inv != tc.wantInv {
					t.Fatalf("SEND with invalidate %v, want %v", inv, tc.wantInv)
				}
				if got, want := h.posted(c), h.restPosted(q.depth); got != want {
					t.Fatalf("receives posted %d, want %d: the capsule's goes back with the response", got, want)
				}
				h.finish(q, c, kindSend, verbs.WCSuccess)
				if len(q.free) != len(q.reqs) || q.sqCredits != q.depth*5 || q.readsOut != 0 {
					t.Fatalf("after the SEND: %d of %d requests free, %d send credits, %d reads out",
						len(q.free), len(q.reqs), q.sqCredits, q.readsOut)
				}
				h.check(q)
			})
		}
	})
}

// TestEnginePostFailure: a post that takes only part of a queue's work.
// The queue is torn down; a request whose READs or SEND did not all go in
// is let go once, and its buffers wait for the QP to be destroyed, since
// the part that went in may still move data through them.
func TestEnginePostFailure(t *testing.T) {
	forModes(t, func(t *testing.T, srq int) {
		tests := []struct {
			name    string
			cmd     nvme.Command
			reads   bool // fail the READ chain, else the response
			postOK  int  // sends the failed post takes
			held    int  // buffers that must wait for the QP
			recvBad bool // fail the receives instead: the SEND went in, and flushes
		}{
			{name: "READ chain half-way", cmd: cmd(1, nvme.OpWrite, 4*testUnit, false), reads: true, postOK: 2, held: 4},
			{name: "READ chain at its first", cmd: cmd(1, nvme.OpWrite, 4*testUnit, false), reads: true, postOK: 0, held: 4},
			{name: "WRITE+SEND chain half-way", cmd: cmd(2, nvme.OpRead, 4*testUnit, false), postOK: 2, held: 4},
			{name: "WRITE+SEND chain at the SEND", cmd: cmd(2, nvme.OpRead, 4*testUnit, false), postOK: 4, held: 4},
			{name: "SEND alone", cmd: cmd(3, nvme.OpFlush, 0, false), postOK: 0},
			{name: "receives", cmd: cmd(3, nvme.OpFlush, 0, false), recvBad: true},
		}
		for _, tc := range tests {
			if tc.recvBad && srq > 0 {
				continue // the queue posts no receives: TestEngineSRQPostFailure
			}
			t.Run(tc.name, func(t *testing.T) {
				h := newBench(t, benchOpts{srq: srq})
				q, c, core := h.open(benchOpts{})
				switch {
				case tc.recvBad:
					h.b.failRecvs[c] = true
				case tc.reads:
					h.b.failSends[c] = tc.postOK
				default:
					core.hold = true
				}
				h.capsule(q, c, tc.cmd, 0)
				if !tc.reads && !tc.recvBad {
					h.b.failSends[c] = tc.postOK
					h.respond(core)
				}
				if q.live() || c.setErrors != 1 || c.disconnects != 1 || core.destroyed != 1 {
					t.Fatalf("queue %s, SetError %d, Disconnect %d, core destroyed %d: want a teardown",
						q.state, c.setErrors, c.disconnects, core.destroyed)
				}
				if out := len(q.reqs) - len(q.free); out != b2i(tc.recvBad) {
					t.Fatalf("%d requests out: the one whose work did not go in must be let go", out)
				}
				// The queue waits, holding the buffers: for its receives to
				// flush, or with an SRQ for its QP's last WQE (srq.go).
				if q.state != qsDraining || c.destroys != 0 || len(q.held) != tc.held {
					t.Fatalf("queue %s, destroyed %d times, %d buffers held for the QP; want draining, 0, %d", q.state, c.destroys, len(q.held), tc.held)
				}
				if tc.reads && len(core.executed) != 0 {
					t.Fatal("a write whose data never came was executed")
				}
				h.check(q)
				// The posted part flushes; the queue goes, and the held buffers
				// return only now.
				h.flushAll(c)
				h.gone(q, c)
			})
		}
	})
}

// TestEngineWaitLines: requests that wait for data buffers, RDMA READ
// credits or send credits go in arrival order: in each case the third
// request would fit where the second does not, and must not pass it.
func TestEngineWaitLines(t *testing.T) {
	forModes(t, func(t *testing.T, srq int) {
		tests := []struct {
			name  string
			bench benchOpts
			queue benchOpts
			first nvme.Command // takes the resource
			then  []nvme.Command
			// release gives the resource back: the completion kind of first.
			release int
			// waits is the metric that must count the waiting requests.
			waits func(*Stats) uint64
		}{
			{
				// One queue holds at most its share (here 4 of 6): the line
				// is the queue's own. The poller's line is in
				// TestEngineTeardownDropsWaiters and TestEngineBufferShare.
				name: "data buffers", bench: benchOpts{chunks: 6},
				first:   cmd(1, nvme.OpRead, 4*testUnit, false),
				then:    []nvme.Command{cmd(2, nvme.OpRead, 4*testUnit, false), cmd(3, nvme.OpRead, testUnit, false)},
				release: kindSend, waits: func(s *Stats) uint64 { return s.ShareWaits.Load() },
			},
			{
				name: "RDMA READ credits", queue: benchOpts{readDepth: 3},
				first:   cmd(1, nvme.OpWrite, 2*testUnit, false),
				then:    []nvme.Command{cmd(2, nvme.OpWrite, 2*testUnit, false), cmd(3, nvme.OpWrite, testUnit, false)},
				release: kindRead, waits: func(s *Stats) uint64 { return s.ReadWaits.Load() },
			},
			{
				name: "send credits", queue: benchOpts{sqSize: 6},
				first:   cmd(1, nvme.OpRead, 4*testUnit, false),
				then:    []nvme.Command{cmd(2, nvme.OpRead, 2*testUnit, false), cmd(3, nvme.OpFlush, 0, false)},
				release: kindSend, waits: func(s *Stats) uint64 { return s.SendWaits.Load() },
			},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				h := newBench(t, withSRQ(tc.bench, srq))
				q, c, core := h.open(tc.queue)
				h.capsule(q, c, tc.first, 0)
				for _, cm := range tc.then {
					h.capsule(q, c, cm, 0)
				}
				if n := tc.waits(&h.stats); n != uint64(len(tc.then)) {
					t.Fatalf("%d requests counted as waiting, want %d", n, len(tc.then))
				}
				h.check(q)
				// Give back the first's resource, then serve each in turn: the
				// order of service must be the order of arrival.
				var order []uint16
				for len(c.sends) > 0 {
					k := tc.release
					if _, ok := firstSignaled(c, k); !ok {
						k = kindSend
						if _, ok := firstSignaled(c, k); !ok {
							k = kindRead
						}
					}
					cid := h.finish(q, c, k, verbs.WCSuccess)
					if k == tc.release && (len(order) == 0 || order[len(order)-1] != cid) {
						order = append(order, cid)
					}
					h.check(q)
				}
				if want := []uint16{1, 2, 3}; !slices.Equal(order, want) {
					t.Fatalf("served %v, want %v", order, want)
				}
				if !slices.Equal(core.executed, []uint16{1, 2, 3}) {
					t.Fatalf("executed %v, want [1 2 3]", core.executed)
				}
				if len(q.free) != len(q.reqs) || len(h.e.pool.free) != h.total {
					t.Fatalf("not all back: %d of %d requests, %d of %d buffers", len(q.free), len(q.reqs), len(h.e.pool.free), h.total)
				}
			})
		}
	})
}

func firstSignaled(c *fakeConn, kind int) (int, bool) {
	for i, w := range c.sends {
		if k, _, _, _ := splitWRID(w.WRID); k == kind && w.Flags&verbs.SendSignaled != 0 {
			return i, true
		}
	}
	return 0, false
}

// TestEngineCompletionAfterTeardown: work that completes once the queue is
// being torn down. A request whose data arrives then must not execute: a
// Connect run on a queue the core already let go of creates a controller
// nothing removes. Completions in error are counted, never fatal, and the
// queue still drains once.
func TestEngineCompletionAfterTeardown(t *testing.T) {
	forModes(t, func(t *testing.T, srq int) {
		tests := []struct {
			name       string
			cmd        nvme.Command
			hold       bool   // the core holds it (backend I/O in flight)
			kind       int    // the completion that comes after the teardown
			status     uint32 // its status
			wantErrors uint64 // completion errors counted
		}{
			{name: "READ succeeds", cmd: cmd(1, nvme.OpWrite, 2*testUnit, false), kind: kindRead, status: verbs.WCSuccess},
			{name: "READ flushed", cmd: cmd(1, nvme.OpWrite, 2*testUnit, false), kind: kindRead, status: verbs.WCFlushErr},
			{name: "READ in error", cmd: cmd(1, nvme.OpWrite, testUnit, false), kind: kindRead, status: 12, wantErrors: 1},
			{name: "SEND succeeds", cmd: cmd(2, nvme.OpRead, testUnit, false), kind: kindSend, status: verbs.WCSuccess},
			{name: "SEND flushed", cmd: cmd(2, nvme.OpRead, testUnit, false), kind: kindSend, status: verbs.WCFlushErr},
			{name: "SEND in error", cmd: cmd(2, nvme.OpFlush, 0, false), kind: kindSend, status: 12, wantErrors: 1},
			{name: "core responds late", cmd: cmd(3, nvme.OpRead, testUnit, false), hold: true},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				h := newBench(t, benchOpts{srq: srq})
				q, c, core := h.open(benchOpts{})
				core.hold = tc.hold
				h.capsule(q, c, tc.cmd, 0)
				executed := len(core.executed)
				q.teardown("host disconnected")
				h.e.flush()
				if tc.hold {
					h.respond(core)
				} else {
					h.finish(q, c, tc.kind, tc.status)
				}
				if len(core.executed) != executed {
					t.Fatalf("executed %v after the teardown", core.executed[executed:])
				}
				if n := h.stats.CompletionErrors.Load(); n != tc.wantErrors {
					t.Fatalf("%d completion errors counted, want %d", n, tc.wantErrors)
				}
				if core.destroyed != 1 || c.setErrors != 1 {
					t.Fatalf("core destroyed %d, SetError %d: want once each", core.destroyed, c.setErrors)
				}
				h.check(q)
				h.flushAll(c)
				h.gone(q, c)
			})
		}
	})
}

// TestEngineReceivesRunDry: every request is out (waiting for its SEND to
// complete, or for send credits) while the host goes on sending. Capsules
// that find no free request wait, in order, and none is lost; a queue torn
// down with capsules waiting still drains.
func TestEngineReceivesRunDry(t *testing.T) {
	forModes(t, func(t *testing.T, srq int) {
		const depth = 2 // four requests
		tests := []struct {
			name     string
			queue    benchOpts
			teardown bool
		}{
			{name: "SENDs outstanding", queue: benchOpts{depth: depth}},
			{name: "SENDs outstanding, then torn down", queue: benchOpts{depth: depth}, teardown: true},
			// One credit: one response at a time; the others hold their receive.
			{name: "waiting for send credits", queue: benchOpts{depth: depth, sqSize: 1}},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				h := newBench(t, benchOpts{srq: srq})
				q, c, core := h.open(tc.queue)
				cid := uint16(0)
				// Fill every request: each response SEND stays outstanding.
				// The host sends on into whatever receives are posted: its
				// own, or with an SRQ, as many as its queue holds (it has
				// the responses, whose SENDs the target has not reaped).
				more := func() bool {
					if srq > 0 {
						return len(q.free) > 0 || q.parked.len() < depth
					}
					return len(c.recvs) > 0
				}
				for more() {
					cid++
					h.capsule(q, c, cmd(cid, nvme.OpFlush, 0, false), 0)
				}
				if (tc.queue.sqSize == 0 || srq > 0) && (len(q.free) != 0 || q.parked.len() != depth) {
					t.Fatalf("%d requests free, %d capsules parked; want 0 and %d", len(q.free), q.parked.len(), depth)
				}
				if srq == 0 && len(c.recvs) != 0 {
					t.Fatalf("%d receives posted, want the queue dry", len(c.recvs))
				}
				h.check(q)
				if tc.teardown {
					q.teardown("host disconnected")
					h.flushAll(c)
					if len(core.executed) != 2*depth {
						t.Fatalf("executed %v: parked capsules must not run on a dead queue", core.executed)
					}
					h.gone(q, c)
					return
				}
				for len(c.sends) > 0 {
					h.finish(q, c, kindSend, verbs.WCSuccess)
					h.check(q)
				}
				want := make([]uint16, cid)
				for i := range want {
					want[i] = uint16(i + 1)
				}
				if !slices.Equal(core.executed, want) {
					t.Fatalf("executed %v, want %v", core.executed, want)
				}
				if h.posted(c) != h.restPosted(depth) || len(q.free) != len(q.reqs) || q.parked.len() != 0 {
					t.Fatalf("%d receives posted, %d of %d free, %d parked: want all back", h.posted(c), len(q.free), len(q.reqs), q.parked.len())
				}
			})
		}
	})
}

// TestEngineReleasedOnce: duplicate and late events never release a
// request twice (which would put it twice on the free list, and let a
// queue be destroyed under a request in use) nor free its buffers twice.
func TestEngineReleasedOnce(t *testing.T) {
	forModes(t, func(t *testing.T, srq int) {
		tests := []struct {
			name string
			run  func(h *bench, q *queue, c *fakeConn, core *fakeCore)
		}{
			{"SEND completion twice", func(h *bench, q *queue, c *fakeConn, core *fakeCore) {
				h.capsule(q, c, cmd(1, nvme.OpRead, 2*testUnit, false), 0)
				w := c.sends[len(c.sends)-1]
				h.finish(q, c, kindSend, verbs.WCSuccess)
				h.e.complete(&verbs.WC{WRID: w.WRID, Status: verbs.WCSuccess})
			}},
			{"READ completion twice", func(h *bench, q *queue, c *fakeConn, core *fakeCore) {
				core.hold = true
				h.capsule(q, c, cmd(1, nvme.OpWrite, 2*testUnit, false), 0)
				w := c.sends[len(c.sends)-1]
				h.finish(q, c, kindRead, verbs.WCSuccess)
				h.e.complete(&verbs.WC{WRID: w.WRID, Status: verbs.WCSuccess})
				if len(core.executed) != 1 {
					t.Fatalf("executed %v, want once", core.executed)
				}
				h.respond(core)
				h.finish(q, c, kindSend, verbs.WCSuccess)
			}},
			{"core responds twice", func(h *bench, q *queue, c *fakeConn, core *fakeCore) {
				core.hold = true
				h.capsule(q, c, cmd(1, nvme.OpRead, testUnit, false), 0)
				r := core.held[0]
				h.respond(core)
				h.loop.handOver(&q.reqs[r.Tag])
				h.runLoop()
				if n := len(kinds(c.sends)); n != 2 {
					t.Fatalf("posted %v: one response, once", kinds(c.sends))
				}
				h.finish(q, c, kindSend, verbs.WCSuccess)
			}},
			{"flushed READ of an abandoned request", func(h *bench, q *queue, c *fakeConn, core *fakeCore) {
				h.b.failSends[c] = 1
				h.capsule(q, c, cmd(1, nvme.OpWrite, 3*testUnit, false), 0)
				h.flushAll(c) // the READ that went in flushes after the request was let go
			}},
			{"SEND flushed after the teardown", func(h *bench, q *queue, c *fakeConn, core *fakeCore) {
				h.capsule(q, c, cmd(1, nvme.OpRead, testUnit, false), 0)
				q.teardown("host disconnected")
				h.flushAll(c)
			}},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				h := newBench(t, benchOpts{srq: srq})
				q, c, core := h.open(benchOpts{})
				tc.run(h, q, c, core)
				h.check(q)
				if len(q.free) != len(q.reqs) {
					t.Fatalf("%d of %d requests free", len(q.free), len(q.reqs))
				}
				if q.live() {
					q.teardown("end of test")
					h.flushAll(c)
				}
				h.gone(q, c)
			})
		}
	})
}

// TestEngineLateCompletion: a completion of a queue already gone, or of a
// slot a new queue took since, reaches nothing.
func TestEngineLateCompletion(t *testing.T) {
	h := newBench(t, benchOpts{})
	q, c, _ := h.open(benchOpts{})
	stale := c.recvs[0].WRID
	q.teardown("host disconnected")
	h.flushAll(c)
	h.gone(q, c)
	q2, c2, core2 := h.open(benchOpts{})
	if q2.slot != q.slot || q2.gen == q.gen {
		t.Fatalf("slot %d gen %d after slot %d gen %d: want the slot reused with a new generation", q2.slot, q2.gen, q.slot, q.gen)
	}
	h.e.complete(&verbs.WC{WRID: stale, Status: verbs.WCSuccess, ByteLen: nvme.CommandSize})
	h.e.complete(&verbs.WC{WRID: wrID(kindSend, 3, 9, 0), Status: verbs.WCSuccess})  // a slot never used
	h.e.complete(&verbs.WC{WRID: wrID(kindSend, 99, 1, 0), Status: verbs.WCSuccess}) // past the table
	if len(core2.executed) != 0 || len(c2.recvs) != q2.depth || !q2.live() {
		t.Fatalf("a stale completion reached the new queue: executed %v, %d receives, %s", core2.executed, len(c2.recvs), q2.state)
	}
	h.check(q2)
}

// TestEngineBadCapsule: a short capsule tears the queue down, and a command
// the core refuses is failed, not executed, and answered.
func TestEngineBadCapsule(t *testing.T) {
	forModes(t, func(t *testing.T, srq int) {
		t.Run("short", func(t *testing.T) {
			h := newBench(t, benchOpts{srq: srq})
			q, c, _ := h.open(benchOpts{})
			w, _ := h.take(c)
			h.e.complete(&verbs.WC{WRID: w.WRID, Status: verbs.WCSuccess, ByteLen: 10, QPNum: c.qpn})
			if q.live() {
				t.Fatal("queue still live after a short capsule")
			}
			h.flushAll(c)
			h.gone(q, c)
		})
		for _, tc := range []struct {
			name  string
			cmd   nvme.Command
			parse nvme.Status
			want  nvme.Status
		}{
			{"parse fails", cmd(1, nvme.OpFlush, 0, false), nvme.StatusInvalidOpcode, nvme.StatusInvalidOpcode},
			{"in-capsule data for a read", cmd(2, nvme.OpRead, 64, true), nvme.StatusSuccess, nvme.StatusInvalidField.WithDNR()},
			{"in-capsule data that did not arrive", cmd(3, nvme.OpWrite, 200, true), nvme.StatusSuccess, nvme.StatusDataSGLLengthInvalid.WithDNR()},
		} {
			t.Run(tc.name, func(t *testing.T) {
				h := newBench(t, benchOpts{srq: srq})
				q, c, core := h.open(benchOpts{})
				core.parseStatus = tc.parse
				h.capsule(q, c, tc.cmd, 0)
				if len(core.executed) != 0 || core.failed != 1 {
					t.Fatalf("executed %v, failed %d: want failed once", core.executed, core.failed)
				}
				if got := kinds(c.sends); !slices.Equal(got, []string{"SEND"}) {
					t.Fatalf("posted %v, want a response alone", got)
				}
				_, _, _, idx := splitWRID(c.sends[0].WRID)
				if st := q.reqs[idx].fr.Rsp.Status(); st != tc.want {
					t.Fatalf("status %v, want %v", st, tc.want)
				}
				h.finish(q, c, kindSend, verbs.WCSuccess)
				h.check(q)
			})
		}
	})
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestEngineTeardownDropsWaiters: a queue torn down while its requests wait
// in every line lets them all go, unexecuted, and leaves another queue's
// waiter in the poller's buffer line alone.
func TestEngineTeardownDropsWaiters(t *testing.T) {
	forModes(t, func(t *testing.T, srq int) {
		h := newBench(t, benchOpts{srq: srq, chunks: 12}) // a queue's share: 6
		q, c, core := h.open(benchOpts{depth: 8, readDepth: 1, sqSize: 6})
		other, oc, ocore := h.open(benchOpts{})
		third, tc, tcore := h.open(benchOpts{})
		h.capsule(q, c, cmd(1, nvme.OpWrite, testUnit, false), 0)       // READ out: takes the one READ credit
		h.capsule(q, c, cmd(2, nvme.OpWrite, testUnit, false), 0)       // waits for READ credits
		h.capsule(q, c, cmd(3, nvme.OpRead, 4*testUnit, false), 0)      // takes 4 buffers (6 left; the whole share), sends 5: 0 credits left
		h.capsule(q, c, cmd(4, nvme.OpFlush, 0, false), 0)              // waits for send credits
		h.capsule(q, c, cmd(5, nvme.OpRead, 4*testUnit, false), 0)      // waits for its queue's share
		h.capsule(other, oc, cmd(8, nvme.OpRead, 4*testUnit, false), 0) // takes 4 buffers (2 left)
		h.capsule(q, c, cmd(6, nvme.OpRead, testUnit, false), 0)        // waits behind 5 for the share
		h.capsule(third, tc, cmd(9, nvme.OpRead, 4*testUnit, false), 0) // waits for buffers
		if q.readWait.line.len() != 1 || q.sendWait.line.len() != 1 || q.bufWait.line.len() != 2 || h.e.pool.wait.line.len() != 1 {
			t.Fatalf("lines: read %d, send %d, share %d, buffers %d; want 1, 1, 2, 1",
				q.readWait.line.len(), q.sendWait.line.len(), q.bufWait.line.len(), h.e.pool.wait.line.len())
		}
		h.check(q, other, third)
		if !slices.Equal(core.executed, []uint16{3, 4}) {
			t.Fatalf("executed %v, want [3 4]", core.executed)
		}
		// The capsule buffers are reused by later commands: find the waiters
		// by their state, not their CID.
		var waiters []int
		for i := range q.reqs {
			if st := q.reqs[i].state; st == rsNeedBuffer || st == rsNeedRead || st == rsNeedSend {
				waiters = append(waiters, i)
			}
		}
		if len(waiters) != 4 {
			t.Fatalf("%d requests waiting, want 4", len(waiters))
		}
		q.Disconnect() // the core asks, from another goroutine
		h.runLoop()
		if h.e.pool.wait.line.len() != 1 || h.e.pool.wait.line.buf[h.e.pool.wait.line.head].q != third {
			t.Fatalf("buffer line holds %d, want the third queue's request alone", h.e.pool.wait.line.len())
		}
		// The torn-down queue's waiters are out of every line and free at
		// once; only the requests with work on the QP are still out.
		if q.readWait.line.len() != 0 || q.sendWait.line.len() != 0 || q.bufWait.line.len() != 0 || q.bufClaimed != 5 {
			t.Fatalf("credit lines hold %d and %d, the share line %d (%d claimed) after the teardown",
				q.readWait.line.len(), q.sendWait.line.len(), q.bufWait.line.len(), q.bufClaimed)
		}
		for _, i := range waiters {
			if st := q.reqs[i].state; st != rsFree {
				t.Fatalf("waiter %d is %s after the teardown, want free", i, st)
			}
		}
		h.finish(q, c, kindRead, verbs.WCSuccess) // the READ out completes after all
		if !slices.Equal(core.executed, []uint16{3, 4}) {
			t.Fatalf("executed %v, want [3 4]: waiters must not run on a queue torn down", core.executed)
		}
		h.flushAll(c)
		h.gone(q, c)
		// Its buffers came back: the third queue's request goes on.
		if !slices.Equal(ocore.executed, []uint16{8}) || !slices.Equal(tcore.executed, []uint16{9}) {
			t.Fatalf("other queues executed %v and %v, want [8] and [9]", ocore.executed, tcore.executed)
		}
		h.finish(other, oc, kindSend, verbs.WCSuccess)
		h.finish(third, tc, kindSend, verbs.WCSuccess)
		h.check(other, third)
	})
}

// TestEngineBatchFull: a round that stages more than the batch holds posts
// in several calls, in order. When such a post fails for the queue of the
// request making room, both requests are let go: the one posted in part
// keeps its buffers until the QP is gone, the other, of which nothing went
// in, gives them back at once.
func TestEngineBatchFull(t *testing.T) {
	forModes(t, func(t *testing.T, srq int) {
		for _, fail := range []bool{false, true} {
			t.Run(map[bool]string{false: "posted in two calls", true: "the first call fails"}[fail], func(t *testing.T) {
				h := newBench(t, benchOpts{srq: srq, batchSends: 5})
				q, c, core := h.open(benchOpts{})
				core.hold = true
				h.capsule(q, c, cmd(1, nvme.OpRead, 4*testUnit, false), 0)
				h.capsule(q, c, cmd(2, nvme.OpRead, 4*testUnit, false), 0)
				if fail {
					h.b.failSends[c] = 2
				}
				posts := h.b.posts
				h.respond(core) // two chains of five in one round
				if !fail {
					if got := h.b.posts - posts; got != 2 {
						t.Fatalf("%d posts for two full chains, want 2", got)
					}
					h.finish(q, c, kindSend, verbs.WCSuccess)
					h.finish(q, c, kindSend, verbs.WCSuccess)
					h.check(q)
					if len(q.free) != len(q.reqs) {
						t.Fatalf("%d of %d requests free", len(q.free), len(q.reqs))
					}
					return
				}
				if q.live() || len(q.free) != len(q.reqs) {
					t.Fatalf("queue %s with %d of %d requests free; want torn down, all free", q.state, len(q.free), len(q.reqs))
				}
				// The buffers the device might still use stay held until
				// the QP goes: with an SRQ too, after its last WQE.
				held := 4
				if len(q.held) != held || len(h.e.pool.free) != h.total-held {
					t.Fatalf("%d buffers held, %d in the pool; want %d and %d", len(q.held), len(h.e.pool.free), held, h.total-held)
				}
				h.check(q)
				h.flushAll(c)
				h.gone(q, c)
			})
		}
	})
}

// TestEngineStuckQueue: a queue that does not drain is reported once, with
// what its requests wait for.
func TestEngineStuckQueue(t *testing.T) {
	forModes(t, func(t *testing.T, srq int) {
		var log strings.Builder
		h := newBench(t, benchOpts{srq: srq})
		h.e.log = slog.New(slog.NewTextHandler(&log, nil))
		q, c, core := h.open(benchOpts{})
		q.log = h.e.log
		core.hold = true
		h.capsule(q, c, cmd(1, nvme.OpRead, testUnit, false), 0)
		q.teardown("host disconnected")
		h.e.checkStuck()
		if strings.Contains(log.String(), "queue not drained") {
			t.Fatal("reported before drainWarnAfter")
		}
		q.drainSince = time.Now().Add(-2 * drainWarnAfter)
		h.e.checkStuck()
		h.e.checkStuck()
		if n := strings.Count(log.String(), "queue not drained"); n != 1 {
			t.Fatalf("reported %d times, want once:\n%s", n, log.String())
		}
		if !strings.Contains(log.String(), `by_state="executing=1"`) || !strings.Contains(log.String(), "reason=\"host disconnected\"") {
			t.Fatalf("report does not say what the queue waits for:\n%s", log.String())
		}
		h.respond(core)
		h.flushAll(c)
		h.gone(q, c)
	})
}

// TestFIFO: the line on its own: order, a full line, removal.
func TestFIFO(t *testing.T) {
	var waits atomic.Uint64
	reqs := make([]request, 3)
	f := newFIFO(2, &waits)
	if got := f.admit(&reqs[0], true); got != admitted {
		t.Fatalf("admit with nothing waiting and the resource there: %v", got)
	}
	first, again := f.admit(&reqs[0], false), f.admit(&reqs[0], false)
	if first != waiting || again != waiting || waits.Load() != 1 {
		t.Fatalf("a request waiting twice is counted once: %d", waits.Load())
	}
	if f.admit(&reqs[1], true) != waiting {
		t.Fatal("a request passed the head")
	}
	if got := f.admit(&reqs[2], false); got != overflow || reqs[2].waitingIn != nil {
		t.Fatalf("full line: %v, waiting in %p", got, reqs[2].waitingIn)
	}
	f.remove(&reqs[0])
	f.remove(&reqs[2]) // not in the line: nothing happens
	if h, _ := f.line.peek(); h != &reqs[1] || reqs[0].waitingIn != nil {
		t.Fatal("remove did not take the head out")
	}
	var tried []*request
	f.retry(func(r *request) { tried = append(tried, r); f.admit(r, true) })
	if len(tried) != 1 || f.line.len() != 0 || reqs[1].waitingIn != nil {
		t.Fatalf("retry tried %d, line holds %d", len(tried), f.line.len())
	}
	// A head that stopped waiting without leaving the line is dropped, not
	// retried forever.
	f.admit(&reqs[0], false)
	reqs[0].waitingIn = nil
	f.retry(func(*request) {})
	if f.line.len() != 0 {
		t.Fatal("a stale head blocks the line")
	}
}

// TestEngineReadChainFlushedInPart: when a QP in error flushes the first,
// unsignaled READs of a chain, the request keeps its buffers until the last
// READ, behind them, has come back too: until then the device may still
// have the others.
func TestEngineReadChainFlushedInPart(t *testing.T) {
	forModes(t, func(t *testing.T, srq int) {
		h := newBench(t, benchOpts{srq: srq})
		q, c, _ := h.open(benchOpts{})
		h.capsule(q, c, cmd(1, nvme.OpWrite, 4*testUnit, false), 0)
		q.teardown("host disconnected")
		h.e.flush()
		first := c.sends[0]
		c.sends = c.sends[1:]
		h.e.complete(&verbs.WC{WRID: first.WRID, Status: verbs.WCFlushErr})
		_, _, _, idx := splitWRID(first.WRID)
		if r := &q.reqs[idx]; r.state != rsReading || len(r.chunks) != 4 {
			t.Fatalf("after a flushed first READ the request is %s with %d buffers; want reading, holding 4", r.state, len(r.chunks))
		}
		h.check(q)
		h.flushAll(c)
		h.gone(q, c)
	})
}

// TestEngineErrorOnLiveQueue: a READ, WRITE or SEND that fails on a live
// queue tears it down, and the queue drains.
func TestEngineErrorOnLiveQueue(t *testing.T) {
	forModes(t, func(t *testing.T, srq int) {
		for _, tc := range []struct {
			name string
			cmd  nvme.Command
			hold bool
			pick func(c *fakeConn) int // index of the send that fails
		}{
			{"last READ", cmd(1, nvme.OpWrite, 2*testUnit, false), false, func(c *fakeConn) int { return len(c.sends) - 1 }},
			{"first READ", cmd(1, nvme.OpWrite, 2*testUnit, false), false, func(*fakeConn) int { return 0 }},
			{"WRITE", cmd(2, nvme.OpRead, 2*testUnit, false), false, func(*fakeConn) int { return 0 }},
			{"SEND", cmd(3, nvme.OpFlush, 0, false), false, func(c *fakeConn) int { return len(c.sends) - 1 }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				h := newBench(t, benchOpts{srq: srq})
				q, c, _ := h.open(benchOpts{})
				h.capsule(q, c, tc.cmd, 0)
				i := tc.pick(c)
				w := c.sends[i]
				c.sends = append(c.sends[:i:i], c.sends[i+1:]...)
				h.e.complete(&verbs.WC{WRID: w.WRID, Status: 4}) // local protection error
				h.e.flush()
				if q.live() || c.setErrors != 1 {
					t.Fatalf("queue %s, SetError %d after a failed %s: want a teardown", q.state, c.setErrors, tc.name)
				}
				if n := h.stats.CompletionErrors.Load(); n != 1 {
					t.Fatalf("%d completion errors counted, want 1", n)
				}
				h.check(q)
				h.flushAll(c)
				h.gone(q, c)
			})
		}
	})
}

// TestEngineResponsesNotDelivered: a host that stops posting receives
// leaves its responses' SENDs retrying on RNR NAKs. Its connection request
// sets how often (the IB CM gives the passive side's QP the REQ's RNR retry
// count), and Linux asks for 7, for ever: found by tests/e2e TestHostile
// (no-receives), where such a queue held its requests and data buffers
// until the host left. The queue must be torn down once its SENDs have made
// no progress for responseTimeout, and give everything back; a queue with
// none out, or whose SENDs complete, stays.
func TestEngineResponsesNotDelivered(t *testing.T) {
	forModes(t, func(t *testing.T, srq int) {
		h := newBench(t, benchOpts{srq: srq})
		now := time.Unix(1000, 0)
		h.e.now = func() time.Time { return now }
		stuck, sc, _ := h.open(benchOpts{})
		idle, _, _ := h.open(benchOpts{})
		busy, bc, _ := h.open(benchOpts{})
		// waiting has a command the core holds for ever (an AER, a long
		// flush): no response is due, so nothing is stalled.
		waiting, wc, wcore := h.open(benchOpts{})
		wcore.hold = true
		h.capsule(waiting, wc, cmd(3, nvme.OpRead, testUnit, false), 0)
		h.capsule(stuck, sc, cmd(1, nvme.OpRead, 2*testUnit, false), 0)
		h.capsule(busy, bc, cmd(2, nvme.OpRead, testUnit, false), 0)
		if got := kinds(sc.sends); !slices.Equal(got, []string{"WRITE", "WRITE", "SEND"}) {
			t.Fatalf("posted %v, want the read's WRITE+SEND chain", got)
		}
		step := drainWarnAfter / 2 // the listener's check period
		for elapsed := time.Duration(0); elapsed <= 3*responseTimeout; elapsed += step {
			h.e.checkStuck()
			h.runLoop()
			if !idle.live() {
				t.Fatal("a queue with nothing outstanding was torn down")
			}
			if !waiting.live() {
				t.Fatalf("a queue whose command the core holds was torn down after %v", elapsed)
			}
			if !busy.live() {
				t.Fatalf("a queue whose responses complete was torn down after %v", elapsed)
			}
			// busy's SEND completes, and it gets the next command.
			h.finish(busy, bc, kindSend, verbs.WCSuccess)
			h.capsule(busy, bc, cmd(2, nvme.OpRead, testUnit, false), 0)
			if !stuck.live() {
				if elapsed < responseTimeout {
					t.Fatalf("torn down after %v without progress, before responseTimeout %v", elapsed, responseTimeout)
				}
				break
			}
			now = now.Add(step)
		}
		if stuck.live() {
			t.Fatalf("a queue whose response SEND never completes is still live after %v", 3*responseTimeout)
		}
		if stuck.reason != "responses not delivered" {
			t.Fatalf("torn down for %q", stuck.reason)
		}
		h.check()
		h.flushAll(sc)
		h.gone(stuck, sc)
	})
}

// TestEngineBufferShare: a queue whose responses never complete (its host
// posts no receives, so every SEND waits on RNR retries) keeps the data
// buffers of those requests. It may hold no more than its share of the
// poller's pool: its further requests wait in its own line, and a second
// queue on the same poller still gets buffers and runs.
func TestEngineBufferShare(t *testing.T) {
	forModes(t, func(t *testing.T, srq int) {
		h := newBench(t, benchOpts{srq: srq}) // 16 buffers; a transfer takes up to 4
		hog, hc, hcore := h.open(benchOpts{})
		other, oc, ocore := h.open(benchOpts{})
		for cid := uint16(1); cid <= 4; cid++ {
			h.capsule(hog, hc, cmd(cid, nvme.OpRead, 4*testUnit, false), 0)
			h.check(hog, other)
		}
		h.capsule(other, oc, cmd(9, nvme.OpRead, 4*testUnit, false), 0)
		h.check(hog, other)
		if !slices.Equal(ocore.executed, []uint16{9}) {
			t.Fatalf("second queue executed %v, want [9]: the first holds %d of %d buffers",
				ocore.executed, h.total-len(h.e.pool.free)-4*len(ocore.executed), h.total)
		}
		h.finish(other, oc, kindSend, verbs.WCSuccess)
		// The host comes back to its receives: the hog's requests go on, in
		// the order they came.
		var order []uint16
		for len(hc.sends) > 0 {
			order = append(order, h.finish(hog, hc, kindSend, verbs.WCSuccess))
			h.check(hog, other)
		}
		if want := []uint16{1, 2, 3, 4}; !slices.Equal(order, want) || !slices.Equal(hcore.executed, want) {
			t.Fatalf("first queue served %v, executed %v; want %v", order, hcore.executed, want)
		}
		if len(h.e.pool.free) != h.total {
			t.Fatalf("pool has %d of %d buffers at rest", len(h.e.pool.free), h.total)
		}
	})
}

// TestQueueShare: a queue's share of its poller's data buffers.
func TestQueueShare(t *testing.T) {
	for _, tc := range []struct{ total, depth, maxChunks, want int }{
		{total: 1024, depth: 128, maxChunks: 16, want: 512}, // the defaults: half the pool
		{total: 1024, depth: 4, maxChunks: 16, want: 64},    // a shallow queue: what its depth can use
		{total: 16, depth: 4, maxChunks: 4, want: 8},
		{total: 6, depth: 4, maxChunks: 4, want: 4}, // a small pool: still one largest transfer
		{total: 4, depth: 1, maxChunks: 4, want: 4},
	} {
		if got := queueShare(tc.total, tc.depth, tc.maxChunks); got != tc.want {
			t.Errorf("queueShare(%d, %d, %d) = %d, want %d", tc.total, tc.depth, tc.maxChunks, got, tc.want)
		}
	}
}
