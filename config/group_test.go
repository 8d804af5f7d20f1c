package config

import (
	"strings"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
)

const gatewayYAML = `
ports: [{transport: loop, address: 127.0.0.1}]
gateway_group: {name: g1, pool: rbd, id: 2}
`

func TestLoadGateway(t *testing.T) {
	c, err := loadYAML([]byte(gatewayYAML))
	if err != nil {
		t.Fatal(err)
	}
	want := GatewayGroup{Name: "g1", Pool: "rbd", ID: 2, CephConf: limits.RBDCephConf, Client: limits.RBDClient, Lease: limits.GroupLease,
		KeyDir: limits.GroupKeyDir}
	if c.GatewayGroup != want {
		t.Fatalf("gateway_group = %+v, want %+v", c.GatewayGroup, want)
	}
	if lo, hi := c.GatewayGroup.CNTLIDRange(); lo != 2041 || hi != 4080 {
		t.Errorf("CNTLIDRange = %d..%d, want 2041..4080", lo, hi)
	}
	// Written back, it reads the same; a configuration without a group
	// writes no gateway_group section.
	out, err := Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	back, err := loadYAML(out)
	if err != nil || back.GatewayGroup != want {
		t.Fatalf("marshalled and loaded: %+v, %v\n%s", back, err, out)
	}
	plain, _ := loadYAML([]byte(minimalYAML))
	if out, _ := Marshal(plain); strings.Contains(string(out), "gateway_group") {
		t.Errorf("a configuration without a group writes one:\n%s", out)
	}
}

func TestGatewayGroupRejects(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		key  string
		msg  string
	}{
		{"pool without name", "ports: [{transport: loop, address: 127.0.0.1}]\nsubsystems: [{nqn: nqn.2026-11.io.example:t, allow_any_host: true}]\ngateway_group: {pool: rbd}\n",
			"gateway_group.name", "required"},
		{"bad name", strings.Replace(gatewayYAML, "name: g1", "name: g/1", 1), "gateway_group.name", `"g/1"`},
		{"no pool", strings.Replace(gatewayYAML, "pool: rbd, ", "", 1), "gateway_group.pool", ""},
		{"id 0", strings.Replace(gatewayYAML, "id: 2", "id: 0", 1), "gateway_group.id", "1..32"},
		{"id 33", strings.Replace(gatewayYAML, "id: 2", "id: 33", 1), "gateway_group.id", "1..32"},
		{"relative ceph_conf", strings.Replace(gatewayYAML, "id: 2", "id: 2, ceph_conf: ceph.conf", 1), "gateway_group.ceph_conf", "absolute"},
		{"empty client", strings.Replace(gatewayYAML, "id: 2", `id: 2, client: ""`, 1), "gateway_group.client", ""},
		{"short lease", strings.Replace(gatewayYAML, "id: 2", "id: 2, lease: 1s", 1), "gateway_group.lease", "2s..5m0s"},
		{"subsystems in a gateway's file", gatewayYAML + "subsystems: [{nqn: nqn.2026-11.io.example:t, allow_any_host: true}]\n",
			"subsystems", "kept in RADOS"},
		{"ana_groups in a gateway's file", strings.Replace(gatewayYAML, "address: 127.0.0.1}", "address: 127.0.0.1, ana_groups: {1: optimized}}", 1),
			"ports[0].ana_groups", "the group sets"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadYAML([]byte(tt.yaml))
			assertErrContains(t, err, tt.key, tt.msg)
		})
	}
}

// A composed gateway configuration (the file's with the group's
// subsystems and ANA states) validates: the file-only rules are not
// Validate's.
func TestGatewayComposedValidates(t *testing.T) {
	c, err := loadYAML([]byte(gatewayYAML))
	if err != nil {
		t.Fatal(err)
	}
	c.Ports[0].ANAGroups = map[string]string{"1": "inaccessible", "2": "optimized"}
	c.Subsystems = []Subsystem{{NQN: "nqn.2026-11.io.example:t", AllowAnyHost: true}}
	c.ApplyDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.GatewayGroup.Lease != 10*time.Second {
		t.Errorf("lease %v", c.GatewayGroup.Lease)
	}
}

// A gateway's rbd namespaces are opened through its own gateway_group
// ceph_conf and client: they are the defaults of its namespaces, and any
// other is refused (the group's state names neither).
func TestGatewayRBDCluster(t *testing.T) {
	gw := func() *Config {
		c, err := loadYAML([]byte(strings.Replace(gatewayYAML, "id: 2", "id: 2, ceph_conf: /etc/ceph/gw.conf, client: gw", 1)))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := gw()
	c.Subsystems = []Subsystem{{NQN: "nqn.2026-11.io.example:t", AllowAnyHost: true,
		Namespaces: []Namespace{{NSID: 1, Backend: BackendRBD, Pool: "rbd", Image: "i"}}}}
	c.ApplyDefaults()
	if n := c.Subsystems[0].Namespaces[0]; n.CephConf != "/etc/ceph/gw.conf" || n.Client != "gw" {
		t.Fatalf("defaults ceph_conf %q, client %q; want the gateway's", n.CephConf, n.Client)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	// client.gw is gw.
	c.Subsystems[0].Namespaces[0].Client = "client.gw"
	if err := c.Validate(); err != nil {
		t.Errorf("client.gw: %v", err)
	}
	tests := []struct {
		name, key string
		edit      func(n *Namespace)
	}{
		{"another ceph_conf", "subsystems[0].namespaces[0].ceph_conf", func(n *Namespace) { n.CephConf = "/etc/ceph/ceph.conf" }},
		{"another client", "subsystems[0].namespaces[0].client", func(n *Namespace) { n.Client = "admin" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := gw()
			c.Subsystems = []Subsystem{{NQN: "nqn.2026-11.io.example:t", AllowAnyHost: true,
				Namespaces: []Namespace{{NSID: 1, Backend: BackendRBD, Pool: "rbd", Image: "i"}}}}
			tt.edit(&c.Subsystems[0].Namespaces[0])
			c.ApplyDefaults()
			assertErrContains(t, c.Validate(), tt.key, "gateway_group")
		})
	}
	// Without a group, the defaults are limits'.
	plain, err := loadYAML([]byte(minimalYAML))
	if err != nil {
		t.Fatal(err)
	}
	plain.Subsystems[0].Namespaces = []Namespace{{NSID: 1, Backend: BackendRBD, Pool: "rbd", Image: "i"}}
	plain.ApplyDefaults()
	if n := plain.Subsystems[0].Namespaces[0]; n.CephConf != limits.RBDCephConf || n.Client != limits.RBDClient {
		t.Errorf("without a group: ceph_conf %q, client %q", n.CephConf, n.Client)
	}
}

// A gateway with only one of its gateway_group ceph_conf and client set
// takes that one and the other's default; the same path spelt otherwise is
// the same file.
func TestGatewayRBDClusterPartial(t *testing.T) {
	c, err := loadYAML([]byte(strings.Replace(gatewayYAML, "id: 2", "id: 2, ceph_conf: /etc/ceph/gw.conf", 1)))
	if err != nil {
		t.Fatal(err)
	}
	c.GatewayGroup.Client = "" // as a configuration built in code, without Load's defaults
	c.Subsystems = []Subsystem{{NQN: "nqn.2026-11.io.example:t", AllowAnyHost: true,
		Namespaces: []Namespace{{NSID: 1, Backend: BackendRBD, Pool: "rbd", Image: "i"}}}}
	c.ApplyDefaults()
	if n := c.Subsystems[0].Namespaces[0]; n.CephConf != "/etc/ceph/gw.conf" || n.Client != limits.RBDClient {
		t.Errorf("ceph_conf %q, client %q; want the gateway's file and the default user", n.CephConf, n.Client)
	}
	c.GatewayGroup.Client = limits.RBDClient
	c.Subsystems[0].Namespaces[0].CephConf = "/etc/ceph//gw.conf"
	if err := c.Validate(); err != nil {
		t.Errorf("the gateway's file spelt with a double slash: %v", err)
	}
}
