package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/control"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

const (
	ctlSubA  = "nqn.2026-11.io.example:a"
	ctlSubB  = "nqn.2026-11.io.example:b"
	ctlHost1 = "nqn.2026-11.io.example:host1"
	ctlHost2 = "nqn.2026-11.io.example:host2"
)

// ctlYAML is a target on a loop port, which needs no RDMA.
const ctlYAML = `
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

// ctlBench is a real control.Manager on the loop transport, serving its
// API on a Unix socket as serve does.
type ctlBench struct {
	t    *testing.T
	dir  string
	path string // the configuration file
	sock string
	tgt  *fabric.Target
	lt   *fabric.LoopTransport
	m    *control.Manager
}

// sockDir is t.TempDir, or a shorter directory when a socket path in it
// would not fit in sun_path's 108 bytes.
func sockDir(t *testing.T) string {
	d := t.TempDir()
	if len(d) < 80 {
		return d
	}
	d, err := os.MkdirTemp("", "ctl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func newCtlBench(t *testing.T) *ctlBench {
	t.Helper()
	b := &ctlBench{t: t, dir: t.TempDir()}
	b.path = filepath.Join(b.dir, "config.yaml")
	yaml := strings.ReplaceAll(ctlYAML, "FILE", filepath.Join(b.dir, "ns2.img"))
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
	b.m, err = control.New(b.tgt, cfg, control.Options{Path: b.path, Transport: func(name string) (fabric.Transport, error) {
		if name != "loop" {
			return nil, errors.New("only loop in tests")
		}
		return b.lt, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	b.sock = filepath.Join(sockDir(t), "api.sock")
	l, err := control.ListenAPI(b.sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(b.m.Handler())
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return b
}

// run runs the CLI as main does, against the bench's socket.
func (b *ctlBench) run(args ...string) (stdout, stderr string, err error) {
	b.t.Helper()
	return runCtl(append(args, "--socket", b.sock)...)
}

func runCtl(args ...string) (stdout, stderr string, err error) {
	root := rootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err = root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// connect makes hostnqn a controller of subnqn through the loop port.
func (b *ctlBench) connect(subnqn, hostnqn string) {
	b.t.Helper()
	lq, err := b.lt.Dial("127.0.0.1", 0, 32)
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
}

// hasRow reports whether a line of out starts with the given fields.
func hasRow(out string, fields ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= len(fields) && slices.Equal(f[:len(fields)], fields) {
			return true
		}
	}
	return false
}

func TestCtl(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(b *ctlBench)
		args    []string
		wantOut []string // lines of stdout, each given as its leading fields
		wantErr string
		check   func(t *testing.T, b *ctlBench, stdout, stderr string)
	}{
		{name: "status", args: []string{"status"}, wantOut: []string{
			"PORTS", "ID TRANSPORT ADDRESS PORT STATE ANA GROUPS", "1 loop 127.0.0.1 4420 live 1=optimized",
			"SUBSYSTEMS", ctlSubA + " 2 " + ctlHost1 + "," + ctlHost2 + " all 1-65519", ctlSubB + " 1 any all",
			"NAMESPACES", "SUBSYSTEM NSID BACKEND SIZE BLOCK SIZE ACCESS ANA GROUP RESERVATION PATH UUID",
			ctlSubA + " 1 memory 1MiB 512 rw 1 - -", ctlSubA + " 2 file 1MiB 512 rw 1 -", ctlSubB + " 1 memory 2MiB 512 rw 1 - -",
			"CONTROLLERS", "SUBSYSTEM HOST NQN HOST ADDRESS CNTLID PORT I/O QUEUES KATO CONNECTED", ctlSubB + " " + ctlHost1,
		}},
		{name: "status json", args: []string{"status", "--json"}, check: func(t *testing.T, b *ctlBench, out, _ string) {
			var st control.Status
			if err := json.Unmarshal([]byte(out), &st); err != nil {
				t.Fatal(err)
			}
			if len(st.Ports) != 1 || st.Ports[0].State != control.PortLive || len(st.Subsystems) != 2 || len(st.Controllers) != 1 ||
				st.Controllers[0].HostNQN != ctlHost1 || st.Controllers[0].CNTLID == 0 || st.Controllers[0].Connected.IsZero() {
				t.Fatalf("status %+v", st)
			}
		}},

		{name: "subsystem list", args: []string{"subsystem", "list"}, wantOut: []string{"NQN NAMESPACES HOSTS PORTS CNTLIDS SERIAL MODEL", ctlSubB + " 1 any all 1-65519"}},
		{name: "subsystem list json", args: []string{"subsystem", "list", "--json"}, check: func(t *testing.T, b *ctlBench, out, _ string) {
			var ss []control.SubsystemStatus
			if err := json.Unmarshal([]byte(out), &ss); err != nil || len(ss) != 2 || ss[1].NQN != ctlSubB {
				t.Fatalf("%v %+v", err, ss)
			}
		}},
		{name: "subsystem add", args: []string{"subsystem", "add", "nqn.2026-11.io.example:c",
			"--host", ctlHost1, "--host", ctlHost2, "--serial", "S1", "--model", "M1"},
			wantOut: []string{"add subsystem nqn.2026-11.io.example:c"}, check: func(t *testing.T, b *ctlBench, _, _ string) {
				s := b.tgt.Subsystem("nqn.2026-11.io.example:c")
				if s == nil || !slices.Equal(s.Hosts(), []string{ctlHost1, ctlHost2}) {
					t.Fatal("not added as asked")
				}
				if c := b.m.Running().Subsystems[2]; c.Serial != "S1" || c.Model != "M1" {
					t.Fatalf("running %+v", c)
				}
			}},
		{name: "subsystem add json", args: []string{"subsystem", "add", "nqn.2026-11.io.example:c", "--allow-any-host", "--json"},
			check: func(t *testing.T, b *ctlBench, out, _ string) {
				var res control.Result
				if err := json.Unmarshal([]byte(out), &res); err != nil || !slices.Equal(res.Applied, []string{"add subsystem nqn.2026-11.io.example:c"}) || !res.Persisted {
					t.Fatalf("%v %+v", err, res)
				}
			}},
		{name: "subsystem add existing", args: []string{"subsystem", "add", ctlSubB, "--allow-any-host"}, wantErr: "subsystem " + ctlSubB + ": already exists"},
		{name: "subsystem add existing json", args: []string{"subsystem", "add", ctlSubB, "--allow-any-host", "--json"}, wantErr: "already exists",
			check: func(t *testing.T, b *ctlBench, out, _ string) {
				var e control.ErrorResponse
				if err := json.Unmarshal([]byte(out), &e); err != nil || !strings.Contains(e.Error, "already exists") {
					t.Fatalf("%v %q", err, out)
				}
			}},
		{name: "subsystem add without hosts", args: []string{"subsystem", "add", "nqn.2026-11.io.example:c"}, wantErr: "no host could connect"},
		{name: "subsystem remove", args: []string{"subsystem", "remove", ctlSubB}, wantOut: []string{"remove subsystem " + ctlSubB}},
		{name: "subsystem remove missing", args: []string{"subsystem", "remove", "nqn.2026-11.io.example:x"}, wantErr: "no such subsystem"},
		{name: "subsystem remove needs NQN", args: []string{"subsystem", "remove"}, wantErr: "accepts 1 arg"},

		{name: "ns list", args: []string{"ns", "list", ctlSubA}, wantOut: []string{
			"NSID BACKEND SIZE BLOCK SIZE ACCESS ANA GROUP RESERVATION PATH UUID", "1 memory 1MiB 512 rw 1 - -", "2 file 1MiB 512 rw 1 -"}},
		{name: "ns list json", args: []string{"ns", "list", ctlSubA, "--json"}, check: func(t *testing.T, b *ctlBench, out, _ string) {
			var ns []control.NamespaceStatus
			if err := json.Unmarshal([]byte(out), &ns); err != nil || len(ns) != 2 || ns[1].Size != 1<<20 || ns[1].Path == "" {
				t.Fatalf("%v %+v", err, ns)
			}
		}},
		{name: "ns list missing", args: []string{"ns", "list", "nqn.2026-11.io.example:x"}, wantErr: "no such subsystem"},
		{name: "ns add memory", args: []string{"ns", "add", ctlSubA, "--nsid", "3", "--backend", "memory", "--size", "1MiB", "--block-size", "4096", "--read-only"},
			wantOut: []string{"add namespace 3 to " + ctlSubA}, check: func(t *testing.T, b *ctlBench, _, _ string) {
				out, _, err := b.run("ns", "list", ctlSubA)
				if err != nil || !hasRow(out, "3", "memory", "1MiB", "4096", "ro", "1", "-", "-") {
					t.Fatalf("%v\n%s", err, out)
				}
			}},
		{name: "ns add file", args: []string{"ns", "add", ctlSubA, "--nsid", "3", "--path", "DIR/ns3.img", "--size", "2MiB",
			"--uuid", "0b5bd5e6-1c41-4ff1-9d0a-2a8f7e6f3a10", "--buffered-io"},
			wantOut: []string{"add namespace 3 to " + ctlSubA}, check: func(t *testing.T, b *ctlBench, _, _ string) {
				n := b.m.Running().Subsystems[0].Namespaces[2]
				if n.Backend != "file" || n.Size != 2*config.MiB || !n.BufferedIO || n.UUID != "0b5bd5e6-1c41-4ff1-9d0a-2a8f7e6f3a10" {
					t.Fatalf("namespace %+v", n)
				}
			}},
		{name: "ns add existing", args: []string{"ns", "add", ctlSubA, "--nsid", "1", "--size", "1MiB"}, wantErr: "already exists"},
		{name: "ns add without nsid", args: []string{"ns", "add", ctlSubA, "--size", "1MiB"}, wantErr: `required flag(s) "nsid" not set`},
		{name: "ns add bad size", args: []string{"ns", "add", ctlSubA, "--nsid", "3", "--size", "1G"}, wantErr: "--size"},
		{name: "ns resize", args: []string{"ns", "resize", ctlSubA, "2", "4MiB"}, wantOut: []string{"resize namespace 2 of " + ctlSubA + " to 4MiB"}},
		{name: "ns shrink refused", args: []string{"ns", "resize", ctlSubA, "2", "512KiB"}, wantErr: "namespace would shrink"},
		{name: "ns shrink forced", args: []string{"ns", "resize", ctlSubA, "2", "512KiB", "--force"}, wantOut: []string{"resize namespace 2"}},
		{name: "ns resize missing", args: []string{"ns", "resize", ctlSubA, "9", "4MiB"}, wantErr: "no such namespace"},
		{name: "ns remove", args: []string{"ns", "remove", ctlSubA, "2"}, wantOut: []string{"remove namespace 2 from " + ctlSubA}},
		{name: "ns remove bad nsid", args: []string{"ns", "remove", ctlSubA, "two"}, wantErr: `NSID "two"`},

		{name: "host list", args: []string{"host", "list", ctlSubA}, check: func(t *testing.T, b *ctlBench, out, _ string) {
			if out != ctlHost1+"\n"+ctlHost2+"\n" {
				t.Fatalf("%q", out)
			}
		}},
		{name: "host add", args: []string{"host", "add", ctlSubA, "nqn.2026-11.io.example:host3"},
			wantOut: []string{"allow host nqn.2026-11.io.example:host3 on " + ctlSubA}},
		{name: "host add existing", args: []string{"host", "add", ctlSubA, ctlHost1}, wantErr: "already exists"},
		{name: "host remove", args: []string{"host", "remove", ctlSubA, ctlHost2}, wantOut: []string{"remove host " + ctlHost2 + " from " + ctlSubA}},
		{name: "host remove missing", args: []string{"host", "remove", ctlSubA, "nqn.2026-11.io.example:host9"}, wantErr: "no such host"},

		{name: "port list", args: []string{"port", "list"}, wantOut: []string{"ID TRANSPORT ADDRESS PORT STATE ANA GROUPS", "1 loop 127.0.0.1 4420 live 1=optimized"}},
		{name: "port ana set", args: []string{"port", "ana", "set", "1", "2", "inaccessible"},
			wantOut: []string{"set the ANA states of port 1 to map[2:inaccessible]"}, check: func(t *testing.T, b *ctlBench, _, _ string) {
				out, _, err := b.run("port", "ana", "show", "1")
				if err != nil || !hasRow(out, "1", "optimized") || !hasRow(out, "2", "inaccessible") {
					t.Fatalf("%v\n%s", err, out)
				}
			}},
		{name: "port ana set bad state", args: []string{"port", "ana", "set", "1", "2", "fast"}, wantErr: `"fast" is not an ANA state`},
		{name: "port ana show missing", args: []string{"port", "ana", "show", "9"}, wantErr: "no such port"},
		{name: "subsystem ports", args: []string{"subsystem", "ports", ctlSubA, "1"},
			wantOut: []string{"serve " + ctlSubA + " on ports [1]"}, check: func(t *testing.T, b *ctlBench, _, _ string) {
				out, _, err := b.run("subsystem", "list")
				if err != nil || !hasRow(out, ctlSubA, "2", ctlHost1+","+ctlHost2, "1") {
					t.Fatalf("%v\n%s", err, out)
				}
			}},
		{name: "subsystem ports unknown", args: []string{"subsystem", "ports", ctlSubA, "5"}, wantErr: "5 is the ID of no port"},
		{name: "ns ana-group", args: []string{"ns", "ana-group", ctlSubA, "1", "4"},
			wantOut: []string{"move namespace 1 of " + ctlSubA + " to ANA group 4"}, check: func(t *testing.T, b *ctlBench, _, _ string) {
				out, _, err := b.run("ns", "list", ctlSubA)
				if err != nil || !hasRow(out, "1", "memory", "1MiB", "512", "rw", "4") {
					t.Fatalf("%v\n%s", err, out)
				}
			}},
		{name: "ns ana-group out of range", args: []string{"ns", "ana-group", ctlSubA, "1", "200"}, wantErr: "1..128"},
		{name: "ns add masked", args: []string{"ns", "add", ctlSubA, "--nsid", "3", "--backend", "memory", "--size", "1MiB", "--host", ctlHost1},
			wantOut: []string{"add namespace 3 to " + ctlSubA}, check: func(t *testing.T, b *ctlBench, _, _ string) {
				if got := b.m.Running().Subsystems[0].Namespaces[2].Hosts; !slices.Equal(got, []string{ctlHost1}) {
					t.Fatalf("mask %v", got)
				}
			}},
		{name: "ns host add and remove", setup: func(b *ctlBench) {
			if _, _, err := b.run("ns", "add", ctlSubA, "--nsid", "3", "--backend", "memory", "--size", "1MiB", "--host", ctlHost1); err != nil {
				b.t.Fatal(err)
			}
			if _, _, err := b.run("ns", "host", "add", ctlSubA, "3", ctlHost2); err != nil {
				b.t.Fatal(err)
			}
		}, args: []string{"ns", "host", "remove", ctlSubA, "3", ctlHost1},
			wantOut: []string{"show namespace 3 of " + ctlSubA + " to hosts [" + ctlHost2 + "]"}, check: func(t *testing.T, b *ctlBench, _, _ string) {
				out, _, err := b.run("status")
				if err != nil || !hasRow(out, ctlSubA, "3", ctlHost2, "-", "-", "-", "-") {
					t.Fatalf("%v\n%s", err, out)
				}
			}},
		{name: "ns host add to no mask", args: []string{"ns", "host", "add", ctlSubA, "1", ctlHost2}, wantErr: "has no mask"},
		{name: "ns qos", args: []string{"ns", "qos", ctlSubA, "1", "--iops", "5000", "--read-bw", "100MB"},
			wantOut: []string{"set the QoS of namespace 1 of " + ctlSubA}, check: func(t *testing.T, b *ctlBench, _, _ string) {
				out, _, err := b.run("status")
				if err != nil || !hasRow(out, ctlSubA, "1", "all", "iops=5000", "read_bw=100000000/s", "-", "0/0", "0s") {
					t.Fatalf("%v\n%s", err, out)
				}
			}},
		{name: "ns qos per host", setup: func(b *ctlBench) {
			if _, _, err := b.run("ns", "qos", ctlSubA, "1", "--host", "default", "--write-iops", "10"); err != nil {
				b.t.Fatal(err)
			}
		}, args: []string{"ns", "qos", ctlSubA, "1", "--host", ctlHost2, "--bw", "1MiB"},
			wantOut: []string{"set the QoS of namespace 1 of " + ctlSubA}, check: func(t *testing.T, b *ctlBench, _, _ string) {
				q := b.m.Running().Subsystems[0].Namespaces[0].QoSPerHost
				if q.Default.WriteIOPS != 10 || len(q.Hosts) != 1 || q.Hosts[0].NQN != ctlHost2 || q.Hosts[0].BW != config.MiB {
					t.Fatalf("per host %+v", q)
				}
				if _, _, err := b.run("ns", "qos", ctlSubA, "1", "--host", ctlHost2, "--remove"); err != nil {
					t.Fatal(err)
				}
				if q := b.m.Running().Subsystems[0].Namespaces[0].QoSPerHost; len(q.Hosts) != 0 {
					t.Fatalf("per host %+v after --remove", q)
				}
			}},
		{name: "ns qos remove without host", args: []string{"ns", "qos", ctlSubA, "1", "--remove"}, wantErr: "--remove takes --host"},
		{name: "ns qos bad bandwidth", args: []string{"ns", "qos", ctlSubA, "1", "--bw", "1Gbit"}, wantErr: "--bw"},
		{name: "port add", args: []string{"port", "add", "--transport", "loop", "--address", "127.0.0.2"}, wantOut: []string{"add port loop 127.0.0.2:4420"}},
		{name: "port add existing", args: []string{"port", "add", "--transport", "loop", "--address", "127.0.0.1"}, wantErr: "already exists"},
		{name: "port add without address", args: []string{"port", "add"}, wantErr: `required flag(s) "address" not set`},
		{name: "port remove", setup: func(b *ctlBench) {
			if _, _, err := b.run("port", "add", "--transport", "loop", "--address", "::1", "--port", "4421"); err != nil {
				b.t.Fatal(err)
			}
		}, args: []string{"port", "remove", "--transport", "loop", "--address", "::1", "--port", "4421"}, wantOut: []string{"remove port loop [::1]:4421"}},
		{name: "port remove missing", args: []string{"port", "remove", "--transport", "loop", "--address", "127.0.0.9"}, wantErr: "no such port"},

		{name: "reload unchanged", args: []string{"reload"}, wantOut: []string{"nothing to change"}},
		{name: "reload", setup: func(b *ctlBench) {
			y := strings.ReplaceAll(ctlYAML, "FILE", filepath.Join(b.dir, "ns2.img")) +
				"  - {nqn: nqn.2026-11.io.example:c, allow_any_host: true}\nrdma: {max_queues: 8}\n"
			os.WriteFile(b.path, []byte(y), 0o600)
		}, args: []string{"reload"}, wantOut: []string{"add subsystem nqn.2026-11.io.example:c", "takes effect at the next start: rdma.max_queues"}},
		{name: "reload a broken file", setup: func(b *ctlBench) { os.WriteFile(b.path, []byte("ports: ["), 0o600) },
			args: []string{"reload"}, wantErr: "invalid change"},

		{name: "config save", args: []string{"config", "save"}, check: func(t *testing.T, b *ctlBench, out, _ string) {
			f := filepath.Join(b.dir, "saved.yaml")
			os.WriteFile(f, []byte(out), 0o600)
			c, err := config.LoadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := config.Marshal(c)
			if want, _ := config.Marshal(b.m.Running()); string(got) != string(want) {
				t.Fatalf("saved\n%s\nrunning\n%s", got, want)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newCtlBench(t)
			b.connect(ctlSubB, ctlHost1)
			if tc.setup != nil {
				tc.setup(b)
			}
			args := slices.Clone(tc.args)
			for i := range args {
				args[i] = strings.ReplaceAll(args[i], "DIR", b.dir)
			}
			out, errOut, err := b.run(args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("error %v, want one line with %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatalf("%v\n%s", err, errOut)
			}
			for _, want := range tc.wantOut {
				if !hasRow(out, strings.Fields(want)...) {
					t.Errorf("no line %q in\n%s", want, out)
				}
			}
			if tc.check != nil {
				tc.check(t, b, out, errOut)
			}
		})
	}
}

// TestCtlUnreachable: no target, or a dead one, is one clear line.
func TestCtlUnreachable(t *testing.T) {
	dir := sockDir(t)
	stale := filepath.Join(dir, "stale.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	for _, sock := range []string{filepath.Join(dir, "missing.sock"), stale} {
		for _, args := range [][]string{{"status"}, {"host", "add", ctlSubA, ctlHost1}, {"config", "save"}, {"reload", "--json"}} {
			_, _, err := runCtl(append(args, "--socket", sock)...)
			want := "cannot reach the target at " + sock + ": is nvmeof-tgt serve running?"
			if err == nil || err.Error() != want {
				t.Errorf("%v on %s: %v, want %q", args, sock, err, want)
			}
		}
	}
}

// TestCtlNotSaved: on the embedded default, a change is live but not
// saved, and the operator is told.
func TestCtlNotSaved(t *testing.T) {
	b := newCtlBench(t)
	// A target of its own, without a file.
	tgt := fabric.NewTarget(fabric.Options{})
	t.Cleanup(func() { tgt.Close() })
	cfg := b.m.Running()
	cfg.Subsystems = cfg.Subsystems[1:]
	m, err := control.New(tgt, cfg, control.Options{Transport: func(string) (fabric.Transport, error) {
		return fabric.NewLoopTransport(fabric.TransportLimits{MDTS: 128 << 10, MaxQueueDepth: 64, MaxIOQueues: 4}), nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(sockDir(t), "api.sock")
	l, err := control.ListenAPI(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(m.Handler())
	srv.Listener = l
	srv.Start()
	defer srv.Close()
	out, errOut, err := runCtl("ns", "add", ctlSubB, "--nsid", "2", "--size", "1MiB", "--socket", sock)
	if err != nil || !strings.Contains(out, "add namespace 2 to "+ctlSubB) || !strings.Contains(errOut, "lasts until it stops") {
		t.Fatalf("%v\nstdout %s\nstderr %s", err, out, errOut)
	}
	if _, _, err := runCtl("reload", "--socket", sock); err == nil || !strings.Contains(err.Error(), "no configuration file") {
		t.Fatalf("reload: %v", err)
	}
}

// TestCtlDotNames: "." and ".." are not names. Go's mux cleaned
// DELETE /v1/subsystems/A/hosts/.. to A's own path and redirected, and the
// CLI followed, so `host remove A ..` removed subsystem A.
func TestCtlDotNames(t *testing.T) {
	for _, args := range [][]string{
		{"host", "remove", ctlSubA, ".."},
		{"host", "remove", ctlSubA, "."},
		{"host", "add", ctlSubA, ".."},
		{"ns", "remove", ctlSubA + "/namespaces/1", ".."},
		{"subsystem", "remove", ctlSubA + "/hosts/" + ctlHost1 + "/../.."},
		{"subsystem", "add", "..", "--allow-any-host"},
		{"subsystem", "add", "nqn.2026-11.io.example:a/b", "--allow-any-host"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			b := newCtlBench(t)
			if _, _, err := b.run(args...); err == nil {
				t.Fatal("no error")
			}
			r := b.m.Running()
			if len(r.Subsystems) != 2 || !slices.Equal(config.HostNQNs(r.Subsystems[0].Hosts), []string{ctlHost1, ctlHost2}) ||
				len(r.Subsystems[0].Namespaces) != 2 {
				t.Fatalf("changed: %+v", r.Subsystems)
			}
		})
	}
}

// TestCtlJSON: --json prints the API's JSON as the server writes it.
func TestCtlJSON(t *testing.T) {
	b := newCtlBench(t)
	b.connect(ctlSubB, ctlHost1)
	st := b.m.Status()
	for _, tc := range []struct {
		args []string
		want any
	}{
		{[]string{"status"}, st},
		{[]string{"subsystem", "list"}, st.Subsystems},
		{[]string{"ns", "list", ctlSubA}, st.Subsystems[0].Namespaces},
		{[]string{"host", "list", ctlSubB}, []control.HostInfo{}},
		{[]string{"port", "list"}, st.Ports},
		{[]string{"subsystem", "remove", "nqn.2026-11.io.example:x"}, control.ErrorResponse{Error: "subsystem nqn.2026-11.io.example:x: no such subsystem"}},
	} {
		out, _, _ := b.run(append(tc.args, "--json")...)
		var want bytes.Buffer
		control.EncodeJSON(&want, tc.want)
		if out != want.String() {
			t.Errorf("%v: %s, want %s", tc.args, out, want.Bytes())
		}
	}
}

// TestMain runs main instead of the tests when asked to, so that a test
// can see the exit code of a command.
func TestMain(m *testing.M) {
	if os.Getenv("NVMEOF_TGT_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestCtlExitCodes: each class of failure has its own exit code
// (docs/api.md), with or without --json.
func TestCtlExitCodes(t *testing.T) {
	b := newCtlBench(t)
	missing := filepath.Join(sockDir(t), "missing.sock")
	tests := []struct {
		args []string
		want int
	}{
		{[]string{"status"}, 0},
		{[]string{"help"}, 0},
		{[]string{"subsystem", "add", "nqn.2026-11.io.example:c", "--allow-any-host"}, 0},

		// Usage: cobra's argument and flag errors, and arguments the CLI
		// reads itself.
		{[]string{"status", "extra"}, 2},
		{[]string{"subsystem", "remove"}, 2},
		{[]string{"ns", "add", ctlSubA, "--size", "1MiB"}, 2},
		{[]string{"port", "add", "--address", "127.0.0.3", "--port", "x"}, 2},
		{[]string{"status", "--no-such-flag"}, 2},
		{[]string{"no-such-command"}, 2},
		{[]string{"ns", "add", ctlSubA, "--nsid", "3", "--size", "1G"}, 2},
		{[]string{"ns", "resize", ctlSubA, "2", "1G"}, 2},
		{[]string{"ns", "remove", ctlSubA, "two"}, 2},

		// Not found.
		{[]string{"subsystem", "remove", "nqn.2026-11.io.example:x"}, 3},
		{[]string{"ns", "list", "nqn.2026-11.io.example:x"}, 3},
		{[]string{"ns", "remove", ctlSubA, "9"}, 3},
		{[]string{"host", "remove", ctlSubA, "nqn.2026-11.io.example:host9", "--json"}, 3},
		{[]string{"port", "remove", "--transport", "loop", "--address", "127.0.0.9"}, 3},

		// Conflict.
		{[]string{"subsystem", "add", ctlSubB, "--allow-any-host"}, 4},
		{[]string{"host", "add", ctlSubA, ctlHost1, "--json"}, 4},

		// Unreachable.
		{[]string{"status", "--socket", missing}, 5},
		{[]string{"reload", "--json", "--socket", missing}, 5},

		// Refused as invalid.
		{[]string{"subsystem", "add", "nqn.2026-11.io.example:d"}, 6},
		{[]string{"host", "add", ctlSubA, ".."}, 6},
		{[]string{"host", "remove", ctlSubA, ".."}, 6},
		{[]string{"ns", "resize", ctlSubA, "2", "512KiB"}, 6},
		{[]string{"ns", "remove", ctlSubA, "0", "--json"}, 6},

		// Anything else: the target could not make the change.
		{[]string{"ns", "add", ctlSubA, "--nsid", "3", "--backend", "file", "--path", "/nonexistent/dir/x.img", "--size", "1MiB"}, 1},
	}
	for _, tc := range tests {
		args := tc.args
		if !slices.Contains(args, "--socket") && args[0] != "help" && args[0] != "no-such-command" {
			args = append(slices.Clone(args), "--socket", b.sock)
		}
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), "NVMEOF_TGT_TEST_MAIN=1")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if code != tc.want {
			t.Errorf("%v: exit %d, want %d; stderr %s", tc.args, code, tc.want, stderr.Bytes())
		}
		if code != 0 && !strings.HasPrefix(stderr.String(), "nvmeof-tgt: ") {
			t.Errorf("%v: stderr %q", tc.args, stderr.Bytes())
		}
	}
}
