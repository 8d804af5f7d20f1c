//go:build linux && cgo && rbd

package control

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/control/group"
	"github.com/nvmeof-tgt/nvmeof-tgt/control/group/rados"
)

// TestRBDGatewayStore: a gateway group's objects in the pool "rbd" of the
// cluster NVMEOF_TGT_TEST_CEPH_CONF names (the e2e suite runs this in the
// guest: TestRBDUnit), through two clients as two gateways: the state's
// compare-and-swap on the object's version, notifications acknowledged
// across clients, leases, a state corrupted by `rados put`, and fencing:
// once blocklisted, a client's every operation is ErrBlocklisted.
func TestRBDGatewayStore(t *testing.T) {
	conf := os.Getenv("NVMEOF_TGT_TEST_CEPH_CONF")
	if conf == "" {
		t.Skip("no cluster: set NVMEOF_TGT_TEST_CEPH_CONF (tests/lab/ceph-up.sh)")
	}
	ctx := context.Background()
	g := config.GatewayGroup{Name: fmt.Sprintf("unit%d", time.Now().UnixNano()%1e9), Pool: "rbd", ID: 1, CephConf: conf, Client: "admin", Lease: 3 * time.Second}
	t.Cleanup(func() {
		for _, o := range []string{rados.StateObject(g.Name), rados.LeasesObject(g.Name)} {
			exec.Command("rados", "-c", conf, "-p", "rbd", "rm", o).Run()
		}
	})
	open := func() group.Store {
		st, err := rados.Open(g, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.(interface{ Close() }).Close() })
		return st
	}
	a, b := open(), open()
	bad := g
	bad.Pool = "no-such-pool"
	if _, err := rados.Open(bad, nil); err == nil || !strings.Contains(err.Error(), `pool "no-such-pool": no such pool`) {
		t.Errorf("a missing pool: %v", err)
	}

	// Compare-and-swap: the first writer creates; a write on a stale read
	// loses, whichever way the object moved.
	cur, err := group.Read(ctx, a)
	if err != nil || cur.Version != 0 {
		t.Fatalf("no object yet: %+v %v", cur, err)
	}
	next := cur.Clone()
	next.Listeners[1] = []group.Listener{{PortID: 1, Transport: "rdma", Address: "10.0.0.1", Port: 4420}}
	if err := group.Commit(ctx, a, cur, next); err != nil {
		t.Fatal(err)
	}
	if err := group.Commit(ctx, b, cur, next.Clone()); !errors.Is(err, group.ErrConflict) {
		t.Fatalf("a second create: %v, want ErrConflict", err)
	}
	s1, err := group.Read(ctx, b)
	if err != nil || s1.Version != 1 || len(s1.Listeners[1]) != 1 {
		t.Fatalf("read through the other client: %+v %v", s1, err)
	}
	n2 := s1.Clone()
	n2.Listeners[2] = []group.Listener{{PortID: 1, Transport: "rdma", Address: "10.0.0.2", Port: 4421}}
	if err := group.Commit(ctx, b, s1, n2); err != nil {
		t.Fatal(err)
	}
	n3 := s1.Clone()
	delete(n3.Listeners, 1)
	if err := group.Commit(ctx, a, s1, n3); !errors.Is(err, group.ErrConflict) {
		t.Fatalf("a write on a stale read: %v, want ErrConflict", err)
	}
	if s, _ := group.Read(ctx, a); s.Version != 2 || len(s.Listeners) != 2 {
		t.Fatalf("the losing write changed the state: %+v", s)
	}

	// Notifications reach the other client, which acknowledges; the
	// notifier's own watch sees its own as such.
	got := make(chan group.Notice, 4)
	for _, st := range []group.Store{a, b} {
		stop, err := st.Watch(func(n group.Notice) { got <- n; n.Ack() })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
	}
	acked, missed, err := a.Notify(ctx, []byte("v3"), 5*time.Second)
	if err != nil || acked != 2 || missed != 0 {
		t.Fatalf("notify: %d acked, %d missed, %v", acked, missed, err)
	}
	selfSeen := 0
	for range 2 {
		n := <-got
		if string(n.Payload) != "v3" {
			t.Errorf("payload %q", n.Payload)
		}
		if n.Self {
			selfSeen++
		}
	}
	if selfSeen != 1 {
		t.Errorf("%d notices marked as the notifier's own, want 1", selfSeen)
	}

	// Leases: a gateway ID's lock is its incarnation's, from its client;
	// another client is refused it while it is held, and takes it once it
	// lapses; the holder is the cluster's word.
	rec := []byte(`{"incarnation":"a","seq":1,"addrs":[]}`)
	if err := a.Heartbeat(ctx, 1, "a", 3*time.Second, rec); err != nil {
		t.Fatal(err)
	}
	if err := a.Heartbeat(ctx, 1, "a", 3*time.Second, rec); err != nil {
		t.Fatalf("renewal: %v", err)
	}
	l, err := b.Leases(ctx)
	if err != nil || string(l[1].Record) != string(rec) || l[1].Holder == nil || l[1].Holder.Cookie != "a" || !slices.Contains(a.Addrs(), l[1].Holder.Addr) {
		t.Fatalf("leases %+v %v; a's addresses %v", l, err, a.Addrs())
	}
	if err := b.Heartbeat(ctx, 1, "b", 3*time.Second, []byte(`{"incarnation":"b","seq":1,"addrs":[]}`)); !errors.Is(err, group.ErrIDTaken) || !strings.Contains(err.Error(), l[1].Holder.Addr) {
		t.Fatalf("another client's heartbeat of a held ID: %v, want ErrIDTaken naming the holder", err)
	}
	if err := a.Heartbeat(ctx, 1, "a2", 3*time.Second, rec); !errors.Is(err, group.ErrIDTaken) {
		t.Fatalf("another incarnation of the same client: %v, want ErrIDTaken", err)
	}
	time.Sleep(3500 * time.Millisecond)
	if l, err := b.Leases(ctx); err != nil || l[1].Holder != nil {
		t.Fatalf("a lapsed lock: %+v %v", l, err)
	}
	if err := b.Heartbeat(ctx, 1, "b", 3*time.Second, []byte(`{"incarnation":"b","seq":1,"addrs":[]}`)); err != nil {
		t.Fatalf("a lapsed ID taken by another: %v", err)
	}
	// Keys written by anyone else in the leases object are not leases.
	if out, err := exec.Command("rados", "-c", conf, "-p", "rbd", "setomapval", rados.LeasesObject(g.Name), "0001", "x").CombinedOutput(); err != nil {
		t.Fatalf("rados setomapval: %v %s", err, out)
	}
	if l, err := a.Leases(ctx); err != nil || len(l) != 1 || l[1].Holder == nil || l[1].Holder.Cookie != "b" {
		t.Fatalf("leases beside a stray key: %+v %v", l, err)
	}

	// `rados put` of garbage: the state no longer decodes, and says why.
	garbage := filepath.Join(t.TempDir(), "garbage")
	os.WriteFile(garbage, []byte("garbage"), 0o600)
	if out, err := exec.Command("rados", "-c", conf, "-p", "rbd", "put", rados.StateObject(g.Name), garbage).CombinedOutput(); err != nil {
		t.Fatalf("rados put: %v %s", err, out)
	}
	if _, err := group.Read(ctx, a); !errors.Is(err, group.ErrCorrupt) {
		t.Fatalf("after rados put: %v, want ErrCorrupt", err)
	}

	// Fencing: b blocklists a's client; a can do nothing any more.
	addrs := a.Addrs()
	if len(addrs) == 0 {
		t.Fatal("the client has no address")
	}
	t.Cleanup(func() {
		for _, ad := range addrs {
			exec.Command("ceph", "-c", conf, "osd", "blocklist", "rm", ad).Run()
		}
	})
	if ok, err := b.Blocklisted(ctx, addrs); err != nil || ok {
		t.Fatalf("blocklisted before the fence: %v %v", ok, err)
	}
	if err := b.Blocklist(ctx, addrs); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.Blocklisted(ctx, addrs); err != nil || !ok {
		t.Fatalf("blocklisted after the fence: %v %v", ok, err)
	}
	if ok, err := b.Blocklisted(ctx, append(slices.Clone(addrs), "10.9.9.9:0/1")); err != nil || ok {
		t.Fatalf("one address more, not blocklisted: %v %v", ok, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := a.Heartbeat(ctx, 2, "a", 3*time.Second, []byte(`{"incarnation":"a","seq":2,"addrs":[]}`))
		if errors.Is(err, group.ErrBlocklisted) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a blocklisted client's heartbeat: %v, want ErrBlocklisted", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := b.Leases(ctx); err != nil {
		t.Errorf("the other client was fenced too: %v", err)
	}
}

// TestRBDStoreVersionRace: the version a read of the state returns is the
// state object's, whatever else the client does meanwhile. Heartbeats
// (the leases object) and notifications run beside the state's reads and
// writes on the same client; a read that took another object's version
// would make the compare-and-swap of the next change lose (or win) against
// nobody. One client alone writes the state here, so every conflict is
// false.
func TestRBDStoreVersionRace(t *testing.T) {
	conf := os.Getenv("NVMEOF_TGT_TEST_CEPH_CONF")
	if conf == "" {
		t.Skip("no cluster: set NVMEOF_TGT_TEST_CEPH_CONF (tests/lab/ceph-up.sh)")
	}
	ctx := context.Background()
	g := config.GatewayGroup{Name: fmt.Sprintf("race%d", time.Now().UnixNano()%1e9), Pool: "rbd", ID: 1, CephConf: conf, Client: "admin", Lease: 3 * time.Second}
	t.Cleanup(func() {
		for _, o := range []string{rados.StateObject(g.Name), rados.LeasesObject(g.Name)} {
			exec.Command("rados", "-c", conf, "-p", "rbd", "rm", o).Run()
		}
	})
	st, err := rados.Open(g, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.(interface{ Close() }).Close() })
	// The object first: a watch needs it.
	if _, err := group.Update(ctx, st, 3, func(s *group.State) (bool, error) { s.SetListeners(1, nil); return true, nil }); err != nil {
		t.Fatal(err)
	}
	stopWatch, err := st.Watch(func(n group.Notice) { n.Ack() })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stopWatch)
	// The leases object moves far ahead of the state's version, and
	// notifications go to the state object meanwhile.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			st.Heartbeat(ctx, 1, "a", 3*time.Second, []byte(fmt.Sprintf(`{"incarnation":"a","seq":%d,"addrs":[]}`, i)))
			st.Leases(ctx)
			st.Notify(ctx, []byte("x"), 100*time.Millisecond)
		}
	}()
	conflicts := 0
	for i := range 200 {
		cur, err := group.Read(ctx, st)
		if err != nil {
			close(stop)
			wg.Wait()
			t.Fatal(err)
		}
		next := cur.Clone()
		next.Listeners[1] = []group.Listener{{PortID: 1, Transport: "rdma", Address: "10.0.0.1", Port: 4420 + i}}
		if err := group.Commit(ctx, st, cur, next); errors.Is(err, group.ErrConflict) {
			conflicts++
		} else if err != nil {
			close(stop)
			wg.Wait()
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if conflicts > 0 {
		t.Errorf("%d of 200 changes lost a compare-and-swap with no other writer: a read took another object's version", conflicts)
	}
}
