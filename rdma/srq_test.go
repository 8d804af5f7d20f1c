package rdma

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma/internal/verbs"
)

// TestEngineSRQBinding: with a shared receive queue, capsules of two queues
// land in the SRQ's buffers in whatever order their hosts send them; each
// is bound to the queue its QP number names, executes there, and is
// answered on that QP, and its buffer goes back to the SRQ with the
// response.
func TestEngineSRQBinding(t *testing.T) {
	h := newBench(t, benchOpts{srq: testSRQ})
	a, ac, acore := h.open(benchOpts{})
	b, bc, bcore := h.open(benchOpts{})
	posted := h.e.srq.posted
	acore.hold, bcore.hold = true, true
	h.capsule(a, ac, cmd(1, nvme.OpRead, testUnit, false), 0)
	h.capsule(b, bc, cmd(2, nvme.OpWrite, 200, true), 200)
	h.capsule(a, ac, cmd(3, nvme.OpFlush, 0, false), 0)
	h.capsule(b, bc, cmd(4, nvme.OpFlush, 0, false), 0)
	if !slices.Equal(acore.executed, []uint16{1, 3}) || !slices.Equal(bcore.executed, []uint16{2, 4}) {
		t.Fatalf("queue a executed %v, b %v; want [1 3] and [2 4]", acore.executed, bcore.executed)
	}
	if got := len(h.srq.recvs); got != posted-4 {
		t.Fatalf("%d receives posted with four capsules held, want %d", got, posted-4)
	}
	h.check(a, b)
	h.respond(acore)
	h.respond(bcore)
	if got := kinds(ac.sends); !slices.Equal(got, []string{"WRITE", "SEND", "SEND"}) {
		t.Fatalf("queue a posted %v, want its read's WRITE+SEND and its flush's SEND", got)
	}
	if got := kinds(bc.sends); !slices.Equal(got, []string{"SEND", "SEND"}) {
		t.Fatalf("queue b posted %v, want two responses", got)
	}
	for _, w := range ac.sends {
		if _, slot, _, _ := splitWRID(w.WRID); slot != a.slot {
			t.Fatalf("queue a's QP carries a work request of slot %d", slot)
		}
	}
	if len(h.srq.recvs) != posted {
		t.Fatalf("%d receives posted once the responses went, want %d back", len(h.srq.recvs), posted)
	}
	for len(ac.sends) > 0 {
		h.finish(a, ac, kindSend, verbs.WCSuccess)
	}
	for len(bc.sends) > 0 {
		h.finish(b, bc, kindSend, verbs.WCSuccess)
	}
	h.check(a, b)
	if len(a.free) != len(a.reqs) || len(b.free) != len(b.reqs) {
		t.Fatal("requests not all free once every SEND completed")
	}
}

// TestEngineSRQTeardown: a queue torn down gives back to the SRQ the
// buffers its own requests and parked capsules hold, and no other queue's;
// a receive its QP took but reported only once it was gone (flushed, or
// even complete) goes back to the SRQ too, and reaches no queue.
func TestEngineSRQTeardown(t *testing.T) {
	for _, late := range []uint32{verbs.WCFlushErr, verbs.WCSuccess} {
		t.Run(map[uint32]string{verbs.WCFlushErr: "late receive flushed", verbs.WCSuccess: "late receive complete"}[late], func(t *testing.T) {
			h := newBench(t, benchOpts{srq: testSRQ})
			const depth = 2
			a, ac, acore := h.open(benchOpts{depth: depth})
			b, bc, bcore := h.open(benchOpts{depth: depth})
			acore.hold, bcore.hold = true, true
			posted := h.e.srq.posted
			// a: every request held by the core and depth capsules parked.
			for cid := uint16(1); cid <= 3*depth; cid++ {
				h.capsule(a, ac, cmd(cid, nvme.OpFlush, 0, false), 0)
			}
			h.capsule(b, bc, cmd(10, nvme.OpFlush, 0, false), 0)
			if a.parked.len() != depth || len(a.free) != 0 {
				t.Fatalf("queue a has %d parked and %d free, want %d and 0", a.parked.len(), len(a.free), depth)
			}
			// A capsule a's QP took from the SRQ and has not reported.
			inflight, _ := h.take(ac)
			h.inflight = append(h.inflight, inflight)
			h.check(a, b)

			a.teardown("host disconnected")
			h.e.flush()
			// Only the parked capsules' buffers are back: the requests are
			// still the core's.
			if got, want := len(h.srq.recvs), posted-3*depth-1-1+depth; got != want {
				t.Fatalf("%d receives posted after a's teardown, want %d (its parked capsules back)", got, want)
			}
			h.respond(acore)
			h.flushAll(ac)
			h.gone(a, ac)
			// The receive a's QP took comes in after a is gone.
			h.inflight = nil
			h.e.complete(&verbs.WC{WRID: inflight.WRID, Status: late, ByteLen: nvme.CommandSize, QPNum: ac.qpn})
			h.e.flush()
			if got, want := len(h.srq.recvs), posted-1; got != want {
				t.Fatalf("%d receives posted with a gone, want %d: all but b's", got, want)
			}
			if len(bcore.executed) != 1 || !b.live() {
				t.Fatalf("queue b executed %v and is %s: a's teardown or late receive reached it", bcore.executed, b.state)
			}
			h.check(b)
			h.respond(bcore)
			h.finish(b, bc, kindSend, verbs.WCSuccess)
			if len(h.srq.recvs) != posted {
				t.Fatalf("%d receives posted at the end, want all %d back", len(h.srq.recvs), posted)
			}
			h.check(b)
		})
	}
}

// TestEngineSRQLastWQE: with an SRQ, a queue torn down keeps its QP, and
// its QP number bound to it, until the device reports the QP's last WQE
// (IBV_EVENT_QP_LAST_WQE_REACHED); then the CQs are drained first, so a
// receive the QP took and had not reported goes back to the SRQ and to no
// queue, and only then is the QP destroyed. A device that never sends the
// event is waited for lastWQETimeout, with a warning.
func TestEngineSRQLastWQE(t *testing.T) {
	type step int
	const (
		eventAfterDrain  step = iota // the queue's requests are back before the event
		eventBeforeDrain             // the event comes while the core holds a request
		eventWhileLive               // rdma_cm moved the QP to error before the teardown
		timeout                      // no event
	)
	for _, tc := range []struct {
		name string
		step step
	}{{"event after the requests are back", eventAfterDrain}, {"event before the requests are back", eventBeforeDrain},
		{"event before the teardown", eventWhileLive}, {"no event: timeout", timeout}} {
		t.Run(tc.name, func(t *testing.T) {
			var log strings.Builder
			h := newBench(t, benchOpts{srq: testSRQ})
			h.e.log = slog.New(slog.NewTextHandler(&log, nil))
			a, ac, acore := h.open(benchOpts{})
			a.log = h.e.log
			b, bc, bcore := h.open(benchOpts{})
			acore.hold = true
			h.capsule(a, ac, cmd(1, nvme.OpFlush, 0, false), 0)
			// A capsule a's QP took from the SRQ; its completion (flushed)
			// is in the CQ, not polled yet.
			inflight, _ := h.take(ac)
			h.inflight = append(h.inflight, inflight)
			h.cq = append(h.cq, verbs.WC{WRID: inflight.WRID, Status: verbs.WCFlushErr, QPNum: ac.qpn})
			h.check(a, b)

			if tc.step == eventWhileLive {
				h.inflight = nil  // delivered by the drain before the event's teardown
				ac.inError = true // rdma_cm's doing, on the host's DREQ
				h.lastWQE(ac)
				if a.live() || len(h.cq) != 0 {
					t.Fatalf("queue %s, %d completions undrained after its QP's last WQE: want torn down, drained", a.state, len(h.cq))
				}
			} else {
				a.teardown("host disconnected")
				h.e.flush()
			}
			if tc.step == eventBeforeDrain {
				h.inflight = nil
				h.lastWQE(ac)
				if a.state != qsDraining || ac.destroys != 0 || len(h.cq) != 0 {
					t.Fatalf("queue %s, destroyed %d times, %d completions left: want draining with a request out, CQ drained", a.state, ac.destroys, len(h.cq))
				}
			}
			h.respond(acore)
			h.flushQP(ac)
			if tc.step == eventAfterDrain || tc.step == timeout {
				// Everything of the queue is back but the QP's last WQE.
				if a.state != qsDraining || ac.destroys != 0 || h.e.byQPN[ac.qpn] != a {
					t.Fatalf("queue %s, destroyed %d times, its QP number bound to it %v: want draining, 0, bound (waiting for the last WQE)",
						a.state, ac.destroys, h.e.byQPN[ac.qpn] == a)
				}
				h.inflight = nil // the drain delivers it
				if tc.step == eventAfterDrain {
					h.lastWQE(ac)
				} else {
					if len(h.timers) != 1 || h.timers[0].d != lastWQETimeout {
						t.Fatalf("timers %v, want one of %v", h.timers, lastWQETimeout)
					}
					h.fire()
					if !strings.Contains(log.String(), "level=WARN msg=\"no IBV_EVENT_QP_LAST_WQE_REACHED") {
						t.Fatalf("no warning for the timeout; log:\n%s", log.String())
					}
					if n := h.stats.SRQLastWQETimeouts.Load(); n != 1 {
						t.Fatalf("%d last WQE timeouts counted, want 1", n)
					}
				}
			}
			if tc.step != timeout && strings.Contains(log.String(), "no IBV_EVENT_QP_LAST_WQE_REACHED") {
				t.Fatalf("timeout warning with the event; log:\n%s", log.String())
			}
			if len(h.cq) != 0 || h.loop.drains == 0 {
				t.Fatalf("%d completions left in the CQ, %d drains: want the CQs drained before the QP goes", len(h.cq), h.loop.drains)
			}
			h.gone(a, ac)
			for _, tm := range h.timers {
				if !tm.fired && !tm.cancelled {
					t.Fatal("the last WQE timer outlives the queue")
				}
			}
			// The late receive went back to the SRQ, not to b.
			if got := len(h.srq.recvs); got != testSRQ {
				t.Fatalf("%d receives posted with a gone, want all %d back", got, testSRQ)
			}
			if len(bcore.executed) != 0 || !b.live() {
				t.Fatalf("queue b executed %v and is %s: a's teardown or late receive reached it", bcore.executed, b.state)
			}
			// A repeat of the event, or one for a QP this poller does not
			// have, does nothing.
			h.lastWQE(ac)
			h.e.lastWQEReached(999)
			h.capsule(b, bc, cmd(2, nvme.OpFlush, 0, false), 0)
			h.finish(b, bc, kindSend, verbs.WCSuccess)
			if !slices.Equal(bcore.executed, []uint16{2}) {
				t.Fatalf("queue b executed %v, want [2]", bcore.executed)
			}
			h.check(b)
		})
	}
}

// TestEngineSRQError: IBV_EVENT_SRQ_ERR tears down every queue of the
// poller (their hosts reconnect), is logged as an error and counted, and
// every buffer comes back.
func TestEngineSRQError(t *testing.T) {
	var log strings.Builder
	h := newBench(t, benchOpts{srq: testSRQ})
	h.e.log = slog.New(slog.NewTextHandler(&log, nil))
	a, ac, acore := h.open(benchOpts{})
	b, bc, _ := h.open(benchOpts{})
	acore.hold = true
	h.capsule(a, ac, cmd(1, nvme.OpFlush, 0, false), 0)
	h.e.srqFailed()
	h.e.flush()
	if a.live() || b.live() || a.reason != "shared receive queue failed" {
		t.Fatalf("queues %s (%q) and %s after an SRQ error: want both torn down", a.state, a.reason, b.state)
	}
	if !strings.Contains(log.String(), "level=ERROR msg=\"shared receive queue failed") || h.stats.SRQErrors.Load() != 1 {
		t.Fatalf("SRQ errors counted %d; log:\n%s", h.stats.SRQErrors.Load(), log.String())
	}
	h.respond(acore)
	h.flushAll(ac)
	h.flushAll(bc)
	h.gone(a, ac)
	h.gone(b, bc)
	if len(h.srq.recvs) != testSRQ {
		t.Fatalf("%d receives posted, want all %d back", len(h.srq.recvs), testSRQ)
	}
}

// TestEngineSRQGauges: the SRQ's posted and held buffers are published
// for metrics, and held returns to 0 once the queues are gone.
func TestEngineSRQGauges(t *testing.T) {
	h := newBench(t, benchOpts{srq: testSRQ})
	q, c, core := h.open(benchOpts{})
	core.hold = true
	h.capsule(q, c, cmd(1, nvme.OpFlush, 0, false), 0)
	h.capsule(q, c, cmd(2, nvme.OpFlush, 0, false), 0)
	if p, held := h.e.srq.gPosted.Load(), h.e.srq.gHeld.Load(); p != testSRQ-2 || held != 2 {
		t.Fatalf("gauges posted %d held %d, want %d and 2", p, held, testSRQ-2)
	}
	q.teardown("host disconnected")
	h.respond(core)
	h.flushAll(c)
	h.gone(q, c)
	if p, held := h.e.srq.gPosted.Load(), h.e.srq.gHeld.Load(); p != testSRQ || held != 0 {
		t.Fatalf("gauges posted %d held %d after the queue is gone, want %d and 0", p, held, testSRQ)
	}
}

// TestEngineSRQDepthExceeded: with an SRQ nothing but the host's queue
// depth limits what one queue takes of the poller's buffers. A host with
// more commands out than its queue holds (every request busy and depth
// capsules parked) breaks the submission queue's flow control: it is
// disconnected, as a warning, not a line-full bug, and every buffer comes
// back.
func TestEngineSRQDepthExceeded(t *testing.T) {
	var log strings.Builder
	h := newBench(t, benchOpts{srq: testSRQ})
	h.e.log = slog.New(slog.NewTextHandler(&log, nil))
	const depth = 2
	q, c, core := h.open(benchOpts{depth: depth})
	q.log = h.e.log
	other, oc, ocore := h.open(benchOpts{})
	core.hold = true
	posted := h.e.srq.posted
	for cid := uint16(1); cid <= 3*depth; cid++ {
		h.capsule(q, c, cmd(cid, nvme.OpFlush, 0, false), 0)
	}
	if !q.live() {
		t.Fatal("torn down within its depth")
	}
	h.capsule(q, c, cmd(99, nvme.OpFlush, 0, false), 0)
	if q.live() || q.reason != "queue depth exceeded" {
		t.Fatalf("queue %s (%q) after a capsule past its depth, want torn down", q.state, q.reason)
	}
	if !strings.Contains(log.String(), "level=WARN msg=\"host sent more commands than its queue holds") || strings.Contains(log.String(), "wait line full") {
		t.Fatalf("log:\n%s", log.String())
	}
	h.respond(core)
	h.flushAll(c)
	h.gone(q, c)
	if len(h.srq.recvs) != posted {
		t.Fatalf("%d receives posted, want all %d back", len(h.srq.recvs), posted)
	}
	// The other queue was never held up.
	h.capsule(other, oc, cmd(7, nvme.OpFlush, 0, false), 0)
	h.finish(other, oc, kindSend, verbs.WCSuccess)
	if !slices.Equal(ocore.executed, []uint16{7}) {
		t.Fatalf("other queue executed %v", ocore.executed)
	}
	h.check(other)
}

// TestEngineSRQStartsFull: every buffer of the SRQ is posted at start, and
// the limit is not armed (nothing is spare): a burst of capsules from many
// queues finds receives posted up to the SRQ's depth.
func TestEngineSRQStartsFull(t *testing.T) {
	h := newBench(t, benchOpts{srq: testSRQ})
	if h.e.srq.posted != testSRQ || len(h.e.srq.spare) != 0 || len(h.loop.arms) != 0 {
		t.Fatalf("%d posted, %d spare, limits armed %v; want all %d, none, none", h.e.srq.posted, len(h.e.srq.spare), h.loop.arms, testSRQ)
	}
	var qs []*queue
	var cs []*fakeConn
	var cores []*fakeCore
	for range 4 {
		q, c, core := h.open(benchOpts{depth: 8})
		core.hold = true
		qs, cs, cores = append(qs, q), append(cs, c), append(cores, core)
	}
	// 4 queues of depth 8, each with its 16 requests held by the core: 64
	// capsules, the whole SRQ.
	cid := uint16(0)
	for range 16 {
		for j := range qs {
			cid++
			h.capsule(qs[j], cs[j], cmd(cid, nvme.OpFlush, 0, false), 0)
		}
	}
	for _, q := range qs {
		if !q.live() {
			t.Fatalf("queue %d torn down (%s) within its depth", q.slot, q.reason)
		}
	}
	if len(h.srq.recvs) != 0 {
		t.Fatalf("%d receives left, want the burst to have taken all", len(h.srq.recvs))
	}
	h.check(qs...)
	for _, core := range cores {
		h.respond(core)
	}
	for j, q := range qs {
		for len(cs[j].sends) > 0 {
			h.finish(q, cs[j], kindSend, verbs.WCSuccess)
		}
	}
	if len(h.srq.recvs) != testSRQ {
		t.Fatalf("%d posted once every capsule was answered, want all %d", len(h.srq.recvs), testSRQ)
	}
	h.check(qs...)
}

// TestEngineSRQGrow: with buffers spare (a faultinject build posting a
// quarter at start), the limit is armed at a quarter of those given; each
// SRQ limit event gives the SRQ as many again as it has, until all are,
// arming the limit again while some are spare, and then not.
func TestEngineSRQGrow(t *testing.T) {
	h := newBench(t, benchOpts{srq: testSRQ, srqStart: testSRQ / 4})
	q, c, core := h.open(benchOpts{depth: 16})
	core.hold = true
	if !slices.Equal(h.loop.arms, []int{4}) {
		t.Fatalf("limits armed at start %v, want [4]", h.loop.arms)
	}
	// Capsules held by the core until the SRQ is below its limit.
	cid := uint16(0)
	for len(h.srq.recvs) >= srqArmAt(testSRQ/4) {
		cid++
		h.capsule(q, c, cmd(cid, nvme.OpFlush, 0, false), 0)
	}
	held := int(cid)
	for _, want := range []struct{ posted, arms int }{{32 - held, 2}, {64 - held, 2}} {
		h.e.growSRQ()
		if h.e.srq.posted != want.posted || len(h.loop.arms) != want.arms {
			t.Fatalf("after a limit event: %d posted, limits armed %v; want %d and %d arms", h.e.srq.posted, h.loop.arms, want.posted, want.arms)
		}
		h.check(q)
	}
	if h.loop.arms[1] != 8 {
		t.Fatalf("limit armed at %d after the first growth, want 8", h.loop.arms[1])
	}
	if h.e.growSRQ(); len(h.e.srq.spare) != 0 || len(h.loop.arms) != 2 {
		t.Fatal("grew past its buffers, or armed the limit with nothing spare")
	}
	h.respond(core)
	for len(c.sends) > 0 {
		h.finish(q, c, kindSend, verbs.WCSuccess)
	}
	if len(h.srq.recvs) != testSRQ {
		t.Fatalf("%d posted once every capsule was answered, want all %d", len(h.srq.recvs), testSRQ)
	}
	h.check(q)
}

// TestEngineSRQPostFailure: SRQ receives a post leaves out (a device in
// trouble: the SRQ has room for every buffer) are logged and kept as
// spare, and the SRQ limit is armed so that its event posts them again;
// no queue is torn down for it.
func TestEngineSRQPostFailure(t *testing.T) {
	var log strings.Builder
	h := newBench(t, benchOpts{srq: testSRQ})
	h.e.log = slog.New(slog.NewTextHandler(&log, nil))
	q, c, _ := h.open(benchOpts{})
	posted := h.e.srq.posted
	h.b.failSRQ = 0
	h.capsule(q, c, cmd(1, nvme.OpFlush, 0, false), 0)
	if !q.live() || !strings.Contains(log.String(), "post SRQ receives") {
		t.Fatalf("queue %s, log:\n%s", q.state, log.String())
	}
	if h.e.srq.posted != posted-1 || len(h.e.srq.spare) != 1 {
		t.Fatalf("%d posted, %d spare; want %d and 1", h.e.srq.posted, len(h.e.srq.spare), posted-1)
	}
	if len(h.loop.arms) != 1 || h.loop.arms[0] != srqArmAt(testSRQ-1) {
		t.Fatalf("limits armed %v, want [%d]: the spare buffer is stranded otherwise", h.loop.arms, srqArmAt(testSRQ-1))
	}
	h.finish(q, c, kindSend, verbs.WCSuccess)
	h.check(q)
	h.e.growSRQ()
	if h.e.srq.posted != testSRQ || len(h.e.srq.spare) != 0 {
		t.Fatalf("%d posted after a limit event, want all %d", h.e.srq.posted, testSRQ)
	}
	h.check(q)
}

// TestSRQDepthFor: where a device gets a shared receive queue per poller.
func TestSRQDepthFor(t *testing.T) {
	rxe := verbs.DeviceAttr{Name: "rxe0", MaxSRQ: 1 << 16, MaxSRQWR: 1 << 14, MaxSRQSGE: 27, MaxCQE: 1<<15 - 1}
	none := verbs.DeviceAttr{Name: "old0", MaxCQE: 1 << 15}
	small := rxe
	small.MaxSRQWR = 256
	for _, tc := range []struct {
		name    string
		mode    string
		attr    verbs.DeviceAttr
		pollers int
		icd     int
		want    int
		wantErr bool
	}{
		{"auto, rxe", ModeAuto, rxe, 1, 8192, DefaultSRQDepth, false},
		{"auto, a smaller SRQ", ModeAuto, small, 1, 8192, 256, false},
		{"off", ModeOff, rxe, 1, 8192, 0, false},
		{"auto, none", ModeAuto, none, 1, 8192, 0, false},
		{"on, none", ModeOn, none, 1, 8192, 0, true},
		{"auto, fewer SRQs than pollers", ModeAuto, verbs.DeviceAttr{MaxSRQ: 2, MaxSRQWR: 4096, MaxSRQSGE: 2, MaxCQE: 1 << 15}, 4, 8192, 0, false},
		{"auto, one SGE and no in-capsule data", ModeAuto, verbs.DeviceAttr{MaxSRQ: 1, MaxSRQWR: 4096, MaxSRQSGE: 1, MaxCQE: 1 << 15}, 1, 0, DefaultSRQDepth, false},
		{"auto, one SGE for two", ModeAuto, verbs.DeviceAttr{MaxSRQ: 1, MaxSRQWR: 4096, MaxSRQSGE: 1, MaxCQE: 1 << 15}, 1, 8192, 0, false},
		{"auto, CQs too small", ModeAuto, verbs.DeviceAttr{MaxSRQ: 1, MaxSRQWR: 4096, MaxSRQSGE: 2, MaxCQE: 3000}, 1, 8192, 0, false},
	} {
		got, err := srqDepthFor(tc.mode, tc.attr, tc.pollers, tc.icd)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("%s: srqDepthFor = %d, %v; want %d, error %v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}

// TestLayoutRegion: what a device registers, with and without SRQ, at the
// defaults and with the queues a device takes by default in each mode:
// without SRQ every queue block holds its receive buffers, with SRQ only
// its responses, and the receive buffers are the pollers'.
func TestLayoutRegion(t *testing.T) {
	const depth, icd, unit, chunks = 128, 8192, 64 << 10, 1024
	perQueueRecv := depth * (nvme.CommandSize + icd) // 1 MiB + 8 KiB
	perQueueRsp := 2 * depth * nvme.CompletionSize   // 4 KiB
	for _, tc := range []struct {
		name          string
		blocks, recvs int
		min, max      int // bounds of the size
	}{
		{"without SRQ, 64 queues", 64, 64 * depth, 64*(perQueueRecv+perQueueRsp) + chunks*unit, 64*(perQueueRecv+perQueueRsp) + chunks*unit + 3*unit},
		{"with SRQ, 1024 queues, one poller", 1024, DefaultSRQDepth, 1024*perQueueRsp + DefaultSRQDepth*(nvme.CommandSize+icd) + chunks*unit,
			1024*perQueueRsp + DefaultSRQDepth*(nvme.CommandSize+icd) + chunks*unit + 3*unit},
	} {
		l := layoutRegion(tc.blocks, depth, tc.recvs, icd, unit, chunks)
		if l.size < tc.min || l.size > tc.max {
			t.Errorf("%s: %d bytes, want %d..%d", tc.name, l.size, tc.min, tc.max)
		}
		if l.cmdOff < tc.blocks*perQueueRsp || l.icdOff < l.cmdOff+tc.recvs*nvme.CommandSize ||
			l.dataOff < l.icdOff+tc.recvs*icd || l.dataOff%unit != 0 || l.icdOff%4096 != 0 {
			t.Errorf("%s: parts overlap or are misaligned: %+v", tc.name, l)
		}
	}
}

// quietCore answers every command at once and records nothing: a core that
// allocates nothing, for TestEngineIOAllocs.
type quietCore struct{ q *queue }

func (c *quietCore) Parse(r *fabric.Request) nvme.Status {
	parseRW(r)
	return nvme.StatusSuccess
}
func (c *quietCore) Execute(r *fabric.Request) { c.Fail(r, nvme.StatusSuccess) }
func (c *quietCore) Fail(r *fabric.Request, st nvme.Status) {
	r.Rsp.SetCID(r.Cmd.CID())
	r.Rsp.SetStatus(st)
	c.q.QueueResponse(r)
}
func (c *quietCore) Destroy() {}

// TestEngineIOAllocs: an I/O allocates nothing on the engine's path, in
// either receive mode, and with an SRQ also when its capsule is moved to
// the overflow (its queue past its share): a keyed read (buffers,
// WRITE+SEND) and a keyed write (buffers, READ, SEND), each from its
// capsule to its SEND's completion.
func TestEngineIOAllocs(t *testing.T) {
	forModes(t, func(t *testing.T, srq int) { testIOAllocs(t, srq, false) })
	t.Run("srq past the share", func(t *testing.T) { testIOAllocs(t, testSRQ, true) })
}

func testIOAllocs(t *testing.T, srq int, pastShare bool) {
	h := newBench(t, benchOpts{srq: srq})
	if pastShare {
		h.e.srq.share = 0 // every capsule moves
	}
	q, c, _ := h.open(benchOpts{})
	q.core = &quietCore{q: q}
	read, write := cmd(1, nvme.OpRead, 2*testUnit, false), cmd(2, nvme.OpWrite, 2*testUnit, false)
	var wc verbs.WC
	recvs := &c.recvs
	if h.srq != nil {
		recvs = &h.srq.recvs
	}
	// take and complete consume from the back and truncate, so that
	// the fakes' slices never move and the fakes allocate nothing.
	capsule := func(command nvme.Command) {
		w := (*recvs)[len(*recvs)-1]
		*recvs = (*recvs)[:len(*recvs)-1]
		_, _, _, slot := splitWRID(w.WRID)
		copy(q.mem.cmdBuf(int(slot)), command)
		wc = verbs.WC{WRID: w.WRID, Status: verbs.WCSuccess, ByteLen: nvme.CommandSize, QPNum: c.qpn}
		h.e.complete(&wc)
		h.e.flush()
	}
	complete := func() { // the last, signaled send posted
		w := c.sends[len(c.sends)-1]
		c.sends = c.sends[:0]
		wc = verbs.WC{WRID: w.WRID, Status: verbs.WCSuccess, QPNum: c.qpn}
		h.e.complete(&wc)
		h.e.flush()
	}
	io := func() {
		capsule(read)
		complete() // SEND
		capsule(write)
		complete() // READ
		complete() // SEND
	}
	io() // the fakes' groups and slices made once
	if n := testing.AllocsPerRun(100, io); n != 0 {
		t.Errorf("%v allocations per read and write", n)
	}
	if moved := h.e.srq != nil && h.e.srq.moved.Load() > 0; moved != pastShare {
		t.Errorf("capsules moved to the overflow: %v, want %v", moved, pastShare)
	}
	h.check(q)
}

// TestPollerMaxReqs: a poller's request lines hold what its queues may
// have in the core or waiting for buffers: with an SRQ, no more than its
// receive buffers and their overflow (each such request holds one).
func TestPollerMaxReqs(t *testing.T) {
	for _, tc := range []struct{ blocks, depth, srq, want int }{
		{64, 128, 0, 64 * 2 * 128},
		{1024, 128, 2048, 2 * 2048},
		{1024, 128, limits.RDMASRQDepth, 2 * limits.RDMASRQDepth},
		{4, 8, 2048, 64}, // fewer queue slots than buffers
	} {
		if got := pollerMaxReqs(tc.blocks, tc.depth, tc.srq); got != tc.want {
			t.Errorf("pollerMaxReqs(%d, %d, %d) = %d, want %d", tc.blocks, tc.depth, tc.srq, got, tc.want)
		}
	}
}

// TestEngineSRQLinesBySRQ: with the buffer line sized by the SRQ
// (pollerMaxReqs), every SRQ buffer's capsule may wait for data buffers at
// once without the line overflowing.
func TestEngineSRQLinesBySRQ(t *testing.T) {
	var log strings.Builder
	h := newBench(t, benchOpts{srq: testSRQ, maxReqs: pollerMaxReqs(4, 8, testSRQ)})
	h.e.log = slog.New(slog.NewTextHandler(&log, nil))
	var qs []*queue
	var cores []*fakeCore
	for range 4 {
		q, c, core := h.open(benchOpts{depth: 8})
		q.log = h.e.log
		core.hold = true
		qs, cores = append(qs, q), append(cores, core)
		for i := range 16 {
			h.capsule(q, c, cmd(uint16(i+1), nvme.OpRead, testMaxBytes, false), 0)
		}
	}
	if len(h.srq.recvs) != 0 || strings.Contains(log.String(), "wait line full") {
		t.Fatalf("%d receives left; log:\n%s", len(h.srq.recvs), log.String())
	}
	for _, q := range qs {
		if !q.live() {
			t.Fatalf("queue torn down: %s", q.reason)
		}
	}
	h.check(qs...)
	for _, core := range cores {
		h.respond(core)
	}
	h.check(qs...)
}

// TestSRQDepthHoldsAHost: the default SRQ depth is more than one host's
// legal load (every I/O queue of a controller at the default depth), so a
// single controller at full depth cannot empty a poller's SRQ (rxe then
// flushes the hosts' QPs).
func TestSRQDepthHoldsAHost(t *testing.T) {
	if load := limits.MaxIOQueues * limits.MaxQueueDepth; DefaultSRQDepth <= load {
		t.Fatalf("default SRQ depth %d, one controller may have %d commands out: want more", DefaultSRQDepth, load)
	}
}

// TestEngineSRQEmptyCounted: a receive that leaves the SRQ with nothing
// posted is counted (per poller, for nvmeof_tgt_rdma_srq_empty_total): the
// next capsule of any host on the poller meets an RNR NAK.
func TestEngineSRQEmptyCounted(t *testing.T) {
	const n = 4
	h := newBench(t, benchOpts{srq: n})
	q, c, core := h.open(benchOpts{depth: 4})
	core.hold = true
	for cid := uint16(1); cid < n; cid++ {
		h.capsule(q, c, cmd(cid, nvme.OpFlush, 0, false), 0)
	}
	if got := h.e.srq.empty.Load(); got != 0 {
		t.Fatalf("SRQ empty counted %d times with %d of %d posted, want 0", got, h.e.srq.posted, n)
	}
	h.capsule(q, c, cmd(n, nvme.OpFlush, 0, false), 0)
	if got := h.e.srq.empty.Load(); got != 1 || h.e.srq.posted != 0 {
		t.Fatalf("SRQ empty counted %d times with %d posted, want 1 and 0", got, h.e.srq.posted)
	}
	h.respond(core)
	h.runLoop()
	for len(c.sends) > 0 {
		h.finish(q, c, kindSend, verbs.WCSuccess)
	}
	if got := h.e.srq.empty.Load(); got != 1 || h.e.srq.posted != n {
		t.Fatalf("SRQ empty counted %d times with %d posted once answered, want 1 and %d", got, h.e.srq.posted, n)
	}
	h.check(q)
}

// TestEngineSRQLastWQEReusedQPN: IBV_EVENT_QP_LAST_WQE_REACHED for the
// number of a queue that is live is taken only if its QP is in the error
// state (rdma_cm moved it there on a DREQ). Otherwise it is an old QP's
// event, acknowledged before the engine saw it, whose number a new,
// healthy queue reused: it is ignored.
func TestEngineSRQLastWQEReusedQPN(t *testing.T) {
	var log strings.Builder
	h := newBench(t, benchOpts{srq: testSRQ})
	h.e.log = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	q, c, core := h.open(benchOpts{})
	h.lastWQE(c)
	if !q.live() || q.lastWQE || c.setErrors != 0 {
		t.Fatalf("queue %s (last WQE %v, SetError %d) after a stale event for its QP number: want live, untouched", q.state, q.lastWQE, c.setErrors)
	}
	if !strings.Contains(log.String(), "level=DEBUG") || !strings.Contains(log.String(), "not in the error state") {
		t.Fatalf("no debug line for the ignored event; log:\n%s", log.String())
	}
	h.capsule(q, c, cmd(1, nvme.OpFlush, 0, false), 0)
	h.finish(q, c, kindSend, verbs.WCSuccess)
	if !slices.Equal(core.executed, []uint16{1}) {
		t.Fatalf("executed %v, want [1]", core.executed)
	}
	h.check(q)
}

// TestEngineSRQDuplicateQPN: a queue whose QP number is already bound to
// a queue of the poller is refused, with an error, and the first keeps it:
// receives on that number must not change queue under it.
func TestEngineSRQDuplicateQPN(t *testing.T) {
	var log strings.Builder
	h := newBench(t, benchOpts{srq: testSRQ})
	h.e.log = slog.New(slog.NewTextHandler(&log, nil))
	a, ac, acore := h.open(benchOpts{})
	c := &fakeConn{qpn: ac.qpn}
	q := newQueue(h.e, queueConfig{conn: c, log: h.e.log, mem: queueMem{rsp: make([]byte, 2*4*nvme.CompletionSize)},
		depth: 4, icd: testICD, sqSize: 20, readDepth: 16})
	q.core = &fakeCore{q: q}
	if added, live := h.e.open(q); added || live {
		t.Fatalf("open of a second queue on QP number %d: added %v live %v, want refused", ac.qpn, added, live)
	}
	if h.e.byQPN[ac.qpn] != a || !strings.Contains(log.String(), "level=ERROR") {
		t.Fatalf("QP number bound to the first queue %v; log:\n%s", h.e.byQPN[ac.qpn] == a, log.String())
	}
	taken := 0
	for _, x := range h.e.queues {
		if x != nil {
			taken++
		}
	}
	if taken != 1 {
		t.Fatalf("%d table slots taken, want 1: the refused queue keeps none", taken)
	}
	h.capsule(a, ac, cmd(1, nvme.OpFlush, 0, false), 0)
	h.finish(a, ac, kindSend, verbs.WCSuccess)
	if !slices.Equal(acore.executed, []uint16{1}) {
		t.Fatalf("first queue executed %v, want [1]", acore.executed)
	}
	h.check(a)
}

// TestEngineSRQRetrySpare: buffers a failed post left spare are posted
// again by the poller's periodic check, not only by the SRQ limit event
// (which comes only once receives are consumed). Those a faultinject build
// holds back at start are left to the limit event.
func TestEngineSRQRetrySpare(t *testing.T) {
	h := newBench(t, benchOpts{srq: testSRQ})
	q, c, _ := h.open(benchOpts{})
	h.b.failSRQ = 0
	h.capsule(q, c, cmd(1, nvme.OpFlush, 0, false), 0)
	h.finish(q, c, kindSend, verbs.WCSuccess)
	if len(h.e.srq.spare) != 1 {
		t.Fatalf("%d spare after a failed post, want 1", len(h.e.srq.spare))
	}
	h.e.checkStuck()
	h.e.flush()
	if len(h.e.srq.spare) != 0 || h.e.srq.posted != testSRQ || len(h.srq.recvs) != testSRQ {
		t.Fatalf("after the periodic check: %d spare, %d posted; want 0 and %d", len(h.e.srq.spare), h.e.srq.posted, testSRQ)
	}
	if p := h.e.srq.gPosted.Load(); p != testSRQ {
		t.Fatalf("gauge posted %d, want %d", p, testSRQ)
	}
	h.check(q)

	h = newBench(t, benchOpts{srq: testSRQ, srqStart: 16})
	h.e.checkStuck()
	h.e.flush()
	if h.e.srq.posted != 16 {
		t.Fatalf("faultinject start: %d posted after the periodic check, want the 16 of the start", h.e.srq.posted)
	}
}

// TestEngineSRQGaugesCurrent: the SRQ gauges are published after the
// round's post, not a round late: at start they show every buffer posted.
func TestEngineSRQGaugesCurrent(t *testing.T) {
	h := newBench(t, benchOpts{srq: testSRQ})
	if p, held := h.e.srq.gPosted.Load(), h.e.srq.gHeld.Load(); p != testSRQ || held != 0 {
		t.Fatalf("gauges at start: posted %d held %d, want %d and 0", p, held, testSRQ)
	}
}

// TestEngineSRQShare: a queue whose commands run long cannot hold every
// buffer of the poller's shared receive queue (audit item 13). Queue a, as
// deep as the SRQ, fills it with commands the core holds (backend I/O that
// takes long): writes in the capsule, and flushes. It holds its share of
// the SRQ's buffers; the capsules past it are copied to the overflow and
// their SRQ buffers posted again, or, the overflow full, keep them
// (counted). Another queue's capsule still finds a receive posted, and
// runs; a's commands run with the command and in-capsule data their host
// sent; and once they are answered every buffer is back.
func TestEngineSRQShare(t *testing.T) {
	for _, tc := range []struct {
		name                string
		share, over         int // benchOpts.srqShare, srqOver
		held, moved, pastIt int // a's SRQ buffers, capsules moved, and kept past the share
	}{
		{"overflow", 0, 0, limits.RDMASRQQueueShare, testSRQ - limits.RDMASRQQueueShare, 0},
		{"overflow full", 8, 8, 8 + 48, 8, 48},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newBench(t, benchOpts{srq: testSRQ, srqShare: tc.share, srqOver: tc.over})
			const depth = testSRQ
			a, ac, acore := h.open(benchOpts{depth: depth})
			b, bc, bcore := h.open(benchOpts{})
			acore.hold, bcore.hold = true, true
			data := func(cid uint16) []byte { return bytes.Repeat([]byte{byte(cid) ^ 0x5a}, 200) }
			for cid := uint16(1); cid <= depth; cid++ {
				if cid%2 == 1 {
					h.capsuleData(a, ac, cmd(cid, nvme.OpWrite, 200, true), data(cid))
				} else {
					h.capsule(a, ac, cmd(cid, nvme.OpFlush, 0, false), 0)
				}
			}
			if len(acore.held) != depth {
				t.Fatalf("queue a's core holds %d commands, want %d", len(acore.held), depth)
			}
			if n := h.posted(ac); n == 0 {
				t.Fatalf("queue a's %d long commands hold all %d SRQ buffers: none is left posted for another queue", depth, testSRQ)
			}
			s := h.e.srq
			if a.srqHeld != tc.held || s.moved.Load() != uint64(tc.moved) || s.overflowFull.Load() != uint64(tc.pastIt) {
				t.Fatalf("queue a holds %d SRQ buffers, %d capsules moved, %d kept past the share; want %d, %d, %d",
					a.srqHeld, s.moved.Load(), s.overflowFull.Load(), tc.held, tc.moved, tc.pastIt)
			}
			if got, want := h.posted(ac), testSRQ-tc.held; got != want {
				t.Fatalf("%d SRQ receives posted, want %d: all but a's", got, want)
			}
			h.capsule(b, bc, cmd(1000, nvme.OpFlush, 0, false), 0)
			if !slices.Equal(bcore.executed, []uint16{1000}) {
				t.Fatalf("queue b executed %v, want its flush", bcore.executed)
			}
			for _, r := range acore.held {
				cid := r.Cmd.CID()
				switch {
				case cid%2 == 1 && (r.Cmd.Opcode() != nvme.OpWrite || len(r.Data) != 1 || !bytes.Equal(r.Data[0], data(cid))):
					t.Fatalf("write CID %d runs with opcode %#x and data %x, want its own", cid, r.Cmd.Opcode(), r.Data)
				case cid%2 == 0 && r.Cmd.Opcode() != nvme.OpFlush:
					t.Fatalf("flush CID %d runs with opcode %#x", cid, r.Cmd.Opcode())
				}
			}
			h.check(a, b)
			h.e.publish()
			if got := s.gOverflow.Load(); got != int64(tc.moved) {
				t.Fatalf("overflow gauge %d, want %d", got, tc.moved)
			}
			h.respond(acore)
			h.respond(bcore)
			for len(ac.sends) > 0 {
				h.finish(a, ac, kindSend, verbs.WCSuccess)
			}
			for len(bc.sends) > 0 {
				h.finish(b, bc, kindSend, verbs.WCSuccess)
			}
			if got := len(h.srq.recvs); got != testSRQ || len(s.overFree) != s.over || a.srqHeld != 0 {
				t.Fatalf("%d SRQ receives posted, %d of %d overflow buffers free, a holds %d once every command was answered; want all back",
					got, len(s.overFree), s.over, a.srqHeld)
			}
			h.check(a, b)
		})
	}
}

// TestEngineSRQShareTeardown: a queue past its share torn down gives the
// overflow buffers of its parked capsules back at once, and those of its
// requests once the core lets go of them; the SRQ's come back as ever.
func TestEngineSRQShareTeardown(t *testing.T) {
	h := newBench(t, benchOpts{srq: testSRQ, srqShare: 2})
	const depth = 2
	a, ac, acore := h.open(benchOpts{depth: depth})
	acore.hold = true
	// Every request held by the core and depth capsules parked: 2 SRQ
	// buffers, then 4 overflow ones (2 requests', 2 parked).
	for cid := uint16(1); cid <= 3*depth; cid++ {
		h.capsuleData(a, ac, cmd(cid, nvme.OpWrite, 100, true), bytes.Repeat([]byte{byte(cid)}, 100))
	}
	s := h.e.srq
	if a.parked.len() != depth || a.srqHeld != 2 || s.over-len(s.overFree) != 4 {
		t.Fatalf("queue a: %d parked, %d SRQ buffers, %d overflow buffers; want %d, 2, 4", a.parked.len(), a.srqHeld, s.over-len(s.overFree), depth)
	}
	h.check(a)
	a.teardown("host disconnected")
	h.e.flush()
	if n := s.over - len(s.overFree); n != 2 {
		t.Fatalf("%d overflow buffers held after the teardown, want the requests' 2", n)
	}
	h.respond(acore)
	h.flushAll(ac)
	h.gone(a, ac)
	if len(h.srq.recvs) != testSRQ || len(s.overFree) != s.over || a.srqHeld != 0 {
		t.Fatalf("%d SRQ receives posted, %d of %d overflow buffers free, %d counted held: want all back",
			len(h.srq.recvs), len(s.overFree), s.over, a.srqHeld)
	}
}
