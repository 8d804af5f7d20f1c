package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/blockdev"
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
)

func do(t *testing.T, h http.Handler, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func decodeAs[T any](t *testing.T, rec *httptest.ResponseRecorder) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatalf("decode %T from %q: %v", v, rec.Body.String(), err)
	}
	return v
}

// TestAPI runs each request against a fresh target serving baseYAML, with
// host1 connected to subsystem a. A refused request must leave the target,
// its file and the connected host as they were.
func TestAPI(t *testing.T) {
	subs := "/v1/subsystems/"
	tests := []struct {
		name         string
		setup        func(b *bench)
		method, path string
		body         string
		want         int
		wantErr      string // in the error body
		check        func(t *testing.T, b *bench, rec *httptest.ResponseRecorder)
	}{
		// Reads.
		{name: "status", method: "GET", path: "/v1/status", want: 200, check: func(t *testing.T, b *bench, rec *httptest.ResponseRecorder) {
			st := decodeAs[Status](t, rec)
			if len(st.Ports) != 1 || len(st.Subsystems) != 2 || len(st.Controllers) != 1 || st.Controllers[0].HostNQN != hst1 {
				t.Fatalf("status %+v", st)
			}
		}},
		{name: "list subsystems", method: "GET", path: "/v1/subsystems", want: 200, check: func(t *testing.T, b *bench, rec *httptest.ResponseRecorder) {
			if ss := decodeAs[[]SubsystemStatus](t, rec); len(ss) != 2 || ss[0].NQN != subA || !ss[1].AllowAnyHost {
				t.Fatalf("subsystems %+v", ss)
			}
		}},
		{name: "get subsystem", method: "GET", path: subs + subA, want: 200, check: func(t *testing.T, b *bench, rec *httptest.ResponseRecorder) {
			if s := decodeAs[SubsystemStatus](t, rec); s.NQN != subA || len(s.Namespaces) != 2 {
				t.Fatalf("subsystem %+v", s)
			}
		}},
		{name: "get missing subsystem", method: "GET", path: subs + "nqn.2026-11.io.example:x", want: 404, wantErr: "no such subsystem"},
		{name: "list namespaces", method: "GET", path: subs + subA + "/namespaces", want: 200, check: func(t *testing.T, b *bench, rec *httptest.ResponseRecorder) {
			ns := decodeAs[[]NamespaceStatus](t, rec)
			if len(ns) != 2 || ns[1].NSID != 2 || ns[1].Backend != "file" || ns[1].Size != 1<<20 || ns[1].BlockSize != 512 {
				t.Fatalf("namespaces %+v", ns)
			}
		}},
		{name: "list namespaces of missing subsystem", method: "GET", path: subs + "nqn.2026-11.io.example:x/namespaces", want: 404},
		{name: "list hosts", method: "GET", path: subs + subA + "/hosts", want: 200, check: func(t *testing.T, b *bench, rec *httptest.ResponseRecorder) {
			if h := decodeAs[[]HostInfo](t, rec); !slices.Equal(h, []HostInfo{{hst1, "none"}, {hst2, "none"}}) {
				t.Fatalf("hosts %+v", h)
			}
		}},
		{name: "list hosts of missing subsystem", method: "GET", path: subs + "nqn.2026-11.io.example:x/hosts", want: 404},
		{name: "list ports", method: "GET", path: "/v1/ports", want: 200, check: func(t *testing.T, b *bench, rec *httptest.ResponseRecorder) {
			if p := decodeAs[[]PortStatus](t, rec); len(p) != 1 || p[0].Transport != "loop" || p[0].Port != 4420 || p[0].ID == 0 {
				t.Fatalf("ports %+v", p)
			}
		}},
		{name: "config", method: "GET", path: "/v1/config", want: 200, check: func(t *testing.T, b *bench, rec *httptest.ResponseRecorder) {
			if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/yaml") {
				t.Fatalf("content type %q", ct)
			}
			// serve --config reads it back to the running configuration.
			f := filepath.Join(b.dir, "saved.yaml")
			os.WriteFile(f, rec.Body.Bytes(), 0o600)
			c, err := config.LoadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := config.Marshal(c)
			if want, _ := config.Marshal(b.m.Running()); string(got) != string(want) {
				t.Fatalf("saved\n%s\nrunning\n%s", got, want)
			}
		}},
		{name: "wrong method", method: "PUT", path: "/v1/status", want: 405, wantErr: "method not allowed"},
		{name: "no such path", method: "GET", path: "/v2/status", want: 404, wantErr: "not found"},

		// Subsystems.
		{name: "add subsystem", method: "POST", path: "/v1/subsystems",
			body: `{"nqn": "nqn.2026-11.io.example:c", "hosts": ["` + hst1 + `"], "model": "m",
				"namespaces": [{"nsid": 1, "backend": "memory", "size": "1MiB"}, {"nsid": 2, "size": 2097152}]}`,
			want: 201, check: func(t *testing.T, b *bench, rec *httptest.ResponseRecorder) {
				if got := b.namespaces("nqn.2026-11.io.example:c"); !slices.Equal(got, []uint32{1, 2}) {
					t.Fatalf("namespaces %v", got)
				}
				if loc := rec.Header().Get("Location"); loc != subs+"nqn.2026-11.io.example:c" {
					t.Fatalf("location %q", loc)
				}
				b.connect("127.0.0.1", "nqn.2026-11.io.example:c", hst1)
			}},
		{name: "add existing subsystem", method: "POST", path: "/v1/subsystems",
			body: `{"nqn": "` + subA + `", "allow_any_host": true}`, want: 409, wantErr: "already exists"},
		{name: "add subsystem with a bad NQN", method: "POST", path: "/v1/subsystems", body: `{"nqn": "nqn.2026-11.io.example:\u0000", "allow_any_host": true}`, want: 400, wantErr: "NUL"},
		{name: "add subsystem with no host", method: "POST", path: "/v1/subsystems", body: `{"nqn": "nqn.2026-11.io.example:c"}`, want: 400, wantErr: "no host could connect"},
		{name: "malformed JSON", method: "POST", path: "/v1/subsystems", body: `{"nqn": `, want: 400},
		{name: "unknown field", method: "POST", path: "/v1/subsystems", body: `{"nqn": "nqn.2026-11.io.example:c", "allow_any_host": true, "hots": []}`, want: 400, wantErr: "unknown field"},
		{name: "unknown namespace field", method: "POST", path: "/v1/subsystems",
			body: `{"nqn": "nqn.2026-11.io.example:c", "allow_any_host": true, "namespaces": [{"nsid": 1, "sise": 1}]}`, want: 400, wantErr: "unknown field"},
		{name: "empty body", method: "POST", path: "/v1/subsystems", want: 400, wantErr: "empty"},
		{name: "two values", method: "POST", path: "/v1/subsystems", body: `{"nqn": "nqn.2026-11.io.example:c", "allow_any_host": true} {}`, want: 400},
		{name: "body too large", method: "POST", path: "/v1/subsystems", body: `{"nqn": "` + strings.Repeat("x", maxBody) + `"}`, want: 413},
		{name: "bad size", method: "POST", path: "/v1/subsystems",
			body: `{"nqn": "nqn.2026-11.io.example:c", "allow_any_host": true, "namespaces": [{"nsid": 1, "size": "1G"}]}`, want: 400, wantErr: "unit"},
		{name: "negative size", method: "POST", path: "/v1/subsystems",
			body: `{"nqn": "nqn.2026-11.io.example:c", "allow_any_host": true, "namespaces": [{"nsid": 1, "size": -1}]}`, want: 400},
		{name: "remove subsystem", method: "DELETE", path: subs + subB, want: 200, check: func(t *testing.T, b *bench, rec *httptest.ResponseRecorder) {
			if res := decodeAs[Result](t, rec); !slices.Equal(res.Applied, []string{"remove subsystem " + subB}) || !res.Persisted {
				t.Fatalf("result %+v", res)
			}
		}},
		{name: "remove missing subsystem", method: "DELETE", path: subs + "nqn.2026-11.io.example:x", want: 404},
		{name: "remove the last subsystem", setup: func(b *bench) { do(b.t, b.m.Handler(), "DELETE", subs+subB, "") },
			method: "DELETE", path: subs + subA, want: 400, wantErr: "at least one subsystem"},

		// Namespaces.
		{name: "add namespace", method: "POST", path: subs + subA + "/namespaces", body: `{"nsid": 3, "backend": "memory", "size": "1MiB", "block_size": 4096}`,
			want: 201, check: func(t *testing.T, b *bench, rec *httptest.ResponseRecorder) {
				if got := b.namespaces(subA); !slices.Equal(got, []uint32{1, 2, 3}) {
					t.Fatalf("namespaces %v", got)
				}
				if got := b.m.Status().Subsystems[0].Namespaces[2].BlockSize; got != 4096 {
					t.Fatalf("block size %d", got)
				}
			}},
		{name: "add file namespace", method: "POST", path: subs + subA + "/namespaces", body: `{"nsid": 3, "path": "DIR/ns3.img", "size": "1MiB", "uuid": "0b5bd5e6-1c41-4ff1-9d0a-2a8f7e6f3a10", "buffered_io": true}`,
			want: 201, check: func(t *testing.T, b *bench, rec *httptest.ResponseRecorder) {
				if ns := b.m.Status().Subsystems[0].Namespaces[2]; ns.Backend != "file" || ns.UUID != "0b5bd5e6-1c41-4ff1-9d0a-2a8f7e6f3a10" || ns.Size != 1<<20 {
					t.Fatalf("namespace %+v", ns)
				}
			}},
		{name: "add existing namespace", method: "POST", path: subs + subA + "/namespaces", body: `{"nsid": 1, "backend": "memory", "size": "2MiB"}`, want: 409},
		{name: "add namespace to missing subsystem", method: "POST", path: subs + "nqn.2026-11.io.example:x/namespaces", body: `{"nsid": 1, "size": "1MiB"}`, want: 404},
		{name: "add namespace 0", method: "POST", path: subs + subA + "/namespaces", body: `{"nsid": 0, "size": "1MiB"}`, want: 400, wantErr: "nsid"},
		{name: "add namespace that cannot open", method: "POST", path: subs + subA + "/namespaces",
			body: `{"nsid": 3, "backend": "file", "path": "/nonexistent/dir/x.img", "size": "1MiB"}`, want: 500},
		{name: "remove namespace", method: "DELETE", path: subs + subA + "/namespaces/2", want: 200, check: func(t *testing.T, b *bench, rec *httptest.ResponseRecorder) {
			if got := b.namespaces(subA); !slices.Equal(got, []uint32{1}) {
				t.Fatalf("namespaces %v", got)
			}
		}},
		{name: "remove missing namespace", method: "DELETE", path: subs + subA + "/namespaces/7", want: 404, wantErr: "no such namespace"},
		{name: "remove namespace of missing subsystem", method: "DELETE", path: subs + "nqn.2026-11.io.example:x/namespaces/1", want: 404},
		{name: "remove namespace x", method: "DELETE", path: subs + subA + "/namespaces/x", want: 400, wantErr: "NSID"},
		{name: "remove namespace 0", method: "DELETE", path: subs + subA + "/namespaces/0", want: 400},
		{name: "grow namespace", method: "POST", path: subs + subA + "/namespaces/2/resize", body: `{"size": "4MiB"}`, want: 200,
			check: func(t *testing.T, b *bench, rec *httptest.ResponseRecorder) {
				if got := b.m.Status().Subsystems[0].Namespaces[1].Size; got != 4<<20 {
					t.Fatalf("size %d", got)
				}
			}},
		{name: "shrink refused", method: "POST", path: subs + subA + "/namespaces/2/resize", body: `{"size": "512KiB"}`, want: 400, wantErr: "shrink"},
		{name: "shrink forced", method: "POST", path: subs + subA + "/namespaces/2/resize", body: `{"size": 524288, "force": true}`, want: 200,
			check: func(t *testing.T, b *bench, rec *httptest.ResponseRecorder) {
				if got := b.m.Status().Subsystems[0].Namespaces[1].Size; got != 512<<10 {
					t.Fatalf("size %d", got)
				}
			}},
		{name: "resize memory", method: "POST", path: subs + subA + "/namespaces/1/resize", body: `{"size": "4MiB"}`, want: 400, wantErr: "memory"},
		{name: "resize file to 0", setup: func(b *bench) { b.truncate(2 << 20) },
			method: "POST", path: subs + subA + "/namespaces/2/resize", body: `{"size": 0}`, want: 200,
			check: func(t *testing.T, b *bench, rec *httptest.ResponseRecorder) {
				if got := b.liveSize(2); got != 2<<20 {
					t.Fatalf("size %d, want the file's 2MiB", got)
				}
			}},
		{name: "resize file to 0 after it was cut", setup: func(b *bench) { b.truncate(512 << 10) },
			method: "POST", path: subs + subA + "/namespaces/2/resize", body: `{"size": 0}`, want: 400, wantErr: "hosts see 1MiB: namespace would shrink"},
		{name: "resize without size", method: "POST", path: subs + subA + "/namespaces/2/resize", body: `{"force": true}`, want: 400, wantErr: "size is required"},
		{name: "resize missing namespace", method: "POST", path: subs + subA + "/namespaces/9/resize", body: `{"size": "4MiB"}`, want: 404},
		{name: "resize with a bad NSID", method: "POST", path: subs + subA + "/namespaces/-1/resize", body: `{"size": "4MiB"}`, want: 400},

		// Hosts.
		{name: "add host", method: "POST", path: subs + subA + "/hosts", body: `{"nqn": "nqn.2026-11.io.example:host3"}`, want: 201,
			check: func(t *testing.T, b *bench, rec *httptest.ResponseRecorder) {
				if got := b.tgt.Subsystem(subA).Hosts(); !slices.Contains(got, "nqn.2026-11.io.example:host3") {
					t.Fatalf("hosts %v", got)
				}
			}},
		{name: "add existing host", method: "POST", path: subs + subA + "/hosts", body: `{"nqn": "` + hst1 + `"}`, want: 409},
		{name: "add host to an open subsystem", method: "POST", path: subs + subB + "/hosts", body: `{"nqn": "` + hst1 + `"}`, want: 400, wantErr: "allow_any_host"},
		{name: "add host with a bad secret", method: "POST", path: subs + subA + "/hosts", body: `{"nqn": "nqn.2026-11.io.example:host4", "dhchap_key": "DHHC-1:01:c2VjcmV0:"}`, want: 400, wantErr: "invalid DH-HMAC-CHAP secret",
			check: func(t *testing.T, b *bench, rec *httptest.ResponseRecorder) {
				if strings.Contains(rec.Body.String(), "c2VjcmV0") || slices.Contains(b.tgt.Subsystem(subA).Hosts(), "nqn.2026-11.io.example:host4") {
					t.Fatalf("secret echoed or host added: %s", rec.Body)
				}
			}},
		{name: "rotate with a bad secret", method: "PUT", path: subs + subA + "/hosts/" + hst1, body: `{"dhchap_key": "DHHC-1:09:c2VjcmV0:"}`, want: 400, wantErr: "invalid DH-HMAC-CHAP secret"},
		{name: "rotate a missing host", method: "PUT", path: subs + subA + "/hosts/nqn.2026-11.io.example:nobody", body: `{}`, want: 404},
		{name: "rotate a key", method: "PUT", path: subs + subA + "/hosts/" + hst1, body: `{"dhchap_key": "DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:"}`, want: 200,
			check: func(t *testing.T, b *bench, rec *httptest.ResponseRecorder) {
				if strings.Contains(rec.Body.String(), "DHHC") {
					t.Fatalf("secret echoed: %s", rec.Body)
				}
				// The listing says who authenticates, never the secret.
				list := httptest.NewRecorder()
				b.m.Handler().ServeHTTP(list, httptest.NewRequest("GET", subs+subA+"/hosts", nil))
				if h := decodeAs[[]HostInfo](t, list); len(h) == 0 || h[0] != (HostInfo{hst1, "host"}) || strings.Contains(list.Body.String(), "DHHC") {
					t.Fatalf("hosts %s", list.Body)
				}
			}},
		{name: "add host with a bad NQN", method: "POST", path: subs + subA + "/hosts", body: `{"nqn": "` + strings.Repeat("h", 224) + `"}`, want: 400},
		{name: "add host to missing subsystem", method: "POST", path: subs + "nqn.2026-11.io.example:x/hosts", body: `{"nqn": "` + hst1 + `"}`, want: 404},
		{name: "remove host", method: "DELETE", path: subs + subA + "/hosts/" + hst2, want: 200, check: func(t *testing.T, b *bench, rec *httptest.ResponseRecorder) {
			if got := b.tgt.Subsystem(subA).Hosts(); !slices.Equal(got, []string{hst1}) {
				t.Fatalf("hosts %v", got)
			}
		}},
		{name: "remove missing host", method: "DELETE", path: subs + subA + "/hosts/nqn.2026-11.io.example:host9", want: 404, wantErr: "no such host"},
		{name: "remove host of missing subsystem", method: "DELETE", path: subs + "nqn.2026-11.io.example:x/hosts/" + hst1, want: 404},

		// Ports.
		{name: "add port", method: "POST", path: "/v1/ports", body: `{"transport": "loop", "address": "127.0.0.2"}`, want: 201,
			check: func(t *testing.T, b *bench, rec *httptest.ResponseRecorder) {
				if p := b.m.Running().Ports; len(p) != 2 || p[1].Port != 4420 {
					t.Fatalf("ports %+v", p)
				}
				b.connect("127.0.0.2", subB, hst2)
			}},
		{name: "add IPv6 port", method: "POST", path: "/v1/ports", body: `{"transport": "loop", "address": "::1", "port": 4421}`, want: 201},
		{name: "add existing port", method: "POST", path: "/v1/ports", body: `{"transport": "loop", "address": "127.0.0.1"}`, want: 409},
		{name: "add port with a bad transport", method: "POST", path: "/v1/ports", body: `{"transport": "fc", "address": "127.0.0.1"}`, want: 400, wantErr: "not a transport"},
		{name: "remove port", setup: func(b *bench) {
			do(b.t, b.m.Handler(), "POST", "/v1/ports", `{"transport": "loop", "address": "::1", "port": 4421}`)
		}, method: "DELETE", path: "/v1/ports/loop/::1/4421", want: 200, check: func(t *testing.T, b *bench, rec *httptest.ResponseRecorder) {
			if p := b.m.Running().Ports; len(p) != 1 || p[0].Address != "127.0.0.1" {
				t.Fatalf("ports %+v", p)
			}
		}},
		{name: "remove the last port", method: "DELETE", path: "/v1/ports/loop/127.0.0.1/4420", want: 400, wantErr: "at least one port"},
		{name: "remove missing port", method: "DELETE", path: "/v1/ports/loop/127.0.0.1/4421", want: 404, wantErr: "no such port"},
		{name: "remove port x", method: "DELETE", path: "/v1/ports/loop/127.0.0.1/x", want: 400},

		// Reload.
		{name: "reload unchanged", method: "POST", path: "/v1/reload", want: 200, check: func(t *testing.T, b *bench, rec *httptest.ResponseRecorder) {
			if res := decodeAs[Result](t, rec); len(res.Applied) != 0 || res.Persisted {
				t.Fatalf("result %+v", res)
			}
		}},
		{name: "reload", setup: func(b *bench) {
			y := strings.ReplaceAll(baseYAML, "FILE", filepath.Join(b.dir, "ns2.img")) + "  - {nqn: nqn.2026-11.io.example:c, allow_any_host: true}\n"
			os.WriteFile(b.path, []byte(y), 0o600)
		}, method: "POST", path: "/v1/reload", want: 200, check: func(t *testing.T, b *bench, rec *httptest.ResponseRecorder) {
			if res := decodeAs[Result](t, rec); !slices.Equal(res.Applied, []string{"add subsystem nqn.2026-11.io.example:c"}) {
				t.Fatalf("result %+v", res)
			}
		}},
		{name: "reload a broken file", setup: func(b *bench) { os.WriteFile(b.path, []byte("ports: ["), 0o600) },
			method: "POST", path: "/v1/reload", want: 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBench(t, baseYAML)
			h := b.m.Handler()
			if tc.setup != nil {
				tc.setup(b)
			}
			before, _ := os.ReadFile(b.path)
			lq := b.connect("127.0.0.1", subA, hst1)
			rec := do(t, h, tc.method, tc.path, strings.ReplaceAll(tc.body, "DIR", b.dir))
			if rec.Code != tc.want {
				t.Fatalf("%s %s: %d %s, want %d", tc.method, tc.path, rec.Code, rec.Body, tc.want)
			}
			if ct := rec.Header().Get("Content-Type"); tc.path != "/v1/config" && ct != "application/json" {
				t.Fatalf("content type %q", ct)
			}
			if tc.want >= 400 {
				e := decodeAs[ErrorResponse](t, rec)
				if e.Error == "" || strings.Contains(e.Error, "\n") || !strings.Contains(e.Error, tc.wantErr) {
					t.Fatalf("error %q, want one line with %q", e.Error, tc.wantErr)
				}
				if (tc.want == 404 || tc.want == 409) && strings.HasPrefix(e.Error, ErrInvalid.Error()) {
					t.Fatalf("error %q: the request was valid", e.Error)
				}
				if after, _ := os.ReadFile(b.path); string(after) != string(before) || len(e.Applied) != 0 {
					t.Fatalf("a refused request changed the file or applied %v", e.Applied)
				}
				if got := b.namespaces(subA); !slices.Equal(got, []uint32{1, 2}) {
					t.Fatalf("namespaces %v after a refused request", got)
				}
				if disconnected(lq, false) {
					t.Fatal("a refused request disconnected a host")
				}
				return
			}
			if tc.method != "GET" && tc.path != "/v1/reload" {
				if res := decodeAs[Result](t, rec); len(res.Applied) == 0 || !res.Persisted {
					t.Fatalf("result %+v", res)
				}
			}
			if tc.check != nil {
				tc.check(t, b, rec)
			}
		})
	}
}

// TestAPIPathGuard: a name is one path segment, and a path with an empty,
// "." or ".." segment is refused, not cleaned and redirected: a client
// that followed the mux's redirect for DELETE .../hosts/.. removed the
// subsystem. A '/' in a name is escaped as %2F and stays in its segment.
func TestAPIPathGuard(t *testing.T) {
	subs := "/v1/subsystems/"
	tests := []struct {
		method, path, body string
		want               int
	}{
		{"DELETE", subs + subA + "/hosts/..", "", 400},
		{"DELETE", subs + subA + "/hosts/.", "", 400},
		{"DELETE", subs + subA + "/hosts/%2E%2E", "", 400},
		{"DELETE", subs + subA + "/hosts/%2e.", "", 400},
		{"PUT", subs + subA + "/hosts/..", "{}", 400},
		{"DELETE", subs + subA + "/namespaces/1/..", "", 400},
		{"DELETE", subs + subA + "/namespaces/../..", "", 400},
		{"DELETE", subs + "x/../" + subA, "", 400},
		{"DELETE", subs + "./" + subA, "", 400},
		{"DELETE", subs + "/" + subA, "", 400},
		{"GET", "/v1//status", "", 400},
		{"GET", "/v1/./status", "", 400},
		{"DELETE", "/v1/ports/loop/127.0.0.1/4420/..", "", 400},
		{"DELETE", subs + subA + "/hosts/" + url.PathEscape(hst1+"/../.."), "", 404},
		{"DELETE", subs + url.PathEscape(subA+"/hosts/"+hst1), "", 404},
		{"POST", subs + subA + "/hosts", `{"nqn": ".."}`, 400},
		{"POST", subs + subA + "/hosts", `{"nqn": "nqn.2026-11.io.example:a/b"}`, 400},
		{"POST", "/v1/subsystems", `{"nqn": "nqn.2026-11.io.example:pool/vol", "allow_any_host": true}`, 400},
		{"POST", "/v1/subsystems", `{"nqn": "..", "allow_any_host": true}`, 400},
		{"GET", "/", "", 404},
		{"GET", "/v1/status/", "", 404},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			b := newBench(t, baseYAML)
			rec := do(t, b.m.Handler(), tc.method, tc.path, tc.body)
			if rec.Code != tc.want {
				t.Fatalf("%d %s (Location %q), want %d", rec.Code, rec.Body, rec.Header().Get("Location"), tc.want)
			}
			if e := decodeAs[ErrorResponse](t, rec); e.Error == "" {
				t.Fatalf("no error in %s", rec.Body)
			}
			r := b.m.Running()
			if len(r.Subsystems) != 2 || len(r.Ports) != 1 || !slices.Equal(config.HostNQNs(r.Subsystems[0].Hosts), []string{hst1, hst2}) ||
				!slices.Equal(b.namespaces(subA), []uint32{1, 2}) {
				t.Fatalf("changed: %+v", r)
			}
		})
	}
}

// TestAPINoFile: a target on the embedded default keeps changes in memory
// and has nothing to reload.
func TestAPINoFile(t *testing.T) {
	b := newBench(t, baseYAML)
	m, err := New(b.tgt, &config.Config{}, Options{Transport: b.transport})
	if err != nil {
		t.Fatal(err)
	}
	rec := do(t, m.Handler(), "POST", "/v1/reload", "")
	if rec.Code != 400 || !strings.Contains(decodeAs[ErrorResponse](t, rec).Error, "no configuration file") {
		t.Fatalf("reload: %d %s", rec.Code, rec.Body)
	}
}

func TestSizeJSON(t *testing.T) {
	tests := []struct {
		in      string
		want    Size
		wantErr bool
	}{
		{in: `"1GiB"`, want: Size(config.GiB)},
		{in: `"4096"`, want: 4096},
		{in: `4096`, want: 4096},
		{in: `0`, want: 0},
		{in: `"1G"`, wantErr: true},
		{in: `-1`, wantErr: true},
		{in: `1.5`, wantErr: true},
		{in: `true`, wantErr: true},
	}
	for _, tc := range tests {
		var s Size
		err := json.Unmarshal([]byte(tc.in), &s)
		if (err != nil) != tc.wantErr || !tc.wantErr && s != tc.want {
			t.Errorf("%s: %v %v, want %v (error %v)", tc.in, s, err, tc.want, tc.wantErr)
		}
	}
	if out, _ := json.Marshal(Size(config.GiB)); string(out) != `"1GiB"` {
		t.Errorf("marshal: %s", out)
	}
}

// shortDir is a directory for sockets: a Unix socket path must fit in 108
// bytes, which t.TempDir under a long test name may not.
func shortDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "api")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func TestListenAPI(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, path string)
		wantErr string
	}{
		{name: "new directory"},
		{name: "stale socket replaced", setup: func(t *testing.T, path string) {
			os.MkdirAll(filepath.Dir(path), 0o755)
			l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			l.SetUnlinkOnClose(false)
			l.Close()
		}},
		{name: "live socket refused", setup: func(t *testing.T, path string) {
			l, err := ListenAPI(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
		}, wantErr: "another nvmeof-tgt answers"},
		{name: "not a socket", setup: func(t *testing.T, path string) {
			os.MkdirAll(filepath.Dir(path), 0o755)
			os.WriteFile(path, nil, 0o600)
		}, wantErr: "not a socket"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(shortDir(t), "run", "t.sock")
			if tc.setup != nil {
				tc.setup(t, path)
			}
			l, err := ListenAPI(path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ListenAPI: %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			st, err := os.Lstat(path)
			if err != nil || st.Mode().Type() != os.ModeSocket || st.Mode().Perm() != 0o600 {
				t.Fatalf("socket %v %v", st.Mode(), err)
			}
			if d, _ := os.Stat(filepath.Dir(path)); d.Mode().Perm()&0o700 != 0o700 {
				t.Fatalf("directory %v", d.Mode())
			}
			b := newBench(t, baseYAML)
			srv := &http.Server{Handler: b.m.Handler()}
			go srv.Serve(l)
			c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "unix", path)
			}}}
			resp, err := c.Get("http://localhost/v1/status")
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("GET /v1/status: %v %v", resp, err)
			}
			resp.Body.Close()
			srv.Close()
			if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("socket left after Close: %v", err)
			}
			entries, _ := os.ReadDir(filepath.Dir(path))
			if len(entries) != 0 {
				t.Fatalf("left in the directory: %v", entries)
			}
		})
	}
}

// TestListenAPICloseTwice: only the first Close removes the socket. The
// server closes the listener and so may http.Server.Serve, later; by then a
// new listener's socket may stand at the path on the very inode (a freed
// inode is reused), which the identity check alone would take for its own.
// A hard link keeps the inode to put it back.
func TestListenAPICloseTwice(t *testing.T) {
	path := filepath.Join(shortDir(t), "run", "t.sock")
	l, err := ListenAPI(path)
	if err != nil {
		t.Fatal(err)
	}
	keep := path + ".keep"
	if err := os.Link(path, keep); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left after Close: %v", err)
	}
	if err := os.Link(keep, path); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("the second Close removed what stands at the path: %v", err)
	}
}

// TestListenAPIMode: the socket is 0600 from the moment it is bound, even
// under its temporary name and a umask of 0, so that no one else can
// connect in between.
func TestListenAPIMode(t *testing.T) {
	defer syscall.Umask(syscall.Umask(0))
	var modes []os.FileMode
	afterBind = func(path string) {
		st, err := os.Lstat(path)
		if err != nil {
			t.Error(err)
			return
		}
		modes = append(modes, st.Mode().Perm())
	}
	defer func() { afterBind = nil }()
	path := filepath.Join(shortDir(t), "run", "t.sock")
	l, err := ListenAPI(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(modes, []os.FileMode{0o600}) || st.Mode().Perm() != 0o600 {
		t.Fatalf("modes %v when bound, %v at the end; want 0600", modes, st.Mode().Perm())
	}
	// The umask is the caller's again.
	if m := syscall.Umask(0); m != 0 {
		t.Fatalf("umask %#o after ListenAPI", m)
	}
}

// TestListenAPIDirectory: a socket directory that someone else may write
// is refused: they could replace the socket with their own, which the CLI
// would then send changes (and secrets) to.
func TestListenAPIDirectory(t *testing.T) {
	tests := []struct {
		name    string
		mode    os.FileMode
		uid     int
		wantErr string
	}{
		{name: "0755", mode: 0o755},
		{name: "0700", mode: 0o700},
		{name: "world writable", mode: 0o777, wantErr: "writable by group or others"},
		{name: "group writable", mode: 0o775, wantErr: "writable by group or others"},
		{name: "sticky, as /tmp", mode: 0o777 | os.ModeSticky, wantErr: "writable by group or others"},
		{name: "another user's", mode: 0o755, uid: 4242, wantErr: "owned by uid 4242"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(shortDir(t), "run")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, tc.mode); err != nil {
				t.Fatal(err)
			}
			if tc.uid != 0 {
				if os.Geteuid() != 0 {
					t.Skip("chown needs root")
				}
				if err := os.Chown(dir, tc.uid, tc.uid); err != nil {
					t.Fatal(err)
				}
			}
			path := filepath.Join(dir, "t.sock")
			l, err := ListenAPI(path)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				l.Close()
				return
			}
			if err == nil {
				l.Close()
				t.Fatalf("ListenAPI in a %v directory: no error", tc.mode)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("%v, want %q", err, tc.wantErr)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Fatalf("left in the directory: %v", entries)
			}
		})
	}
}

// TestStatusOf: a refusal's status wins over the ErrInvalid that Update
// wraps it in.
func TestStatusOf(t *testing.T) {
	inv := func(err error) error { return fmt.Errorf("%w: %w", ErrInvalid, err) }
	tests := []struct {
		err  error
		want int
	}{
		{inv(notFound(fmt.Errorf("subsystem x: %w", fabric.ErrNoSubsystem))), 404},
		{inv(notFound(fabric.ErrNoNamespace)), 404},
		{inv(notFound(errNoHost)), 404},
		{inv(conflict(errExists)), 409},
		{fmt.Errorf("remove namespace 1: %w", fabric.ErrNoNamespace), 500}, // not the request's fault
		{inv(ErrShrink), 400},
		{inv(errors.New("bad")), 400},
		{ErrNoFile, 400},
		{fmt.Errorf("resize namespace 1: %w", blockdev.ErrInvalidArgument), 400},
		{fmt.Errorf("add port: %w", os.ErrPermission), 500},
		{fmt.Errorf("rbd image rbd/x: %w", blockdev.ErrExclusiveLock), 400},
		{fmt.Errorf("rbd image rbd/x: %w", blockdev.ErrNotSupported), 400},
		{fmt.Errorf("rbd image rbd/x: %w", syscall.ETIMEDOUT), 500}, // the cluster's fault
	}
	for _, tc := range tests {
		if got := statusOf(tc.err); got != tc.want {
			t.Errorf("%v: %d, want %d", tc.err, got, tc.want)
		}
	}
}
