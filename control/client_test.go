package control

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
)

// serve serves b's API on a new socket, as serve does, and returns a
// client of it.
func (b *bench) serve() *Client {
	b.t.Helper()
	sock := filepath.Join(shortDir(b.t), "api.sock")
	l, err := ListenAPI(sock)
	if err != nil {
		b.t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(b.m.Handler())
	srv.Listener = l
	srv.Start()
	b.t.Cleanup(srv.Close)
	return NewClient(sock)
}

// TestClient calls every method of Client against the real server, in an
// order where each finds what the one before left.
func TestClient(t *testing.T) {
	b := newBench(t, baseYAML)
	c := b.serve()
	ctx := context.Background()
	const subC, hst3 = "nqn.2026-11.io.example:c", "nqn.2026-11.io.example:host3"
	b.connect("127.0.0.1", subB, hst1)

	ok := func(what string, res Result, err error, want ...string) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !slices.Equal(res.Applied, want) || !res.Persisted {
			t.Fatalf("%s: %+v, want applied %q", what, res, want)
		}
	}

	st, err := c.Status(ctx)
	if err != nil || len(st.Ports) != 1 || len(st.Subsystems) != 2 || len(st.Controllers) != 1 || st.Controllers[0].HostNQN != hst1 {
		t.Fatalf("Status: %+v %v", st, err)
	}
	y, err := c.Config(ctx)
	if err != nil || !strings.Contains(string(y), subA) {
		t.Fatalf("Config: %q %v", y, err)
	}
	subs, err := c.Subsystems(ctx)
	if err != nil || len(subs) != 2 || subs[0].NQN != subA || !subs[1].AllowAnyHost {
		t.Fatalf("Subsystems: %+v %v", subs, err)
	}

	res, err := c.AddSubsystem(ctx, SubsystemRequest{NQN: subC, Hosts: []string{hst1}, Model: "m",
		Namespaces: []NamespaceRequest{{NSID: 1, Backend: "memory", Size: Size(config.MiB)}}})
	ok("AddSubsystem", res, err, "add subsystem "+subC)
	s, err := c.Subsystem(ctx, subC)
	if err != nil || s.NQN != subC || s.Model != "m" || !slices.Equal(s.Hosts, []string{hst1}) || len(s.Namespaces) != 1 {
		t.Fatalf("Subsystem: %+v %v", s, err)
	}

	res, err = c.AddNamespace(ctx, subC, NamespaceRequest{NSID: 2, Path: filepath.Join(b.dir, "c2.img"), Size: Size(config.MiB)})
	ok("AddNamespace", res, err, "add namespace 2 to "+subC)
	res, err = c.ResizeNamespace(ctx, subC, 2, ResizeRequest{Size: new(Size(2 * config.MiB))})
	ok("ResizeNamespace", res, err, "resize namespace 2 of "+subC+" to 2MiB")
	nss, err := c.Namespaces(ctx, subC)
	if err != nil || len(nss) != 2 || nss[1].NSID != 2 || nss[1].Backend != "file" || nss[1].Size != 2<<20 {
		t.Fatalf("Namespaces: %+v %v", nss, err)
	}
	res, err = c.RemoveNamespace(ctx, subC, 2)
	ok("RemoveNamespace", res, err, "remove namespace 2 from "+subC)

	res, err = c.AddHost(ctx, subC, HostRequest{NQN: hst3})
	ok("AddHost", res, err, "allow host "+hst3+" on "+subC)
	res, err = c.SetHost(ctx, subC, HostRequest{NQN: hst3, DHCHAPKey: "DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:"})
	if err != nil || !res.Persisted {
		t.Fatalf("SetHost: %+v %v", res, err)
	}
	hosts, err := c.Hosts(ctx, subC)
	if err != nil || !slices.Equal(hosts, []HostInfo{{hst1, "none"}, {hst3, "host"}}) {
		t.Fatalf("Hosts: %+v %v", hosts, err)
	}
	res, err = c.RemoveHost(ctx, subC, hst3)
	ok("RemoveHost", res, err, "remove host "+hst3+" from "+subC)

	res, err = c.AddPort(ctx, PortRequest{Transport: "loop", Address: "::1", Port: 4421})
	ok("AddPort", res, err, "add port loop [::1]:4421")
	ports, err := c.Ports(ctx)
	if err != nil || len(ports) != 2 || ports[1].Address != "::1" || ports[1].ID == 0 {
		t.Fatalf("Ports: %+v %v", ports, err)
	}
	res, err = c.SetANAState(ctx, 2, "1", "inaccessible")
	ok("SetANAState", res, err, "set the ANA states of port 2 to map[1:inaccessible]")
	ana, err := c.PortANA(ctx, 2)
	if err != nil || ana["1"] != "inaccessible" {
		t.Fatalf("PortANA: %v %v", ana, err)
	}
	if _, err := c.SetANAState(ctx, 2, "1", "fast"); !IsInvalid(err) {
		t.Fatalf("SetANAState with a bad state: %v", err)
	}
	if _, err := c.SetANAState(ctx, 9, "1", "optimized"); !IsNotFound(err) {
		t.Fatalf("SetANAState of port 9: %v", err)
	}
	res, err = c.SetSubsystemPorts(ctx, subC, []int{2})
	ok("SetSubsystemPorts", res, err, "serve "+subC+" on ports [2]")
	res, err = c.SetANAGroup(ctx, subC, 1, 5)
	ok("SetANAGroup", res, err, "move namespace 1 of "+subC+" to ANA group 5")
	if s, _ := c.Subsystem(ctx, subC); !slices.Equal(s.Ports, []int{2}) || s.Namespaces[0].ANAGroup != 5 {
		t.Fatalf("after: %+v", s)
	}
	res, err = c.SetSubsystemPorts(ctx, subC, nil)
	ok("SetSubsystemPorts", res, err, "serve "+subC+" on ports []")
	res, err = c.RemovePort(ctx, PortRequest{Transport: "loop", Address: "::1", Port: 4421})
	ok("RemovePort", res, err, "remove port loop [::1]:4421")

	res, err = c.RemoveSubsystem(ctx, subC)
	ok("RemoveSubsystem", res, err, "remove subsystem "+subC)

	res, err = c.Reload(ctx)
	if err != nil || len(res.Applied) != 0 || res.Persisted {
		t.Fatalf("Reload: %+v %v", res, err)
	}
}

// TestClientErrors: each class of failure is a value, whatever its
// message says.
func TestClientErrors(t *testing.T) {
	b := newBench(t, baseYAML)
	c := b.serve()
	ctx := context.Background()
	is := map[string]func(error) bool{"not found": IsNotFound, "conflict": IsConflict, "invalid": IsInvalid, "unreachable": IsUnreachable}
	tests := []struct {
		name string
		call func(c *Client) error
		code int
		is   string
	}{
		{"missing subsystem", func(c *Client) error { _, err := c.Subsystem(ctx, "nqn.2026-11.io.example:x"); return err }, 404, "not found"},
		{"missing host", func(c *Client) error { _, err := c.RemoveHost(ctx, subA, "nqn.2026-11.io.example:x"); return err }, 404, "not found"},
		{"missing namespace", func(c *Client) error { _, err := c.RemoveNamespace(ctx, subA, 9); return err }, 404, "not found"},
		{"missing port", func(c *Client) error {
			_, err := c.RemovePort(ctx, PortRequest{Transport: "loop", Address: "127.0.0.9", Port: 4420})
			return err
		}, 404, "not found"},
		{"existing subsystem", func(c *Client) error {
			_, err := c.AddSubsystem(ctx, SubsystemRequest{NQN: subB, AllowAnyHost: true})
			return err
		}, 409, "conflict"},
		{"existing host", func(c *Client) error { _, err := c.AddHost(ctx, subA, HostRequest{NQN: hst1}); return err }, 409, "conflict"},
		{"NSID 0", func(c *Client) error { _, err := c.RemoveNamespace(ctx, subA, 0); return err }, 400, "invalid"},
		{"host ..", func(c *Client) error { _, err := c.RemoveHost(ctx, subA, ".."); return err }, 400, "invalid"},
		{"host .", func(c *Client) error { _, err := c.SetHost(ctx, subA, HostRequest{NQN: "."}); return err }, 400, "invalid"},
		{"subsystem ..", func(c *Client) error { _, err := c.Namespaces(ctx, ".."); return err }, 400, "invalid"},
		{"empty name", func(c *Client) error { _, err := c.Hosts(ctx, ""); return err }, 400, "invalid"},
		{"shrink", func(c *Client) error {
			_, err := c.ResizeNamespace(ctx, subA, 2, ResizeRequest{Size: new(Size(0x1000))})
			return err
		}, 400, "invalid"},
		{"too large", func(c *Client) error {
			_, err := c.AddSubsystem(ctx, SubsystemRequest{NQN: strings.Repeat("x", maxBody)})
			return err
		}, 413, "invalid"},
		{"unreachable", func(*Client) error {
			_, err := NewClient(filepath.Join(shortDir(t), "missing.sock")).Status(ctx)
			return err
		}, 0, "unreachable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call(c)
			if err == nil {
				t.Fatal("no error")
			}
			if got := StatusCode(err); got != tc.code {
				t.Errorf("%v: status %d, want %d", err, got, tc.code)
			}
			for name, f := range is {
				if f(err) != (name == tc.is) {
					t.Errorf("%v: %s is %v", err, name, f(err))
				}
			}
			var ae *APIError
			if tc.code != 0 && (!errors.As(err, &ae) || ae.Error() != ae.ErrorResponse.Error ||
				(tc.code == 404 || tc.code == 409) && strings.HasPrefix(ae.Error(), ErrInvalid.Error())) {
				t.Errorf("%#v", err)
			}
		})
	}
	if r := b.m.Running(); len(r.Subsystems) != 2 || len(r.Subsystems[0].Hosts) != 2 || len(r.Subsystems[0].Namespaces) != 2 {
		t.Fatalf("changed: %+v", r.Subsystems)
	}
}

// TestClientNoRedirect: the client never follows a redirect; the API
// sends none, and following one re-sends a change to another resource.
func TestClientNoRedirect(t *testing.T) {
	var followed atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc(routeRemoveHost.url("a", "h"), func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, routeSubsystem.url("a"), http.StatusTemporaryRedirect)
	})
	mux.HandleFunc(routeStatus.url(), func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, routeSubsystem.url("a"), http.StatusFound)
	})
	mux.HandleFunc(routeSubsystem.url("a"), func(w http.ResponseWriter, r *http.Request) {
		followed.Store(true)
		writeJSON(w, http.StatusOK, Result{Applied: []string{"remove subsystem a"}, Persisted: true})
	})
	sock := filepath.Join(shortDir(t), "api.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener = l
	srv.Start()
	defer srv.Close()
	c := NewClient(sock)
	if _, err := c.RemoveHost(context.Background(), "a", "h"); err == nil || !strings.Contains(err.Error(), "redirect") {
		t.Errorf("RemoveHost: %v, want an error about the redirect", err)
	}
	if _, err := c.Status(context.Background()); err == nil || !strings.Contains(err.Error(), "redirect") {
		t.Errorf("Status: %v, want an error about the redirect", err)
	}
	if followed.Load() {
		t.Fatal("the client followed a redirect")
	}
}

// TestRouteURL: a name is one segment, whatever it holds, and the mux
// routes each filled-in path to its own route.
func TestRouteURL(t *testing.T) {
	mux := newBench(t, baseYAML).m.Handler().(jsonErrors).mux
	tests := []struct {
		r    route
		args []string
		want string
	}{
		{routeStatus, nil, "/v1/status"},
		{routeSubsystem, []string{subA}, "/v1/subsystems/" + subA},
		{routeRemoveHost, []string{"a/b", "c?d#e"}, "/v1/subsystems/a%2Fb/hosts/c%3Fd%23e"},
		{routeRemoveHost, []string{subA, ".."}, "/v1/subsystems/" + subA + "/hosts/%2E%2E"},
		{routeSetHost, []string{".", "..."}, "/v1/subsystems/%2E/hosts/..."},
		{routeResizeNamespace, []string{"a b", "7"}, "/v1/subsystems/a%20b/namespaces/7/resize"},
		{routeRemovePort, []string{"rdma", "fd00::1", "4420"}, "/v1/ports/rdma/fd00::1/4420"},
	}
	for _, tc := range tests {
		got := tc.r.url(tc.args...)
		if got != tc.want {
			t.Errorf("%s %q: %q, want %q", tc.r.path, tc.args, got, tc.want)
		}
		if checkPath(got) != nil {
			continue // refused before the mux
		}
		req := httptest.NewRequest(tc.r.method, got, nil)
		if _, pattern := mux.Handler(req); pattern != tc.r.pattern() {
			t.Errorf("%s routes to %q, want %q", got, pattern, tc.r.pattern())
		}
	}
}

// TestClientRoundTrip: what the client decodes, encoded again, is the
// API's answer byte for byte, so that the CLI's --json prints the API's
// JSON.
func TestClientRoundTrip(t *testing.T) {
	b := newBench(t, baseYAML)
	c := b.serve()
	ctx := context.Background()
	b.connect("127.0.0.1", subA, hst1)
	if _, err := c.SetHost(ctx, subA, HostRequest{NQN: hst2, DHCHAPKey: "DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:"}); err != nil {
		t.Fatal(err)
	}
	h := b.m.Handler()
	tests := []struct {
		path string
		get  func() (any, error)
	}{
		{routeStatus.url(), func() (any, error) { return c.Status(ctx) }},
		{routeSubsystems.url(), func() (any, error) { return c.Subsystems(ctx) }},
		{routeSubsystem.url(subA), func() (any, error) { return c.Subsystem(ctx, subA) }},
		{routeNamespaces.url(subA), func() (any, error) { return c.Namespaces(ctx, subA) }},
		{routeHosts.url(subA), func() (any, error) { return c.Hosts(ctx, subA) }},
		{routePorts.url(), func() (any, error) { return c.Ports(ctx) }},
	}
	for _, tc := range tests {
		v, err := tc.get()
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		var got strings.Builder
		EncodeJSON(&got, v)
		if want := do(t, h, "GET", tc.path, "").Body.String(); got.String() != want {
			t.Errorf("%s: encoded again\n%s\nthe API sent\n%s", tc.path, got.String(), want)
		}
	}
}
