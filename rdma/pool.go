package rdma

import "sync/atomic"

// bufPool is one poller's share of the registered data buffers: chunks of
// unit bytes carved out of mem, handed out whole to requests that move data
// with RDMA, in FIFO order (SPDK's buffer pool). Nothing is allocated or
// registered per I/O.
type bufPool struct {
	mem   []byte // chunks*unit bytes of the registered region
	unit  int
	free  []int32 // indexes of free chunks, a stack
	total int     // chunks in the pool
	wait  fifo    // requests waiting for chunks
}

// queueShare is the most chunks one queue may hold of a pool of total: what
// depth commands of maxChunks each can use, but at most half the pool, so a
// queue whose requests never finish (a host that posts no receives keeps
// every response SEND retrying) leaves the other queues of its poller at
// least the other half; and at least one largest transfer, so every
// command can run. Requests past the share wait in their queue's line.
func queueShare(total, depth, maxChunks int) int {
	return max(maxChunks, min(depth*maxChunks, total/2))
}

func newBufPool(mem []byte, unit, maxWaiters int, waits *atomic.Uint64) bufPool {
	n := len(mem) / unit
	p := bufPool{mem: mem, unit: unit, free: make([]int32, 0, n), total: n, wait: newFIFO(maxWaiters, waits)}
	for i := n - 1; i >= 0; i-- {
		p.free = append(p.free, int32(i))
	}
	return p
}

func (p *bufPool) chunk(i int32) []byte {
	off := int(i) * p.unit
	return p.mem[off : off+p.unit : off+p.unit]
}

// chunksFor is how many chunks n bytes take.
func (p *bufPool) chunksFor(n uint32) int { return (int(n) + p.unit - 1) / p.unit }

// get gives r chunks for its transfer when r is at the head of the line and
// there are enough; r.segs then maps exactly r.fr.DataLen bytes.
func (p *bufPool) get(r *request) admission {
	need := p.chunksFor(r.fr.DataLen)
	if a := p.wait.admit(r, len(p.free) >= need); a != admitted {
		return a
	}
	left := int(r.fr.DataLen)
	for i := 0; i < need; i++ {
		c := p.free[len(p.free)-1]
		p.free = p.free[:len(p.free)-1]
		r.chunks = append(r.chunks, c)
		n := min(left, p.unit)
		r.segs = append(r.segs, p.chunk(c)[:n])
		left -= n
	}
	r.fr.Data = r.segs
	return admitted
}

// put gives chunks back; the caller lets the line retry (retry).
func (p *bufPool) put(chunks []int32) { p.free = append(p.free, chunks...) }
