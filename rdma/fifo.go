package rdma

import "sync/atomic"

// fifo is the wait line of one resource: data buffers (the poller's pool),
// RDMA READ credits or send-queue credits (a queue's). A request that cannot
// have the resource joins the back, and only the head may take it, so no
// request starves (SPDK's pending queues). A request waits in one fifo at a
// time (request.waitingIn).
type fifo struct {
	line  ring[*request]
	waits *atomic.Uint64 // requests that had to wait, for metrics
}

func newFIFO(capacity int, waits *atomic.Uint64) fifo {
	return fifo{line: newRing[*request](capacity), waits: waits}
}

// admission is what fifo.admit decided.
type admission uint8

const (
	admitted admission = iota // r may take the resource now
	waiting                   // r waits in the line
	overflow                  // the line is full: a sizing bug, r cannot wait
)

// admit lets r through when nothing waits ahead of it and have reports the
// resource is there; otherwise r waits in the line (joining it once).
func (f *fifo) admit(r *request, have bool) admission {
	if h, any := f.line.peek(); any && h != r || !have {
		if r.waitingIn == f {
			return waiting
		}
		// Every line is sized for every request that can wait in it.
		if !f.line.push(r) {
			return overflow
		}
		r.waitingIn = f
		f.waits.Add(1)
		return waiting
	}
	if r.waitingIn == f {
		f.line.pop()
		r.waitingIn = nil
	}
	return admitted
}

// retry lets the heads of the line try again, after the resource was given
// back, until the head has to wait. try runs the head's state machine.
func (f *fifo) retry(try func(*request)) {
	for {
		h, ok := f.line.peek()
		if !ok {
			return
		}
		try(h)
		if h2, ok := f.line.peek(); ok && h2 == h {
			if h.waitingIn == f {
				return // the head still waits
			}
			f.line.pop() // left waiting without leaving the line: never block on it
		}
	}
}

// remove takes r out of the line, if it waits there.
func (f *fifo) remove(r *request) {
	if r.waitingIn != f {
		return
	}
	f.line.removeIf(func(x *request) bool { return x == r })
	r.waitingIn = nil
}

// removeIf takes every request for which drop reports true out of the line,
// keeping the others' order, and returns how many it took into out.
func (f *fifo) removeIf(drop func(*request) bool, out []*request) []*request {
	f.line.removeIf(func(r *request) bool {
		if drop(r) {
			r.waitingIn = nil
			out = append(out, r)
			return true
		}
		return false
	})
	return out
}
