package control

import (
	"slices"
	"strings"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

const multipathYAML = `
ports:
  - {id: 1, transport: loop, address: 127.0.0.1, port: 4420, ana_groups: {2: non-optimized}}
  - {id: 7, transport: loop, address: 127.0.0.2, port: 4420}
referrals:
  - {transport: rdma, address: 10.0.0.2, port_id: 3}
subsystems:
  - nqn: nqn.2026-11.io.example:a
    allow_any_host: true
    ports: [1, 7]
    cntlid_min: 10
    cntlid_max: 20
    namespaces:
      - {nsid: 1, backend: memory, size: 1MiB}
      - {nsid: 2, backend: memory, size: 1MiB, ana_group: 2}
`

func (b *bench) port(id uint16) *fabric.Port {
	for _, p := range b.tgt.Ports() {
		if p.ID == id {
			return p
		}
	}
	b.t.Fatalf("no port %d", id)
	return nil
}

// TestMultipathConfig: what the multipath keys set up at start, and each
// changed live, with the hosts that stay connected staying.
func TestMultipathConfig(t *testing.T) {
	b := newBench(t, multipathYAML)
	const sub = "nqn.2026-11.io.example:a"
	if s := b.port(1).ANAState(2); s != nvme.ANANonOptimized {
		t.Fatalf("port 1 group 2: %v", s)
	}
	if s := b.port(7).ANAState(2); s != nvme.ANAOptimized {
		t.Fatalf("port 7 group 2: %v", s)
	}
	if refs := b.tgt.Referrals(); len(refs) != 1 || refs[0] != (fabric.Referral{Transport: "rdma", Address: "10.0.0.2", Service: "4420", PortID: 3}) {
		t.Fatalf("referrals %+v", refs)
	}
	if got := b.tgt.Subsystem(sub).Ports(); !slices.Equal(got, []uint16{1, 7}) {
		t.Fatalf("subsystem ports %v", got)
	}
	h1 := b.connect("127.0.0.1", sub, "nqn.2026-11.io.example:h1")
	h7 := b.connect("127.0.0.2", sub, "nqn.2026-11.io.example:h7")
	for _, c := range b.tgt.Controllers() {
		if c.SubNQN == sub && (c.CNTLID < 10 || c.CNTLID > 20) {
			t.Fatalf("CNTLID %d outside 10..20", c.CNTLID)
		}
	}

	edits := []struct {
		name  string
		edit  func(c *config.Config)
		check func(t *testing.T)
	}{
		{"ANA states", func(c *config.Config) {
			c.Ports[0].ANAGroups = map[string]string{"1": "inaccessible", "2": "change"}
		}, func(t *testing.T) {
			if b.port(1).ANAState(1) != nvme.ANAInaccessible || b.port(1).ANAState(2) != nvme.ANAChange {
				t.Fatalf("port 1: %v", b.port(1).ANAStates())
			}
		}},
		{"namespace group", func(c *config.Config) { c.Subsystems[0].Namespaces[0].ANAGroup = 3 }, func(t *testing.T) {
			if g := b.liveNS(sub, 1).ANAGroup(); g != 3 {
				t.Fatalf("group %d", g)
			}
		}},
		{"referrals", func(c *config.Config) { c.Referrals = nil }, func(t *testing.T) {
			if refs := b.tgt.Referrals(); len(refs) != 0 {
				t.Fatalf("referrals %+v", refs)
			}
		}},
		{"cntlid range", func(c *config.Config) { c.Subsystems[0].CNTLIDMin, c.Subsystems[0].CNTLIDMax = 30, 40 }, func(t *testing.T) {
			b.connect("127.0.0.1", sub, "nqn.2026-11.io.example:h3")
			ids := []nvme.CNTLID{}
			for _, c := range b.tgt.Controllers() {
				ids = append(ids, c.CNTLID)
			}
			if !slices.Contains(ids, 30) {
				t.Fatalf("CNTLIDs %v, want 30 for the new one", ids)
			}
		}},
	}
	for _, e := range edits {
		t.Run(e.name, func(t *testing.T) {
			res, err := b.m.Update(tester, func(c *config.Config) error { e.edit(c); return nil }, false)
			if err != nil || len(res.Applied) != 1 {
				t.Fatalf("Update: %+v %v", res, err)
			}
			e.check(t)
			if disconnected(h1, false) || disconnected(h7, false) {
				t.Fatal("a host was disconnected")
			}
		})
	}
	// The subsystem off port 7: its host there goes, the other stays.
	res, err := b.m.Update(tester, func(c *config.Config) error { c.Subsystems[0].Ports = []int{1}; return nil }, false)
	if err != nil || len(res.Applied) != 1 {
		t.Fatalf("Update: %+v %v", res, err)
	}
	if !disconnected(h7, true) || disconnected(h1, false) {
		t.Fatal("taking port 7 away: want its host gone, the other one kept")
	}
	// Restart-only keys are named.
	res, err = b.m.Update(tester, func(c *config.Config) error { c.StateDir = "/srv/state"; return nil }, false)
	if err != nil || !slices.Contains(res.Restart, "state_dir") {
		t.Fatalf("state_dir: %+v %v", res, err)
	}
	// A port whose address changes is another listener.
	res, err = b.m.Update(tester, func(c *config.Config) error { c.Ports[1].Address = "127.0.0.3"; return nil }, false)
	if err != nil || len(res.Applied) != 2 || !strings.HasPrefix(res.Applied[0], "remove port") {
		t.Fatalf("moved port: %+v %v", res, err)
	}
	if p := b.port(7); p.Address != "127.0.0.3" {
		t.Fatalf("port 7 at %s", p.Address)
	}
}

func (b *bench) liveNS(nqn string, nsid uint32) *fabric.Namespace {
	b.t.Helper()
	ns := b.m.liveNamespace(nqn, nsid)
	if ns == nil {
		b.t.Fatalf("no namespace %d of %s", nsid, nqn)
	}
	return ns
}
