package fabric

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/nvmeof-tgt/nvmeof-tgt/blockdev"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// IOContext lets one transport thread run backend I/O itself: reads, writes
// and flushes of namespaces whose backend can queue them (files, block
// devices, RBD images), and Write Zeroes and deallocations of those that can
// queue them too (RBD images), go on the context's ring (io_uring, librbd's
// completion queue) instead of to the namespace's workers, and the thread
// collects their completions with Poll, between its own polls. No goroutine
// hand-off is on that path.
//
// One goroutine owns an IOContext: it executes every request of the queues
// bound to it (Queue.UseIOContext) and calls Poll and Close.
type IOContext struct {
	ring  *blockdev.Ring
	reqs  []*Request // by slot; the slot is the tag of the request's operations
	free  []uint32
	comps []blockdev.Completion
	count *atomic.Uint64
}

// NewIOContext sets up an io_uring for depth requests in flight. wakeFD, an
// eventfd, is signalled on every completion when it is not -1, so the owner
// can sleep on it. It fails where the kernel has no io_uring (or forbids it):
// the caller then leaves its queues on the workers.
func NewIOContext(depth, wakeFD int) (*IOContext, error) {
	ring, err := blockdev.NewRing(depth)
	if err != nil {
		return nil, err
	}
	if wakeFD >= 0 {
		if err := ring.RegisterEventFD(wakeFD); err != nil {
			ring.Close()
			return nil, err
		}
	}
	c := &IOContext{ring: ring, reqs: make([]*Request, depth), free: make([]uint32, depth), comps: make([]blockdev.Completion, 64)}
	for i := range c.free {
		c.free[i] = uint32(depth - 1 - i)
	}
	return c, nil
}

// CountInto makes c count the requests it takes into ctr, which other
// goroutines may read. Call it before c is used.
func (c *IOContext) CountInto(ctr *atomic.Uint64) { c.count = ctr }

// UseIOContext binds the queue to c: its I/O runs on c from now on. Call it
// before the queue's first command, from the goroutine that owns c.
func (q *Queue) UseIOContext(c *IOContext) { q.io = c }

// Pending is the number of requests with backend I/O in flight on c.
func (c *IOContext) Pending() int { return len(c.reqs) - len(c.free) }

// Arm prepares the owner's sleep on the wake eventfd: a completion from now
// on signals it. It reports false when one is waiting already; the owner
// then polls rather than sleeps.
func (c *IOContext) Arm() bool { return c.ring.Arm() }

// Poll submits what was queued since the last call and completes the
// requests whose I/O finished. It returns how many it completed.
func (c *IOContext) Poll() int {
	// An error here is the kernel refusing the ring itself; the operations
	// it did not take come back through Reap with that error.
	_ = c.ring.Submit()
	done := 0
	for {
		n := c.ring.Reap(c.comps)
		for _, comp := range c.comps[:n] {
			r := c.reqs[comp.Tag]
			if comp.Err != nil && r.ioErr == nil {
				r.ioErr = comp.Err
			}
			r.ioLeft--
			if r.ioLeft == 0 {
				c.release(uint32(comp.Tag))
				r.complete(r.ns.ioDone(r))
				done++
			}
		}
		if n < len(c.comps) {
			return done
		}
	}
}

// Close waits for the I/O in flight and releases the ring. The requests
// still on it are not completed: their queues are gone by then.
func (c *IOContext) Close() error {
	if err := c.ring.Close(); err != nil {
		return fmt.Errorf("close I/O context: %w", err)
	}
	return nil
}

func (c *IOContext) release(slot uint32) {
	c.reqs[slot] = nil
	c.free = append(c.free, slot)
}

// queueIO puts r's read, write or flush, or its Write Zeroes or
// deallocation (dsm, its ranges, checked), on its queue's I/O context. It
// reports false when that cannot be done (no context, a backend that cannot
// queue, a full ring): the caller runs the request the blocking way.
func (ns *Namespace) queueIO(r *Request, op uint8, dsm []byte) (nvme.Status, bool) {
	c := r.ioContext()
	if c == nil || ns.queuer == nil || len(c.free) == 0 {
		return 0, false
	}
	parts := max(1, len(r.Data))
	switch op {
	case nvme.OpWriteZeroes:
		parts = 1
	case nvme.OpDSM:
		parts = len(dsm) / nvme.DSMRangeSize
	}
	if c.ring.Space() < parts || (op == nvme.OpWriteZeroes || op == nvme.OpDSM) && ns.zeroQueuer == nil {
		return 0, false
	}
	slot := c.free[len(c.free)-1]
	tag := uint64(slot)
	r.ioOp, r.ioErr, r.ioLeft = op, nil, 0
	off := int64(r.Cmd.SLBA() << ns.blockShift)
	var err error
	switch op {
	case nvme.OpWriteZeroes:
		n := int64(r.Cmd.NumBlocks()) << ns.blockShift
		if err = ns.zeroQueuer.QueueWriteZeroes(c.ring, off, n, r.durable(), tag); err == nil {
			ns.stats.shard(r).zeroOps.Add(1)
			r.ioLeft++
		}
	case nvme.OpDSM:
		for i := 0; i+nvme.DSMRangeSize <= len(dsm); i += nvme.DSMRangeSize {
			rg := nvme.DSMRange(dsm[i : i+nvme.DSMRangeSize])
			if rg.NumBlocks() == 0 {
				continue
			}
			off, n := int64(rg.SLBA()<<ns.blockShift), int64(uint64(rg.NumBlocks())<<ns.blockShift)
			err = ns.zeroQueuer.QueueDiscard(c.ring, off, n, tag)
			if errors.Is(err, blockdev.ErrNotQueued) && r.ioLeft > 0 {
				// Part is queued already: do this range the blocking way.
				err = ns.dev.Discard(off, n)
			} else if err == nil {
				r.ioLeft++
			}
			if err != nil {
				break
			}
		}
	case nvme.OpFlush:
		if err = ns.queuer.QueueFlush(c.ring, tag); err == nil {
			ns.stats.count(r, nvme.OpFlush)
			r.ioLeft++
		}
	case nvme.OpRead, nvme.OpWrite:
		durable := op == nvme.OpWrite && r.durable()
		for _, seg := range r.Data {
			if op == nvme.OpRead {
				err = ns.queuer.QueueRead(c.ring, seg, off, tag)
			} else {
				err = ns.queuer.QueueWrite(c.ring, seg, off, durable, tag)
			}
			if errors.Is(err, blockdev.ErrNotQueued) && r.ioLeft > 0 {
				// Part is queued already: do this segment the blocking way.
				err = ns.syncSegment(op, seg, off, durable)
			} else if err == nil {
				r.ioLeft++
			}
			if err != nil {
				break
			}
			off += int64(len(seg))
		}
	}
	if errors.Is(err, blockdev.ErrNotQueued) && r.ioLeft == 0 {
		return 0, false
	}
	if op == nvme.OpDSM {
		ns.stats.shard(r).discardOps.Add(1)
	}
	if err != nil {
		r.ioErr = err
	}
	if r.ioLeft == 0 {
		// Nothing went on the ring: it failed before any I/O.
		return ns.ioDone(r), true
	}
	c.free = c.free[:len(c.free)-1]
	c.reqs[slot] = r
	if c.count != nil {
		c.count.Add(1)
	}
	return statusPending, true
}

// ioContext is the IOContext r's I/O may go on, or nil: none when r runs
// off its transport's goroutine.
func (r *Request) ioContext() *IOContext {
	if r.offOwner {
		return nil
	}
	return r.q.io
}

// syncSegment is one segment the blocking way, for a request partly queued.
func (ns *Namespace) syncSegment(op uint8, seg []byte, off int64, durable bool) error {
	if op == nvme.OpRead {
		_, err := ns.dev.ReadAt(seg, off)
		return err
	}
	if _, err := ns.dev.WriteAt(seg, off); err != nil {
		return err
	}
	if durable {
		return ns.dev.Flush()
	}
	return nil
}

// ioDone is the status of a request whose queued I/O all finished.
func (ns *Namespace) ioDone(r *Request) nvme.Status {
	if r.ioErr != nil {
		err := r.ioErr
		r.ioErr = nil
		return ns.fail(r, r.ioOp, err)
	}
	if r.ioOp != nvme.OpFlush { // counted when queued
		ns.stats.count(r, r.ioOp)
	}
	r.dataWritten = r.ioOp == nvme.OpRead
	return nvme.StatusSuccess
}
