package control

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/control/group"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
)

// maskYAML is baseYAML with namespace 1 of subsystem a masked to both its
// hosts and limited.
const maskYAML = `
ports:
  - {transport: loop, address: 127.0.0.1, port: 4420}
subsystems:
  - nqn: nqn.2026-11.io.example:a
    hosts: [nqn.2026-11.io.example:host1, nqn.2026-11.io.example:host2]
    namespaces:
      - nsid: 1
        backend: memory
        size: 1MiB
        hosts: [nqn.2026-11.io.example:host1, nqn.2026-11.io.example:host2]
        qos: {iops: 5000, bw: 100MB}
      - {nsid: 2, path: FILE, size: 1MiB}
`

// TestMaskAndQoSAPI: a namespace's mask and QoS change live through the
// API, on the same fabric namespace (hosts are not disconnected, the
// namespace not re-added), in the running configuration and its file;
// refusals change nothing.
func TestMaskAndQoSAPI(t *testing.T) {
	ns1 := "/v1/subsystems/" + subA + "/namespaces/1"
	ns2 := "/v1/subsystems/" + subA + "/namespaces/2"
	type want struct {
		hosts []string
		qos   fabric.QoSConfig
	}
	start := want{[]string{hst1, hst2}, fabric.QoSConfig{Limits: fabric.QoSLimits{IOPS: 5000, BW: 100e6}}}
	tests := []struct {
		name         string
		setup        []string // method path body, applied first
		method, path string
		body         string
		code         int
		wantErr      string
		want         want // of namespace 1 afterwards
	}{
		{name: "remove a host", method: "DELETE", path: ns1 + "/hosts/" + hst2, code: 200,
			want: want{[]string{hst1}, start.qos}},
		{name: "add it back", setup: []string{"DELETE " + ns1 + "/hosts/" + hst2}, method: "POST", path: ns1 + "/hosts",
			body: `{"nqn":"` + hst2 + `"}`, code: 200, want: start},
		{name: "add a host not allowed on the subsystem", method: "POST", path: ns1 + "/hosts",
			body: `{"nqn":"nqn.2026-11.io.example:host9"}`, code: 200,
			want: want{[]string{hst1, hst2, "nqn.2026-11.io.example:host9"}, start.qos}},
		{name: "add a host twice", method: "POST", path: ns1 + "/hosts", body: `{"nqn":"` + hst1 + `"}`, code: 409,
			wantErr: "already exists", want: start},
		{name: "add to a namespace with no mask", method: "POST", path: ns2 + "/hosts", body: `{"nqn":"` + hst1 + `"}`, code: 409,
			wantErr: "has no mask", want: start},
		{name: "remove the last host", setup: []string{"DELETE " + ns1 + "/hosts/" + hst2}, method: "DELETE", path: ns1 + "/hosts/" + hst1,
			code: 409, wantErr: "the last host", want: want{[]string{hst1}, start.qos}},
		{name: "remove a host not in the mask", method: "DELETE", path: ns1 + "/hosts/nqn.2026-11.io.example:host9", code: 404,
			wantErr: "no such host", want: start},
		{name: "mask of a missing namespace", method: "POST", path: "/v1/subsystems/" + subA + "/namespaces/7/hosts",
			body: `{"nqn":"` + hst1 + `"}`, code: 404, wantErr: "no such namespace", want: start},
		{name: "a host that is no NQN", method: "POST", path: ns1 + "/hosts", body: `{"nqn":"a/b"}`, code: 400, wantErr: "hosts[2]", want: start},

		{name: "set the namespace's limits", method: "PUT", path: ns1 + "/qos", body: `{"read_iops": 100, "write_bw": "1GiB"}`, code: 200,
			want: want{start.hosts, fabric.QoSConfig{Limits: fabric.QoSLimits{ReadIOPS: 100, WriteBW: 1 << 30}}}},
		{name: "remove the namespace's limits", method: "PUT", path: ns1 + "/qos", body: `{}`, code: 200,
			want: want{start.hosts, fabric.QoSConfig{}}},
		{name: "limits of a file namespace", method: "PUT", path: ns2 + "/qos", body: `{"iops": 7}`, code: 200, want: start},
		{name: "the per-host default", method: "PUT", path: ns1 + "/qos/hosts/default", body: `{"iops": 300}`, code: 200,
			want: want{start.hosts, fabric.QoSConfig{Limits: start.qos.Limits, PerHost: fabric.QoSLimits{IOPS: 300}}}},
		{name: "a host's own", method: "PUT", path: ns1 + "/qos/hosts/" + hst2, body: `{"bw": 4096}`, code: 200,
			want: want{start.hosts, fabric.QoSConfig{Limits: start.qos.Limits, Hosts: map[string]fabric.QoSLimits{hst2: {BW: 4096}}}}},
		{name: "a host's own replaced", setup: []string{"PUT " + ns1 + "/qos/hosts/" + hst2 + ` {"bw": 4096}`},
			method: "PUT", path: ns1 + "/qos/hosts/" + hst2, body: `{"iops": 9}`, code: 200,
			want: want{start.hosts, fabric.QoSConfig{Limits: start.qos.Limits, Hosts: map[string]fabric.QoSLimits{hst2: {IOPS: 9}}}}},
		{name: "a host's own removed", setup: []string{"PUT " + ns1 + "/qos/hosts/" + hst2 + ` {"bw": 4096}`},
			method: "DELETE", path: ns1 + "/qos/hosts/" + hst2, code: 200, want: start},
		{name: "the default removed", setup: []string{"PUT " + ns1 + "/qos/hosts/default" + ` {"iops": 4}`},
			method: "DELETE", path: ns1 + "/qos/hosts/default", code: 200, want: start},
		{name: "remove limits a host does not have", method: "DELETE", path: ns1 + "/qos/hosts/" + hst1, code: 404,
			wantErr: "no such host", want: start},
		{name: "an unknown limit", method: "PUT", path: ns1 + "/qos", body: `{"burst": 1}`, code: 400, wantErr: "unknown field", want: start},
		{name: "a bandwidth with a bad unit", method: "PUT", path: ns1 + "/qos", body: `{"bw": "1Gbit"}`, code: 400, want: start},
		{name: "limits of a host that is no NQN", method: "PUT", path: ns1 + "/qos/hosts/a%2Fb", body: `{"iops": 1}`, code: 400,
			wantErr: "qos_per_host.hosts[0]", want: start},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBench(t, maskYAML)
			h := b.m.Handler()
			live := b.m.liveNamespace(subA, 1)
			for _, s := range tc.setup {
				f := strings.SplitN(s, " ", 3)
				body := ""
				if len(f) == 3 {
					body = f[2]
				}
				if rec := do(t, h, f[0], f[1], body); rec.Code != 200 {
					t.Fatalf("setup %s: %d %s", s, rec.Code, rec.Body)
				}
			}
			before, _ := config.Marshal(b.m.Running())
			rec := do(t, h, tc.method, tc.path, tc.body)
			if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.wantErr) {
				t.Fatalf("%s %s: %d %s, want %d with %q", tc.method, tc.path, rec.Code, rec.Body, tc.code, tc.wantErr)
			}
			if rec.Code != 200 {
				if after, _ := config.Marshal(b.m.Running()); string(after) != string(before) {
					t.Fatalf("a refused change changed the configuration:\n%s\n%s", before, after)
				}
			}
			if b.m.liveNamespace(subA, 1) != live {
				t.Fatal("namespace 1 was added again: hosts lost it for a moment")
			}
			checkNS1(t, b, tc.want.hosts, tc.want.qos, rec)
		})
	}
}

// checkNS1 checks namespace 1 of subsystem a in fabric, in the running
// configuration, in its file and in the status.
func checkNS1(t *testing.T, b *bench, hosts []string, qos fabric.QoSConfig, rec *httptest.ResponseRecorder) {
	t.Helper()
	fns := b.m.liveNamespace(subA, 1)
	if got := fns.Hosts(); !slices.Equal(got, slices.Sorted(slices.Values(hosts))) {
		t.Errorf("fabric mask %v, want %v", got, hosts)
	}
	if got := fns.QoS(); !reflect.DeepEqual(got, qos) && !(got.IsZero() && qos.IsZero()) {
		t.Errorf("fabric QoS %+v, want %+v", got, qos)
	}
	file, err := config.LoadFile(b.path)
	if err != nil {
		t.Fatal(err)
	}
	for what, c := range map[string]*config.Config{"running": b.m.Running(), "file": file} {
		n := findNamespace(findSubsystem(c, subA), 1)
		if !slices.Equal(n.Hosts, hosts) {
			t.Errorf("%s configuration's hosts %v, want %v", what, n.Hosts, hosts)
		}
		if got := qosConfig(*n); !reflect.DeepEqual(got, qos) && !(got.IsZero() && qos.IsZero()) {
			t.Errorf("%s configuration's QoS %+v, want %+v", what, got, qos)
		}
	}
	for _, s := range b.m.Status().Subsystems {
		if s.NQN != subA {
			continue
		}
		st := s.Namespaces[0]
		if !slices.Equal(st.Hosts, hosts) {
			t.Errorf("status hosts %v, want %v", st.Hosts, hosts)
		}
		if (st.QoS == nil) != qos.IsZero() {
			t.Errorf("status QoS %+v, want %+v", st.QoS, qos)
		} else if st.QoS != nil && st.QoS.Limits.config() != (config.QoS{IOPS: qos.Limits.IOPS, ReadIOPS: qos.Limits.ReadIOPS,
			WriteIOPS: qos.Limits.WriteIOPS, BW: config.Bytes(qos.Limits.BW), ReadBW: config.Bytes(qos.Limits.ReadBW), WriteBW: config.Bytes(qos.Limits.WriteBW)}) {
			t.Errorf("status QoS limits %+v, want %+v", st.QoS.Limits, qos.Limits)
		}
	}
}

// TestMaskAndQoSClient: the client's calls reach the routes.
func TestMaskAndQoSClient(t *testing.T) {
	b := newBench(t, maskYAML)
	c := b.serve()
	ctx := t.Context()
	steps := []func() (Result, error){
		func() (Result, error) { return c.RemoveNamespaceHost(ctx, subA, 1, hst2) },
		func() (Result, error) { return c.AddNamespaceHost(ctx, subA, 1, hst2) },
		func() (Result, error) { return c.SetNamespaceQoS(ctx, subA, 1, QoSRequest{IOPS: 10}) },
		func() (Result, error) {
			return c.SetNamespaceHostQoS(ctx, subA, 1, QoSDefaultHost, QoSRequest{ReadBW: 1 << 20})
		},
		func() (Result, error) { return c.SetNamespaceHostQoS(ctx, subA, 1, hst1, QoSRequest{WriteIOPS: 3}) },
		func() (Result, error) { return c.RemoveNamespaceHostQoS(ctx, subA, 1, hst1) },
		func() (Result, error) { return c.SetNamespaceHostQoS(ctx, subA, 1, hst2, QoSRequest{IOPS: 1}) },
	}
	for i, step := range steps {
		if res, err := step(); err != nil || len(res.Applied) == 0 {
			t.Fatalf("step %d: %+v %v", i, res, err)
		}
	}
	checkNS1(t, b, []string{hst1, hst2}, fabric.QoSConfig{Limits: fabric.QoSLimits{IOPS: 10}, PerHost: fabric.QoSLimits{ReadBW: 1 << 20},
		Hosts: map[string]fabric.QoSLimits{hst2: {IOPS: 1}}}, nil)
	if _, err := c.RemoveNamespaceHost(ctx, subA, 1, "nqn.2026-11.io.example:none"); err == nil {
		t.Fatal("removing a host not in the mask succeeded")
	}
}

// TestGatewayMaskAndQoS: a namespace's mask and QoS are the group's:
// added and changed through one gateway's API, every gateway applies them
// to the same namespace, live; the gateways' hosts see them alike.
func TestGatewayMaskAndQoS(t *testing.T) {
	cl := group.NewCluster()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	a := startGateway(t, cl, clock, 1, addrA)
	b := startGateway(t, cl, clock, 2, addrB)
	waitUntil(t, "A sees B", func() bool { return a.alive(2) })
	h := a.m.Handler()
	rec := do(t, h, "POST", "/v1/subsystems", `{"nqn":"`+subA+`","allow_any_host":true,
		"namespaces":[{"nsid":1,"backend":"memory","size":"1MiB","hosts":["`+hst1+`"],"qos":{"iops":100},
		"qos_per_host":{"default":{"bw":"1MB"},"hosts":[{"nqn":"`+hst2+`","iops":7}]}}]}`)
	if rec.Code != http.StatusCreated {
		t.Fatalf("add subsystem through A: %d %s", rec.Code, rec.Body)
	}
	want := func(what string, hosts []string, q fabric.QoSConfig) {
		t.Helper()
		for _, n := range []*gwNode{a, b} {
			waitUntil(t, what, func() bool {
				ns := n.m.liveNamespace(subA, 1)
				return ns != nil && slices.Equal(ns.Hosts(), hosts) && reflect.DeepEqual(ns.QoS(), q)
			})
		}
	}
	q := fabric.QoSConfig{Limits: fabric.QoSLimits{IOPS: 100}, PerHost: fabric.QoSLimits{BW: 1e6},
		Hosts: map[string]fabric.QoSLimits{hst2: {IOPS: 7}}}
	want("both gateways mask and limit the namespace", []string{hst1}, q)
	liveB := b.m.liveNamespace(subA, 1)

	// Changed through B this time.
	hb := b.m.Handler()
	if rec := do(t, hb, "POST", "/v1/subsystems/"+subA+"/namespaces/1/hosts", `{"nqn":"`+hst2+`"}`); rec.Code != http.StatusOK {
		t.Fatalf("add host through B: %d %s", rec.Code, rec.Body)
	}
	if rec := do(t, hb, "DELETE", "/v1/subsystems/"+subA+"/namespaces/1/hosts/"+hst1, ""); rec.Code != http.StatusOK {
		t.Fatalf("remove host through B: %d %s", rec.Code, rec.Body)
	}
	if rec := do(t, hb, "PUT", "/v1/subsystems/"+subA+"/namespaces/1/qos", `{"read_bw":"2MB"}`); rec.Code != http.StatusOK {
		t.Fatalf("set QoS through B: %d %s", rec.Code, rec.Body)
	}
	q.Limits = fabric.QoSLimits{ReadBW: 2e6}
	want("both gateways follow", []string{hst2}, q)
	if b.m.liveNamespace(subA, 1) != liveB {
		t.Fatal("B added the namespace again for a change of mask or QoS")
	}
}

// TestMaskAndQoSReloadUnchanged: a file that writes an empty mask or an
// empty list of QoS hosts is the configuration without them: a reload
// changes nothing.
func TestMaskAndQoSReloadUnchanged(t *testing.T) {
	b := newBench(t, maskYAML)
	y := strings.ReplaceAll(maskYAML, "{nsid: 2, path: FILE, size: 1MiB}", "{nsid: 2, path: FILE, size: 1MiB, hosts: [], qos_per_host: {hosts: []}}")
	y = strings.ReplaceAll(y, "FILE", filepath.Join(b.dir, "ns2.img"))
	if err := os.WriteFile(b.path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := b.m.Reload(tester)
	if err != nil || len(res.Applied) != 0 {
		t.Fatalf("reload: %+v %v: want nothing to change", res, err)
	}
}
