package config

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
)

// GatewayGroup makes the target one gateway of a group: gateways that serve
// the same subsystems, namespaces and hosts, kept in one object in a RADOS
// pool, each with its own ports, controller-ID range and ANA group.
//
// What is shared lives in the group's state, changed through any
// gateway's API; what is the gateway's own (ports, rdma, metrics, api, log,
// state_dir) stays in its file. A gateway's file therefore lists no
// subsystems, and its ports no ana_groups: the group sets them.
type GatewayGroup struct {
	// Name names the group: its state is the object
	// nvmeof-tgt.<name>.state in Pool. Empty: no group.
	Name string `mapstructure:"name"`
	// Pool is the RADOS pool the group's objects live in.
	Pool string `mapstructure:"pool"`
	// ID is this gateway's number in the group, 1..limits.GroupGateways,
	// unique: its ANA group, and its controller IDs
	// (ID-1)*limits.GroupCNTLIDWidth+1 .. ID*limits.GroupCNTLIDWidth.
	ID int `mapstructure:"id"`
	// CephConf and Client are the cluster's configuration file and the
	// Ceph user (client.<Client>), as an rbd namespace's keys; defaults
	// limits.RBDCephConf and limits.RBDClient.
	CephConf string `mapstructure:"ceph_conf"`
	Client   string `mapstructure:"client"`
	// Lease is how long a gateway that stopped heartbeating still counts
	// as alive; past it another gateway takes its ANA group over and
	// blocklists its clients. Default limits.GroupLease.
	Lease time.Duration `mapstructure:"lease"`
	// KeyDir is the directory under which this gateway reads the
	// DH-HMAC-CHAP key files the group's hosts name: their paths come
	// from the group's state, which anyone able to write the pool can
	// write, and the gateway opens them as root. Default
	// limits.GroupKeyDir.
	KeyDir string `mapstructure:"key_dir"`
}

// Enabled reports whether the target is a gateway of a group.
func (g GatewayGroup) Enabled() bool { return g.Name != "" }

// CNTLIDRange is the controller IDs gateway g.ID hands out: a range of its
// own, disjoint from every other gateway's.
func (g GatewayGroup) CNTLIDRange() (lo, hi int) {
	return (g.ID-1)*limits.GroupCNTLIDWidth + 1, g.ID * limits.GroupCNTLIDWidth
}

// groupNameOK reports whether s may name a group: it names RADOS objects and
// appears in metrics, so letters, digits, '.', '_' and '-' only.
func groupNameOK(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
		default:
			return false
		}
	}
	return true
}

func (g GatewayGroup) validate(p *problems) {
	const k = "gateway_group"
	if !g.Enabled() {
		if g.Pool != "" || g.ID != 0 {
			p.add(k+".name", "required with gateway_group.pool or gateway_group.id")
		}
		return
	}
	if !groupNameOK(g.Name) {
		p.add(k+".name", "%q: want 1..64 letters, digits, '.', '_' or '-'", g.Name)
	}
	if g.Pool == "" || strings.ContainsAny(g.Pool, " \t\n/") {
		p.add(k+".pool", "%q: want the name of a RADOS pool", g.Pool)
	}
	if g.ID < 1 || g.ID > limits.GroupGateways {
		p.add(k+".id", "%d is out of range 1..%d", g.ID, limits.GroupGateways)
	}
	if !filepath.IsAbs(g.CephConf) {
		p.add(k+".ceph_conf", "%q: want an absolute path", g.CephConf)
	}
	if g.Client == "" || strings.ContainsAny(g.Client, " \t\n") {
		p.add(k+".client", "%q: want a Ceph user name, such as admin", g.Client)
	}
	if d := g.Lease; d < limits.GroupLeaseMin || d > limits.GroupLeaseMax {
		p.add(k+".lease", "%v: want %v..%v", d, limits.GroupLeaseMin, limits.GroupLeaseMax)
	}
	if !filepath.IsAbs(g.KeyDir) || filepath.Clean(g.KeyDir) == "/" {
		p.add(k+".key_dir", "%q: want an absolute path to a directory of key files, not /", g.KeyDir)
	}
}

// validateGroupKeys refuses, on a gateway, a host key file outside its
// gateway_group.key_dir.
func (c *Config) validateGroupKeys(p *problems) {
	g := c.GatewayGroup
	if !g.Enabled() {
		return
	}
	dir := filepath.Clean(g.KeyDir) + "/"
	for i, s := range c.Subsystems {
		for j, h := range s.Hosts {
			k := fmt.Sprintf("subsystems[%d].hosts[%d]", i, j)
			for key, f := range map[string]string{"dhchap_key_file": h.DHCHAPKeyFile, "dhchap_ctrl_key_file": h.DHCHAPCtrlKeyFile} {
				if f != "" && (filepath.Clean(f) != f || !strings.HasPrefix(f, dir)) {
					p.add(k+"."+key, "%q: a gateway reads the group's key files under its gateway_group.key_dir (%s) only", f, g.KeyDir)
				}
			}
		}
	}
}

// gatewayFileProblems are what a gateway's own file may not hold: what the
// group decides. Checked on files only (load), not on the configuration the
// group composes from the file and its state.
func (c *Config) gatewayFileProblems() []error {
	if !c.GatewayGroup.Enabled() {
		return nil
	}
	var p problems
	if len(c.Subsystems) > 0 {
		p.add("subsystems", "a gateway of group %q serves the group's subsystems, kept in RADOS: remove them from the file and add them through the API (any gateway's)", c.GatewayGroup.Name)
	}
	for i, pt := range c.Ports {
		if len(pt.ANAGroups) > 0 {
			p.add(fmt.Sprintf("ports[%d].ana_groups", i), "the group sets the ANA states of a gateway's ports: each gateway's own group optimized, the others inaccessible")
		}
	}
	return p
}

// validateGroupImages refuses, on a gateway, an rbd namespace whose
// ceph_conf or client is not the gateway's own gateway_group keys: the
// group's images are in its cluster, and each gateway reaches it through
// its own file and user (the group's state names neither, so that
// whoever can write the pool cannot make a gateway read another file).
func (c *Config) validateGroupImages(p *problems) {
	g := c.GatewayGroup
	if !g.Enabled() {
		return
	}
	for i, s := range c.Subsystems {
		for j, n := range s.Namespaces {
			if n.Backend != BackendRBD {
				continue
			}
			k := fmt.Sprintf("subsystems[%d].namespaces[%d]", i, j)
			if filepath.Clean(n.CephConf) != filepath.Clean(g.CephConf) {
				p.add(k+".ceph_conf", "%q: a gateway group's images are in its cluster, which each gateway reaches through its own gateway_group.ceph_conf (%q here): leave ceph_conf out", n.CephConf, g.CephConf)
			}
			if strings.TrimPrefix(n.Client, "client.") != strings.TrimPrefix(g.Client, "client.") {
				p.add(k+".client", "%q: a gateway group's images are opened as each gateway's own gateway_group.client (%q here): leave client out", n.Client, g.Client)
			}
		}
	}
}
