package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/control/group"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// fakeClock is the gateways' clock: the test moves it past a lease.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// switchStore is a gateway's store whose writes of the state can be made
// to lose every compare-and-swap.
type switchStore struct {
	*group.MemStore
	conflict atomic.Bool
	writes   atomic.Int32
	// gate, when armed, holds the next read's result (as read then)
	// until it is closed: a read that returns late.
	gate    chan struct{}
	armed   atomic.Bool
	noAddrs atomic.Bool
	// beatFails makes the lease's writes fail (the cluster unreachable).
	beatFails atomic.Bool
	// readFails makes the state's reads fail; reads counts them.
	readFails atomic.Bool
	reads     atomic.Int64
	// block, when set, holds every read until it is closed: reads that
	// take long (an OSD slow to answer).
	block atomic.Pointer[chan struct{}]
	// leasesFail makes the leases' reads fail: no OSD answers.
	leasesFail atomic.Bool
}

func (s *switchStore) Leases(ctx context.Context) (map[int]group.Lease, error) {
	if s.leasesFail.Load() {
		return nil, errors.New("injected: no OSD answers")
	}
	return s.MemStore.Leases(ctx)
}

func (s *switchStore) Heartbeat(ctx context.Context, id int, inc string, hold time.Duration, rec []byte) error {
	if s.beatFails.Load() {
		return errors.New("injected: the lease cannot be written")
	}
	return s.MemStore.Heartbeat(ctx, id, inc, hold, rec)
}

func (s *switchStore) Read(ctx context.Context) (group.Object, error) {
	s.reads.Add(1)
	if b := s.block.Load(); b != nil {
		<-*b
	}
	if s.readFails.Load() {
		return group.Object{}, errors.New("injected: the state cannot be read")
	}
	o, err := s.MemStore.Read(ctx)
	if s.armed.CompareAndSwap(true, false) {
		<-s.gate
	}
	return o, err
}

// Addrs are none while noAddrs is set: a client whose addresses cannot be read.
func (s *switchStore) Addrs() []string {
	if s.noAddrs.Load() {
		return nil
	}
	return s.MemStore.Addrs()
}

func (s *switchStore) Write(ctx context.Context, ver uint64, data []byte, set map[string][]byte, rm []string) error {
	s.writes.Add(1)
	if s.conflict.Load() {
		return group.ErrConflict
	}
	return s.MemStore.Write(ctx, ver, data, set, rm)
}

type gwNode struct {
	tgt    *fabric.Target
	m      *Manager
	store  *switchStore
	fenced atomic.Bool
	// barriers counts the OSD-map barriers run after a blocklist that had
	// fenced B; barrierEarly those run before it.
	barriers, barrierEarly atomic.Int32
	// extra are client addresses the gateway reports beside its store's
	// (GroupOptions.Addrs: its rbd namespaces' connections); extraFn, when
	// set, gives them instead.
	extra   atomic.Pointer[[]string]
	extraFn atomic.Value // func() []string
	// unsettled: a write of its data path timed out (GroupOptions.Unsettled).
	unsettled atomic.Bool
}

const gwLease = 2 * time.Second

// Gateways' client addresses in the in-memory cluster: A's and B's machines,
// B's again after a restart, and a third machine's.
const (
	addrA  = "10.0.0.1:0/1"
	addrA2 = "10.0.0.1:0/2"
	addrB  = "10.0.0.2:0/1"
	addrB2 = "10.0.0.2:0/2"
	addrC  = "10.0.0.3:0/1"
)

func startGateway(t *testing.T, cl *group.Cluster, clock *fakeClock, id int, client string) *gwNode {
	t.Helper()
	return startGatewayPort(t, cl, clock, id, client, 1)
}

// startGatewayPort is startGateway with its port's ID.
func startGatewayPort(t *testing.T, cl *group.Cluster, clock *fakeClock, id int, client string, portID int) *gwNode {
	t.Helper()
	return startGatewayWith(t, cl, clock, id, client, portID, nil)
}

// startGatewayWith is startGatewayPort with setup run on the node before
// it starts.
func startGatewayWith(t *testing.T, cl *group.Cluster, clock *fakeClock, id int, client string, portID int, setup func(*gwNode)) *gwNode {
	t.Helper()
	yaml := fmt.Sprintf("ports: [{id: %d, transport: loop, address: 127.0.0.%d}]\ngateway_group: {name: g, pool: p, id: %d, lease: %v}\n", portID, id, id, gwLease)
	path := filepath.Join(t.TempDir(), "gw.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cl.SetClock(clock.Now)
	n := &gwNode{tgt: fabric.NewTarget(fabric.Options{}), store: &switchStore{MemStore: cl.Client(client)}}
	if setup != nil {
		setup(n)
	}
	lt := fabric.NewLoopTransport(fabric.TransportLimits{MDTS: 128 << 10, MaxQueueDepth: 64, MaxIOQueues: 4})
	n.m, err = New(n.tgt, cfg, Options{
		Transport: func(string) (fabric.Transport, error) { return lt, nil },
		Group: &GroupOptions{Store: n.store, Now: clock.Now, MemoryNamespaces: true, Fenced: func(error) { n.fenced.Store(true) },
			Unsettled: n.unsettled.Load,
			Addrs: func() []string {
				if f, ok := n.extraFn.Load().(func() []string); ok {
					return f()
				}
				if p := n.extra.Load(); p != nil {
					return *p
				}
				return nil
			},
			Barrier: func() error {
				if cl.Blocklisted(addrB) {
					n.barriers.Add(1)
				} else {
					n.barrierEarly.Add(1)
				}
				return nil
			}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.m.Close(); n.tgt.Close() })
	return n
}

// resvVersionOf is st's version as n's namespaces' reservations take it.
func resvVersionOf(n *gwNode, st *group.State) uint64 {
	n.m.gw.mu.Lock()
	defer n.m.gw.mu.Unlock()
	return n.m.gw.resvVersion(st)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (n *gwNode) anaState(group uint32) nvme.ANAState {
	return n.tgt.Ports()[0].ANAState(group)
}

func (n *gwNode) alive(id int) bool {
	for _, ms := range n.m.Group().Members {
		if ms.ID == id {
			return ms.Alive
		}
	}
	return false
}

// TestGatewayGroup: two gateways share one state. A change through A's
// API is served by B; namespaces spread over the gateways' ANA groups;
// each gateway's ports report its own group optimized. B dies: A fences
// it and takes its group over; B, a zombie, finds itself fenced; B
// restarted takes its group back. A corrupt state and a change that keeps
// losing its compare-and-swap are refused with a clear error and change
// nothing, and both gateways go on serving.
func TestGatewayGroup(t *testing.T) {
	cl := group.NewCluster()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	a := startGateway(t, cl, clock, 1, addrA)
	b := startGateway(t, cl, clock, 2, addrB)
	waitUntil(t, "A sees B", func() bool { return a.alive(2) })
	waitUntil(t, "B sees A", func() bool { return b.alive(1) })
	h := a.m.Handler()

	// A subsystem and two namespaces through A, spread over groups 1 and 2.
	rec := do(t, h, "POST", "/v1/subsystems", `{"nqn":"`+subA+`","allow_any_host":true,
		"namespaces":[{"nsid":1,"backend":"memory","size":"1MiB"},{"nsid":2,"backend":"memory","size":"1MiB"}]}`)
	if rec.Code != http.StatusCreated {
		t.Fatalf("add subsystem through A: %d %s", rec.Code, rec.Body)
	}
	waitUntil(t, "B serves the subsystem", func() bool {
		s := b.tgt.Subsystem(subA)
		return s != nil && len(s.Namespaces()) == 2
	})
	for _, n := range []*gwNode{a, b} {
		s := findSubsystem(n.m.Running(), subA)
		if g1, g2 := s.Namespaces[0].ANAGroup, s.Namespaces[1].ANAGroup; g1 != 1 || g2 != 2 {
			t.Errorf("namespaces in groups %d and %d, want 1 and 2", g1, g2)
		}
	}
	if lo, hi := findSubsystem(b.m.Running(), subA).CNTLIDMin, findSubsystem(b.m.Running(), subA).CNTLIDMax; lo != 2041 || hi != 4080 {
		t.Errorf("B's controller IDs %d..%d, want 2041..4080", lo, hi)
	}
	waitUntil(t, "each gateway's own group optimized", func() bool {
		return a.anaState(1) == nvme.ANAOptimized && a.anaState(2) == nvme.ANAInaccessible &&
			b.anaState(1) == nvme.ANAInaccessible && b.anaState(2) == nvme.ANAOptimized
	})

	// A subsystem with hosts, and a host more, through A; on B.
	if rec := do(t, h, "POST", "/v1/subsystems", `{"nqn":"`+subB+`","hosts":["`+hst1+`"]}`); rec.Code != http.StatusCreated {
		t.Fatalf("add %s: %d %s", subB, rec.Code, rec.Body)
	}
	if rec := do(t, h, "POST", "/v1/subsystems/"+subB+"/hosts", `{"nqn":"`+hst2+`"}`); rec.Code != http.StatusCreated {
		t.Fatalf("add host: %d %s", rec.Code, rec.Body)
	}
	waitUntil(t, "B allows both hosts", func() bool {
		s := findSubsystem(b.m.Running(), subB)
		return s != nil && len(s.Hosts) == 2
	})

	// What the group decides or never keeps is refused through the API.
	before := cl.Object().Version
	refused := []struct{ name, method, path, body, want string }{
		{"inline secret", "POST", "/v1/subsystems/" + subB + "/hosts", `{"nqn":"nqn.2026-11.io.example:h3","dhchap_key":"DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:"}`, "keeps no secret"},
		{"controller IDs", "POST", "/v1/subsystems", `{"nqn":"nqn.2026-11.io.example:c","allow_any_host":true,"cntlid_min":5,"cntlid_max":9}`, "own controller IDs"},
		{"ANA state", "PUT", "/v1/ports/1/ana/2", `{"state":"optimized"}`, "the group sets the ANA states"},
		{"file namespace", "POST", "/v1/subsystems/" + subB + "/namespaces", `{"nsid":7,"backend":"file","path":"/etc/hostname","read_only":true}`, "local to one machine"},
	}
	for _, r := range refused {
		rec := do(t, h, r.method, r.path, r.body)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), r.want) {
			t.Errorf("%s: %d %s, want 400 with %q", r.name, rec.Code, rec.Body, r.want)
		}
	}
	if v := cl.Object().Version; v != before {
		t.Errorf("refused changes wrote the state: version %d -> %d", before, v)
	}

	// Reservations through A hold on B before A's command completes.
	nsA, nsB := a.m.liveNamespace(subA, 2), b.m.liveNamespace(subA, 2)
	host := fabric.HostID{1, 2, 3}
	want := fabric.ReservationState{Type: nvme.ResvWriteExclusive, Holder: host, Registrants: []fabric.ReservationRegistrant{{HostID: host, Key: 7}}}
	sh := resvSharer{a.m}
	ver, err := sh.Commit(subA, 2, func(cur fabric.ReservationState) *fabric.ReservationState { return &want })
	if err != nil {
		t.Fatal(err)
	}
	if err := nsA.ApplyReservation(ver, want); err != nil {
		t.Fatal(err)
	}
	sh.Publish(ver)
	if got := nsB.ReservationState(); got.Type != want.Type || got.Holder != host {
		t.Fatalf("B's reservation after A's published: %+v", got)
	}
	// A state in which the namespace has no record (it was removed and added again between two
	// of B's reads) leaves B holding nothing of it.
	gone := b.m.gw.latest().Clone()
	delete(gone.Reservations, group.NSRef{NQN: subA, NSID: 2})
	gone.Version += 1000
	b.m.applyReservations(gone, resvVersionOf(b, gone))
	if got := nsB.ReservationState(); got.Type != 0 || len(got.Registrants) != 0 {
		t.Errorf("B's reservation after a state with no record of the namespace: %+v", got)
	}
	a.m.applyReservations(gone, resvVersionOf(a, gone))

	// B dies (no clean stop). A lease later, A fences it and takes group 2.
	b.m.closeGateway()
	// The clock moves on while A heartbeats: A sees B's record stop
	// changing, and a lease later takes over.
	waitUntil(t, "A takes group 2 over", func() bool {
		clock.Add(100 * time.Millisecond)
		return a.anaState(2) == nvme.ANAOptimized
	})
	if !cl.Blocklisted(addrB) {
		t.Error("B's client was not blocklisted before A took its group")
	}
	if a.barriers.Load() == 0 || a.barrierEarly.Load() != 0 {
		t.Errorf("A took group 2 over after %d OSD-map barriers after the blocklist (%d before it), want 1 or more after and none before",
			a.barriers.Load(), a.barrierEarly.Load())
	}
	if gs := a.m.Group(); gs.Failovers != 1 || gs.Owners["2"] != 1 {
		t.Errorf("A's view after the failover: %+v", gs)
	}
	// B was a zombie: its next heartbeat finds it fenced.
	b.m.gw.heartbeat()
	waitUntil(t, "B is told it was fenced", b.fenced.Load)
	if gs := b.m.Group(); !gs.Fenced || gs.Members[1].Alive {
		t.Errorf("B's view of itself: %+v", gs)
	}

	// B restarted (a new client): A gives group 2 back.
	b2 := startGateway(t, cl, clock, 2, addrB2)
	waitUntil(t, "failback", func() bool {
		return a.anaState(2) == nvme.ANAInaccessible && b2.anaState(2) == nvme.ANAOptimized && b2.anaState(1) == nvme.ANAInaccessible
	})
	if s := b2.tgt.Subsystem(subA); s == nil || len(s.Namespaces()) != 2 {
		t.Fatal("restarted B does not serve the group's subsystem")
	}
	if got := b2.m.liveNamespace(subA, 2).ReservationState(); got.Type != want.Type {
		t.Errorf("restarted B's reservation %+v", got)
	}

	// A corrupt state: changes refused with the reason, both go on
	// serving what they served.
	good := cl.Object()
	cl.Put(group.Object{Data: []byte("garbage"), Omap: good.Omap})
	runningA := a.m.Running()
	rec = do(t, h, "DELETE", "/v1/subsystems/"+subB, "")
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "corrupt") {
		t.Fatalf("a change on a corrupt state: %d %s", rec.Code, rec.Body)
	}
	b2.m.sync(true)
	if gs := b2.m.Group(); !strings.Contains(gs.Error, "corrupt") || b2.tgt.Subsystem(subB) == nil {
		t.Errorf("B on a corrupt state: %+v", gs)
	}
	if a.tgt.Subsystem(subB) == nil || len(a.m.Running().Subsystems) != len(runningA.Subsystems) {
		t.Error("A stopped serving what it served")
	}
	cl.Put(group.Object{Data: good.Data, Omap: good.Omap})
	if rec := do(t, h, "DELETE", "/v1/subsystems/"+subB, ""); rec.Code != http.StatusOK {
		t.Fatalf("after the repair: %d %s", rec.Code, rec.Body)
	}
	waitUntil(t, "B removes it too", func() bool { return b2.tgt.Subsystem(subB) == nil })
	if gs := b2.m.Group(); gs.Error != "" {
		t.Errorf("B still reports %q", gs.Error)
	}

	// A change that loses every compare-and-swap: 409, nothing changed.
	before = cl.Object().Version
	a.store.conflict.Store(true)
	rec = do(t, h, "POST", "/v1/subsystems", `{"nqn":"nqn.2026-11.io.example:d","allow_any_host":true}`)
	a.store.conflict.Store(false)
	if rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), "try again") {
		t.Fatalf("a change losing every race: %d %s", rec.Code, rec.Body)
	}
	if cl.Object().Version != before || a.tgt.Subsystem("nqn.2026-11.io.example:d") != nil {
		t.Error("the refused change changed something")
	}
	if gs := a.m.Group(); gs.Conflicts < 8 {
		t.Errorf("conflicts counted %d", gs.Conflicts)
	}
}

// TestGatewaySlowChange: a change that holds the manager long (an image
// slow to open) does not stop the gateway's heartbeats: the others must
// not take it for dead and fence it.
func TestGatewaySlowChange(t *testing.T) {
	cl := group.NewCluster()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	a := startGateway(t, cl, clock, 1, addrA)
	b := startGateway(t, cl, clock, 2, addrB)
	waitUntil(t, "A sees B", func() bool { return a.alive(2) })
	b.m.mu.Lock() // B busy with a change
	for range 30 {
		clock.Add(200 * time.Millisecond) // 6 s in all, three leases
		time.Sleep(100 * time.Millisecond)
	}
	b.m.mu.Unlock()
	if cl.Blocklisted(addrB) || !a.alive(2) {
		t.Fatalf("B was taken for dead while busy: blocklisted %v, A's view %+v", cl.Blocklisted(addrB), a.m.Group())
	}
}

// TestGatewayStaleRead: a read of the group's state that returns after a
// change through this gateway was committed and applied is older than
// what runs: applying it would undo the change for a while.
func TestGatewayStaleRead(t *testing.T) {
	cl := group.NewCluster()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	a := startGateway(t, cl, clock, 1, addrA)
	h := a.m.Handler()
	if rec := do(t, h, "POST", "/v1/subsystems", `{"nqn":"`+subA+`","allow_any_host":true}`); rec.Code != http.StatusCreated {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	a.store.gate = make(chan struct{})
	a.store.armed.Store(true)
	synced := make(chan struct{})
	go func() { a.m.sync(true); close(synced) }() // reads, and is held
	waitUntil(t, "the sync's read", func() bool { return !a.store.armed.Load() })
	if rec := do(t, h, "POST", "/v1/subsystems/"+subA+"/namespaces", `{"nsid":1,"backend":"memory","size":"1MiB"}`); rec.Code != http.StatusCreated {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	close(a.store.gate)
	<-synced
	if s := a.tgt.Subsystem(subA); s == nil || len(s.Namespaces()) != 1 {
		t.Fatal("a late read undid the change")
	}
}

// TestGatewayNoAddrsNoTakeover: a dead gateway no lease of which this
// gateway read while it held its lease lock (it died before this one
// started, or it recorded no client address) cannot be fenced: its record's
// addresses are anyone's word, and a blocklist of nothing fences nothing.
// Its ANA group is not taken over, and status says so, until the cluster
// blocklists every address the record names (by hand, or an earlier fence).
func TestGatewayNoAddrsNoTakeover(t *testing.T) {
	cl := group.NewCluster()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	a := startGateway(t, cl, clock, 1, addrA)
	ctx := context.Background()
	// Gateway 3 joined and died before A started: its listeners and a
	// record, its lock long lapsed.
	if _, err := group.Update(ctx, cl.Client(addrC), 3, func(s *group.State) (bool, error) {
		s.Listeners[3] = []group.Listener{{PortID: 1, Transport: "loop", Address: "127.0.0.3", Port: 4420}}
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	cl.SetLease(3, group.LeaseRecord{Incarnation: "c1", Seq: 9, Addrs: []string{addrC}}.Encode(), nil, time.Time{})
	if rec := do(t, a.m.Handler(), "POST", "/v1/subsystems", `{"nqn":"`+subA+`","allow_any_host":true,"namespaces":[{"nsid":1,"backend":"memory","size":"1MiB","ana_group":3}]}`); rec.Code != http.StatusCreated {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	waitUntil(t, "A sees 3 dead", func() bool {
		clock.Add(100 * time.Millisecond)
		a.m.sync(true)
		gs := a.m.Group()
		return len(gs.Members) == 2 && !gs.Members[1].Alive
	})
	// As long again as that took: a takeover would have come by then.
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) && a.anaState(3) != nvme.ANAOptimized {
		clock.Add(100 * time.Millisecond)
		time.Sleep(10 * time.Millisecond)
	}
	if st := a.anaState(3); st != nvme.ANAInaccessible || a.m.Group().Failovers != 0 || cl.Blocklisted(addrC) {
		t.Errorf("A took 3's group over on a record it could not trust: group 3 %v, %d failovers, blocklisted %v", st, a.m.Group().Failovers, cl.Blocklisted(addrC))
	}
	if ms := a.m.Group().Members[1]; !ms.Unverified {
		t.Errorf("status does not say 3's addresses are unverified: %+v", ms)
	}
	// Blocklisted by hand, without the operator's word through the group:
	// still not taken over (the record's claim of those addresses is
	// anyone's).
	if err := cl.Client(addrA2).Blocklist(ctx, []string{addrC}); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		clock.Add(100 * time.Millisecond)
		time.Sleep(10 * time.Millisecond)
	}
	if st := a.anaState(3); st != nvme.ANAInaccessible {
		t.Errorf("A took 3's group over on a blocklist anyone could name: %v", st)
	}
	// Fenced on the operator's word (group fence 3): taken over. A live
	// gateway and this one are refused.
	for _, tt := range []struct {
		path string
		code int
	}{{"/v1/group/gateways/1/fence", 400}, {"/v1/group/gateways/9/fence", 404}, {"/v1/group/gateways/3/fence", 200}} {
		if rec := do(t, a.m.Handler(), "POST", tt.path, ""); rec.Code != tt.code {
			t.Errorf("POST %s: %d %s, want %d", tt.path, rec.Code, rec.Body, tt.code)
		}
	}
	waitUntil(t, "A takes 3's group over", func() bool {
		clock.Add(100 * time.Millisecond)
		return a.anaState(3) == nvme.ANAOptimized
	})
}

// TestGatewayForgedLease: a lease record written by anyone able to write
// the pool gets no live gateway blocklisted. A record is believed only while
// its incarnation holds the gateway's lease lock from a client the record
// names, with every address of that client's machine; even then a fence
// leaves out every address of a live gateway.
func TestGatewayForgedLease(t *testing.T) {
	cl := group.NewCluster()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	a := startGateway(t, cl, clock, 1, addrA)
	b := startGateway(t, cl, clock, 2, addrB)
	waitUntil(t, "A sees B", func() bool { return a.alive(2) })
	ctx := context.Background()
	if _, err := group.Update(ctx, cl.Client(addrC), 3, func(s *group.State) (bool, error) {
		s.Listeners[3] = []group.Listener{{PortID: 1, Transport: "loop", Address: "127.0.0.3", Port: 4420}}
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	a.m.sync(true)
	// A gateway 3 run by the forger on B's machine, whose record names B's
	// client too, renewed for a while and then dead.
	forger := "10.0.0.2:0/99"
	for i := range 5 {
		cl.SetLease(3, group.LeaseRecord{Incarnation: "x", Seq: uint64(i), Addrs: []string{forger, addrB}}.Encode(), &group.Holder{Cookie: "x", Addr: forger}, clock.Now().Add(gwLease))
		clock.Add(gwLease / 4)
		time.Sleep(gwLease / 4)
	}
	// B's own record rewritten with A's address (B's lock, held by B, cannot
	// be taken).
	cl.SetLease(2, group.LeaseRecord{Incarnation: "forged", Seq: 1, Addrs: []string{addrA}}.Encode(), nil, time.Time{})
	// 3 dies (its lock lapses): a lease later, A would fence it, but a
	// trusted address of it (B's, its machine's) is a live gateway's:
	// nothing is blocklisted, and its group is not taken over.
	for range 150 {
		// No faster than the gateways' own heartbeats: they live.
		clock.Add(20 * time.Millisecond)
		time.Sleep(20 * time.Millisecond)
	}
	if cl.Blocklisted(addrB) || cl.Blocklisted(addrA) || cl.Blocklisted(forger) {
		t.Errorf("a forged lease got a fence: A %v, B %v, the forger's client %v", cl.Blocklisted(addrA), cl.Blocklisted(addrB), cl.Blocklisted(forger))
	}
	if st := a.anaState(3); st == nvme.ANAOptimized {
		t.Error("3's group taken over with a trusted address of it left unfenced")
	}
	if !a.alive(2) || !b.alive(1) {
		t.Errorf("A and B no longer see each other alive: %+v", a.m.Group())
	}
	for _, ms := range a.m.Group().Members {
		if ms.ID == 2 && slices.Contains(ms.Addrs, addrA) {
			t.Errorf("A took B's addresses from a record B's lock does not back: %+v", ms)
		}
	}
}

// TestGatewayDuplicateID: a second gateway given an ID another live gateway
// holds is refused, with why, and changes nothing; the first stays.
func TestGatewayDuplicateID(t *testing.T) {
	cl := group.NewCluster()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	a := startGateway(t, cl, clock, 1, addrA)
	// A renews its lease while the second tries to join (its heartbeats,
	// on the clock that does not move: its lock never lapses).
	yaml := fmt.Sprintf("ports: [{id: 1, transport: loop, address: 127.0.0.9}]\ngateway_group: {name: g, pool: p, id: 1, lease: %v}\n", gwLease)
	path := filepath.Join(t.TempDir(), "gw.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	listeners := cl.Object().Omap["listener/1/1"]
	tgt := fabric.NewTarget(fabric.Options{})
	defer tgt.Close()
	lt := fabric.NewLoopTransport(fabric.TransportLimits{MDTS: 128 << 10, MaxQueueDepth: 64, MaxIOQueues: 4})
	_, err = New(tgt, cfg, Options{Transport: func(string) (fabric.Transport, error) { return lt, nil },
		Group: &GroupOptions{Store: cl.Client(addrA2), Now: clock.Now, MemoryNamespaces: true}})
	if err == nil || !strings.Contains(err.Error(), "one id") {
		t.Fatalf("a second gateway 1: %v, want refused as a duplicate id", err)
	}
	if got := cl.Object().Omap["listener/1/1"]; !slices.Equal(got, listeners) {
		t.Errorf("the refused gateway wrote its listeners over the first's: %s", got)
	}
	if gs := a.m.Group(); gs.Fenced || !gs.Members[0].Alive {
		t.Errorf("the first gateway 1: %+v", gs)
	}
}

// TestGatewayRefusesMemory: a gateway refuses a memory namespace through its
// API (each gateway's memory is its own: a multipath host would read through
// one gateway what it wrote through another), and the group's state is left
// as it was.
func TestGatewayRefusesMemory(t *testing.T) {
	cl := group.NewCluster()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	a := startGateway(t, cl, clock, 1, addrA)
	h := a.m.Handler()
	if rec := do(t, h, "POST", "/v1/subsystems", `{"nqn":"`+subA+`","hosts":["nqn.2026-11.io.example:h0"],
		"namespaces":[{"nsid":1,"backend":"memory","size":"1MiB"}]}`); rec.Code != http.StatusCreated {
		t.Fatalf("add with memory allowed (the tests'): %d %s", rec.Code, rec.Body)
	}
	a.m.mu.Lock()
	a.m.gw.opts.MemoryNamespaces = false // as a gateway runs
	a.m.mu.Unlock()
	ver := a.m.Group().Version
	for _, tt := range []struct{ name, method, path, body string }{
		{"namespace", "POST", "/v1/subsystems/" + subA + "/namespaces", `{"nsid":2,"backend":"memory","size":"1MiB"}`},
		{"subsystem", "POST", "/v1/subsystems", `{"nqn":"` + subA + `-2","allow_any_host":true,"namespaces":[{"nsid":1,"backend":"memory","size":"1MiB"}]}`},
	} {
		rec := do(t, h, tt.method, tt.path, tt.body)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "RBD images only") {
			t.Errorf("%s with a memory namespace: %d %s, want 400 naming RBD images", tt.name, rec.Code, rec.Body)
		}
	}
	if v := a.m.Group().Version; v != ver {
		t.Errorf("the group's state went from version %d to %d", ver, v)
	}
	// The namespace already in the group stays, and a change beside it is taken.
	if rec := do(t, h, "POST", "/v1/subsystems/"+subA+"/hosts", `{"nqn":"nqn.2026-11.io.example:h1"}`); rec.Code != http.StatusCreated {
		t.Errorf("a host beside the memory namespace already there: %d %s", rec.Code, rec.Body)
	}
	if s := a.tgt.Subsystem(subA); s == nil || len(s.Namespaces()) != 1 {
		t.Error("the memory namespace already in the group is no longer served")
	}
}

// TestReservationRecord: a namespace's reservations go into the group's
// record and come back the same, the notices a change owes hosts included.
func TestReservationRecord(t *testing.T) {
	h1, h2 := fabric.HostID{1, 2, 3}, fabric.HostID{0xff, 9}
	for _, st := range []fabric.ReservationState{
		{},
		{Generation: 2, Registrants: []fabric.ReservationRegistrant{{HostID: h1, Key: 1}}, Seq: 1},
		{Generation: 3, Type: nvme.ResvExclusiveAccess, Holder: h2, Registrants: []fabric.ReservationRegistrant{{HostID: h2, Key: 9}},
			PTPL: true, Seq: 7, Notices: []fabric.ReservationNotice{{HostID: h1, Kind: nvme.ResvNotifyRegistrationPreempt}}, Aborted: []fabric.HostID{h1}},
		{Generation: 3, Type: nvme.ResvWriteExclusiveAllRegs, Registrants: []fabric.ReservationRegistrant{{HostID: h1, Key: 1}, {HostID: h2, Key: 2}},
			Seq: 8, Notices: []fabric.ReservationNotice{{HostID: h1, Kind: nvme.ResvNotifyReleased}, {HostID: h2, Kind: nvme.ResvNotifyPreempted}}},
	} {
		r := groupReservation(st)
		if err := r.Check(); err != nil {
			t.Errorf("%+v: record %+v: %v", st, r, err)
		}
		back, err := fabricReservation(r)
		if err != nil || !reflect.DeepEqual(back, st) {
			t.Errorf("%+v: back as %+v, %v", st, back, err)
		}
	}
}

// TestGatewayLeaseAddrsBeforeServing: a change that gives the gateway a new
// RADOS client (an rbd namespace's connection) has its lease record the
// client's address before the change is served, not at the next periodic
// heartbeat: a gateway that died in between would be fenced without it.
func TestGatewayLeaseAddrsBeforeServing(t *testing.T) {
	cl := group.NewCluster()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	a := startGateway(t, cl, clock, 1, addrA)
	h := a.m.Handler()
	leased := func() []string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		recs, err := a.store.Leases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r, err := group.DecodeLease(recs[1].Record)
		if err != nil {
			t.Fatal(err)
		}
		return r.Addrs
	}
	for i, addr := range []string{"10.0.0.1:0/101", "10.0.0.1:0/102", "10.0.0.1:0/103"} {
		// The namespace's open gives the gateway a client of this address.
		a.extra.Store(&[]string{addr})
		body := fmt.Sprintf(`{"nqn":"%s-%d","allow_any_host":true,"namespaces":[{"nsid":1,"backend":"memory","size":"1MiB"}]}`, subA, i)
		if rec := do(t, h, "POST", "/v1/subsystems", body); rec.Code != http.StatusCreated {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
		if got := leased(); !slices.Contains(got, addr) {
			t.Errorf("change %d: the lease records %v once the change is served, want %s in it", i, got, addr)
		}
	}
	// A new client whose address cannot be written to the lease: the change is refused, and
	// nothing of it is served or in the group's state.
	a.store.beatFails.Store(true)
	a.extra.Store(&[]string{"10.0.0.1:0/104"})
	ver := cl.Object().Version
	body := `{"nqn":"` + subA + `-x","allow_any_host":true,"namespaces":[{"nsid":1,"backend":"memory","size":"1MiB"}]}`
	if rec := do(t, h, "POST", "/v1/subsystems", body); rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "lease") {
		t.Errorf("a change whose new client the lease cannot record: %d %s, want 503 naming the lease", rec.Code, rec.Body)
	}
	if a.tgt.Subsystem(subA+"-x") != nil || cl.Object().Version != ver {
		t.Error("the refused change is served or in the group's state")
	}
	a.store.beatFails.Store(false)
}

// TestGatewayStateRecreated: the state object removed and made anew (the
// README's repair) starts its versions again; the gateways follow the new
// object whatever its version, their own changes on it included, and a
// reservation change on it holds on every gateway, though each namespace
// held a higher version of the old object's.
func TestGatewayStateRecreated(t *testing.T) {
	cl := group.NewCluster()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	a := startGateway(t, cl, clock, 1, addrA)
	b := startGateway(t, cl, clock, 2, addrB)
	waitUntil(t, "A sees B", func() bool { return a.alive(2) })
	h := a.m.Handler()
	if rec := do(t, h, "POST", "/v1/subsystems", `{"nqn":"`+subA+`","allow_any_host":true,"namespaces":[{"nsid":1,"backend":"memory","size":"1MiB"}]}`); rec.Code != http.StatusCreated {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	waitUntil(t, "B serves the namespace", func() bool { return b.m.liveNamespace(subA, 1) != nil })
	// The old object's versions climb, and so do the namespace's reservation versions.
	host := fabric.HostID{1, 2, 3}
	for i := range 6 {
		ver, err := resvSharer{a.m}.Commit(subA, 1, func(cur fabric.ReservationState) *fabric.ReservationState {
			return &fabric.ReservationState{Generation: uint32(i + 1), Registrants: []fabric.ReservationRegistrant{{HostID: host, Key: uint64(i + 1)}}}
		})
		if err != nil {
			t.Fatal(err)
		}
		resvSharer{a.m}.Publish(ver)
	}
	old := a.m.Group().Version
	oldEpoch := string(cl.Object().Omap["epoch"])
	// Removed: every gateway serves what it served meanwhile.
	cl.Remove()
	for _, n := range []*gwNode{a, b} {
		n.m.sync(true)
		if n.tgt.Subsystem(subA) == nil || n.m.liveNamespace(subA, 1) == nil {
			t.Fatal("a missing state object emptied a gateway")
		}
	}
	// The next change, through B, makes it anew from B's state.
	if rec := do(t, b.m.Handler(), "POST", "/v1/subsystems", `{"nqn":"`+subB+`","allow_any_host":true}`); rec.Code != http.StatusCreated {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	obj := cl.Object()
	if v, _ := strconv.ParseUint(string(obj.Omap["version"]), 10, 64); v >= old {
		t.Fatalf("the new object's version %d is not below the old %d: the test shows nothing", v, old)
	}
	if e := string(obj.Omap["epoch"]); e == "" || e == oldEpoch {
		t.Errorf("the object made anew has epoch %q, the old one had %q", e, oldEpoch)
	}
	if obj.Omap["subsystem/"+subA] == nil || obj.Omap["resv/"+subA+"/1"] == nil {
		t.Errorf("the object made anew lacks what B served: %v", slices.Sorted(maps.Keys(obj.Omap)))
	}
	for _, n := range []*gwNode{a, b} {
		waitUntil(t, "each gateway serves the new object", func() bool { n.m.sync(true); return n.tgt.Subsystem(subB) != nil && n.tgt.Subsystem(subA) != nil })
	}
	// A reservation on the new object, through B, holds on A.
	want := fabric.ReservationState{Generation: 1, Type: nvme.ResvWriteExclusive, Holder: host, Registrants: []fabric.ReservationRegistrant{{HostID: host, Key: 9}}}
	ver, err := resvSharer{b.m}.Commit(subA, 1, func(fabric.ReservationState) *fabric.ReservationState { return &want })
	if err != nil {
		t.Fatal(err)
	}
	resvSharer{b.m}.Publish(ver)
	if got := a.m.liveNamespace(subA, 1).ReservationState(); got.Type != want.Type || got.Holder != host {
		t.Errorf("A's reservation after B's on the new object: %+v", got)
	}
	a.m.sync(true)
	if a.tgt.Subsystem(subB) == nil {
		t.Error("A's next read undid the new object's change")
	}
}

// TestGatewayNoticeUnread: a gateway that cannot read the change another
// announces does not acknowledge it (the issuer would complete the command
// as seen everywhere), and refuses I/O on the group's namespaces, a path
// error the host retries on another path, with its ports reporting its
// groups inaccessible, until it reads the state again.
func TestGatewayNoticeUnread(t *testing.T) {
	cl := group.NewCluster()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	a := startGateway(t, cl, clock, 1, addrA)
	b := startGateway(t, cl, clock, 2, addrB)
	waitUntil(t, "A sees B", func() bool { return a.alive(2) })
	body := `{"nqn":"` + subA + `","allow_any_host":true,"namespaces":[{"nsid":1,"backend":"memory","size":"1MiB","ana_group":2}]}`
	if rec := do(t, a.m.Handler(), "POST", "/v1/subsystems", body); rec.Code != http.StatusCreated {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	waitUntil(t, "B serves group 2", func() bool { return b.m.liveNamespace(subA, 1) != nil && b.anaState(2) == nvme.ANAOptimized })
	nsB := b.m.liveNamespace(subA, 1)

	b.store.readFails.Store(true)
	host := fabric.HostID{1, 2, 3}
	want := fabric.ReservationState{Generation: 1, Type: nvme.ResvWriteExclusive, Holder: host, Registrants: []fabric.ReservationRegistrant{{HostID: host, Key: 9}}}
	ver, err := resvSharer{a.m}.Commit(subA, 1, func(fabric.ReservationState) *fabric.ReservationState { return &want })
	if err != nil {
		t.Fatal(err)
	}
	if missed, err := a.m.gw.notify(ver, group.KindReservation); err != nil || missed != 1 {
		t.Errorf("the change B could not read: %d unacknowledged (%v), want B's", missed, err)
	}
	if !nsB.SharedStateUnknown() {
		t.Error("B serves I/O on a namespace whose reservations it could not read")
	}
	waitUntil(t, "B reports its group inaccessible", func() bool { return b.anaState(2) == nvme.ANAInaccessible })
	if gs := b.m.Group(); !strings.Contains(gs.Unread, "injected") {
		t.Errorf("B's status does not say why it refuses I/O: %+v", gs)
	}

	b.store.readFails.Store(false)
	b.m.sync(true)
	if nsB.SharedStateUnknown() {
		t.Error("B still refuses I/O once it read the state")
	}
	if got := nsB.ReservationState(); got.Type != want.Type || got.Holder != host {
		t.Errorf("B's reservation once it read the state: %+v", got)
	}
	waitUntil(t, "B reports its group optimized again", func() bool { return b.anaState(2) == nvme.ANAOptimized })
	if missed, err := a.m.gw.notify(ver, group.KindReservation); err != nil || missed != 0 {
		t.Errorf("a change B can read: %d unacknowledged (%v)", missed, err)
	}
	if gs := b.m.Group(); gs.Unread != "" {
		t.Errorf("B's status: %+v", gs)
	}
}

// TestGatewayPeerCannotApply: a change one gateway cannot apply (a
// subsystem on a port ID only the other has, written by another client of
// the pool) leaves that subsystem unserved there and reported as such, and
// the gateway goes on following every other change, and takes a dead
// gateway's group over. The API refuses subsystem ports in a group: each
// gateway numbers its own.
func TestGatewayPeerCannotApply(t *testing.T) {
	cl := group.NewCluster()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	a := startGatewayPort(t, cl, clock, 1, addrA, 1)
	b := startGatewayPort(t, cl, clock, 2, addrB, 2)
	waitUntil(t, "A sees B", func() bool { return a.alive(2) })
	h := a.m.Handler()
	if rec := do(t, h, "POST", "/v1/subsystems", `{"nqn":"`+subA+`","allow_any_host":true,"namespaces":[{"nsid":1,"backend":"memory","size":"1MiB","ana_group":1}]}`); rec.Code != http.StatusCreated {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	waitUntil(t, "B serves it", func() bool { return b.tgt.Subsystem(subA) != nil })

	// Through the API: refused, nothing written.
	ver := cl.Object().Version
	rec := do(t, h, "POST", "/v1/subsystems", `{"nqn":"nqn.2026-11.io.example:p","allow_any_host":true,"ports":[1]}`)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "ports") {
		t.Errorf("a subsystem with ports through a gateway: %d %s, want 400 naming ports", rec.Code, rec.Body)
	}
	if cl.Object().Version != ver {
		t.Error("the refused change was written")
	}
	// Written by another client of the pool (an older gateway): B has no port 1.
	const onPort1 = "nqn.2026-11.io.example:port1"
	ctx := context.Background()
	if _, err := group.Update(ctx, cl.Client(addrC), 3, func(s *group.State) (bool, error) {
		s.Subsystems = append(s.Subsystems, config.Subsystem{NQN: onPort1, AllowAnyHost: true, Serial: "s", Model: "m", Ports: []int{1}})
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "A serves it", func() bool { a.m.sync(true); return a.tgt.Subsystem(onPort1) != nil })
	b.m.sync(true)
	if gs := b.m.Group(); !strings.Contains(gs.Degraded[onPort1], "port") {
		t.Errorf("B does not report the subsystem it cannot serve: %+v", gs)
	}
	// Every later change is still followed by B.
	if rec := do(t, h, "POST", "/v1/subsystems", `{"nqn":"`+subB+`","allow_any_host":true}`); rec.Code != http.StatusCreated {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	waitUntil(t, "B serves the next change", func() bool { b.m.sync(true); return b.tgt.Subsystem(subB) != nil })
	// A dies: B fences it and takes group 1 over, its configuration still short of one subsystem.
	a.m.closeGateway()
	waitUntil(t, "B takes group 1 over", func() bool {
		clock.Add(100 * time.Millisecond)
		return b.anaState(1) == nvme.ANAOptimized
	})
	if !cl.Blocklisted(addrA) {
		t.Error("A was not fenced")
	}
}

// TestGatewayKeyDir: a gateway reads the key files the group's state names
// only under its own gateway_group.key_dir: whoever can write the pool
// writes those paths, and the gateway opens them as root. Through the API a
// path elsewhere is refused; written to the state by another client, the
// subsystem is not served on this gateway, which says why, and serves the
// rest.
func TestGatewayKeyDir(t *testing.T) {
	cl := group.NewCluster()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	a := startGateway(t, cl, clock, 1, addrA)
	h := a.m.Handler()
	keyDir := a.m.Running().GatewayGroup.KeyDir
	if keyDir != limits.GroupKeyDir {
		t.Fatalf("key_dir %q, want the default %q", keyDir, limits.GroupKeyDir)
	}
	if rec := do(t, h, "POST", "/v1/subsystems", `{"nqn":"`+subA+`","hosts":["`+hst1+`"]}`); rec.Code != http.StatusCreated {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	ver := cl.Object().Version
	for _, path := range []string{"/etc/shadow", keyDir + "/../../shadow", "/dev/zero", keyDir} {
		body := fmt.Sprintf(`{"nqn":"%s","dhchap_key_file":%q}`, hst2, path)
		rec := do(t, h, "POST", "/v1/subsystems/"+subA+"/hosts", body)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "key_dir") {
			t.Errorf("a host key file %s: %d %s, want 400 naming key_dir", path, rec.Code, rec.Body)
		}
	}
	if cl.Object().Version != ver {
		t.Error("a refused key file was written to the group's state")
	}
	// Written by another client of the pool.
	const other = "nqn.2026-11.io.example:keys"
	if _, err := group.Update(context.Background(), cl.Client(addrC), 3, func(s *group.State) (bool, error) {
		s.Subsystems = append(s.Subsystems, config.Subsystem{NQN: other, Serial: "s", Model: "m",
			Hosts: []config.Host{{NQN: hst1, DHCHAPKeyFile: "/etc/shadow"}}})
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	if rec := do(t, h, "POST", "/v1/subsystems", `{"nqn":"`+subB+`","allow_any_host":true}`); rec.Code != http.StatusCreated {
		t.Fatalf("a change beside it: %d %s", rec.Code, rec.Body)
	}
	a.m.sync(true)
	if a.tgt.Subsystem(other) != nil {
		t.Error("a subsystem naming a key file outside key_dir is served")
	}
	if a.tgt.Subsystem(subB) == nil {
		t.Error("the rest is not served")
	}
	if gs := a.m.Group(); !strings.Contains(gs.Degraded[other], "key_dir") {
		t.Errorf("status does not say why: %+v", gs.Degraded)
	}
}

// TestGatewayLeaseAddrsEveryPath: the cluster client a namespace's open
// creates is in the gateway's lease before the namespace is served, at
// start-up and when the gateway applies a change made through another
// gateway, as through its own API (TestGatewayLeaseAddrsBeforeServing): a
// gateway that stalled in between would be fenced without it, and the
// client could still write after the takeover.
func TestGatewayLeaseAddrsEveryPath(t *testing.T) {
	var opened atomic.Bool
	defer func(f func()) { afterOpen = f }(afterOpen)
	afterOpen = func() { opened.Store(true) }
	cl := group.NewCluster()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	extra := func(n *gwNode, addr string) {
		n.extraFn.Store(func() []string {
			if opened.Load() {
				return []string{addr}
			}
			return nil
		})
	}
	leased := func(n *gwNode, id int) []string {
		recs, err := n.store.Leases(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		r, err := group.DecodeLease(recs[id].Record)
		if err != nil {
			t.Fatal(err)
		}
		return r.Addrs
	}
	a := startGatewayWith(t, cl, clock, 1, addrA, 1, func(n *gwNode) { extra(n, "10.0.0.1:0/500") })
	b := startGatewayWith(t, cl, clock, 2, addrB, 2, func(n *gwNode) { extra(n, "10.0.0.2:0/500") })
	waitUntil(t, "A sees B", func() bool { return a.alive(2) })
	// Sync: a change through A, which B applies.
	if rec := do(t, a.m.Handler(), "POST", "/v1/subsystems", `{"nqn":"`+subA+`","allow_any_host":true,"namespaces":[{"nsid":1,"backend":"memory","size":"1MiB"}]}`); rec.Code != http.StatusCreated {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	waitUntil(t, "B serves the namespace", func() bool { return b.m.liveNamespace(subA, 1) != nil })
	if got := leased(b, 2); !slices.Contains(got, "10.0.0.2:0/500") {
		t.Errorf("B serves a namespace whose new client its lease does not record: %v", got)
	}
	// Start-up: a gateway that joins a group with a namespace in it.
	opened.Store(false)
	c := startGatewayWith(t, cl, clock, 3, addrC, 3, func(n *gwNode) { extra(n, "10.0.0.3:0/500") })
	if c.m.liveNamespace(subA, 1) == nil {
		t.Fatal("the new gateway does not serve the group's namespace")
	}
	if got := leased(c, 3); !slices.Contains(got, "10.0.0.3:0/500") {
		t.Errorf("a gateway served a namespace at start-up whose client its lease does not record: %v", got)
	}
}

// TestGatewayHeartbeatLog: a lease that stops being renewed is logged once, when the first
// heartbeat fails, and again when one renews it, with how many failed; not once per beat (a
// partition fails every beat). Only logs told when a partitioned gateway renewed its lease.
func TestGatewayHeartbeatLog(t *testing.T) {
	cl := group.NewCluster()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	a := startGateway(t, cl, clock, 1, addrA)
	var buf lockedBuffer
	g := a.m.gw
	g.mu.Lock()
	g.log = slog.New(slog.NewTextHandler(&buf, nil))
	g.mu.Unlock()

	a.store.beatFails.Store(true)
	for range 3 {
		g.heartbeat()
	}
	if n := strings.Count(buf.String(), "heartbeat failed"); n != 1 {
		t.Fatalf("%d heartbeat failures logged for 3 or more failed beats, want 1:\n%s", n, buf.String())
	}
	a.store.beatFails.Store(false)
	g.heartbeat()
	out := buf.String()
	if strings.Count(out, "heartbeat renewed the lease again") != 1 {
		t.Fatalf("the renewal after failures is not logged once:\n%s", out)
	}
	m := regexp.MustCompile(`failed_beats=(\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no failed_beats in the renewal's line:\n%s", out)
	}
	if n, _ := strconv.Atoi(m[1]); n < 3 {
		t.Errorf("failed_beats=%d, want at least the 3 failed here", n)
	}
	g.heartbeat()
	if strings.Count(buf.String(), "renewed the lease again") != 1 {
		t.Errorf("a renewal after a renewal is logged too:\n%s", buf.String())
	}
}
