package fabric

import (
	"sync/atomic"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// statShards spreads a namespace's counters over cache lines by queue, so
// that queues running on different cores do not fight over one line on every
// I/O. A power of two.
const statShards = 16

// NamespaceStats is a snapshot of a namespace's I/O counters.
type NamespaceStats struct {
	ReadOps, WriteOps, ReadBytes, WriteBytes uint64
	FlushOps, ZeroOps, DiscardOps, Errors    uint64
}

// nsCounters are a namespace's live counters, one shard per queue slot (the
// queue ID modulo statShards); readers add the shards up.
type nsCounters struct {
	shards [statShards]nsShard
}

type nsShard struct {
	readOps, writeOps, readBytes, writeBytes atomic.Uint64
	flushOps, zeroOps, discardOps, errors    atomic.Uint64
	// The eight counters fill a cache line; the pad keeps the next shard off
	// it whatever the alignment.
	_ [64]byte
}

// shard is the shard of the queue r arrived on.
func (c *nsCounters) shard(r *Request) *nsShard {
	return &c.shards[int(r.q.qid)&(statShards-1)]
}

// count records one read, write (with its bytes) or flush of r.
func (c *nsCounters) count(r *Request, op uint8) {
	sh := c.shard(r)
	switch op {
	case nvme.OpRead:
		sh.readOps.Add(1)
		sh.readBytes.Add(uint64(r.DataLen))
	case nvme.OpWrite:
		sh.writeOps.Add(1)
		sh.writeBytes.Add(uint64(r.DataLen))
	case nvme.OpFlush:
		sh.flushOps.Add(1)
	}
}

func (c *nsCounters) snapshot() NamespaceStats {
	var s NamespaceStats
	for i := range c.shards {
		sh := &c.shards[i]
		s.ReadOps += sh.readOps.Load()
		s.WriteOps += sh.writeOps.Load()
		s.ReadBytes += sh.readBytes.Load()
		s.WriteBytes += sh.writeBytes.Load()
		s.FlushOps += sh.flushOps.Load()
		s.ZeroOps += sh.zeroOps.Load()
		s.DiscardOps += sh.discardOps.Load()
		s.Errors += sh.errors.Load()
	}
	return s
}
