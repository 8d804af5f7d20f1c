package verbs

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// FaultEnv names the variable that, in a binary built with the faultinject
// tag, makes some batch posts fail part-way. It exists to test the failure
// path of a post (the queue's teardown and the release of exactly the
// requests whose work did not go in) end to end on a real device, which
// otherwise never fails a post. Production builds ignore it.
//
// The value is EVERY or EVERY:TIMES: every EVERYth Post of a Batch (a
// poller's) that stages work fails, at most TIMES times in all (default 1). Failures alternate between a
// QP's sends and its receives, starting with sends: the first half of that
// QP's requests of the kind go in and the rest fail with ENOMEM, as when a
// provider's queue is full. A batch with a shared receive queue has no QP
// receives: its SRQ's receives fail instead.
const FaultEnv = "NVMEOF_TGT_FAULT_POST"

// FaultCreateQPEnv names the variable that, in a faultinject build, makes
// the Nth rdma_create_qp of the process fail with ENOMEM, once, as a device
// out of QPs or memory would: it tests the undo of a connection's setup.
const FaultCreateQPEnv = "NVMEOF_TGT_FAULT_CREATEQP"

// FaultSRQDepthEnv names the variable that, in a faultinject build, gives
// each poller's shared receive queue that many receive buffers (at least
// 16) instead of the default, so that a host's ordinary load runs it low:
// it tests the SRQ limit event and the SRQ's growth on a real device.
const FaultSRQDepthEnv = "NVMEOF_TGT_FAULT_SRQ_DEPTH"

// FaultSRQStartEnv names the variable that, in a faultinject build, posts
// only that many of each SRQ's receive buffers at start (at least 1),
// leaving the rest spare as a failed post would: it tests the SRQ limit
// event posting the spare on a real device.
const FaultSRQStartEnv = "NVMEOF_TGT_FAULT_SRQ_START"

// faultPlan decides which posts fail. Each Batch counts its own posts (a
// Batch has one user), so pollers share only the budget of failures, and
// only when one is due: the plan adds no synchronization between pollers
// that could hide a data race from the race detector.
type faultPlan struct {
	every, times int
	fired        atomic.Int64
}

// parseFaultPlan parses FaultEnv's value; "" means no faults (nil).
func parseFaultPlan(s string) (*faultPlan, error) {
	if s == "" {
		return nil, nil
	}
	everyS, timesS, hasTimes := strings.Cut(s, ":")
	every, err := strconv.Atoi(everyS)
	if err != nil || every < 1 {
		return nil, fmt.Errorf("%s=%q: want EVERY[:TIMES], integers >= 1", FaultEnv, s)
	}
	times := 1
	if hasTimes {
		if times, err = strconv.Atoi(timesS); err != nil || times < 1 {
			return nil, fmt.Errorf("%s=%q: want EVERY[:TIMES], integers >= 1", FaultEnv, s)
		}
	}
	return &faultPlan{every: every, times: times}, nil
}

// faultCut is one planned failure: group's sends (or receives, or the
// SRQ's receives) are cut to keep before the post, and apply reports the
// rest as failed after it. The zero value does nothing.
type faultCut struct {
	on          bool
	recv        bool
	srq         bool
	group       int
	keep, total uint32
}

// cut plans this post's failure, if it is due, and truncates the chosen
// group (or the SRQ's receives, sp) so that only keep of its requests of
// that kind are posted. posts is the calling Batch's own count of posts
// (-1 once the plan is spent).
func (f *faultPlan) cut(g []postGroup, sp *srqPost, posts *int) faultCut {
	// Posts of the SRQ's receives alone (a poller filling its SRQ at
	// start, in a post per batch of receives) do not count: the plan is
	// about posts that carry a queue's work, wherever the SRQ's start ends.
	if f == nil || *posts < 0 || len(g) == 0 {
		return faultCut{}
	}
	if *posts++; *posts < f.every {
		return faultCut{}
	}
	done := f.fired.Load()
	if done >= int64(f.times) {
		*posts = -1
		return faultCut{}
	}
	recv := done%2 == 1
	for i := range g {
		n := g[i].sends
		if recv {
			n = g[i].recvs
		}
		if n == 0 {
			continue
		}
		if !f.fired.CompareAndSwap(done, done+1) {
			return faultCut{} // another poller injected this one; try again next post
		}
		*posts = 0
		c := faultCut{on: true, recv: recv, group: i, keep: n / 2, total: n}
		if recv {
			g[i].recvs = c.keep
		} else {
			g[i].sends = c.keep
		}
		return c
	}
	if recv && sp != nil && sp.n > 0 {
		if !f.fired.CompareAndSwap(done, done+1) {
			return faultCut{}
		}
		*posts = 0
		c := faultCut{on: true, recv: true, srq: true, keep: sp.n / 2, total: sp.n}
		sp.n = c.keep
		return c
	}
	return faultCut{} // nothing of that kind staged: the next post tries again
}

// apply restores the group's count and reports its requests past keep as
// not posted, unless the real post had already failed before them.
func (c faultCut) apply(g []postGroup, sp *srqPost) {
	if !c.on {
		return
	}
	enomem := -int32(syscall.ENOMEM)
	if c.srq {
		sp.n = c.total
		if sp.rc == 0 {
			sp.rc, sp.posted = enomem, int32(c.keep)
		}
		return
	}
	gr := &g[c.group]
	if c.recv {
		gr.recvs = c.total
		if gr.recvRC == 0 {
			gr.recvRC, gr.recvsPosted = enomem, int32(c.keep)
		}
		return
	}
	gr.sends = c.total
	if gr.sendRC == 0 {
		gr.sendRC, gr.sendsPosted = enomem, int32(c.keep)
	}
}
