package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nvmeof-tgt/nvmeof-tgt/control"
	"github.com/nvmeof-tgt/nvmeof-tgt/control/group/rados"
)

var testGroup = &control.GroupStatus{Name: "g1", Pool: "rbd", ID: 1, Version: 12, Failovers: 1, Conflicts: 3, StateErrors: 2,
	Error: "group state is corrupt: its data is not the header",
	Members: []control.MemberStatus{
		{ID: 1, Self: true, Alive: true, LeaseAge: 300 * time.Millisecond, Listeners: []string{"rdma 10.0.0.1:4420"}},
		{ID: 2, Alive: false, Fenced: true, LeaseAge: 12 * time.Second, Listeners: []string{"rdma 10.0.0.1:4421"}},
	},
	Owners: map[string]int{"1": 1, "2": 1},
}

func TestGroupMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newGroupCollector(func() *control.GroupStatus { return testGroup }))
	got := gather(t, reg)
	want := map[string]float64{
		`nvmeof_tgt_group_version{group="g1"}`:                       12,
		`nvmeof_tgt_group_state_ok{group="g1"}`:                      0,
		`nvmeof_tgt_group_members{group="g1"}`:                       2,
		`nvmeof_tgt_group_members_alive{group="g1"}`:                 1,
		`nvmeof_tgt_group_failovers_total{group="g1"}`:               1,
		`nvmeof_tgt_group_conflicts_total{group="g1"}`:               3,
		`nvmeof_tgt_group_state_errors_total{group="g1"}`:            2,
		`nvmeof_tgt_group_lease_age_seconds{gateway="2",group="g1"}`: 12,
		`nvmeof_tgt_group_ana_owner{ana_group="2",group="g1"}`:       1,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (%v), want %v", k, g, ok, v)
		}
	}
}

func TestPrintGroup(t *testing.T) {
	var b bytes.Buffer
	printGroup(&b, testGroup)
	out := b.String()
	for _, w := range []string{"GATEWAY GROUP g1 (pool rbd, object nvmeof-tgt.g1.state): gateway 1, state version 12",
		"state unreadable", "1 (this)  alive", "2         fenced", "1,2", "rdma 10.0.0.1:4421"} {
		if !strings.Contains(out, w) {
			t.Errorf("missing %q in\n%s", w, out)
		}
	}
}

// TestGroupNeedsItsBuild: a gateway_group is a problem for the default
// build, which has no librados; the rbd build takes the file.
func TestGroupNeedsItsBuild(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, dir, "ports: [{transport: loop, address: 127.0.0.1}]\ngateway_group: {name: g1, pool: rbd, id: 1, ceph_conf: "+
		filepath.Join(dir, "ceph.conf")+"}\nmetrics: {listen: \"\"}\n")
	os.WriteFile(filepath.Join(dir, "ceph.conf"), []byte("[global]\n"), 0o600)
	const want = "gateway_group: this nvmeof-tgt is built without librados; nvmeof-tgt-rbd serves gateway groups"
	if rados.Supported {
		if stdout, stderr, err := runCLI(t, "config", "validate", path); err != nil || stdout != path+": ok\n" {
			t.Fatalf("validate in the rbd build: %v %q %q", err, stdout, stderr)
		}
		return
	}
	if _, stderr, err := runCLI(t, "config", "validate", path); err == nil || strings.TrimSpace(stderr) != want {
		t.Fatalf("validate: %v %q, want %q", err, stderr, want)
	}
}
