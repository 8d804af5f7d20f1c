package fabric

import (
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/blockdev"
	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// NamespaceConfig describes one namespace.
type NamespaceConfig struct {
	NSID     uint32
	Device   blockdev.Device
	UUID     [16]byte
	NGUID    [16]byte // all zeroes: none
	EUI64    [8]byte  // all zeroes: none
	ReadOnly bool
	// ANAGroup is the namespace's ANA group, 1..limits.ANAGroups;
	// 0: limits.ANAGroup.
	ANAGroup uint32
	// Workers is how many goroutines run the backend's blocking I/O; 0 runs
	// it inline on the transport's goroutine (the memory backend).
	Workers int
	// Reservations shares the namespace's reservations with the other
	// targets that serve it (resvshare.go); nil: this target's alone.
	Reservations ReservationSharer
	// Hosts masks the namespace to these hosts (mask.go); none: every
	// host the subsystem allows sees it.
	Hosts []string
	// QoS limits its I/O (qos.go); zero: none.
	QoS QoSConfig
}

// Namespace is one namespace of a subsystem.
type Namespace struct {
	nsid       nvme.NSID
	dev        blockdev.Device
	uuid       [16]byte
	nguid      [16]byte
	eui64      [8]byte
	readOnly   bool
	blockShift uint
	// nblocks is the size in blocks, read on every I/O and changed by
	// ResizeNamespace.
	nblocks  atomic.Uint64
	anaGroup atomic.Uint32 // read on every I/O, changed by SetNamespaceANAGroup
	// sharedUnknown is set while the namespace's shared state (the
	// reservations other targets of a gateway group hold) cannot be
	// read: read on every I/O (ioPathStatus).
	sharedUnknown atomic.Bool
	// work runs the blocking backend calls; nil runs them inline (memory).
	work       *nsWorkers
	queuer     blockdev.Queuer     // the backend, when it can queue I/O on an IOContext
	zeroQueuer blockdev.ZeroQueuer // the backend, when it can queue zeroes and deallocations too
	lastErrLog atomic.Int64        // unix seconds of the last logged backend error

	// resv is the namespace's reservations (resvcmd.go); statePath the
	// file they persist in through power loss ("": no state directory).
	resv      nsResv
	statePath string
	subnqn    string
	log       *slog.Logger

	stats nsCounters
	// refs counts the commands executing on the namespace, so that it is
	// closed only after they finish; removed refuses new ones.
	refs    nsRefs
	removed atomic.Bool

	// hosts is the namespace's mask: the hosts that see it, nil for every
	// host the subsystem allows (mask.go). Read on every I/O.
	hosts atomic.Pointer[hostMask]
	// qos is the namespace's QoS while it limits anything, nil otherwise:
	// read on every I/O. qosState keeps it while off; qosMu orders
	// SetQoS and close.
	qos      atomic.Pointer[nsQoS]
	qosState *nsQoS
	qosMu    sync.Mutex
}

// NSID is the namespace ID.
func (ns *Namespace) NSID() nvme.NSID { return ns.nsid }

// SetSharedStateUnknown says whether the namespace's shared state (the
// reservations the other targets that serve it hold) cannot be read now.
// While it cannot, this target cannot tell whether a host's command
// conflicts with a reservation taken elsewhere, so every I/O command to it
// fails with ANA Inaccessible, a path error the host retries on another
// path.
func (ns *Namespace) SetSharedStateUnknown(unknown bool) { ns.sharedUnknown.Store(unknown) }

// SharedStateUnknown reports what SetSharedStateUnknown set.
func (ns *Namespace) SharedStateUnknown() bool { return ns.sharedUnknown.Load() }

// Stats is a snapshot of the namespace's counters.
func (ns *Namespace) Stats() NamespaceStats { return ns.stats.snapshot() }

// AddNamespace attaches a backend as a namespace.
func (s *Subsystem) AddNamespace(c NamespaceConfig) (*Namespace, error) {
	if s.discovery {
		return nil, errors.New("add namespace: the discovery subsystem has none")
	}
	nsid := nvme.NSID(c.NSID)
	if !nsid.Valid() {
		return nil, fmt.Errorf("add namespace: invalid NSID %d", c.NSID)
	}
	bs := c.Device.BlockSize()
	if bs < 512 || bs&(bs-1) != 0 {
		return nil, fmt.Errorf("add namespace %d: block size %d is not a power of two >= 512", c.NSID, bs)
	}
	ns := &Namespace{
		nsid: nsid, dev: c.Device, uuid: c.UUID, nguid: c.NGUID, eui64: c.EUI64, readOnly: c.ReadOnly,
		blockShift: uint(bits.TrailingZeros32(bs)),
	}
	group := c.ANAGroup
	if group == 0 {
		group = limits.ANAGroup
	}
	if err := CheckANAGroup(group); err != nil {
		return nil, fmt.Errorf("add namespace %d: %w", c.NSID, err)
	}
	ns.anaGroup.Store(group)
	ns.subnqn = s.nqn
	ns.log = s.t.log
	ns.resv.sharer = c.Reservations
	ns.resv.notify = func(n []resvNotice) { s.resvNotify(nsid, n) }
	ns.resv.wait = func(hosts []HostID) { s.waitHosts(ns, hosts, sharedAbortWait) }
	ns.statePath = resvStatePath(s.t.opts.StateDir, s.nqn, nsid)
	if err := ns.restoreResv(); err != nil {
		return nil, fmt.Errorf("add namespace %d: %w", c.NSID, err)
	}
	if err := CheckHosts(c.Hosts); err != nil {
		return nil, fmt.Errorf("add namespace %d: %w", c.NSID, err)
	}
	// Masked before it is published: no other host sees it for a moment.
	ns.hosts.Store(newHostMask(c.Hosts))
	if err := ns.SetQoS(c.QoS); err != nil {
		return nil, fmt.Errorf("add namespace %d: %w", c.NSID, err)
	}
	ns.queuer, _ = c.Device.(blockdev.Queuer)
	if ns.queuer != nil {
		ns.zeroQueuer, _ = c.Device.(blockdev.ZeroQueuer)
	}
	ns.nblocks.Store(uint64(c.Device.Size()) >> ns.blockShift)
	if ns.nblocks.Load() == 0 {
		return nil, fmt.Errorf("add namespace %d: device is smaller than one block", c.NSID)
	}
	if err := s.insertNamespace(ns, c.Workers); err != nil {
		return nil, err
	}
	if rn, ok := c.Device.(blockdev.ResizeNotifier); ok {
		rn.NotifyResize(func() { s.followBackend(ns) })
	}
	// Hosts connected now that see it learn of it (nothing is connected
	// at start).
	s.nsChangedFor(ns)
	return ns, nil
}

// followBackend takes the size a backend that changed size on its own (an
// RBD image resized by `rbd resize` or another gateway) now has, and tells
// the hosts as ResizeNamespace does. A shrink is followed too: the image is
// smaller whatever the hosts are told, and I/O past its end fails anyway.
func (s *Subsystem) followBackend(ns *Namespace) {
	nb := uint64(ns.dev.Size()) >> ns.blockShift
	if ns.removed.Load() || nb == 0 {
		return
	}
	old := ns.nblocks.Swap(nb)
	if old == nb {
		return
	}
	s.t.log.Info("namespace resized by its backend", "subnqn", s.nqn, "nsid", ns.nsid, "bytes", nb<<ns.blockShift, "was", old<<ns.blockShift)
	s.nsChangedFor(ns)
}

// workQueueDepth is how many commands wait for a namespace's workers before
// more are refused (submit). A variable for tests.
var workQueueDepth = 1 << 16

// insertNamespace publishes ns, with its workers, unless its NSID is taken.
func (s *Subsystem) insertNamespace(ns *Namespace, workers int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.removed {
		return fmt.Errorf("add namespace %d: subsystem removed", ns.nsid)
	}
	if _, ok := s.namespaces[ns.nsid]; ok {
		return fmt.Errorf("add namespace %d: NSID in use", ns.nsid)
	}
	if workers > 0 {
		// They start as commands wait; past workQueueDepth waiting,
		// submit refuses: it never blocks.
		ns.work = newNSWorkers(workers)
	}
	s.namespaces[ns.nsid] = ns
	s.publishNamespaces()
	s.maxNSID = max(s.maxNSID, ns.nsid)
	return nil
}

// NamespaceInfo describes a namespace for the operator.
type NamespaceInfo struct {
	NSID      nvme.NSID
	Size      int64 // bytes
	BlockSize uint32
	ReadOnly  bool
	UUID      [16]byte
}

// Info describes the namespace.
func (ns *Namespace) Info() NamespaceInfo {
	return NamespaceInfo{
		NSID: ns.nsid, Size: int64(ns.nblocks.Load()) << ns.blockShift, BlockSize: 1 << ns.blockShift,
		ReadOnly: ns.readOnly, UUID: ns.uuid,
	}
}

// publishNamespaces makes the namespace map the one the I/O path reads. s.mu is held.
func (s *Subsystem) publishNamespaces() {
	table := make(map[nvme.NSID]*Namespace, len(s.namespaces))
	s.nsids = s.nsids[:0]
	for k, v := range s.namespaces {
		table[k] = v
		s.nsids = append(s.nsids, k)
	}
	s.nsTable.Store(&table)
	sort.Slice(s.nsids, func(i, j int) bool { return s.nsids[i] < s.nsids[j] })
}

// ErrNoNamespace means the subsystem has no namespace with that NSID.
var ErrNoNamespace = errors.New("no such namespace")

// RemoveNamespace detaches a namespace while hosts may be using it: new
// commands to it get Invalid Namespace, hosts get a Namespace Attribute
// Changed notice, commands already executing complete, and only then is the
// backend flushed and closed.
func (s *Subsystem) RemoveNamespace(nsid nvme.NSID) error {
	s.mu.Lock()
	ns := s.namespaces[nsid]
	if ns != nil {
		delete(s.namespaces, nsid)
		s.publishNamespaces()
	}
	s.mu.Unlock()
	if ns == nil {
		return fmt.Errorf("remove namespace %d: %w", nsid, ErrNoNamespace)
	}
	s.nsChangedFor(ns)
	return ns.close()
}

// ResizeNamespace changes a namespace's size while hosts use it, and tells
// them (the Linux host then updates the block device's capacity). The
// backend must be a blockdev.Resizer; size is in bytes, 0 for the
// backend's own size now (a file's length, a block device's whole size:
// see BackingSize). It does not refuse a smaller size: its caller decides
// whether hosts may lose the end.
func (s *Subsystem) ResizeNamespace(nsid nvme.NSID, size int64) error {
	ns := s.namespace(nsid)
	if ns == nil {
		return fmt.Errorf("resize namespace %d: %w", nsid, ErrNoNamespace)
	}
	rs, ok := ns.dev.(blockdev.Resizer)
	if !ok {
		return fmt.Errorf("resize namespace %d: %w: the backend cannot change size", nsid, blockdev.ErrNotSupported)
	}
	if err := rs.Resize(size); err != nil {
		return fmt.Errorf("resize namespace %d: %w", nsid, err)
	}
	nb := uint64(ns.dev.Size()) >> ns.blockShift
	if nb == ns.nblocks.Swap(nb) {
		return nil
	}
	s.nsChangedFor(ns)
	return nil
}

// BackingSize reads the size of the namespace's backend now (a file's
// length, a block device's size, rounded down to the block size), which
// may differ from the size hosts see (Info) after the file or volume was
// grown or cut from outside. The backend must be a blockdev.Resizer.
func (ns *Namespace) BackingSize() (int64, error) {
	rs, ok := ns.dev.(blockdev.Resizer)
	if !ok {
		return 0, fmt.Errorf("namespace %d: %w: the backend cannot change size", ns.nsid, blockdev.ErrNotSupported)
	}
	n, err := rs.BackingSize()
	if err != nil {
		return 0, fmt.Errorf("namespace %d: %w", ns.nsid, err)
	}
	return n, nil
}

// nsRefs counts commands executing on a namespace, sharded by queue like
// its counters so that queues on different cores do not share a line.
type nsRefs struct {
	shards [statShards]struct {
		n atomic.Int64
		_ [56]byte
	}
}

// enter counts r as executing on its namespace, unless the namespace was
// removed since r was parsed. A command counted is let go by exit, in
// Request.complete.
func (ns *Namespace) enter(r *Request) bool {
	c := &ns.refs.shards[int(r.q.qid)&(statShards-1)].n
	c.Add(1)
	// Ordered with close: it sets removed, then reads the counts.
	if ns.removed.Load() {
		c.Add(-1)
		return false
	}
	return true
}

func (ns *Namespace) exit(r *Request) { ns.refs.shards[int(r.q.qid)&(statShards-1)].n.Add(-1) }

// Executing is how many commands execute on the namespace now.
func (ns *Namespace) Executing() int64 { return ns.executing() }

func (ns *Namespace) executing() int64 {
	var n int64
	for i := range ns.refs.shards {
		n += ns.refs.shards[i].n.Load()
	}
	return n
}

// drainLogEvery is how often a namespace waiting for its commands says so.
const drainLogEvery = 10 * time.Second

// close refuses new commands, waits for those executing, stops the workers
// and flushes and closes the backend. Only once.
func (ns *Namespace) close() error {
	if ns.removed.Swap(true) {
		return nil
	}
	ns.closeQoS()
	start := time.Now()
	for last := start; ns.executing() > 0; {
		time.Sleep(time.Millisecond)
		if time.Since(last) > drainLogEvery {
			last = time.Now()
			slog.Default().Warn("namespace still has commands executing", "nsid", ns.nsid,
				"executing", ns.executing(), "waited", time.Since(start).Round(time.Second))
		}
	}
	if ns.work != nil {
		ns.work.stop()
	}
	var errs []error
	if err := ns.dev.Flush(); err != nil {
		errs = append(errs, fmt.Errorf("flush namespace %d: %w", ns.nsid, err))
	}
	if err := ns.dev.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close namespace %d: %w", ns.nsid, err))
	}
	return errors.Join(errs...)
}
