package group

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
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
	// Heartbeat writes gateway id's lease record.
	Heartbeat(ctx context.Context, id int, record []byte) error
	// Leases reads every gateway's lease record.
	Leases(ctx context.Context) (map[int][]byte, error)
	// Blocklist fences clients by address: the cluster refuses their
	// operations from then on.
	Blocklist(ctx context.Context, addrs []string) error
	// Addrs are this store's client's addresses, as Blocklist takes them.
	Addrs() []string
}

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
	blocklist map[string]bool
	watchers  map[*memWatch]bool
	// Fail, when set, fails every operation with it (an unreachable
	// cluster).
	Fail error
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
	return &Cluster{leases: map[int][]byte{}, blocklist: map[string]bool{}, watchers: map[*memWatch]bool{}}
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

func (s *MemStore) Heartbeat(ctx context.Context, id int, record []byte) error {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if err := s.check(); err != nil {
		return err
	}
	s.c.leases[id] = slices.Clone(record)
	return nil
}

func (s *MemStore) Leases(ctx context.Context) (map[int][]byte, error) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if err := s.check(); err != nil {
		return nil, err
	}
	return maps.Clone(s.c.leases), nil
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
