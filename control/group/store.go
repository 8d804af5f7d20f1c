package group

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Object is the state object as read: its data, its omap and its version
// (0: there is none).
type Object struct {
	Data    []byte
	Omap    map[string][]byte
	Version uint64
}

// Notice is a notification a watcher got.
type Notice struct {
	Payload []byte
	// Self is set when this very client sent it.
	Self bool
	// Ack acknowledges it: the notifier waits for every watcher's, up to
	// its timeout. Call it once.
	Ack func()
}

// Store is what a gateway group needs of RADOS: the state object (read,
// compare-and-swap, watch and notify), the leases object, and fencing.
// The rados package implements it over a pool; MemStore in memory.
type Store interface {
	// Read returns the state object.
	Read(ctx context.Context) (Object, error)
	// Write changes the state object's omap, setting set and removing
	// rm, if the object's version is still ver; ver 0 creates the object
	// with data, and fails if one exists. ErrConflict otherwise.
	Write(ctx context.Context, ver uint64, data []byte, set map[string][]byte, rm []string) error
	// Notify sends payload to the state object's watchers, and waits up
	// to timeout for them to acknowledge: it returns how many did and
	// how many did not.
	Notify(ctx context.Context, payload []byte, timeout time.Duration) (acked, missed int, err error)
	// Watch calls fn, on one goroutine, with every notification of the
	// state object until stop.
	Watch(fn func(Notice)) (stop func(), err error)
	// Watching reports whether the watch holds now: while it does not, a
	// notification may be lost.
	Watching() bool
	// Heartbeat takes or renews gateway id's lease lock for incarnation,
	// to be held for hold from now, and then writes its lease record; if
	// another client, or another incarnation, holds the lock, it writes
	// nothing and returns ErrIDTaken.
	Heartbeat(ctx context.Context, id int, incarnation string, hold time.Duration, record []byte) error
	// Leases reads the lease records of gateways 1..limits.GroupGateways,
	// each with who holds its lock now.
	Leases(ctx context.Context) (map[int]Lease, error)
	// Blocklist fences clients by address: the cluster refuses their
	// operations from then on.
	Blocklist(ctx context.Context, addrs []string) error
	// Blocklisted reports whether every one of addrs is blocklisted.
	Blocklisted(ctx context.Context, addrs []string) (bool, error)
	// Addrs are this store's client's addresses, as Blocklist takes them.
	Addrs() []string
}

// Lease is a gateway's lease as read.
type Lease struct {
	Record []byte
	// Holder is who holds the gateway's lease lock now, as the cluster
	// says; nil: nobody (it lapsed).
	Holder *Holder
}

// Holder is the holder of a lease lock.
type Holder struct {
	// Cookie is the incarnation that took it; Addr its client's address.
	Cookie, Addr string
}

// ErrIDTaken is a heartbeat refused because another gateway holds this
// gateway ID's lease: two gateways were given one ID, or this one stalled
// past its lease and another took the ID.
var ErrIDTaken = errors.New("another gateway holds this gateway ID's lease")

// ErrBlocklisted is an operation refused because this client was
// blocklisted: another gateway fenced this one.
var ErrBlocklisted = errors.New("this gateway's RADOS client is blocklisted")

// MemStore is a Store in memory, for tests: several gateways share its
// Cluster, each through a MemStore of its own (its client).
type MemStore struct {
	c    *Cluster
	addr string
}

// Cluster is what MemStores share: the objects, the watchers, the
// blocklist.
type Cluster struct {
	mu        sync.Mutex
	obj       Object
	leases    map[int][]byte
	locks     map[int]memLock
	now       func() time.Time
	blocklist map[string]bool
	watchers  map[*memWatch]bool
	// Fail, when set, fails every operation with it (an unreachable
	// cluster).
	Fail error
	// WatchLost, when set, is every client's watch lost.
	WatchLost atomic.Bool
}

// memLock is a lease lock: who holds it, until when.
type memLock struct {
	owner  *MemStore
	cookie string
	until  time.Time
}

type memWatch struct {
	owner *MemStore
	ch    chan memNote
	done  chan struct{}
}

type memNote struct {
	payload []byte
	self    bool
	ack     chan struct{}
}

// NewCluster makes an empty in-memory cluster.
func NewCluster() *Cluster {
	return &Cluster{leases: map[int][]byte{}, locks: map[int]memLock{}, now: time.Now, blocklist: map[string]bool{}, watchers: map[*memWatch]bool{}}
}

// SetClock makes now the clock lease locks lapse by.
func (c *Cluster) SetClock(now func() time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = now
}

// SetLease writes gateway id's lease record as anyone holding the pool's
// keys could (a test's forgery), and, if holder is not nil, takes its lock
// for holder until until, as a client that finds the lock free can.
func (c *Cluster) SetLease(id int, record []byte, holder *Holder, until time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leases[id] = slices.Clone(record)
	if holder != nil {
		c.locks[id] = memLock{owner: &MemStore{c: c, addr: holder.Addr}, cookie: holder.Cookie, until: until}
	}
}

// Client makes a client of the cluster with address addr.
func (c *Cluster) Client(addr string) *MemStore { return &MemStore{c: c, addr: addr} }

// Put replaces the state object whole, as `rados put` and `rados
// setomapval` would: a test's corruption.
func (c *Cluster) Put(o Object) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.obj = Object{Data: slices.Clone(o.Data), Omap: maps.Clone(o.Omap), Version: c.obj.Version + 1}
}

// Remove removes the state object, as `rados rm` would.
func (c *Cluster) Remove() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.obj = Object{}
}

// Object is the state object now.
func (c *Cluster) Object() Object {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Object{Data: slices.Clone(c.obj.Data), Omap: maps.Clone(c.obj.Omap), Version: c.obj.Version}
}

// Blocklisted reports whether addr is blocklisted.
func (c *Cluster) Blocklisted(addr string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.blocklist[addr]
}

// check fails an operation of s's client. c.mu is held.
func (s *MemStore) check() error {
	if s.c.Fail != nil {
		return s.c.Fail
	}
	if s.c.blocklist[s.addr] {
		return ErrBlocklisted
	}
	return nil
}

func (s *MemStore) Read(ctx context.Context) (Object, error) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if err := s.check(); err != nil {
		return Object{}, err
	}
	o := s.c.obj
	return Object{Data: slices.Clone(o.Data), Omap: maps.Clone(o.Omap), Version: o.Version}, nil
}

func (s *MemStore) Write(ctx context.Context, ver uint64, data []byte, set map[string][]byte, rm []string) error {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if err := s.check(); err != nil {
		return err
	}
	if s.c.obj.Version != ver {
		return ErrConflict
	}
	if ver == 0 {
		s.c.obj = Object{Data: slices.Clone(data), Omap: map[string][]byte{}}
	}
	o := &s.c.obj
	o.Omap = maps.Clone(o.Omap)
	for k, v := range set {
		o.Omap[k] = slices.Clone(v)
	}
	for _, k := range rm {
		delete(o.Omap, k)
	}
	o.Version++
	return nil
}

func (s *MemStore) Notify(ctx context.Context, payload []byte, timeout time.Duration) (acked, missed int, err error) {
	s.c.mu.Lock()
	if err := s.check(); err != nil {
		s.c.mu.Unlock()
		return 0, 0, err
	}
	var acks []chan struct{}
	for w := range s.c.watchers {
		n := memNote{payload: slices.Clone(payload), self: w.owner == s, ack: make(chan struct{})}
		acks = append(acks, n.ack)
		go func() {
			select {
			case w.ch <- n:
			case <-w.done:
			}
		}()
	}
	s.c.mu.Unlock()
	deadline := time.After(timeout)
	for _, a := range acks {
		select {
		case <-a:
			acked++
		case <-deadline:
			missed++
		}
	}
	return acked, missed, nil
}

func (s *MemStore) Watch(fn func(Notice)) (func(), error) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if err := s.check(); err != nil {
		return nil, err
	}
	w := &memWatch{owner: s, ch: make(chan memNote), done: make(chan struct{})}
	s.c.watchers[w] = true
	go func() {
		for {
			select {
			case n := <-w.ch:
				var once sync.Once
				fn(Notice{Payload: n.payload, Self: n.self, Ack: func() { once.Do(func() { close(n.ack) }) }})
			case <-w.done:
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.c.mu.Lock()
			delete(s.c.watchers, w)
			s.c.mu.Unlock()
			close(w.done)
		})
	}, nil
}

func (s *MemStore) Watching() bool { return !s.c.WatchLost.Load() }

func (s *MemStore) Heartbeat(ctx context.Context, id int, incarnation string, hold time.Duration, record []byte) error {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if err := s.check(); err != nil {
		return err
	}
	now := s.c.now()
	if l, ok := s.c.locks[id]; ok && now.Before(l.until) && (l.owner.addr != s.addr || l.cookie != incarnation) {
		return fmt.Errorf("%w: held by %s for %s", ErrIDTaken, l.owner.addr, l.cookie)
	}
	s.c.locks[id] = memLock{owner: s, cookie: incarnation, until: now.Add(hold)}
	s.c.leases[id] = slices.Clone(record)
	return nil
}

func (s *MemStore) Leases(ctx context.Context) (map[int]Lease, error) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if err := s.check(); err != nil {
		return nil, err
	}
	out := map[int]Lease{}
	now := s.c.now()
	for id, r := range s.c.leases {
		l := Lease{Record: slices.Clone(r)}
		if k, ok := s.c.locks[id]; ok && now.Before(k.until) {
			l.Holder = &Holder{Cookie: k.cookie, Addr: k.owner.addr}
		}
		out[id] = l
	}
	return out, nil
}

func (s *MemStore) Blocklisted(ctx context.Context, addrs []string) (bool, error) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if err := s.check(); err != nil {
		return false, err
	}
	for _, a := range addrs {
		if !s.c.blocklist[a] {
			return false, nil
		}
	}
	return len(addrs) > 0, nil
}

func (s *MemStore) Blocklist(ctx context.Context, addrs []string) error {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if err := s.check(); err != nil {
		return err
	}
	for _, a := range addrs {
		s.c.blocklist[a] = true
	}
	return nil
}

func (s *MemStore) Addrs() []string { return []string{s.addr} }
