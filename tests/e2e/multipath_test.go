//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Multipath through the Linux host's native multipath (nvme_core.multipath=Y, the 6.12
// default): one subsystem served on three ports (two on the lab address, one on a second
// address with its own Soft-RoCE device), the ANA state of each group per port, flips by
// reload while fio verifies, and I/O that waits while no path is usable.

const (
	mpPort2    = 4421 // the second port on the lab address
	anaFollows = 2 * time.Second
)

// mpPorts renders the configuration's ports section: ID 1 on the lab address, ID 2 on its
// second port, ID 3 on the second address, each with its ANA group states.
func mpPorts(states [3]map[int]string) string {
	var b strings.Builder
	b.WriteString("ports:\n")
	for i, ap := range [3]struct {
		addr string
		port int
	}{{labAddr, portRDMA}, {labAddr, mpPort2}, {rmAddr, portRDMA}} {
		var groups []string
		for g, s := range states[i] {
			groups = append(groups, fmt.Sprintf("%d: %s", g, s))
		}
		fmt.Fprintf(&b, "  - {id: %d, transport: rdma, address: %q, port: %d, ana_groups: {%s}}\n",
			i+1, ap.addr, ap.port, strings.Join(groups, ", "))
	}
	return b.String()
}

// setPorts rewrites the ports section of the target's configuration file and reloads it.
func (p *tgtProcess) setPorts(t *testing.T, ports string) {
	t.Helper()
	replacePorts(t, p.cfgPath, ports)
	p.ctl(t, "reload")
}

// mpConnect connects one path (a controller) of subnqn through addr:port and returns its
// nvmeN; it is disconnected when the test ends.
func mpConnect(t *testing.T, h host, subnqn, addr string, port int) string {
	t.Helper()
	return mpConnectOver(t, h, "rdma", subnqn, addr, port)
}

// mpConnectOver is mpConnect over transport ("rdma", "tcp").
func mpConnectOver(t *testing.T, h host, transport, subnqn, addr string, port int) string {
	t.Helper()
	before := nvmeControllers()
	args := append([]string{"connect", "-t", transport, "-a", addr, "-s", strconv.Itoa(port), "-n", subnqn}, h.flags()...)
	args = append(args, "--ctrl-loss-tmo=60", "--reconnect-delay=1")
	mustRun(t, connectTimeout, "nvme", args...)
	for name := range nvmeControllers() {
		if !before[name] && readSys(filepath.Join("/sys/class/nvme", name, "subsysnqn")) == subnqn {
			t.Cleanup(func() { _ = runQuiet(cmdTimeout, "nvme", "disconnect", "-d", name) })
			return name
		}
	}
	t.Fatalf("connect %s through %s:%d: no new controller", subnqn, addr, port)
	return ""
}

func nvmeControllers() map[string]bool {
	out := map[string]bool{}
	ents, _ := os.ReadDir("/sys/class/nvme")
	for _, e := range ents {
		out[e.Name()] = true
	}
	return out
}

var pathDisk = regexp.MustCompile(`^nvme[0-9]+c([0-9]+)n[0-9]+$`)

// pathState is the ANA state the host shows for namespace nsid through controller ctrl
// (/sys/block/nvmeXcYnZ/ana_state), "" while it has no such path.
func pathState(ctrl string, nsid uint32) string {
	if d := pathBlock(ctrl, nsid); d != "" {
		return readSys(filepath.Join("/sys/block", d, "ana_state"))
	}
	return ""
}

// pathBlock is the host's hidden disk of namespace nsid through controller ctrl (nvmeXcYnZ),
// "" while it has none.
func pathBlock(ctrl string, nsid uint32) string {
	inst := strings.TrimPrefix(ctrl, "nvme")
	ents, _ := os.ReadDir("/sys/block")
	for _, e := range ents {
		m := pathDisk.FindStringSubmatch(e.Name())
		if m == nil || m[1] != inst {
			continue
		}
		if n, err := readSysUint(filepath.Join("/sys/block", e.Name(), "nsid")); err == nil && uint32(n) == nsid {
			return e.Name()
		}
	}
	return ""
}

// waitPathStates waits until the host shows want[i][nsid] through path ctrls[i], within d.
func waitPathStates(t *testing.T, what string, ctrls []string, want [3]map[uint32]string, d time.Duration) {
	t.Helper()
	start := time.Now()
	var got []string
	err := waitFor(d, func() bool {
		got = got[:0]
		ok := true
		for i, c := range ctrls {
			for nsid, w := range want[i] {
				s := pathState(c, nsid)
				got = append(got, fmt.Sprintf("%s ns%d=%s", c, nsid, s))
				ok = ok && s == w
			}
		}
		return ok
	})
	if err != nil {
		t.Fatalf("%s: the host shows %v, want %v, after %v", what, got, want, d)
	}
	t.Logf("%s: the host followed in %v", what, time.Since(start).Round(time.Millisecond))
}

// headDev is the multipath disk of nsid of subnqn.
func headDev(t *testing.T, subnqn string, nsid uint32) string {
	t.Helper()
	c := &controller{subnqn: subnqn}
	return c.blockDev(t, nsid)
}

// mpFio is a time-based random-write job of block size bs on dev that verifies what it wrote as
// it goes; its result comes on the channel.
func mpFio(t *testing.T, dev, dir string, bs int, runtime time.Duration) <-chan error {
	report := filepath.Join(dir, fmt.Sprintf("fio-mp-%d.json", bs))
	args := []string{"--name=mp", "--filename=" + dev, "--ioengine=libaio", "--direct=1", "--rw=randwrite",
		"--bs=" + strconv.Itoa(bs), "--iodepth=8", "--size=16m", "--time_based", "--runtime=" + strconv.Itoa(int(runtime.Seconds())),
		"--verify=crc32c", "--verify_backlog=64", "--verify_fatal=1", "--verify_state_save=0",
		"--output-format=json", "--output=" + report}
	done := make(chan error, 1)
	go func() {
		r := execCmd(runtime+fioTimeout, "fio", args...)
		raw, _ := os.ReadFile(report)
		var rep fioReport
		switch {
		case r.err != nil:
			done <- fmt.Errorf("fio bs %d: %v\n%s\n%s", bs, r.err, limit(r.stderr), limit(raw))
		case json.Unmarshal(fioJSON(raw), &rep) != nil || len(rep.Jobs) != 1:
			done <- fmt.Errorf("fio bs %d report: %s", bs, limit(raw))
		case rep.Jobs[0].Error != 0 || rep.Jobs[0].Write.IOBytes == 0 || rep.Jobs[0].Read.IOBytes == 0:
			done <- fmt.Errorf("fio bs %d: error %d, wrote %d, verified %d bytes", bs, rep.Jobs[0].Error,
				rep.Jobs[0].Write.IOBytes, rep.Jobs[0].Read.IOBytes)
		default:
			t.Logf("fio bs %d: wrote %d MiB, verified %d MiB", bs, rep.Jobs[0].Write.IOBytes>>20, rep.Jobs[0].Read.IOBytes>>20)
			done <- nil
		}
	}()
	return done
}

// TestMultipathANA: the host sees one subsystem with three paths and each path's ANA state per
// namespace; Identify and the ANA log carry the fields the host needs; states flipped by reload
// reach the host's sysfs within 2 s without a rescan while fio verifies through the paths; with
// no path usable I/O waits in the host, and completes once a path is back.
func TestMultipathANA(t *testing.T) {
	h := newHost(t)
	sub := nqn("multipath")
	requireTgt(t, "ANA states set through nvmeof-tgt's configuration and API")
	addSoftRoCE(t)
	p, dir := startTgt(t, Spec{Port: rdmaPort(), Subsystems: []Subsystem{{
		NQN: sub, AllowAnyHost: true, Namespaces: []Namespace{memNS(1, 64*mib, 0, ""), memNS(2, 64*mib, 0, "")},
	}}})
	p.ctl(t, "ns", "ana-group", sub, "2", "2")
	// Group 1 (namespace 1) is optimized on port 1 and non-optimized on 2 and 3; group 2
	// (namespace 2) the other way round, optimized on port 2.
	states := [3]map[int]string{{2: "non-optimized"}, {1: "non-optimized"}, {1: "non-optimized", 2: "non-optimized"}}
	p.setPorts(t, mpPorts(states))

	ctrls := []string{mpConnect(t, h, sub, labAddr, portRDMA), mpConnect(t, h, sub, labAddr, mpPort2), mpConnect(t, h, sub, rmAddr, portRDMA)}
	if got := readSys("/sys/module/nvme_core/parameters/multipath"); got != "Y" {
		t.Fatalf("nvme_core.multipath is %q: the test needs the host's native multipath", got)
	}
	waitPathStates(t, "at connect", ctrls, [3]map[uint32]string{
		{1: "optimized", 2: "non-optimized"}, {1: "non-optimized", 2: "optimized"}, {1: "non-optimized", 2: "non-optimized"},
	}, 10*time.Second)
	dev1, dev2 := headDev(t, sub, 1), headDev(t, sub, 2)
	t.Logf("paths %v; namespace 1 is %s, 2 is %s", ctrls, dev1, dev2)

	t.Run("identify", func(t *testing.T) {
		var id struct {
			CMIC      int `json:"cmic"`
			ANACAP    int `json:"anacap"`
			ANATT     int `json:"anatt"`
			ANAGRPMAX int `json:"anagrpmax"`
			NANAGRPID int `json:"nanagrpid"`
			MNAN      int `json:"mnan"`
			NN        int `json:"nn"`
			OAES      int `json:"oaes"`
			CNTLID    int `json:"cntlid"`
		}
		nvmeJSON(t, &id, "id-ctrl", "/dev/"+ctrls[1], "-o", "json")
		if id.CMIC != 0x0a || id.ANACAP != 0x1f || id.ANATT != 10 || id.ANAGRPMAX != 128 || id.NANAGRPID != 128 ||
			id.MNAN != id.NN || id.MNAN == 0 || id.OAES&(1<<11) == 0 {
			t.Errorf("id-ctrl %+v", id)
		}
		var ns struct {
			ANAGRPID int `json:"anagrpid"`
			NMIC     int `json:"nmic"`
			RESCAP   int `json:"rescap"`
		}
		nvmeJSON(t, &ns, "id-ns", "/dev/"+ctrls[1], "-n", "2", "-o", "json")
		if ns.ANAGRPID != 2 || ns.NMIC != 1 {
			t.Errorf("id-ns %+v", ns)
		}
		var log struct {
			Groups []struct {
				GrpID int    `json:"grpid"`
				State string `json:"state"`
				NSIDs []struct {
					NSID int `json:"nsid"`
				} `json:"NSIDS"`
			} `json:"ANA DESC LIST "`
		}
		raw := mustRun(t, cmdTimeout, "nvme", "ana-log", "/dev/"+ctrls[1], "-o", "json")
		if err := json.Unmarshal(raw, &log); err != nil || len(log.Groups) != 2 {
			t.Fatalf("ana-log: %v\n%s", err, raw)
		}
		if log.Groups[0].GrpID != 1 || log.Groups[0].State != "non-optimized" || len(log.Groups[0].NSIDs) != 1 ||
			log.Groups[1].GrpID != 2 || log.Groups[1].State != "optimized" || log.Groups[1].NSIDs[0].NSID != 2 {
			t.Errorf("ana-log through port 2:\n%s", raw)
		}
	})

	t.Run("flips under fio", func(t *testing.T) {
		fio4k := mpFio(t, dev1, dir, 4096, 45*time.Second)
		fio128k := mpFio(t, dev2, dir, 128<<10, 45*time.Second)
		time.Sleep(3 * time.Second)
		flips := []struct {
			name   string
			states [3]map[int]string
			want   [3]map[uint32]string
		}{
			{"port 1 group 1 inaccessible", [3]map[int]string{{1: "inaccessible", 2: "non-optimized"}, {1: "non-optimized"}, {1: "non-optimized", 2: "non-optimized"}},
				[3]map[uint32]string{{1: "inaccessible"}, {1: "non-optimized"}, {1: "non-optimized"}}},
			{"port 2 group 2 inaccessible", [3]map[int]string{{1: "inaccessible", 2: "non-optimized"}, {1: "non-optimized", 2: "inaccessible"}, {1: "non-optimized", 2: "non-optimized"}},
				[3]map[uint32]string{{2: "non-optimized"}, {2: "inaccessible"}, {2: "non-optimized"}}},
			{"port 1 group 1 through change", [3]map[int]string{{1: "change", 2: "non-optimized"}, {1: "non-optimized", 2: "inaccessible"}, {1: "non-optimized", 2: "non-optimized"}},
				[3]map[uint32]string{{1: "change"}}},
			{"port 1 group 1 optimized again", [3]map[int]string{{2: "non-optimized"}, {1: "non-optimized", 2: "inaccessible"}, {1: "non-optimized", 2: "non-optimized"}},
				[3]map[uint32]string{{1: "optimized"}}},
			{"port 2 group 2 optimized, port 3 both inaccessible", [3]map[int]string{{2: "non-optimized"}, {1: "non-optimized"}, {1: "inaccessible", 2: "inaccessible"}},
				[3]map[uint32]string{{1: "optimized", 2: "non-optimized"}, {1: "non-optimized", 2: "optimized"}, {1: "inaccessible", 2: "inaccessible"}}},
			{"all back", states, [3]map[uint32]string{{1: "optimized", 2: "non-optimized"}, {1: "non-optimized", 2: "optimized"}, {1: "non-optimized", 2: "non-optimized"}}},
		}
		for _, f := range flips {
			p.setPorts(t, mpPorts(f.states))
			waitPathStates(t, f.name, ctrls, f.want, anaFollows)
			time.Sleep(3 * time.Second)
		}
		for _, ch := range []<-chan error{fio4k, fio128k} {
			if err := <-ch; err != nil {
				t.Error(err)
			}
		}
	})

	t.Run("no usable path", func(t *testing.T) {
		off := [3]map[int]string{{1: "inaccessible", 2: "non-optimized"}, {1: "inaccessible"}, {1: "inaccessible", 2: "non-optimized"}}
		p.setPorts(t, mpPorts(off))
		waitPathStates(t, "group 1 inaccessible everywhere", ctrls,
			[3]map[uint32]string{{1: "inaccessible"}, {1: "inaccessible"}, {1: "inaccessible"}}, anaFollows)
		want := pattern(1<<20, 54)
		src := filepath.Join(dir, "queued.bin")
		if err := os.WriteFile(src, want, 0o600); err != nil {
			t.Fatal(err)
		}
		done := make(chan cmdResult, 1)
		go func() {
			done <- execCmd(2*time.Minute, "dd", "if="+src, "of="+dev1, "bs=64k", "oflag=direct", "conv=fsync")
		}()
		select {
		case r := <-done:
			t.Fatalf("a write with no usable path completed (it should wait in the host): %v", r)
		case <-time.After(5 * time.Second):
		}
		p.setPorts(t, mpPorts(states))
		select {
		case r := <-done:
			if r.err != nil {
				t.Fatalf("the queued write failed once a path was back: %v", r)
			}
		case <-time.After(time.Minute):
			t.Fatal("the queued write did not complete after a path came back")
		}
		if got := ddRead(t, dev1, 0, len(want)); string(got) != string(want) {
			t.Fatal("the queued write's data did not reach the namespace")
		}
	})
}

// replacePorts rewrites the configuration file's ports section (which comes before its
// subsystems, as the harness writes it) as ports.
func replacePorts(t *testing.T, cfgPath, ports string) {
	t.Helper()
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(b)
	i, j := strings.Index(cfg, "ports:\n"), strings.Index(cfg, "subsystems:\n")
	if i < 0 || j < i {
		t.Fatalf("config has no ports section before subsystems:\n%s", cfg)
	}
	if err := os.WriteFile(cfgPath, []byte(cfg[:i]+ports+cfg[j:]), 0o600); err != nil {
		t.Fatal(err)
	}
}
