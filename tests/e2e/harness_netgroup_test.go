//go:build e2e && netlab

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/tests/netlab"
)

// Gateway groups in the network lab: a one-node Ceph cluster in one guest (tests/lab/ceph-up.sh
// on an address of one of its links), nvmeof-tgt-rbd gateways in guests of their own
// (startNetGateway), and what a test reads of the cluster from the cluster's guest: an image's
// bytes, the blocklist, a lock's holder.

const (
	// netCephUpTimeout bounds ceph-up.sh in a guest of one vCPU: about a minute and a half
	// there (TCG), most of it the mgr's start and the PGs peering; the rest is for a machine
	// busy with other guests. netCephUpSeconds is the script's own limit (HEALTH_OK).
	netCephUpTimeout = 8 * time.Minute
	netCephUpSeconds = "420"
	// netCephDir is the daemons' directory in their guest: its /run, a tmpfs of its own.
	netCephDir = "/run/ceph-net"
)

// netCeph is a one-node Ceph cluster (mon, mgr, memstore OSD, pool "rbd") in a guest of the
// network lab, its daemons bound to addr.
type netCeph struct {
	g    *labGuest
	addr string
	conf string // in the results directory, which every guest mounts at the same path
}

// startNetCeph starts a cluster in g on addr (one of g's link addresses: the guests that reach
// it over that link are its clients), booting g first if its power is off. The test's end
// stops it (its logs kept in the test's directory if the test failed) and, if it booted g,
// cuts g's power again, leaving the lab as it found it.
func startNetCeph(t *testing.T, g *labGuest, addr string) *netCeph {
	t.Helper()
	g.remote(t)
	dir := testDir(t)
	if g.isOff() {
		start := time.Now()
		g.boot(t)
		g.waitUp(t)
		t.Logf("%s booted in %v", g, time.Since(start).Round(time.Millisecond))
		t.Cleanup(func() { g.powerOff(t) })
	}
	script, err := filepath.Abs("tests/lab/ceph-up.sh")
	if err != nil {
		t.Fatal(err)
	}
	down, _ := filepath.Abs("tests/lab/ceph-down.sh")
	c := &netCeph{g: g, addr: addr, conf: filepath.Join(dir, "ceph.conf")}
	env := []string{"env", "CEPH_DIR=" + netCephDir, "CEPH_CONF=" + c.conf}
	t.Cleanup(func() {
		if t.Failed() {
			logs := filepath.Join(dir, "ceph-log-"+g.name)
			_ = g.exec(cmdTimeout, "cp", "-r", netCephDir+"/log", logs)
			t.Logf("Ceph's logs from %s: %s", g, logs)
		}
		if r := g.exec(2*time.Minute, append(env, down, "--purge")...); r.err != nil {
			t.Logf("ceph-down.sh in %s: %v", g, r)
		}
	})
	start := time.Now()
	r := g.exec(netCephUpTimeout, append(env, "CEPH_ADDR="+addr, "CEPH_TIMEOUT="+netCephUpSeconds, script)...)
	log := filepath.Join(dir, "ceph-up-"+g.name+".log")
	_ = os.WriteFile(log, append(r.stdout, r.stderr...), 0o644)
	if r.err != nil {
		t.Fatalf("ceph-up.sh in %s: %v\n%s", g, r.err, tail(append(r.stdout, r.stderr...), 60))
	}
	t.Logf("Ceph cluster up in %s on %s in %v:\n%s", g, addr, time.Since(start).Round(time.Second), tail(r.stderr, 4))
	return c
}

// cmd runs a Ceph client command (ceph, rbd, rados) in the cluster's guest and returns its
// standard output.
func (c *netCeph) cmd(t *testing.T, tool string, args ...string) []byte {
	t.Helper()
	return c.g.mustRun(t, rbdTimeout, append([]string{tool, "-c", c.conf}, args...)...)
}

// readImage reads n bytes at off of image in the pool, as the cluster has them (rbd export,
// from the cluster's own guest: no gateway in the way).
func (c *netCeph) readImage(t *testing.T, image string, off int64, n int) []byte {
	t.Helper()
	if off%ddBlock != 0 || n%ddBlock != 0 {
		t.Fatalf("readImage: offset %d and length %d must be multiples of %d", off, n, ddBlock)
	}
	out := c.g.mustRun(t, rbdTimeout, "bash", "-c",
		`set -o pipefail; rbd -c "$1" export --no-progress "$2" - | { dd bs="$3" skip="$4" count="$5" iflag=fullblock status=none && cat >/dev/null; }`,
		"bash", c.conf, cephPool+"/"+image, strconv.Itoa(ddBlock), strconv.FormatInt(off/ddBlock, 10), strconv.Itoa(n/ddBlock))
	if len(out) != n {
		t.Fatalf("rbd export of %s: %d bytes at %d, want %d", image, len(out), off, n)
	}
	return out
}

// blocklist is the cluster's blocklist: each entry's address and expiry.
func (c *netCeph) blocklist(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, line := range strings.Split(string(c.cmd(t, "ceph", "osd", "blocklist", "ls")), "\n") {
		if f := strings.Fields(line); len(f) >= 2 {
			out[f[0]] = strings.Join(f[1:], " ")
		}
	}
	return out
}

var lockAddr = regexp.MustCompile(`"addr":\s*"(?:v[12]:|any:)?([^"]+)"`)

// lockHolder is the address of the client holding lock name on object obj of the pool ("" if
// none): for a gateway's lease lock, its group client.
func (c *netCeph) lockHolder(t *testing.T, obj, name string) string {
	t.Helper()
	out := c.cmd(t, "rados", "-p", cephPool, "lock", "info", obj, name, "--format", "json")
	if m := lockAddr.FindSubmatch(out); m != nil {
		return string(m[1])
	}
	return ""
}

// gatewayNetYAML is gateway id's file in the network lab: its port on addr, the group
// (conf is the cluster's, lease groupLease), its metrics, API socket and state directory.
func gatewayNetYAML(grp string, id int, addr, conf, stateDir, apiSock string) string {
	return fmt.Sprintf(`ports:
  - {id: %d, transport: rdma, address: %q, port: %d}
gateway_group: {name: %q, pool: %q, id: %d, ceph_conf: %q, lease: %v}
state_dir: %q
metrics: {listen: "127.0.0.1:9771"}
api: {socket: %q}
log: {level: debug}
`, id, addr, portRDMA, grp, cephPool, id, conf, groupLease, stateDir, apiSock)
}

// startNetGateway starts nvmeof-tgt-rbd in g as gateway id of group grp, serving on addr, a
// client of the cluster c; the test's end stops it and asserts a clean exit (a test that
// ends it otherwise says so by waiting for its exit: exited).
func startNetGateway(t *testing.T, g *labGuest, c *netCeph, grp string, id int, addr string) *remoteTgt {
	t.Helper()
	g.remote(t)
	bin, err := filepath.Abs(needRBDBin(t))
	if err != nil {
		t.Fatal(err)
	}
	p := &remoteTgt{g: g, bin: bin, dir: filepath.Join(testDir(t), fmt.Sprintf("gw%d-%s", id, g.name))}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p.apiSock = fmt.Sprintf("/run/e2e-gw/%s-%d/api.sock", grp, id)
	p.cfgPath = filepath.Join(p.dir, "nvmeof-tgt.yaml")
	p.logPath = filepath.Join(p.dir, tgtLogName)
	cfg := gatewayNetYAML(grp, id, addr, c.conf, filepath.Join(p.dir, "state"), p.apiSock)
	if err := os.WriteFile(p.cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatalf("write config: %v", err)
	}
	t.Cleanup(func() {
		if p.pid != 0 {
			p.Stop(t)
		}
		if t.Failed() {
			p.logTail(t)
		}
	})
	p.startGateway(t)
	return p
}

// startGateway starts (or starts again) the gateway with its file.
func (p *remoteTgt) startGateway(t *testing.T) {
	t.Helper()
	if p.pid != 0 {
		t.Fatal("gateway: start while running")
	}
	p.g.mustRun(t, cmdTimeout, "mkdir", "-p", filepath.Dir(p.apiSock))
	if f, err := os.OpenFile(p.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644); err == nil {
		fmt.Fprintf(f, "=== e2e: %s serve --config %s in %s (%s)\n", p.bin, p.cfgPath, p.g.name, time.Now().Format(time.RFC3339))
		f.Close()
	}
	start := time.Now()
	resp, err := p.g.agent.Do(context.Background(), netlab.Request{Op: netlab.OpStart,
		Argv: []string{p.bin, "serve", "--config", p.cfgPath}, Log: p.logPath, Notify: true, Timeout: tgtReadyTimeout})
	if err != nil {
		t.Fatalf("start gateway in %s: %v", p.g.name, err)
	}
	p.pid, p.bootID = resp.PID, p.g.currentBoot()
	switch {
	case resp.Ready:
		t.Logf("gateway pid %d in %s ready after %v", p.pid, p.g.name, time.Since(start).Round(time.Millisecond))
	case resp.Exited:
		p.pid = 0
		p.logTail(t)
		t.Fatalf("gateway in %s exited before READY=1", p.g.name)
	default:
		p.signal(syscall.SIGKILL)
		p.pid = 0
		p.logTail(t)
		t.Fatalf("gateway in %s sent no READY=1 within %v", p.g.name, tgtReadyTimeout)
	}
}

// exited waits up to d for the process to exit by itself and returns its exit status.
func (p *remoteTgt) exited(t *testing.T, d time.Duration) (int, bool) {
	t.Helper()
	resp, err := p.wait(d)
	if err != nil {
		t.Fatalf("wait for nvmeof-tgt in %s: %v", p.g.name, err)
	}
	if !resp.Exited {
		return 0, false
	}
	p.pid = 0
	return resp.Exit, true
}

// gwStatus is the gateway's `status --json`.
func (p *remoteTgt) gwStatus(t *testing.T) gwStatus {
	t.Helper()
	var st gwStatus
	out := p.ctl(t, "status", "--json")
	if err := json.Unmarshal(out, &st); err != nil || st.Group == nil {
		t.Fatalf("status --json in %s: %v, group %v\n%s", p.g.name, err, st.Group, out)
	}
	return st
}

// nsMetric is a namespace counter of the gateway (nvmeof_tgt_namespace_*), summed over the
// series with labels.
func (p *remoteTgt) nsMetric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	v, ok := metricSum(p.metrics(t), name, labels...)
	if !ok {
		t.Fatalf("no %s %v in the metrics of nvmeof-tgt in %s", name, labels, p.g.name)
	}
	return v
}

// tcpHeld is what g's kernel holds unacknowledged toward peer, in every TCP socket to it
// (ss's Send-Q: bytes written and not yet acknowledged by peer's kernel), with each socket's
// line (ss -tnoi: state, queues, retransmission timer) for the log.
func tcpHeld(t *testing.T, g *labGuest, peer string) (int, string) {
	t.Helper()
	out := string(g.mustRun(t, cmdTimeout, "ss", "-Htnoi", "dst", peer))
	held := 0
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		// State Recv-Q Send-Q Local Peer [timer...]; -i's details on the lines after.
		if len(f) < 5 || strings.Contains(f[0], ":") {
			continue
		}
		if n, err := strconv.Atoi(f[2]); err == nil {
			held += n
		}
	}
	return held, strings.TrimSpace(out)
}

// mpConnectTmo is mpConnect with ctrl-loss-tmo tmo: how long the host keeps reconnecting to
// a path whose target went away.
func mpConnectTmo(t *testing.T, h host, subnqn, addr string, port int, tmo time.Duration) string {
	t.Helper()
	before := nvmeControllers()
	args := append([]string{"connect", "-t", "rdma", "-a", addr, "-s", strconv.Itoa(port), "-n", subnqn}, h.flags()...)
	args = append(args, fmt.Sprintf("--ctrl-loss-tmo=%d", int(tmo.Seconds())), "--reconnect-delay=1")
	mustRun(t, connectTimeout, "nvme", args...)
	for name := range nvmeControllers() {
		if !before[name] && readSys(filepath.Join("/sys/class/nvme", name, "subsysnqn")) == subnqn &&
			strings.Contains(readSys(filepath.Join("/sys/class/nvme", name, "address")), addr) {
			t.Cleanup(func() { _ = runQuiet(cmdTimeout, "nvme", "disconnect", "-d", name) })
			return name
		}
	}
	t.Fatalf("connect %s through %s:%d: no new controller", subnqn, addr, port)
	return ""
}
