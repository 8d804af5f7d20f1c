package fabric

import (
	"math/bits"
	"sync/atomic"
	"time"

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
	// WorkersFull counts commands refused, for the host to retry, because
	// the namespace's workers had too many waiting (Namespace.submit).
	WorkersFull uint64
	// Latency of read, write and flush (indexed by LatRead, LatWrite,
	// LatFlush), from Parse to completion; see Request.start.
	Latency [LatOps]LatencyHistogram
}

// Latency ops: the indexes of NamespaceStats.Latency, which are the NVM
// opcodes of Flush, Write and Read.
const (
	LatFlush = nvme.OpFlush
	LatWrite = nvme.OpWrite
	LatRead  = nvme.OpRead
	LatOps   = 3
)

// Latency buckets: bucket i counts commands that took at most
// LatencyBucketBase<<i (8us to 33.6s, past the Linux host's default I/O
// timeout, nvme_core.io_timeout=30s); bucket LatencyBuckets counts the
// slower ones. Fixed bounds let the I/O path pick a bucket with a division
// and a bit length, and need no configuration.
const (
	LatencyBuckets    = 23
	LatencyBucketBase = 8 * time.Microsecond
)

// LatencyBound is the upper bound of bucket i < LatencyBuckets.
func LatencyBound(i int) time.Duration { return LatencyBucketBase << i }

// LatencyHistogram is a snapshot of one operation's latencies.
type LatencyHistogram struct {
	// Buckets are per bucket, not cumulative; the last is the overflow.
	Buckets [LatencyBuckets + 1]uint64
	// Sum is the total latency of the counted commands.
	Sum time.Duration
}

// Count is the number of commands counted.
func (h *LatencyHistogram) Count() uint64 {
	var n uint64
	for _, b := range h.Buckets {
		n += b
	}
	return n
}

// latencyBucket is the bucket of a latency of d nanoseconds.
func latencyBucket(d int64) int {
	if d <= 0 {
		return 0
	}
	return min(bits.Len64(uint64(d-1)/uint64(LatencyBucketBase)), LatencyBuckets)
}

// nsCounters are a namespace's live counters, one shard per queue slot (the
// queue ID modulo statShards); readers add the shards up.
type nsCounters struct {
	shards [statShards]nsShard
	lat    [statShards]latShard
	// workersFull is rare (a flood): one counter is enough.
	workersFull atomic.Uint64
}

// latShard holds one shard's latency histograms. The count of an operation
// is the sum of its buckets, so a snapshot's count always matches them.
type latShard struct {
	ops [LatOps]struct {
		buckets [LatencyBuckets + 1]atomic.Uint64
		sum     atomic.Uint64 // nanoseconds
	}
	_ [64]byte
}

type nsShard struct {
	readOps, writeOps, readBytes, writeBytes atomic.Uint64
	flushOps, zeroOps, discardOps, errors    atomic.Uint64
	// The eight counters fill a cache line; the pad keeps the next shard off
	// it whatever the alignment.
	_ [64]byte
}

// epoch anchors nanotime. time.Since of a Time with a monotonic reading
// reads only the monotonic clock (one vDSO call); time.Now reads the wall
// clock as well.
var epoch = time.Now()

// nanotime is monotonic nanoseconds since epoch.
func nanotime() int64 { return int64(time.Since(epoch)) }

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

// observe records the latency of read, write or flush r, d nanoseconds.
func (c *nsCounters) observe(r *Request, op uint8, d int64) {
	if op >= LatOps {
		return
	}
	h := &c.lat[int(r.q.qid)&(statShards-1)].ops[op]
	h.buckets[latencyBucket(d)].Add(1)
	h.sum.Add(uint64(max(d, 0)))
}

func (c *nsCounters) snapshot() NamespaceStats {
	s := NamespaceStats{WorkersFull: c.workersFull.Load()}
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
		for op := range c.lat[i].ops {
			h := &c.lat[i].ops[op]
			for b := range h.buckets {
				s.Latency[op].Buckets[b] += h.buckets[b].Load()
			}
			s.Latency[op].Sum += time.Duration(h.sum.Load())
		}
	}
	return s
}
