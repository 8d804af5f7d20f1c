package tcp

import "sync"

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
type bufPool struct {
	unit  int
	limit int64
	stats *Stats

	mu    sync.Mutex
	free  [][]byte
	inUse int64 // bytes out
	// head and tail are the line of requests waiting (request.next).
	head, tail *request
}

func newBufPool(unit int, limit int64, stats *Stats) *bufPool {
	return &bufPool{unit: unit, limit: limit, stats: stats}
}

// units is how many units n bytes take.
func (p *bufPool) units(n uint32) int { return (int(n) + p.unit - 1) / p.unit }

// fits reports whether k more units stay within the limit; a pool with
// nothing out always gives, so a transfer as large as the limit goes.
func (p *bufPool) fits(k int) bool {
	return p.inUse == 0 || p.inUse+int64(k*p.unit) <= p.limit
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

// get gives r the units for n bytes and reports true, or puts r in line
// and reports false: the units come later, through r.c.granted, on the
// goroutine that gave some back.
func (p *bufPool) get(r *request, n uint32) bool {
	k := p.units(n)
	p.mu.Lock()
	if p.head == nil && p.fits(k) {
		p.take(r, k)
		p.mu.Unlock()
		return true
	}
	r.need = k
	r.waiting = true
	if p.tail == nil {
		p.head = r
	} else {
		p.tail.next = r
	}
	p.tail = r
	p.mu.Unlock()
	p.stats.BufferWaits.Add(1)
	return false
}

// getNow gives r the units for n bytes whatever the limit.
func (p *bufPool) getNow(r *request, n uint32) {
	p.mu.Lock()
	p.take(r, p.units(n))
	p.mu.Unlock()
}

// put gives r's units back, and the units of the requests in line that
// now fit, in order.
func (p *bufPool) put(r *request) {
	if len(r.chunks) == 0 {
		return
	}
	var granted, last *request
	p.mu.Lock()
	for i, b := range r.chunks {
		p.free = append(p.free, b)
		r.chunks[i] = nil
	}
	p.inUse -= int64(len(r.chunks) * p.unit)
	r.chunks = r.chunks[:0]
	for w := p.head; w != nil && p.fits(w.need); w = p.head {
		p.unlink(w, nil)
		p.take(w, w.need)
		if last == nil {
			granted = w
		} else {
			last.granted = w
		}
		last = w
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

// unlink takes w out of the line; prev is the request before it, nil for
// the head. p.mu is held.
func (p *bufPool) unlink(w, prev *request) {
	if prev == nil {
		p.head = w.next
	} else {
		prev.next = w.next
	}
	if p.tail == w {
		p.tail = prev
	}
	w.next = nil
	w.waiting = false
}

// cancel takes r out of the line. It reports false when r was not in it
// (its units are granted, or on their way through r.c.granted).
func (p *bufPool) cancel(r *request) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !r.waiting {
		return false
	}
	var prev *request
	for w := p.head; w != nil; prev, w = w, w.next {
		if w == r {
			p.unlink(w, prev)
			return true
		}
	}
	return false
}

// out is the bytes the pool has given and not got back.
func (p *bufPool) out() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inUse
}
