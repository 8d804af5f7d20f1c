package control

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/control/group"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Faults of a gateway group found by a review of its fixes: each test
// failed before the fix it names.

// addGroupNS adds a subsystem with one memory namespace in ANA group grp through n.
func addGroupNS(t *testing.T, n *gwNode, nqn string, grp int) {
	t.Helper()
	body := fmt.Sprintf(`{"nqn":%q,"allow_any_host":true,"namespaces":[{"nsid":1,"backend":"memory","size":"1MiB","ana_group":%d}]}`, nqn, grp)
	if rec := do(t, n.m.Handler(), "POST", "/v1/subsystems", body); rec.Code != http.StatusCreated {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
}

// trusts reports whether n trusts addresses of gateway id.
func trusts(n *gwNode, id int) bool {
	n.m.gw.mu.Lock()
	defer n.m.gw.mu.Unlock()
	return len(n.m.gw.tracker.Trusted(id)) > 0
}

// TestGatewayStolenIncarnation: a zombie B's lock lapses, and someone takes
// gw.2's lock under B's (public) incarnation from another client and
// writes that B stopped. A does not believe it: a lease later it fences B's
// own clients before it takes B's group.
func TestGatewayStolenIncarnation(t *testing.T) {
	cl := group.NewCluster()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	a := startGateway(t, cl, clock, 1, addrA)
	b := startGateway(t, cl, clock, 2, addrB)
	waitUntil(t, "A sees B", func() bool { return a.alive(2) })
	addGroupNS(t, a, subA, 2)
	waitUntil(t, "A trusts B", func() bool { return trusts(a, 2) })
	inc := b.m.gw.incarnation
	b.m.closeGateway() // a zombie: no heartbeat, no clean stop
	cl.SetLease(2, group.LeaseRecord{Incarnation: inc, Seq: 999, Addrs: []string{addrC}, Stopped: true}.Encode(),
		&group.Holder{Cookie: inc, Addr: addrC}, clock.Now().Add(gwLease))
	waitUntil(t, "A takes group 2", func() bool { clock.Add(50 * time.Millisecond); return a.anaState(2) == nvme.ANAOptimized })
	if !cl.Blocklisted(addrB) {
		t.Error("A took the zombie B's group over without fencing B's client")
	}
}

// TestGatewayNewIncarnationOwed: B, paused past its lease, is replaced by a
// new incarnation (another machine), which then dies too. The replaced
// incarnation's clients are fenced as well as the new one's: it neither
// stopped nor was fenced, and would write when it resumed.
func TestGatewayNewIncarnationOwed(t *testing.T) {
	cl := group.NewCluster()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	a := startGateway(t, cl, clock, 1, addrA)
	b := startGateway(t, cl, clock, 2, addrB)
	waitUntil(t, "A sees B", func() bool { return a.alive(2) })
	addGroupNS(t, a, subA, 2)
	waitUntil(t, "A trusts B", func() bool { return trusts(a, 2) })
	b.m.closeGateway()
	for i := range 3 {
		cl.SetLease(2, group.LeaseRecord{Incarnation: "new", Seq: uint64(i), Addrs: []string{addrC}}.Encode(),
			&group.Holder{Cookie: "new", Addr: addrC}, clock.Now().Add(gwLease))
		clock.Add(gwLease / 4)
		time.Sleep(gwLease / 4)
	}
	if !cl.Blocklisted(addrB) {
		t.Error("the replaced incarnation's client is not fenced while its replacement holds the ID")
	}
	waitUntil(t, "A takes group 2", func() bool { clock.Add(50 * time.Millisecond); return a.anaState(2) == nvme.ANAOptimized })
	if !cl.Blocklisted(addrB) || !cl.Blocklisted(addrC) {
		t.Errorf("blocklisted: the old incarnation %v, the new %v; want both", cl.Blocklisted(addrB), cl.Blocklisted(addrC))
	}
}

// TestGatewayWholeIPFence: a record naming IP:0/0 (in Ceph, every client of
// that machine) is not a lease at all, and never fenced.
func TestGatewayWholeIPFence(t *testing.T) {
	cl := group.NewCluster()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	a := startGateway(t, cl, clock, 1, addrA)
	forger := "10.0.0.1:0/99"
	for i := range 5 {
		cl.SetLease(3, group.LeaseRecord{Incarnation: "x", Seq: uint64(i), Addrs: []string{forger, "10.0.0.1:0/0"}}.Encode(),
			&group.Holder{Cookie: "x", Addr: forger}, clock.Now().Add(gwLease))
		clock.Add(gwLease / 4)
		time.Sleep(gwLease / 4)
	}
	for range 50 {
		clock.Add(20 * time.Millisecond)
		time.Sleep(20 * time.Millisecond)
	}
	if cl.Blocklisted("10.0.0.1:0/0") {
		t.Error("A blocklisted 10.0.0.1:0/0: every client of its own machine")
	}
	if len(a.m.Group().Members) != 1 {
		t.Errorf("a record naming a whole machine counts as a member: %+v", a.m.Group().Members)
	}
}

// TestGatewayUnreadIdle: B cannot read a change announced to it: it refuses
// I/O, its lease says it is idle once nothing runs, and A serves B's group
// meanwhile with nothing fenced; B does not spin reading; once B reads
// again it serves its group again.
func TestGatewayUnreadIdle(t *testing.T) {
	cl := group.NewCluster()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	a := startGateway(t, cl, clock, 1, addrA)
	b := startGateway(t, cl, clock, 2, addrB)
	waitUntil(t, "A sees B", func() bool { return a.alive(2) })
	addGroupNS(t, a, subA, 2)
	waitUntil(t, "B serves group 2", func() bool { return b.anaState(2) == nvme.ANAOptimized })
	b.store.readFails.Store(true)
	if _, err := a.m.gw.notify(a.m.Group().Version, group.KindConfig); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "B unread", b.m.gw.unreadNow)
	r0 := b.store.reads.Load()
	waitUntil(t, "A serves group 2", func() bool { clock.Add(20 * time.Millisecond); return a.anaState(2) == nvme.ANAOptimized })
	time.Sleep(time.Second)
	if n := b.store.reads.Load() - r0; n > 20 {
		t.Errorf("B read the state %d times while unread: it spins", n)
	}
	if b.anaState(2) != nvme.ANAInaccessible || cl.Blocklisted(addrB) || !a.alive(2) {
		t.Errorf("B while idle: group 2 %v, blocklisted %v, alive to A %v", b.anaState(2), cl.Blocklisted(addrB), a.alive(2))
	}
	b.store.readFails.Store(false)
	b.m.sync(true)
	waitUntil(t, "B serves group 2 again", func() bool {
		clock.Add(20 * time.Millisecond)
		return b.anaState(2) == nvme.ANAOptimized && a.anaState(2) == nvme.ANAInaccessible
	})
}

// TestGatewayUnreadTaker: A, of lowest ID, is unread: it is no taker while
// idle, and C's death is still taken over (by B).
func TestGatewayUnreadTaker(t *testing.T) {
	cl := group.NewCluster()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	a := startGateway(t, cl, clock, 1, addrA)
	b := startGateway(t, cl, clock, 2, addrB)
	c := startGateway(t, cl, clock, 3, addrC)
	waitUntil(t, "all see all", func() bool { return a.alive(2) && a.alive(3) && b.alive(1) && b.alive(3) })
	addGroupNS(t, b, subA, 3)
	waitUntil(t, "C serves group 3", func() bool { return c.anaState(3) == nvme.ANAOptimized })
	waitUntil(t, "B trusts C", func() bool { return trusts(b, 3) })
	a.store.readFails.Store(true)
	if _, err := b.m.gw.notify(b.m.Group().Version, group.KindConfig); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "A unread", a.m.gw.unreadNow)
	c.m.closeGateway()
	waitUntil(t, "B takes group 3", func() bool { clock.Add(20 * time.Millisecond); return b.anaState(3) == nvme.ANAOptimized })
	if !cl.Blocklisted(addrC) {
		t.Error("C's group taken over unfenced")
	}
}

// TestGatewayUnreadFlags: unread and read again from two goroutines at once
// leave every namespace's refusal as the gateway's status says.
func TestGatewayUnreadFlags(t *testing.T) {
	cl := group.NewCluster()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	a := startGateway(t, cl, clock, 1, addrA)
	body := `{"nqn":"` + subA + `","allow_any_host":true,"namespaces":[`
	for i := 1; i <= 32; i++ {
		if i > 1 {
			body += ","
		}
		body += fmt.Sprintf(`{"nsid":%d,"backend":"memory","size":"1MiB"}`, i)
	}
	if rec := do(t, a.m.Handler(), "POST", "/v1/subsystems", body+`]}`); rec.Code != http.StatusCreated {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	bad := 0
	for range 500 {
		a.m.unreadState(errors.New("x"))
		done := make(chan struct{}, 2)
		go func() { a.m.unreadState(errors.New("y")); done <- struct{}{} }()
		go func() { a.m.readState(a.m.gw.readGen()); done <- struct{}{} }()
		<-done
		<-done
		// Status and flags as one (the loop may change both meanwhile).
		a.m.gw.sharedMu.Lock()
		unread := a.m.gw.unreadNow()
		for n := uint32(1); n <= 32; n++ {
			if a.m.liveNamespace(subA, n).SharedStateUnknown() != unread {
				bad++
				break
			}
		}
		a.m.gw.sharedMu.Unlock()
		a.m.readState(a.m.gw.readGen())
	}
	if bad > 0 {
		t.Errorf("%d of 500: a namespace's refusal disagrees with the gateway's unread status", bad)
	}
}

// groupFile is a gateway's own file: one port, gateway id.
func groupFile(t *testing.T, id, portID int) (*config.Config, string) {
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
	return cfg, path
}

// newBare starts a gateway without startGateway's test hooks.
func newBare(t *testing.T, cl *group.Cluster, clock *fakeClock, cfg *config.Config, path, addr string) (*Manager, error) {
	t.Helper()
	tgt := fabric.NewTarget(fabric.Options{})
	t.Cleanup(func() { tgt.Close() })
	lt := fabric.NewLoopTransport(fabric.TransportLimits{MDTS: 128 << 10, MaxQueueDepth: 64, MaxIOQueues: 4})
	m, err := New(tgt, cfg, Options{Path: path, Transport: func(string) (fabric.Transport, error) { return lt, nil },
		Group: &GroupOptions{Store: cl.Client(addr), Now: clock.Now, MemoryNamespaces: true}})
	if err == nil {
		t.Cleanup(m.Close)
	}
	return m, err
}

// otherKeys writes, as another client of the pool would, a subsystem whose
// host's key file is outside this gateway's key_dir.
func otherKeys(t *testing.T, cl *group.Cluster, nqn string) {
	t.Helper()
	if _, err := group.Update(context.Background(), cl.Client(addrC), 3, func(s *group.State) (bool, error) {
		s.Subsystems = append(s.Subsystems, config.Subsystem{NQN: nqn, Serial: "s", Model: "m",
			Hosts: []config.Host{{NQN: hst1, DHCHAPKeyFile: "/srv/keys/h1.key"}}})
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestGatewayStartDegraded: a gateway starts, and serves the rest, though
// one subsystem of the group's state cannot be served on it.
func TestGatewayStartDegraded(t *testing.T) {
	cl := group.NewCluster()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	a := startGateway(t, cl, clock, 1, addrA)
	addGroupNS(t, a, subA, 1)
	otherKeys(t, cl, subB)
	cfg, _ := groupFile(t, 2, 1)
	m, err := newBare(t, cl, clock, cfg, "", addrB)
	if err != nil {
		t.Fatalf("B does not start while one subsystem of the group cannot be served here: %v", err)
	}
	if m.liveNamespace(subA, 1) == nil {
		t.Error("B does not serve the rest")
	}
	if gs := m.Group(); gs.Degraded[subB] == "" {
		t.Errorf("B does not say what it cannot serve: %+v", gs.Degraded)
	}
}

// TestGatewayDegradedNotServed: a subsystem whose new version a gateway
// cannot apply is not served there at all: an older version would keep a
// host the group revoked.
func TestGatewayDegradedNotServed(t *testing.T) {
	cl := group.NewCluster()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	a := startGateway(t, cl, clock, 1, addrA)
	if rec := do(t, a.m.Handler(), "POST", "/v1/subsystems", `{"nqn":"`+subA+`","hosts":["`+hst1+`"]}`); rec.Code != http.StatusCreated {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	// Another gateway (its key_dir /srv/keys) revokes hst1 and adds hst2.
	if _, err := group.Update(context.Background(), cl.Client(addrC), 3, func(s *group.State) (bool, error) {
		s.Subsystems[0].Hosts = []config.Host{{NQN: hst2, DHCHAPKeyFile: "/srv/keys/h2.key"}}
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	a.m.sync(true)
	if s := a.tgt.Subsystem(subA); s != nil {
		t.Errorf("A serves %s as it was, admitting the host the group revoked", subA)
	}
	if gs := a.m.Group(); gs.Degraded[subA] == "" {
		t.Errorf("A does not say why: %+v", gs.Degraded)
	}
}

// TestGatewayReloadDegraded: a reload applies the gateway's file though a
// subsystem of the group cannot be served here, and never opens a key file
// outside key_dir.
func TestGatewayReloadDegraded(t *testing.T) {
	cl := group.NewCluster()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	cfg, path := groupFile(t, 1, 1)
	m, err := newBare(t, cl, clock, cfg, path, addrA)
	if err != nil {
		t.Fatal(err)
	}
	otherKeys(t, cl, subB)
	m.sync(true)
	if _, err := m.Reload(Caller{Source: "signal"}); err != nil {
		t.Errorf("a reload while a subsystem of the group is degraded: %v", err)
	}
	if m.tgt.Subsystem(subB) != nil {
		t.Error("the reload serves a subsystem whose key file is outside key_dir")
	}
}

// TestGatewayRecreatedListeners: after the state object is made anew
// through B, A's listeners are written back into it, and a gateway that
// starts later knows A: two gateways never report one group optimized.
func TestGatewayRecreatedListeners(t *testing.T) {
	cl := group.NewCluster()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	a := startGateway(t, cl, clock, 3, addrA)
	b := startGateway(t, cl, clock, 2, addrB)
	waitUntil(t, "A sees B", func() bool { return a.alive(2) })
	cl.Remove()
	addGroupNS(t, b, subA, 3)
	waitUntil(t, "A serves it, optimized", func() bool { a.m.sync(true); return a.tgt.Subsystem(subA) != nil && a.anaState(3) == nvme.ANAOptimized })
	if cl.Object().Omap["listener/3/1"] == nil {
		t.Error("A's listeners are not in the object made anew")
	}
	b.m.Close()
	b.m.LeaveGroup()
	clock.Add(gwLease)
	b2 := startGateway(t, cl, clock, 2, addrB2)
	for range 12 {
		clock.Add(gwLease / 4)
		time.Sleep(gwLease / 4)
	}
	if a.anaState(3) == nvme.ANAOptimized && b2.anaState(3) == nvme.ANAOptimized {
		t.Error("group 3 optimized on two gateways")
	}
}

// TestGatewayFencesPrevious: a gateway that restarts (a new incarnation)
// before anyone fenced the one before fences that one's clients on its own
// machine before it serves; those on another machine it waits for.
func TestGatewayFencesPrevious(t *testing.T) {
	cl := group.NewCluster()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	b := startGateway(t, cl, clock, 2, addrB)
	addGroupNS(t, b, subA, 2)
	b.m.closeGateway() // paused or killed: no clean stop
	clock.Add(2 * gwLease)
	// Restarted on the same machine.
	b2 := startGateway(t, cl, clock, 2, addrB2)
	if !cl.Blocklisted(addrB) {
		t.Fatal("the restarted gateway serves before its previous incarnation's client is fenced")
	}
	waitUntil(t, "B2 serves its group", func() bool { return b2.anaState(2) == nvme.ANAOptimized })
	// Its previous incarnation on another machine: not fenced here, waited for.
	b2.m.closeGateway()
	clock.Add(2 * gwLease)
	b3 := startGateway(t, cl, clock, 2, addrC)
	if cl.Blocklisted(addrB2) {
		t.Error("a gateway blocklisted a client on another machine on its record's word")
	}
	if gs := b3.m.Group(); len(gs.PrevOwed) == 0 || b3.anaState(2) == nvme.ANAOptimized {
		t.Errorf("B3 serves before its previous incarnation on another machine is fenced: %+v", gs)
	}
	if err := cl.Client(addrA).Blocklist(context.Background(), []string{addrB2}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "B3 serves its group once it is", func() bool { clock.Add(20 * time.Millisecond); return b3.anaState(2) == nvme.ANAOptimized })
}

// TestGatewayLateOldEpoch: a read of the old object that returns after the
// gateway followed one made anew is not followed: the new object's
// versions are lower, and its changes would be undone.
func TestGatewayLateOldEpoch(t *testing.T) {
	cl := group.NewCluster()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	a := startGateway(t, cl, clock, 1, addrA)
	b := startGateway(t, cl, clock, 2, addrB)
	waitUntil(t, "A sees B", func() bool { return a.alive(2) })
	addGroupNS(t, a, subA, 1)
	const subC = "nqn.2026-11.io.example:c"
	for range 4 {
		if rec := do(t, a.m.Handler(), "POST", "/v1/subsystems", `{"nqn":"`+subC+`","allow_any_host":true}`); rec.Code != http.StatusCreated {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
		if rec := do(t, a.m.Handler(), "DELETE", "/v1/subsystems/"+subC, ""); rec.Code != http.StatusOK {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
	// A's next read is held with what it read: the old object.
	a.store.gate = make(chan struct{})
	a.store.armed.Store(true)
	late := make(chan struct{})
	go func() { a.m.gw.read(); close(late) }()
	waitUntil(t, "A's read", func() bool { return !a.store.armed.Load() })
	// The object is made anew through B, and A follows it.
	cl.Remove()
	if rec := do(t, b.m.Handler(), "POST", "/v1/subsystems", `{"nqn":"`+subB+`","allow_any_host":true}`); rec.Code != http.StatusCreated {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	newEpoch := string(cl.Object().Omap["epoch"])
	waitUntil(t, "A follows the new object", func() bool { return a.m.gw.latest().Epoch == newEpoch })
	close(a.store.gate)
	<-late
	if e := a.m.gw.latest().Epoch; e != newEpoch {
		t.Errorf("a late read of the old object moved A back to epoch %s", e)
	}
}

// TestGatewayReadFailures: a read that fails while the watch holds (a
// corrupt object, a slow placement group) leaves I/O served: no change can
// have been announced unheard; with the watch lost too, I/O is refused
// until a read succeeds.
func TestGatewayReadFailures(t *testing.T) {
	cl := group.NewCluster()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	a := startGateway(t, cl, clock, 1, addrA)
	addGroupNS(t, a, subA, 1)
	good := cl.Object()
	cl.Put(group.Object{Data: []byte("garbage"), Omap: good.Omap})
	a.m.sync(true)
	if a.m.gw.unreadNow() || a.m.liveNamespace(subA, 1).SharedStateUnknown() {
		t.Error("a corrupt object, the watch holding: I/O refused")
	}
	cl.Put(group.Object{Data: good.Data, Omap: good.Omap})
	a.store.readFails.Store(true)
	a.m.sync(true)
	if a.m.gw.unreadNow() {
		t.Error("a failed read, the watch holding: I/O refused")
	}
	cl.WatchLost.Store(true)
	a.m.sync(true)
	if !a.m.gw.unreadNow() || !a.m.liveNamespace(subA, 1).SharedStateUnknown() {
		t.Error("a failed read with the watch lost: I/O still served")
	}
	a.store.readFails.Store(false)
	cl.WatchLost.Store(false)
	a.m.sync(true)
	if a.m.gw.unreadNow() || a.m.liveNamespace(subA, 1).SharedStateUnknown() {
		t.Error("read again: I/O still refused")
	}
}

// orderTransport is a loop transport that records, when a port starts
// listening, whether the target already serves sub.
type orderTransport struct {
	*fabric.LoopTransport
	tgt   **fabric.Target
	sub   string
	early bool
}

func (o *orderTransport) Listen(t *fabric.Target, p *fabric.Port) (fabric.Listener, error) {
	if (*o.tgt).Subsystem(o.sub) == nil {
		o.early = true
	}
	return o.LoopTransport.Listen(t, p)
}

// TestGatewayPortAfterSubsystems: a gateway that starts (a restart, a
// failback) listens only once it serves the group's subsystems: a host
// reconnecting to a port that answered first was told its subsystem is
// not there (Connect Invalid Parameters, do not retry), and gave the path
// up for good.
func TestGatewayPortAfterSubsystems(t *testing.T) {
	cl := group.NewCluster()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	a := startGateway(t, cl, clock, 1, addrA)
	addGroupNS(t, a, subA, 1)
	cfg, _ := groupFile(t, 2, 1)
	tgt := fabric.NewTarget(fabric.Options{})
	t.Cleanup(func() { tgt.Close() })
	ot := &orderTransport{LoopTransport: fabric.NewLoopTransport(fabric.TransportLimits{MDTS: 128 << 10, MaxQueueDepth: 64, MaxIOQueues: 4}), tgt: &tgt, sub: subA}
	m, err := New(tgt, cfg, Options{Transport: func(string) (fabric.Transport, error) { return ot, nil },
		Group: &GroupOptions{Store: cl.Client(addrB), Now: clock.Now, MemoryNamespaces: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	if ot.early {
		t.Error("the gateway listened before it served the group's subsystem")
	}
}

// TestGatewayStaleReadKeepsUnread: a sync whose read succeeded before a
// notice's read failed does not mark the state read when it finishes: the
// change the notice announced is still unread, and the namespaces with
// shared reservations keep refusing I/O (audit item 3, a race a loaded
// machine showed in TestGatewayUnreadTaker).
func TestGatewayStaleReadKeepsUnread(t *testing.T) {
	cl := group.NewCluster()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	a := startGateway(t, cl, clock, 1, addrA)
	b := startGateway(t, cl, clock, 2, addrB)
	waitUntil(t, "all see all", func() bool { return a.alive(2) && b.alive(1) })
	addGroupNS(t, b, subA, 2)
	waitUntil(t, "A follows", func() bool { return a.tgt.Subsystem(subA) != nil })
	// A's sync reads the state and is held before it applies what it read.
	a.store.gate = make(chan struct{})
	a.store.armed.Store(true)
	synced := make(chan struct{})
	go func() { a.m.sync(true); close(synced) }()
	waitUntil(t, "the sync's read", func() bool { return !a.store.armed.Load() })
	// A change is announced that A cannot read.
	a.store.readFails.Store(true)
	if _, err := b.m.gw.notify(b.m.Group().Version, group.KindConfig); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "A unread", a.m.gw.unreadNow)
	close(a.store.gate)
	<-synced
	if !a.m.gw.unreadNow() {
		t.Fatal("a read that began before the failed one marked the state read: the announced change is unread, and I/O is served")
	}
	a.store.readFails.Store(false)
	a.m.sync(true)
	if a.m.gw.unreadNow() {
		t.Fatal("a read that began after the failure did not mark the state read")
	}
}

// TestGatewayStaleReadWhileNoticeReads: with the state already unread, a
// sync whose read began before a change was announced does not mark the
// state read while the notice's own read of that change is still under way
// (a slow OSD): the change is not read yet.
func TestGatewayStaleReadWhileNoticeReads(t *testing.T) {
	cl := group.NewCluster()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	a := startGateway(t, cl, clock, 1, addrA)
	b := startGateway(t, cl, clock, 2, addrB)
	waitUntil(t, "all see all", func() bool { return a.alive(2) && b.alive(1) })
	addGroupNS(t, b, subA, 2)
	waitUntil(t, "A follows", func() bool { return a.tgt.Subsystem(subA) != nil })
	// A is unread: a change it could not read.
	a.store.readFails.Store(true)
	if _, err := b.m.gw.notify(b.m.Group().Version, group.KindConfig); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "A unread", a.m.gw.unreadNow)
	a.store.readFails.Store(false)
	// A sync reads (the state before the next change) and is held.
	a.store.gate = make(chan struct{})
	a.store.armed.Store(true)
	synced := make(chan struct{})
	go func() { a.m.sync(true); close(synced) }()
	waitUntil(t, "the sync's read", func() bool { return !a.store.armed.Load() })
	// A change is announced; A's read of it is slow.
	block := make(chan struct{})
	a.store.block.Store(&block)
	reads := a.store.reads.Load()
	notified := make(chan struct{})
	go func() {
		defer close(notified)
		_, _ = b.m.gw.notify(b.m.Group().Version, group.KindConfig)
	}()
	waitUntil(t, "the notice's read", func() bool { return a.store.reads.Load() > reads })
	close(a.store.gate)
	<-synced
	if !a.m.gw.unreadNow() {
		t.Error("a read that began before the announced change marked the state read while the change's own read was under way")
	}
	a.store.block.Store(nil)
	close(block)
	<-notified
	waitUntil(t, "A reads again", func() bool { return !a.m.gw.unreadNow() })
}
