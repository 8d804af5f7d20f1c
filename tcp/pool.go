package tcp

import (
	"sync"

	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
)

// bufPool is the data buffers of every connection of the transport: units
// of one size (Config.IOUnitSize), a transfer taking as many as it needs.
// Units are made the first time they are wanted and kept for reuse, so
// once the target has warmed up no I/O allocates. limit bounds the bytes
// out at once for reads and for writes fetched with R2T; a request past it
// waits in line, first come first served, and never holds up its
// connection's reader (only the writer or the core moves it on). In-capsule
// data, which is on the wire already, takes its units whatever the limit
// (getNow): the reader may never wait for buffers, or a reader waiting for
// buffers held by commands whose data is behind it in its stream would
// never get them.
//
// One connection holds at most share units (shareOf): a request past its
// connection's share waits in the connection's own line, not the pool's,
// so that a host sent R2Ts that sends no data (or one that reads slowly)
// leaves the other connections the rest of the pool until the send
// timeout closes it, and never holds up the pool's line.
type bufPool struct {
	unit  int
	limit int64
	share int
	stats *Stats

	mu    sync.Mutex
	free  [][]byte
	inUse int64 // bytes out
	// line is the requests waiting for the pool.
	line line
}

// line is requests waiting, in order (request.next), under the pool's
// mutex: the pool's, or one connection's for its share.
type line struct{ head, tail *request }

func (l *line) push(r *request) {
	if l.tail == nil {
		l.head = r
	} else {
		l.tail.next = r
	}
	l.tail = r
}

// unlink takes w out; prev is the request before it, nil for the head.
func (l *line) unlink(w, prev *request) {
	if prev == nil {
		l.head = w.next
	} else {
		prev.next = w.next
	}
	if l.tail == w {
		l.tail = prev
	}
	w.next = nil
}

// remove takes r out, reporting whether it was in.
func (l *line) remove(r *request) bool {
	var prev *request
	for w := l.head; w != nil; prev, w = w, w.next {
		if w == r {
			l.unlink(w, prev)
			return true
		}
	}
	return false
}

// shareOf is the most units one connection may hold of a pool of total:
// what depth commands of maxUnits each can use, but at most
// 1/limits.TCPConnBufferShareDivisor of the pool, and at least one largest
// transfer, so every command can run.
func shareOf(total, depth, maxUnits int) int {
	return max(maxUnits, min(depth*maxUnits, total/limits.TCPConnBufferShareDivisor))
}

func newBufPool(unit int, limit int64, share int, stats *Stats) *bufPool {
	return &bufPool{unit: unit, limit: limit, share: share, stats: stats}
}

// units is how many units n bytes take.
func (p *bufPool) units(n uint32) int { return (int(n) + p.unit - 1) / p.unit }

// fits reports whether k more units stay within the limit; a pool with
// nothing out always gives, so a transfer as large as the limit goes.
func (p *bufPool) fits(k int) bool {
	return p.inUse == 0 || p.inUse+int64(k*p.unit) <= p.limit
}

// shareFits reports whether k more units stay within c's share; a
// connection holding none always may claim. p.mu is held.
func (p *bufPool) shareFits(c *conn, k int) bool {
	return c.held == 0 || c.held+k <= p.share
}

// take appends k units to r.chunks; p.mu is held.
func (p *bufPool) take(r *request, k int) {
	for range k {
		var b []byte
		if n := len(p.free); n > 0 {
			b = p.free[n-1]
			p.free[n-1] = nil
			p.free = p.free[:n-1]
		} else {
			b = make([]byte, p.unit)
		}
		r.chunks = append(r.chunks, b)
	}
	p.inUse += int64(k * p.unit)
	p.stats.BufferBytes.Store(p.inUse)
}

// admit claims k units of r's connection's share for r, and gives them if
// the pool's line is empty and they fit, reporting true; else r joins the
// pool's line. p.mu is held.
func (p *bufPool) admit(r *request, k int) bool {
	r.claimed = k
	r.c.held += k
	if p.line.head == nil && p.fits(k) {
		p.take(r, k)
		return true
	}
	r.need = k
	r.waiting, r.inConn = true, false
	p.line.push(r)
	return false
}

// get gives r the units for n bytes and reports true, or puts r in line
// (its connection's or the pool's) and reports false: the units come
// later, through r.c.granted, on the goroutine that gave some back.
func (p *bufPool) get(r *request, n uint32) bool {
	k := p.units(n)
	c := r.c
	p.mu.Lock()
	if c.line.head == nil && p.shareFits(c, k) {
		if p.admit(r, k) {
			p.mu.Unlock()
			return true
		}
	} else {
		r.need = k
		r.waiting, r.inConn = true, true
		c.line.push(r)
	}
	p.mu.Unlock()
	p.stats.BufferWaits.Add(1)
	return false
}

// getNow gives r the units for n bytes whatever the limit and the share.
func (p *bufPool) getNow(r *request, n uint32) {
	p.mu.Lock()
	p.take(r, p.units(n))
	p.mu.Unlock()
}

// put gives r's units back, and the units of the requests in line that
// now fit, in order: first those of r's connection's line that its share
// now allows, then the pool's.
func (p *bufPool) put(r *request) {
	if len(r.chunks) == 0 {
		return
	}
	var granted, last *request
	grant := func(w *request) {
		if last == nil {
			granted = w
		} else {
			last.granted = w
		}
		last = w
	}
	c := r.c
	p.mu.Lock()
	for i, b := range r.chunks {
		p.free = append(p.free, b)
		r.chunks[i] = nil
	}
	p.inUse -= int64(len(r.chunks) * p.unit)
	r.chunks = r.chunks[:0]
	c.held -= r.claimed
	r.claimed = 0
	for w := c.line.head; w != nil && p.shareFits(c, w.need); w = c.line.head {
		c.line.unlink(w, nil)
		w.waiting = false
		if p.admit(w, w.need) {
			grant(w)
		}
	}
	for w := p.line.head; w != nil && p.fits(w.need); w = p.line.head {
		p.line.unlink(w, nil)
		w.waiting = false
		p.take(w, w.need)
		grant(w)
	}
	p.stats.BufferBytes.Store(p.inUse)
	p.mu.Unlock()
	for w := granted; w != nil; {
		next := w.granted
		w.granted = nil
		w.c.granted(w)
		w = next
	}
}

// cancel takes r out of its line, and its claim on its connection's share
// back. It reports false when r was in none (its units are granted, or on
// their way through r.c.granted).
func (p *bufPool) cancel(r *request) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !r.waiting {
		return false
	}
	if r.inConn {
		r.c.line.remove(r)
	} else {
		p.line.remove(r)
		r.c.held -= r.claimed
		r.claimed = 0
	}
	r.waiting = false
	return true
}

// out is the bytes the pool has given and not got back.
func (p *bufPool) out() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inUse
}
