package control

import (
	"fmt"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/control/group"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// TestGatewayUnreadUnsettled: B cannot read a change announced to it, and
// a write of its data path timed out: librados gave it up, but its bytes
// may still sit in a socket toward an OSD and land whenever the network
// heals (TestNetGroupPartition's partition showed a librados write that
// timed out landing after a later one, once healed, unless its client was
// blocklisted). B is then not idle, whatever runs: A takes B's group over
// only once B's clients are blocklisted, and B, finding itself fenced,
// says so.
func TestGatewayUnreadUnsettled(t *testing.T) {
	// osdsDown: B's OSD operations fail too (the usual reason it cannot
	// read): it learns of its fence from the monitor.
	for _, osdsDown := range []bool{false, true} {
		t.Run(fmt.Sprintf("osds-down=%v", osdsDown), func(t *testing.T) { unreadUnsettled(t, osdsDown) })
	}
}

func unreadUnsettled(t *testing.T, osdsDown bool) {
	cl := group.NewCluster()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	a := startGateway(t, cl, clock, 1, addrA)
	b := startGateway(t, cl, clock, 2, addrB)
	waitUntil(t, "A sees B", func() bool { return a.alive(2) })
	addGroupNS(t, a, subA, 2)
	waitUntil(t, "B serves group 2", func() bool { return b.anaState(2) == nvme.ANAOptimized })
	waitUntil(t, "A trusts B", func() bool { return trusts(a, 2) })
	b.unsettled.Store(true)
	b.store.readFails.Store(true)
	if _, err := a.m.gw.notify(a.m.Group().Version, group.KindConfig); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "B unread", b.m.gw.unreadNow)
	waitUntil(t, "B withholds its lease", func() bool { return b.m.Group().LeaseWithheld })
	b.store.leasesFail.Store(osdsDown)
	waitUntil(t, "A serves group 2", func() bool { clock.Add(20 * time.Millisecond); return a.anaState(2) == nvme.ANAOptimized })
	if !cl.Blocklisted(addrB) {
		t.Fatal("A serves B's group while B's data path may still write: B went idle with a write given up on, and nothing fenced it")
	}
	if b.anaState(2) != nvme.ANAInaccessible {
		t.Errorf("B reports its group %v while A serves it", b.anaState(2))
	}
	waitUntil(t, "B finds itself fenced", func() bool { clock.Add(20 * time.Millisecond); return b.fenced.Load() })
}
