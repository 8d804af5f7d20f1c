package rdma

import (
	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma/internal/verbs"
)

// cmConn is one queue's connection in the shell: its rdma_cm ID and QP,
// and the device resources it took. It is the engine's qpConn.
type cmConn struct {
	l  *listener
	d  *device
	p  *poller
	cq *pollerCQ
	id verbs.CMID
	qp *verbs.QP
	// block is the queue's share of the registered region; cqes what it
	// takes of cq, one of p's CQs.
	block, cqes int
	q           *queue
	fq          *fabric.Queue
	// registered: the listener counts the connection (setup).
	registered bool
}

// SetError implements qpConn.
func (c *cmConn) SetError() error { return c.qp.SetError() }

// Disconnect implements qpConn.
func (c *cmConn) Disconnect() { c.id.Disconnect() }

// Destroy implements qpConn: the QP goes, the block and CQ entries return
// to the device, and the listener frees the ID.
func (c *cmConn) Destroy() {
	c.id.DestroyQP()
	c.d.freeBlock(c.block, c.p, c.cq, c.cqes)
	c.d.t.stats.QueuesLive.Add(-1)
	c.d.t.stats.Disconnected.Add(1)
	c.l.queueGone(c)
}

// InError implements qpConn.
func (c *cmConn) InError() (bool, error) { return c.qp.InError() }

// QPNum implements qpConn.
func (c *cmConn) QPNum() uint32 { return c.qp.Num() }

// connOf is q's connection, when q is a queue of the shell with a QP.
func (q *queue) connOf() (*cmConn, bool) {
	if q == nil {
		return nil, false
	}
	c, ok := q.conn.(*cmConn)
	return c, ok && c.qp != nil
}

// verbsBatch is the engine's workBatch over a verbs.Batch, for a poller
// and its SRQ (nil without).
type verbsBatch struct {
	*verbs.Batch
	srq *verbs.SRQ
}

func (b verbsBatch) Send(c qpConn) *verbs.SendWR { return b.Batch.Send(c.(*cmConn).qp) }
func (b verbsBatch) Recv(c qpConn) *verbs.RecvWR { return b.Batch.Recv(c.(*cmConn).qp) }
func (b verbsBatch) SRQRecv() *verbs.RecvWR      { return b.Batch.SRQRecv(b.srq) }
