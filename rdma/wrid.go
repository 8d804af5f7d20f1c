package rdma

// Work request kinds, carried in the top bits of wr_id.
const (
	kindRecv = iota + 1
	kindSend
	kindRead // the last RDMA READ of a request, signaled
	kindWrite
	// kindReadPart is an RDMA READ before the last of its request,
	// unsignaled: seen only when it fails or is flushed, and then the last
	// one, behind it on the same send queue, still has to come back before
	// the request's buffers are free.
	kindReadPart
	// kindSRQRecv is a receive of the poller's shared receive queue: its
	// index is the buffer, and the completion's QP number names the queue.
	kindSRQRecv
)

// wr_id = kind<<48 | queue slot<<32 | generation<<16 | index. It holds
// indexes into the engine's tables, never a Go pointer: the slot finds the
// queue, the generation tells a late completion of a queue already gone,
// and the index is a receive slot (kindRecv), an SRQ buffer (kindSRQRecv,
// with no slot or generation) or a request.
func wrID(kind int, slot, gen, idx uint16) uint64 {
	return uint64(kind)<<48 | uint64(slot)<<32 | uint64(gen)<<16 | uint64(idx)
}

func splitWRID(id uint64) (kind int, slot, gen, idx uint16) {
	return int(id >> 48), uint16(id >> 32), uint16(id >> 16), uint16(id)
}
