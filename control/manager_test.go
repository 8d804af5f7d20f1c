package control

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/internal/atomicfile"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

const (
	subA = "nqn.2026-11.io.example:a"
	subB = "nqn.2026-11.io.example:b"
	hst1 = "nqn.2026-11.io.example:host1"
	hst2 = "nqn.2026-11.io.example:host2"
)

// baseYAML is a configuration on loop ports, which need no RDMA.
const baseYAML = `
ports:
  - {transport: loop, address: 127.0.0.1, port: 4420}
subsystems:
  - nqn: nqn.2026-11.io.example:a
    hosts: [nqn.2026-11.io.example:host1, nqn.2026-11.io.example:host2]
    namespaces:
      - {nsid: 1, backend: memory, size: 1MiB}
      - {nsid: 2, path: FILE, size: 1MiB}
  - nqn: nqn.2026-11.io.example:b
    allow_any_host: true
    namespaces:
      - {nsid: 1, backend: memory, size: 2MiB}
`

type bench struct {
	t    *testing.T
	dir  string
	path string
	tgt  *fabric.Target
	lt   *fabric.LoopTransport
	m    *Manager
}

func newBench(t *testing.T, yaml string) *bench {
	t.Helper()
	dir := t.TempDir()
	b := &bench{t: t, dir: dir, path: filepath.Join(dir, "config.yaml")}
	yaml = strings.ReplaceAll(yaml, "FILE", filepath.Join(dir, "ns2.img"))
	if err := os.WriteFile(b.path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadFile(b.path)
	if err != nil {
		t.Fatal(err)
	}
	b.tgt = fabric.NewTarget(fabric.Options{})
	b.lt = fabric.NewLoopTransport(fabric.TransportLimits{MDTS: 128 << 10, MaxQueueDepth: 64, MaxIOQueues: 4})
	t.Cleanup(func() { b.tgt.Close() })
	b.m, err = New(b.tgt, cfg, Options{Path: b.path, Transport: b.transport})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *bench) transport(name string) (fabric.Transport, error) {
	if name != "loop" {
		return nil, errors.New("only loop in tests")
	}
	return b.lt, nil
}

// connect makes hostnqn a controller of subnqn through the loop port at
// address, and returns its admin queue.
func (b *bench) connect(address, subnqn, hostnqn string) *fabric.LoopQueue {
	b.t.Helper()
	lq, err := b.lt.Dial(address, 0, 32)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(lq.Close)
	c := nvme.Command(make([]byte, nvme.CommandSize))
	c.SetOpcode(nvme.OpFabrics)
	c.SetFlags(nvme.PSDTSGLContig << 6)
	c.SetFCType(nvme.FCTypeConnect)
	c.SetConnect(0, 0, 31, 0, 0)
	c.SGL1().SetKeyed(0x1000, nvme.ConnectDataSize, 1, false)
	d := nvme.ConnectData(make([]byte, nvme.ConnectDataSize))
	d.SetHostID([16]byte{1})
	d.SetCNTLID(nvme.CNTLIDDynamic)
	d.SetSubNQN(subnqn)
	d.SetHostNQN(hostnqn)
	rsp := nvme.Completion(make([]byte, nvme.CompletionSize))
	if err := lq.Submit(c, d, rsp); err != nil || !rsp.Status().IsSuccess() {
		b.t.Fatalf("connect %s to %s: %v %v", hostnqn, subnqn, err, rsp.Status())
	}
	return lq
}

// disconnected reports whether lq is disconnected, waiting for it when
// expected.
func disconnected(lq *fabric.LoopQueue, expected bool) bool {
	wait := 100 * time.Millisecond
	if expected {
		wait = 5 * time.Second
	}
	select {
	case <-lq.Disconnected():
		return true
	case <-time.After(wait):
		return false
	}
}

func (b *bench) namespaces(nqn string) []uint32 {
	var out []uint32
	for _, ns := range b.tgt.Subsystem(nqn).Namespaces() {
		out = append(out, uint32(ns.NSID()))
	}
	return out
}

// tester is the caller of the tests' changes.
var tester = Caller{Source: "test"}

func sub(c *config.Config, nqn string) *config.Subsystem { return findSubsystem(c, nqn) }

// TestStart: New sets up what the configuration says, through the same
// steps as any change.
func TestStart(t *testing.T) {
	b := newBench(t, baseYAML)
	st := b.m.Status()
	if len(st.Ports) != 1 || st.Ports[0].ID == 0 || len(st.Subsystems) != 2 {
		t.Fatalf("status %+v", st)
	}
	a := st.Subsystems[0]
	if a.NQN != subA || len(a.Namespaces) != 2 || a.Namespaces[1].Size != 1<<20 || a.Namespaces[1].Backend != "file" ||
		!slices.Equal(a.Hosts, []string{hst1, hst2}) || a.AllowAnyHost {
		t.Fatalf("subsystem a %+v", a)
	}
	b.connect("127.0.0.1", subB, hst1)
	st = b.m.Status()
	if len(st.Controllers) != 1 || st.Controllers[0].HostNQN != hst1 || st.Controllers[0].SubNQN != subB || st.Controllers[0].HostAddress == "" {
		t.Fatalf("controllers %+v", st.Controllers)
	}
}

// TestUpdate: each kind of change through Update, what the target serves
// afterwards, and that it was written to the configuration file.
func TestUpdate(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(c *config.Config) error
		force   bool
		wantErr error
		check   func(t *testing.T, b *bench)
	}{
		{name: "add namespace", edit: func(c *config.Config) error {
			s := sub(c, subA)
			s.Namespaces = append(s.Namespaces, config.Namespace{NSID: 3, Backend: "memory", Size: config.MiB})
			return nil
		}, check: func(t *testing.T, b *bench) {
			if got := b.namespaces(subA); !slices.Equal(got, []uint32{1, 2, 3}) {
				t.Fatalf("namespaces %v", got)
			}
		}},
		{name: "remove namespace", edit: func(c *config.Config) error {
			s := sub(c, subA)
			s.Namespaces = s.Namespaces[:1]
			return nil
		}, check: func(t *testing.T, b *bench) {
			if got := b.namespaces(subA); !slices.Equal(got, []uint32{1}) {
				t.Fatalf("namespaces %v", got)
			}
		}},
		{name: "grow a file namespace", edit: func(c *config.Config) error {
			sub(c, subA).Namespaces[1].Size = 4 * config.MiB
			return nil
		}, check: func(t *testing.T, b *bench) {
			if got := b.m.Status().Subsystems[0].Namespaces[1].Size; got != 4<<20 {
				t.Fatalf("size %d", got)
			}
			if st, _ := os.Stat(filepath.Join(b.dir, "ns2.img")); st.Size() != 4<<20 {
				t.Fatalf("file is %d bytes", st.Size())
			}
		}},
		{name: "shrink refused", edit: func(c *config.Config) error {
			sub(c, subA).Namespaces[1].Size = 512 * config.KiB
			return nil
		}, wantErr: ErrShrink},
		{name: "shrink forced", force: true, edit: func(c *config.Config) error {
			sub(c, subA).Namespaces[1].Size = 512 * config.KiB
			return nil
		}, check: func(t *testing.T, b *bench) {
			if got := b.m.Status().Subsystems[0].Namespaces[1].Size; got != 512<<10 {
				t.Fatalf("size %d", got)
			}
		}},
		{name: "a file namespace resized to 0 follows its file", edit: func(c *config.Config) error {
			sub(c, subA).Namespaces[1].Size = 0
			return nil
		}, check: func(t *testing.T, b *bench) {
			if got := b.liveSize(2); got != 1<<20 {
				t.Fatalf("size %d", got)
			}
			if n := findNamespace(sub(b.m.Running(), subA), 2); n.Size != 0 {
				t.Fatalf("running size %v", n.Size)
			}
		}},
		{name: "memory cannot resize", edit: func(c *config.Config) error {
			sub(c, subA).Namespaces[0].Size = 4 * config.MiB
			return nil
		}, wantErr: ErrInvalid},
		{name: "namespace replaced", edit: func(c *config.Config) error {
			sub(c, subA).Namespaces[0].ReadOnly = true
			return nil
		}, check: func(t *testing.T, b *bench) {
			if !b.tgt.Subsystem(subA).Namespaces()[0].Info().ReadOnly {
				t.Fatal("not read-only")
			}
		}},
		{name: "remove host disconnects it", edit: func(c *config.Config) error {
			s := sub(c, subA)
			s.Hosts = s.Hosts[1:]
			return nil
		}, check: func(t *testing.T, b *bench) {
			if got := b.tgt.Subsystem(subA).Hosts(); !slices.Equal(got, []string{hst2}) {
				t.Fatalf("hosts %v", got)
			}
		}},
		{name: "remove subsystem", edit: func(c *config.Config) error {
			c.Subsystems = c.Subsystems[1:]
			return nil
		}, check: func(t *testing.T, b *bench) {
			if b.tgt.Subsystem(subA) != nil {
				t.Fatal("still there")
			}
		}},
		{name: "add subsystem and port", edit: func(c *config.Config) error {
			c.Subsystems = append(c.Subsystems, config.Subsystem{NQN: "nqn.2026-11.io.example:c", AllowAnyHost: true,
				Namespaces: []config.Namespace{{NSID: 5, Backend: "memory", Size: config.MiB}}})
			c.Ports = append(c.Ports, config.Port{Transport: "loop", Address: "127.0.0.2", Port: 4420})
			return nil
		}, check: func(t *testing.T, b *bench) {
			if got := b.namespaces("nqn.2026-11.io.example:c"); !slices.Equal(got, []uint32{5}) {
				t.Fatalf("namespaces %v", got)
			}
			b.connect("127.0.0.2", "nqn.2026-11.io.example:c", hst1)
		}},
		{name: "invalid configuration refused", edit: func(c *config.Config) error {
			sub(c, subA).Namespaces[0].NSID = 2
			return nil
		}, wantErr: ErrInvalid},
		{name: "a backend that cannot open changes nothing", edit: func(c *config.Config) error {
			s := sub(c, subA)
			s.Namespaces = s.Namespaces[:1] // this removal must not happen either
			s.Namespaces = append(s.Namespaces, config.Namespace{NSID: 9, Backend: "file", Path: "/nonexistent/dir/x.img", Size: config.MiB})
			return nil
		}, wantErr: os.ErrNotExist},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBench(t, baseYAML)
			before, _ := os.ReadFile(b.path)
			lq := b.connect("127.0.0.1", subA, hst1)
			res, err := b.m.Update(tester, tc.edit, tc.force)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Update: %v, want %v", err, tc.wantErr)
			}
			after, _ := os.ReadFile(b.path)
			if tc.wantErr != nil {
				if len(res.Applied) != 0 || string(after) != string(before) {
					t.Fatalf("a refused change applied %v or wrote the file", res.Applied)
				}
				if got := b.namespaces(subA); !slices.Equal(got, []uint32{1, 2}) {
					t.Fatalf("namespaces %v after a refused change", got)
				}
				return
			}
			if len(res.Applied) == 0 || !res.Persisted {
				t.Fatalf("result %+v", res)
			}
			tc.check(t, b)
			// The file now holds the running configuration, and the old one
			// is kept.
			saved, err := config.LoadFile(b.path)
			if err != nil {
				t.Fatal(err)
			}
			running, _ := config.Marshal(b.m.Running())
			if got, _ := config.Marshal(saved); string(got) != string(running) {
				t.Fatalf("saved\n%s\nrunning\n%s", got, running)
			}
			if bak, _ := os.ReadFile(b.path + ".bak"); string(bak) != string(before) {
				t.Fatal(".bak is not the previous file")
			}
			// Only changes that concern the connected host reach it.
			wantGone := tc.name == "remove host disconnects it" || tc.name == "remove subsystem"
			if got := disconnected(lq, wantGone); got != wantGone {
				t.Fatalf("host disconnected: %v, want %v", got, wantGone)
			}
		})
	}
}

// TestReload: a valid file is applied as a diff; a broken one is refused
// whole and the target goes on as it was; keys that cannot change live
// are named.
func TestReload(t *testing.T) {
	b := newBench(t, baseYAML)
	lq := b.connect("127.0.0.1", subB, hst1)
	write := func(s string) {
		t.Helper()
		s = strings.ReplaceAll(s, "FILE", filepath.Join(b.dir, "ns2.img"))
		if err := os.WriteFile(b.path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(baseYAML + "  - {nqn: nqn.2026-11.io.example:c, allow_any_host: true}\n")
	res, err := b.m.Reload(tester)
	if err != nil || !slices.Equal(res.Applied, []string{"add subsystem nqn.2026-11.io.example:c"}) {
		t.Fatalf("reload: %+v %v", res, err)
	}
	if b.tgt.Subsystem("nqn.2026-11.io.example:c") == nil {
		t.Fatal("subsystem not added")
	}
	for _, broken := range []string{"ports: [", "subsystems: []\nports: []\n", baseYAML + "bogus_key: 1\n"} {
		write(broken)
		if _, err := b.m.Reload(tester); !errors.Is(err, ErrInvalid) {
			t.Fatalf("broken file %q: %v, want ErrInvalid", broken, err)
		}
		if b.tgt.Subsystem("nqn.2026-11.io.example:c") == nil || len(b.tgt.Ports()) != 1 {
			t.Fatal("a broken file changed the target")
		}
	}
	write(baseYAML + "rdma: {max_queues: 8}\ncontroller: {kato_max: 1m}\n")
	res, err = b.m.Reload(tester)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Restart, []string{"rdma.max_queues", "controller.kato_max"}) {
		t.Fatalf("restart keys %v", res.Restart)
	}
	if got := b.m.Running().RDMA.MaxQueues; got == 8 {
		t.Fatal("a key that cannot change live was taken as running")
	}
	// discovery.hosts changes live: its secrets are applied, not named
	// for a restart (the reload that added one warned that it was).
	const key = "DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:"
	write(baseYAML + "rdma: {max_queues: 8}\ncontroller: {kato_max: 1m}\ndiscovery:\n  hosts:\n    - {nqn: " + hst1 + ", dhchap_key: \"" + key + "\"}\n")
	res, err = b.m.Reload(tester)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Restart) != 2 || !slices.ContainsFunc(res.Applied, func(s string) bool { return strings.Contains(s, "nqn.2014-08.org.nvmexpress.discovery") }) {
		t.Fatalf("discovery.hosts reload: applied %v, restart %v", res.Applied, res.Restart)
	}
	if got := b.m.Running().RDMA.MaxQueues; got == 8 {
		t.Fatal("a key that cannot change live was taken as running")
	}
	select {
	case <-lq.Disconnected():
		t.Fatal("a host of an untouched subsystem was disconnected")
	default:
	}
	bm := &Manager{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if _, err := bm.Reload(tester); !errors.Is(err, ErrNoFile) {
		t.Fatalf("reload without a file: %v", err)
	}
}

// TestPersistCrash: a crash at any point of writing the configuration
// leaves the old file or the new one, whole.
func TestPersistCrash(t *testing.T) {
	for _, point := range []string{"written", "synced", ""} {
		t.Run("crash at "+point, func(t *testing.T) {
			b := newBench(t, baseYAML)
			before, _ := os.ReadFile(b.path)
			// Crash on the configuration file itself; its .bak is written
			// before it.
			defer atomicfile.InjectCrash(func(path, p string) bool { return p == point && path == b.path })()
			_, err := b.m.Update(tester, func(c *config.Config) error {
				c.Subsystems = c.Subsystems[1:]
				return nil
			}, false)
			after, rerr := os.ReadFile(b.path)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if point == "" {
				if err != nil || string(after) == string(before) {
					t.Fatalf("no crash: %v, file changed %v", err, string(after) != string(before))
				}
				return
			}
			if err == nil {
				t.Fatal("the crash was not reported")
			}
			if string(after) != string(before) {
				t.Fatalf("after a crash at %s the file is not the old one:\n%s", point, after)
			}
			if bak, _ := os.ReadFile(b.path + ".bak"); string(bak) != string(before) {
				t.Fatal(".bak is not the previous file")
			}
			if _, err := config.LoadFile(b.path); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// write replaces the configuration file, as an operator editing it would.
func (b *bench) write(yaml string) {
	b.t.Helper()
	yaml = strings.ReplaceAll(yaml, "FILE", filepath.Join(b.dir, "ns2.img"))
	if err := os.WriteFile(b.path, []byte(yaml), 0o600); err != nil {
		b.t.Fatal(err)
	}
}

// addNS is an edit adding a memory namespace to subsystem a.
func addNS(nsid uint32) func(c *config.Config) error {
	return func(c *config.Config) error {
		s := sub(c, subA)
		s.Namespaces = append(s.Namespaces, config.Namespace{NSID: nsid, Backend: "memory", Size: config.MiB})
		return nil
	}
}

// TestReloadKeepsConcurrentChange: an API change that comes while a reload
// reads the file is not undone by the reload. The hook runs the change
// between the reload's read and its apply: at once if nothing holds the
// manager (the change completes first), else in the background (it waits
// for the reload).
func TestReloadKeepsConcurrentChange(t *testing.T) {
	b := newBench(t, baseYAML)
	done := make(chan error, 1)
	afterRead = func() {
		change := func() {
			_, err := b.m.Update(tester, addNS(3), false)
			done <- err
		}
		if b.m.mu.TryLock() {
			b.m.mu.Unlock()
			change()
		} else {
			go change()
		}
	}
	defer func() { afterRead = func() {} }()
	if _, err := b.m.Reload(tester); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := b.namespaces(subA); !slices.Equal(got, []uint32{1, 2, 3}) {
		t.Fatalf("namespaces %v: the reload undid the API change", got)
	}
	saved, err := config.LoadFile(b.path)
	if err != nil {
		t.Fatal(err)
	}
	if findNamespace(sub(saved, subA), 3) == nil {
		t.Fatal("the API change is not in the file")
	}
}

// TestPersistRestartKeys: keys that take effect only at the next start
// are written as the file last said them, not as the target runs them
// until then: a reload that reverted them in the file is not undone by
// the next API change.
func TestPersistRestartKeys(t *testing.T) {
	withModel := strings.Replace(baseYAML, "    allow_any_host: true\n", "    allow_any_host: true\n    model: m1\n", 1)
	b := newBench(t, withModel+"rdma: {max_queues: 8}\ncontroller: {kato_max: 1m}\nmetrics: {listen: \"127.0.0.1:9999\"}\n")
	b.write(baseYAML)
	res, err := b.m.Reload(tester)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`subsystems["nqn.2026-11.io.example:b"].model`, "rdma.max_queues", "controller.kato_max", "metrics.listen"}
	for _, k := range want {
		if !slices.Contains(res.Restart, k) {
			t.Fatalf("restart keys %v, want %v", res.Restart, want)
		}
	}
	if _, err := b.m.Update(tester, addNS(3), false); err != nil {
		t.Fatal(err)
	}
	saved, err := config.LoadFile(b.path)
	if err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(b.dir, "fresh.yaml")
	os.WriteFile(fresh, []byte(strings.ReplaceAll(baseYAML, "FILE", filepath.Join(b.dir, "ns2.img"))), 0o600)
	file, err := config.LoadFile(fresh)
	if err != nil {
		t.Fatal(err)
	}
	if saved.RDMA != file.RDMA || saved.Controller != file.Controller || saved.Metrics != file.Metrics ||
		sub(saved, subB).Model != sub(file, subB).Model {
		t.Fatalf("saved rdma %+v controller %+v metrics %+v model %q; the file said %+v %+v %+v %q", saved.RDMA, saved.Controller,
			saved.Metrics, sub(saved, subB).Model, file.RDMA, file.Controller, file.Metrics, sub(file, subB).Model)
	}
	if findNamespace(sub(saved, subA), 3) == nil {
		t.Fatal("the API change is not in the file")
	}
	// The target runs with what it started with until it restarts.
	if r := b.m.Running(); r.RDMA.MaxQueues != 8 || r.Metrics.Listen != "127.0.0.1:9999" || sub(r, subB).Model != "m1" {
		t.Fatalf("running rdma %+v metrics %+v model %q", r.RDMA, r.Metrics, sub(r, subB).Model)
	}
	// The saved file reloads to nothing but the same restart keys.
	res, err = b.m.Reload(tester)
	if err != nil || len(res.Applied) != 0 || len(res.Restart) != len(want) {
		t.Fatalf("reload of the saved file: %+v %v", res, err)
	}
}

// TestRefusedChangeRemovesFiles: a backing file a refused change created
// is removed; one that was there before stays as it was.
func TestRefusedChangeRemovesFiles(t *testing.T) {
	const broken = "/nonexistent/dir/x.img"
	tests := []struct {
		name string
		edit func(dir string) func(c *config.Config) error
		keep bool // the file existed before
	}{
		{name: "namespace added before one that cannot open", edit: func(dir string) func(c *config.Config) error {
			return func(c *config.Config) error {
				s := sub(c, subA)
				s.Namespaces = append(s.Namespaces,
					config.Namespace{NSID: 3, Backend: "file", Path: filepath.Join(dir, "new.img"), Size: config.MiB},
					config.Namespace{NSID: 9, Backend: "file", Path: broken, Size: config.MiB})
				return nil
			}
		}},
		{name: "subsystem whose second namespace cannot open", edit: func(dir string) func(c *config.Config) error {
			return func(c *config.Config) error {
				c.Subsystems = append(c.Subsystems, config.Subsystem{NQN: "nqn.2026-11.io.example:c", AllowAnyHost: true,
					Namespaces: []config.Namespace{
						{NSID: 1, Backend: "file", Path: filepath.Join(dir, "new.img"), Size: config.MiB},
						{NSID: 2, Backend: "file", Path: broken, Size: config.MiB},
					}})
				return nil
			}
		}},
		{name: "an existing file stays", keep: true, edit: func(dir string) func(c *config.Config) error {
			return func(c *config.Config) error {
				s := sub(c, subA)
				s.Namespaces = append(s.Namespaces,
					config.Namespace{NSID: 3, Backend: "file", Path: filepath.Join(dir, "new.img"), Size: config.MiB},
					config.Namespace{NSID: 9, Backend: "file", Path: broken, Size: config.MiB})
				return nil
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBench(t, baseYAML)
			dir := t.TempDir()
			img := filepath.Join(dir, "new.img")
			if tc.keep {
				os.WriteFile(img, []byte("data"), 0o600)
			}
			if _, err := b.m.Update(tester, tc.edit(dir), false); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("Update: %v, want a namespace that cannot open", err)
			}
			got, err := os.ReadFile(img)
			switch {
			case tc.keep && string(got) != "data":
				t.Fatalf("the existing file is now %d bytes, not the 4 it had (%v)", len(got), err)
			case !tc.keep && !errors.Is(err, os.ErrNotExist):
				t.Fatalf("the refused change left %s behind (%v)", img, err)
			}
		})
	}
}

// TestHandEditRefused: an API change is refused while the file differs
// from what the target last loaded or wrote, so that it neither
// overwrites a hand edit nor pushes it out of FILE.bak; a reload takes the
// edit in and changes go on.
func TestHandEditRefused(t *testing.T) {
	b := newBench(t, baseYAML)
	h := b.m.Handler()
	// Changes in a row are fine: the file is what the last one wrote.
	for _, n := range []uint32{3, 4} {
		if _, err := b.m.Update(tester, addNS(n), false); err != nil {
			t.Fatalf("change %d: %v", n, err)
		}
	}
	bak, _ := os.ReadFile(b.path + ".bak")
	edited := baseYAML + "  - {nqn: nqn.2026-11.io.example:c, allow_any_host: true}\n"
	b.write(edited)
	hand, _ := os.ReadFile(b.path)
	if _, err := b.m.Update(tester, addNS(5), false); !errors.Is(err, ErrEdited) {
		t.Fatalf("a change over a hand edit: %v, want ErrEdited", err)
	}
	rec := do(t, h, "POST", "/v1/subsystems/"+subA+"/namespaces", `{"nsid": 6, "backend": "memory", "size": "1MiB"}`)
	if e := decodeAs[ErrorResponse](t, rec); rec.Code != 409 || !strings.Contains(e.Error, b.path) || !strings.Contains(e.Error, "nvmeof-tgt reload") {
		t.Fatalf("%d %q, want 409 naming the file and reload", rec.Code, e.Error)
	}
	if now, _ := os.ReadFile(b.path); string(now) != string(hand) {
		t.Fatal("the hand edit was overwritten")
	}
	if now, _ := os.ReadFile(b.path + ".bak"); string(now) != string(bak) {
		t.Fatal("FILE.bak was replaced")
	}
	if got := b.namespaces(subA); !slices.Equal(got, []uint32{1, 2, 3, 4}) {
		t.Fatalf("namespaces %v", got)
	}
	// After a reload (which drops 3 and 4: the file does not have them),
	// changes are made again, on top of the edit.
	if _, err := b.m.Reload(tester); err != nil {
		t.Fatal(err)
	}
	if _, err := b.m.Update(tester, addNS(5), false); err != nil {
		t.Fatal(err)
	}
	saved, err := config.LoadFile(b.path)
	if err != nil {
		t.Fatal(err)
	}
	if sub(saved, "nqn.2026-11.io.example:c") == nil || findNamespace(sub(saved, subA), 5) == nil {
		t.Fatal("the file lacks the hand edit or the change after the reload")
	}
	// A file removed is not what the target wrote either.
	os.Remove(b.path)
	if _, err := b.m.Update(tester, addNS(6), false); !errors.Is(err, ErrEdited) {
		t.Fatalf("a change with the file removed: %v, want ErrEdited", err)
	}
	if _, err := os.Stat(b.path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the file is back: %v", err)
	}
}

// TestSharedBacking: a change that would put one file behind two
// namespaces is refused, through Update, Reload and New alike, naming
// both; a namespace replaced on its own path is not a second user.
func TestSharedBacking(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(b *bench, c *config.Config)
		wantErr string // "" for a change that must apply
	}{
		{name: "same file in another subsystem", edit: func(b *bench, c *config.Config) {
			s := sub(c, subB)
			s.Namespaces = append(s.Namespaces, config.Namespace{NSID: 3, Backend: "file", Path: b.file()})
		}, wantErr: "subsystems[1].namespaces[1].path: FILE is also the backing of namespace 2 of " + subA},
		{name: "same file through a symlink with another block size", edit: func(b *bench, c *config.Config) {
			link := filepath.Join(b.dir, "link.img")
			if err := os.Symlink(b.file(), link); err != nil {
				b.t.Fatal(err)
			}
			s := sub(c, subA)
			s.Namespaces = append(s.Namespaces, config.Namespace{NSID: 3, Backend: "file", Path: link, BlockSize: 4096})
		}, wantErr: "is also the backing of namespace 2 of " + subA + " (as FILE)"},
		{name: "one new file twice", edit: func(b *bench, c *config.Config) {
			p := filepath.Join(b.dir, "new.img")
			sub(c, subA).Namespaces = append(sub(c, subA).Namespaces, config.Namespace{NSID: 3, Backend: "file", Path: p, Size: config.MiB})
			sub(c, subB).Namespaces = append(sub(c, subB).Namespaces, config.Namespace{NSID: 3, Backend: "file", Path: p, Size: config.MiB})
		}, wantErr: "is also the backing of namespace 3 of " + subA},
		{name: "replaced on the same path", edit: func(b *bench, c *config.Config) {
			sub(c, subA).Namespaces[1].ReadOnly = true
		}},
		{name: "moved to another NSID", edit: func(b *bench, c *config.Config) {
			s := sub(c, subA)
			s.Namespaces[1].NSID = 7
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBench(t, baseYAML)
			before, _ := os.ReadFile(b.path)
			res, err := b.m.Update(tester, func(c *config.Config) error { tc.edit(b, c); return nil }, false)
			if tc.wantErr == "" {
				if err != nil || len(res.Applied) == 0 {
					t.Fatalf("Update: %v %v", res, err)
				}
				return
			}
			want := strings.ReplaceAll(tc.wantErr, "FILE", b.file())
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
				t.Fatalf("Update: %v, want ErrInvalid with %q", err, want)
			}
			after, _ := os.ReadFile(b.path)
			if len(res.Applied) != 0 || string(after) != string(before) {
				t.Fatalf("a refused change applied %v or wrote the file", res.Applied)
			}
			if _, err := os.Stat(filepath.Join(b.dir, "new.img")); err == nil {
				t.Fatal("a refused change created a file")
			}
		})
	}
	t.Run("reload", func(t *testing.T) {
		b := newBench(t, baseYAML)
		y := strings.ReplaceAll(baseYAML, "FILE", b.file()) + "      - {nsid: 2, path: " + b.file() + "}\n"
		if err := os.WriteFile(b.path, []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := b.m.Reload(tester)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "subsystems[1].namespaces[1].path: "+b.file()+" is also the backing of namespace 2 of "+subA) {
			t.Fatalf("Reload: %v", err)
		}
		if got := b.namespaces(subB); !slices.Equal(got, []uint32{1}) {
			t.Fatalf("namespaces of b %v after a refused reload", got)
		}
		// serve refuses it at start too.
		cfg, err := config.LoadFile(b.path)
		if err != nil {
			t.Fatal(err)
		}
		tgt := fabric.NewTarget(fabric.Options{})
		defer tgt.Close()
		if _, err := New(tgt, cfg, Options{Transport: b.transport}); err == nil || !strings.Contains(err.Error(), "is also the backing") {
			t.Fatalf("New: %v", err)
		}
	})
}

// file is the file namespace 2 of subsystem a serves.
func (b *bench) file() string { return filepath.Join(b.dir, "ns2.img") }
