//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/tests/netlab"
)

// The network lab (tests/lab/e2e-net.sh, tests/netlab): several guests joined by links that
// faults act on. This binary runs in the driver guest, the kernel host; a test picks the guests
// it uses by name (labGuest), runs commands in them through their agents (run, mustRun), starts
// nvmeof-tgt in one (startRemoteTgt), cuts, restores and shapes a link from either end
// (labLink: cut and restore its carrier, down and up one end, shape one end with netem) and
// cuts and restores a guest's power (powerKill, boot, waitUp). The TestNet tests
// (build tag netlab) are the only ones that run there.

// netLab is the network lab, nil in the one-guest lab.
var netLab *labNet

const (
	netLabUpTimeout = 4 * time.Minute // a guest's boot under emulation on a loaded machine
	powerTimeout    = time.Minute     // the launcher's answer to a power request
)

type labNet struct {
	desc   *netlab.Lab
	self   string // the guest this binary runs in
	power  string // the directory of power requests
	guests map[string]*labGuest
}

func (n *labNet) String() string {
	var b strings.Builder
	for i, g := range n.desc.Guests {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (%d cpu, %d MiB", g.Name, g.CPUs, g.MemMB)
		switch {
		case g.Name == n.self:
			b.WriteString(", this one")
		case g.Off:
			b.WriteString(", off")
		}
		b.WriteString(")")
	}
	for _, k := range n.desc.Links {
		if !k.Mgmt {
			fmt.Fprintf(&b, "; link %s %s %s-%s %s", k.Name, k.Ends[0].Guest, k.Ends[0].Addr, k.Ends[1].Guest, k.Ends[1].Addr)
		}
	}
	return b.String()
}

// setupNetLab reads the lab and waits for the agent of every guest that booted with it.
func setupNetLab(path string) error {
	desc, err := netlab.Load(path)
	if err != nil {
		return err
	}
	self := os.Getenv("LAB_GUEST")
	if self != desc.Driver {
		return fmt.Errorf("LAB_GUEST=%q: this binary runs in the lab's driver, %s", self, desc.Driver)
	}
	for _, tool := range []string{"ip", "tc", "rdma"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("tool %s: %w", tool, err)
		}
	}
	n := &labNet{desc: desc, self: self, power: envOr("LAB_ORDER_DIR", netlab.OrderDir), guests: map[string]*labGuest{}}
	for _, g := range desc.Guests {
		lg := &labGuest{lab: n, name: g.Name, off: g.Off}
		if g.Name != self {
			lg.agent = &netlab.Client{Addr: g.Agent}
		}
		n.guests[g.Name] = lg
	}
	ctx, cancel := context.WithTimeout(context.Background(), netLabUpTimeout)
	defer cancel()
	for _, g := range n.guests {
		if g.agent == nil || g.off {
			continue
		}
		resp, err := g.agent.WaitUp(ctx)
		if err != nil {
			return fmt.Errorf("guest %s: %w", g.name, err)
		}
		g.bootID = resp.BootID
	}
	netLab = n
	return nil
}

// needNetLab is the network lab; a test that needs it fails without it.
func needNetLab(t *testing.T) *labNet {
	t.Helper()
	if netLab == nil {
		t.Fatal("not in the network lab: run it through tests/lab/e2e-net.sh")
	}
	return netLab
}

// guest is the guest called name.
func (n *labNet) guest(t *testing.T, name string) *labGuest {
	t.Helper()
	g, ok := n.guests[name]
	if !ok {
		t.Fatalf("the network lab has no guest %q (%s)", name, n)
	}
	return g
}

// local is the guest this binary runs in, the host.
func (n *labNet) local() *labGuest { return n.guests[n.self] }

// labGuest is one guest of the network lab.
type labGuest struct {
	lab   *labNet
	name  string
	agent *netlab.Client // nil for the guest this binary runs in

	mu     sync.Mutex
	bootID string // of the boot its agent last answered from
	off    bool   // its power is cut
}

func (g *labGuest) String() string { return g.name }

// run runs argv in the guest within timeout, logging it in full if it fails.
func (g *labGuest) run(t testing.TB, timeout time.Duration, argv ...string) cmdResult {
	t.Helper()
	r := g.exec(timeout, argv...)
	if r.err != nil {
		t.Logf("command failed in %s:\n%s", g.name, r)
	}
	return r
}

// mustRun is run that ends the test if the command fails.
func (g *labGuest) mustRun(t testing.TB, timeout time.Duration, argv ...string) []byte {
	t.Helper()
	r := g.run(t, timeout, argv...)
	if r.err != nil {
		t.Fatalf("in %s: %s: %v", g.name, r.line, r.err)
	}
	return r.stdout
}

// exec runs argv in the guest: here, or through its agent.
func (g *labGuest) exec(timeout time.Duration, argv ...string) cmdResult {
	if g.agent == nil {
		return execCmd(timeout, argv[0], argv[1:]...)
	}
	start := time.Now()
	resp, err := g.agent.Run(context.Background(), timeout, argv...)
	r := cmdResult{line: g.name + ": " + strings.Join(argv, " "), stdout: resp.Stdout, stderr: resp.Stderr,
		took: time.Since(start)}
	switch {
	case err != nil:
		r.err = err
	case resp.TimedOut:
		r.err = fmt.Errorf("timed out after %v", timeout)
	case resp.Signal != 0:
		r.err = fmt.Errorf("killed by %v", syscall.Signal(resp.Signal))
	case resp.Exit != 0:
		r.err = fmt.Errorf("exit status %d", resp.Exit)
	}
	return r
}

// sh runs a shell command in the guest; args are $1, $2, ...
func (g *labGuest) sh(t testing.TB, script string, args ...string) []byte {
	t.Helper()
	return g.mustRun(t, cmdTimeout, append([]string{"sh", "-c", script, "sh"}, args...)...)
}

// rxeCounters are the hardware counters of the guest's Soft-RoCE device dev (port 1).
func (g *labGuest) rxeCounters(t testing.TB, dev string) map[string]uint64 {
	t.Helper()
	dir := filepath.Join("/sys/class/infiniband", dev, "ports/1/hw_counters")
	out := g.sh(t, `cd "$1" && for f in *; do echo "$f $(cat "$f")"; done`, dir)
	c := map[string]uint64{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, v, ok := strings.Cut(line, " ")
		n, err := strconv.ParseUint(v, 10, 64)
		if !ok || err != nil {
			t.Fatalf("%s: %s: counter line %q", g.name, dir, line)
		}
		c[name] = n
	}
	if len(c) == 0 {
		t.Fatalf("%s: no counters in %s", g.name, dir)
	}
	return c
}

// counterDelta is after less before, counter by counter.
func counterDelta(before, after map[string]uint64) map[string]uint64 {
	d := map[string]uint64{}
	for k, v := range after {
		d[k] = v - before[k]
	}
	return d
}

// dmesg saves the guest's kernel log in dir and returns its tail.
func (g *labGuest) dmesg(t testing.TB, dir string) string {
	t.Helper()
	r := g.exec(cmdTimeout, "dmesg")
	if r.err != nil {
		return fmt.Sprintf("(dmesg in %s: %v)", g.name, r.err)
	}
	p := filepath.Join(dir, "dmesg-"+g.name+".txt")
	_ = os.WriteFile(p, r.stdout, 0o644)
	return fmt.Sprintf("%s's kernel log tail (full log in %s):\n%s", g.name, p, tail(r.stdout, 40))
}

// remote fails the test unless the guest is another one than this binary's.
func (g *labGuest) remote(t testing.TB) {
	t.Helper()
	if g.agent == nil {
		t.Fatalf("%s is the guest this test runs in: its power is not under its own control", g.name)
	}
}

// powerKill cuts the guest's power: its QEMU is killed with SIGKILL. The guest's own disk keeps
// what QEMU wrote to it; anything in the guest's memory is lost. If the test leaves the guest
// off, its cleanup boots it again for the tests after it.
func (g *labGuest) powerKill(t *testing.T) {
	t.Helper()
	g.remote(t)
	ctx, cancel := context.WithTimeout(context.Background(), powerTimeout)
	defer cancel()
	if _, err := netlab.RequestPower(ctx, g.lab.power, g.name, netlab.PowerKill); err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	g.off = true
	g.mu.Unlock()
	t.Logf("power cut: %s", g.name)
	t.Cleanup(func() {
		g.mu.Lock()
		off := g.off
		g.mu.Unlock()
		if off {
			g.boot(t)
			g.waitUp(t)
		}
	})
}

// boot powers the guest on (again), on the same disk image and links. Its agent answers once
// the guest is set up: waitUp.
func (g *labGuest) boot(t *testing.T) {
	t.Helper()
	g.remote(t)
	ctx, cancel := context.WithTimeout(context.Background(), powerTimeout)
	defer cancel()
	r, err := netlab.RequestPower(ctx, g.lab.power, g.name, netlab.PowerBoot)
	if err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	g.off = false
	g.mu.Unlock()
	t.Logf("power on: %s (boot %d)", g.name, r.Boots)
}

// waitUp waits for the guest's agent to answer and returns how long the guest has been up.
func (g *labGuest) waitUp(t *testing.T) time.Duration {
	t.Helper()
	g.remote(t)
	ctx, cancel := context.WithTimeout(context.Background(), netLabUpTimeout)
	defer cancel()
	start := time.Now()
	resp, err := g.agent.WaitUp(ctx)
	if err != nil {
		t.Fatalf("%s: %v", g.name, err)
	}
	g.mu.Lock()
	g.bootID = resp.BootID
	g.mu.Unlock()
	t.Logf("%s is up (waited %v, kernel up %v)", g.name, time.Since(start).Round(time.Millisecond), resp.Uptime.Round(time.Millisecond))
	return resp.Uptime
}

// isOff reports whether the guest's power is cut.
func (g *labGuest) isOff() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.off
}

// currentBoot is the boot ID of the boot the guest's agent last answered from.
func (g *labGuest) currentBoot() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.bootID
}

// labLink is a data link of the network lab.
type labLink struct {
	netlab.Link
}

// link is the data link called name.
func (n *labNet) link(t *testing.T, name string) *labLink {
	t.Helper()
	k, ok := n.desc.Link(name)
	if !ok || k.Mgmt {
		t.Fatalf("the network lab has no data link %q (%s)", name, n)
	}
	return &labLink{k}
}

// end is g's side of the link.
func (k *labLink) end(t testing.TB, g *labGuest) netlab.End {
	t.Helper()
	e, ok := k.End(g.name)
	if !ok {
		t.Fatalf("link %s joins %s and %s, not %s", k.Name, k.Ends[0].Guest, k.Ends[1].Guest, g.name)
	}
	return e
}

// addr is g's address on the link.
func (k *labLink) addr(t testing.TB, g *labGuest) string { t.Helper(); return k.end(t, g).Addr }

// rdmaDev is g's Soft-RoCE device on the link.
func (k *labLink) rdmaDev(t testing.TB, g *labGuest) string { t.Helper(); return k.end(t, g).RDMADev }

// cut pulls the link's cable: the carrier of both its NICs goes (QEMU's set_link, by the
// launcher), nothing passes either way, and both guests see NO-CARRIER and their rxe ports go
// down, while the netdevs stay up with their addresses and routes. The test's end restores it
// if the test has not.
func (k *labLink) cut(t *testing.T) {
	t.Helper()
	t.Cleanup(func() { k.setCarrier(t, true, false) })
	k.setCarrier(t, false, true)
	t.Logf("link %s: cut (no carrier at %s and %s)", k.Name, k.Ends[0].Guest, k.Ends[1].Guest)
}

// restore plugs the link's cable back in.
func (k *labLink) restore(t *testing.T) {
	t.Helper()
	k.setCarrier(t, true, true)
	t.Logf("link %s: restored", k.Name)
}

// setCarrier sets the carrier of both ends; a failure fails the test (and ends it if must).
func (k *labLink) setCarrier(t *testing.T, on, must bool) {
	t.Helper()
	for _, e := range k.Ends {
		if g := netLab.guests[e.Guest]; g.isOff() {
			continue // a guest without power has no carrier to set; its next boot has it on
		}
		if err := k.carrier(e.Guest, on); err != nil {
			if must {
				t.Fatal(err)
			}
			t.Error(err)
		}
	}
}

// carrier sets the carrier of guest's NIC on the link.
func (k *labLink) carrier(guest string, on bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), powerTimeout)
	defer cancel()
	return netlab.RequestCarrier(ctx, netLab.power, guest, k.Name, on)
}

// down sets g's NIC on the link administratively down (ip link set down): g's kernel takes its
// routes through it away and its rxe port goes down; the other end keeps its carrier and what
// it sends is lost. Unlike a cut, g's own sends fail at once: on the 6.12 kernel, rxe has
// then been seen to leave g's GSI QP (QP1) in the error state, after which no RDMA CM
// connection to or from g over that device can be made again (README, "Testing"). The test's
// end sets it up again if the test has not.
func (k *labLink) down(t *testing.T, g *labGuest) {
	t.Helper()
	e := k.end(t, g)
	t.Cleanup(func() { _ = g.exec(cmdTimeout, "ip", "link", "set", "dev", e.Netdev, "up") })
	g.mustRun(t, cmdTimeout, "ip", "link", "set", "dev", e.Netdev, "down")
	t.Logf("link %s: %s's end (%s) down", k.Name, g.name, e.Netdev)
}

// up sets g's NIC on the link up again, and says so if its rxe device's GSI QP is left in the
// error state (see down).
func (k *labLink) up(t *testing.T, g *labGuest) {
	t.Helper()
	e := k.end(t, g)
	g.mustRun(t, cmdTimeout, "ip", "link", "set", "dev", e.Netdev, "up")
	t.Logf("link %s: %s's end (%s) up", k.Name, g.name, e.Netdev)
	if st := gsiState(t, g, e.RDMADev); st != "RTS" {
		t.Logf("link %s: %s's %s has its GSI QP (QP1) in state %s: no RDMA CM connection over it until it is made again", k.Name, g.name, e.RDMADev, st)
	}
}

// gsiState is the state of the GSI QP (QP1, the RDMA CM's) of g's rxe device dev.
func gsiState(t testing.TB, g *labGuest, dev string) string {
	t.Helper()
	out := string(g.mustRun(t, cmdTimeout, "rdma", "resource", "show", "qp", "link", dev+"/1", "lqpn", "1"))
	f := strings.Fields(out)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "state" {
			return f[i+1]
		}
	}
	t.Fatalf("%s: no GSI QP state in %q", g.name, out)
	return ""
}

// shape puts netem on what g sends on the link (tc qdisc replace ... root netem ARGS...,
// e.g. "loss", "1%" or "delay", "20ms"); the test's end takes it off if the test has not.
func (k *labLink) shape(t *testing.T, g *labGuest, netem ...string) {
	t.Helper()
	e := k.end(t, g)
	t.Cleanup(func() { _ = g.exec(cmdTimeout, "tc", "qdisc", "del", "dev", e.Netdev, "root") })
	g.mustRun(t, cmdTimeout, append([]string{"tc", "qdisc", "replace", "dev", e.Netdev, "root", "netem"}, netem...)...)
	t.Logf("link %s: %s's end (%s) shaped: netem %s", k.Name, g.name, e.Netdev, strings.Join(netem, " "))
}

// unshape takes the netem off g's end of the link.
func (k *labLink) unshape(t *testing.T, g *labGuest) {
	t.Helper()
	e := k.end(t, g)
	g.mustRun(t, cmdTimeout, "tc", "qdisc", "del", "dev", e.Netdev, "root")
	t.Logf("link %s: %s's end (%s) unshaped", k.Name, g.name, e.Netdev)
}

// remoteTgt is nvmeof-tgt in another guest of the network lab, started there by the guest's
// agent: the same binary (every guest's root is the machine's), its configuration file and log
// in the test's results directory, which every guest shares.
type remoteTgt struct {
	g           *labGuest
	bin         string
	env         []string // KEY=VALUE added to the agent's environment
	metricsAddr string   // its metrics address in its guest, default 127.0.0.1:9771
	dir         string
	spec        Spec
	cfgPath     string
	logPath     string
	apiSock     string
	pid         int
	bootID      string // the guest's boot it runs in
	// qpBase is the guest's QP count with no host connected (qpTotal), set by a test that
	// counts the target's QPs.
	qpBase int
}

// startRemoteTgt starts nvmeof-tgt in g with spec; the test's end stops it and asserts that it
// exits cleanly, unless the guest lost power under it.
func startRemoteTgt(t *testing.T, g *labGuest, spec Spec) *remoteTgt {
	t.Helper()
	return startRemoteTgtWith(t, g, spec, tgtBin)
}

// startRemoteTgtWith is startRemoteTgt with another build of nvmeof-tgt (bin, e.g. the rbd
// build) and env added to its environment.
func startRemoteTgtWith(t *testing.T, g *labGuest, spec Spec, bin string, env ...string) *remoteTgt {
	t.Helper()
	return startRemoteTgtAs(t, g, "tgt-"+g.name, "", spec, bin, env...)
}

// startRemoteTgtAs is startRemoteTgtWith for a second target in the same guest: its own
// directory name (its configuration, log and API socket) and metrics address.
func startRemoteTgtAs(t *testing.T, g *labGuest, name, metrics string, spec Spec, bin string, env ...string) *remoteTgt {
	t.Helper()
	g.remote(t)
	p := &remoteTgt{g: g, bin: bin, env: env, metricsAddr: metrics, dir: filepath.Join(testDir(t), name)}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.pid != 0 {
			p.Stop(t)
		}
		if t.Failed() {
			p.logTail(t)
			t.Log(g.dmesg(t, p.dir))
		}
	})
	p.Start(t, spec)
	return p
}

// Start starts the target with spec. File namespaces' images are made in the guest if missing.
func (p *remoteTgt) Start(t *testing.T, spec Spec) {
	t.Helper()
	if err := spec.validate(); err != nil {
		t.Fatalf("spec: %v", err)
	}
	if p.pid != 0 {
		t.Fatal("remote nvmeof-tgt: Start while running")
	}
	p.spec = spec
	for _, ss := range spec.Subsystems {
		for _, ns := range ss.Namespaces {
			switch ns.Backend {
			case BackendMemory:
			case BackendFile:
				p.g.sh(t, `[ -e "$1" ] || truncate -s "$2" "$1"`, ns.Path, strconv.FormatInt(ns.Size, 10))
			case BackendRBD:
				// The image is the target's to create (Size) on the guest's own cluster.
			default:
				t.Fatalf("remote nvmeof-tgt: %s namespaces are not supported (memory, file and rbd are)", ns.Backend)
			}
		}
	}
	// The API socket in the guest's own /run: a unix socket does not work across 9p.
	p.apiSock = filepath.Join("/run/e2e-tgt", filepath.Base(filepath.Dir(p.dir)), "api.sock")
	if base := filepath.Base(p.dir); base != "tgt-"+p.g.name {
		p.apiSock = filepath.Join(filepath.Dir(p.apiSock), base, "api.sock")
	}
	p.g.mustRun(t, cmdTimeout, "mkdir", "-p", filepath.Dir(p.apiSock))
	p.cfgPath = filepath.Join(p.dir, "nvmeof-tgt.yaml")
	cfg := tgtConfigYAML(spec, nil) + fmt.Sprintf("api:\n  socket: %s\n", strconv.Quote(p.apiSock))
	if base := filepath.Base(p.dir); base != "tgt-"+p.g.name {
		// A second target in the guest: the first holds the default state_dir's lock.
		cfg += fmt.Sprintf("state_dir: %s\n", strconv.Quote(filepath.Join(filepath.Dir(p.apiSock), "state")))
	}
	if p.metricsAddr != "" {
		cfg = strings.Replace(cfg, `metrics: {listen: "127.0.0.1:9771"}`, fmt.Sprintf("metrics: {listen: %q}", p.metricsAddr), 1)
	}
	if err := os.WriteFile(p.cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatalf("write config: %v", err)
	}
	p.logPath = filepath.Join(p.dir, tgtLogName)
	if f, err := os.OpenFile(p.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644); err == nil {
		fmt.Fprintf(f, "=== e2e: %s serve --config %s in %s (%s)\n", p.bin, p.cfgPath, p.g.name, time.Now().Format(time.RFC3339))
		f.Close()
	}
	start := time.Now()
	resp, err := p.g.agent.Do(context.Background(), netlab.Request{Op: netlab.OpStart,
		Argv: []string{p.bin, "serve", "--config", p.cfgPath}, Env: p.env, Log: p.logPath, Notify: true, Timeout: tgtReadyTimeout})
	if err != nil {
		t.Fatalf("start nvmeof-tgt in %s: %v", p.g.name, err)
	}
	p.pid, p.bootID = resp.PID, p.g.currentBoot()
	switch {
	case resp.Ready:
		t.Logf("nvmeof-tgt pid %d in %s ready after %v", p.pid, p.g.name, time.Since(start).Round(time.Millisecond))
	case resp.Exited:
		p.pid = 0
		p.logTail(t)
		t.Fatalf("nvmeof-tgt in %s exited before READY=1", p.g.name)
	default:
		p.signal(syscall.SIGKILL)
		p.pid = 0
		p.logTail(t)
		t.Fatalf("nvmeof-tgt in %s sent no READY=1 within %v", p.g.name, tgtReadyTimeout)
	}
}

// lostPower reports whether the guest has booted again since the target started: the target
// went with its guest's power.
func (p *remoteTgt) lostPower() bool { return p.g.currentBoot() != p.bootID }

func (p *remoteTgt) signal(sig syscall.Signal) error {
	_, err := p.g.agent.Do(context.Background(), netlab.Request{Op: netlab.OpSignal, PID: p.pid, Signal: int(sig)})
	return err
}

func (p *remoteTgt) wait(timeout time.Duration) (netlab.Response, error) {
	return p.g.agent.Do(context.Background(), netlab.Request{Op: netlab.OpWait, PID: p.pid, Timeout: timeout})
}

// Stop sends SIGTERM and asserts a clean exit (status 0) within tgtStopTimeout.
func (p *remoteTgt) Stop(t *testing.T) {
	t.Helper()
	if p.pid == 0 {
		return
	}
	defer func() { p.pid = 0 }()
	if p.lostPower() {
		t.Logf("nvmeof-tgt in %s went with the guest's power", p.g.name)
		return
	}
	if err := p.signal(syscall.SIGTERM); err != nil {
		t.Errorf("SIGTERM nvmeof-tgt in %s: %v", p.g.name, err)
		return
	}
	start := time.Now()
	resp, err := p.wait(tgtStopTimeout)
	if err == nil && !resp.Exited {
		_ = p.signal(syscall.SIGQUIT) // the Go runtime writes every goroutine's stack to the log
		_, _ = p.wait(5 * time.Second)
		_ = p.signal(syscall.SIGKILL)
		_, _ = p.wait(5 * time.Second)
		t.Errorf("nvmeof-tgt in %s did not exit within %v of SIGTERM; stacks (SIGQUIT) in %s; killed", p.g.name, tgtStopTimeout, p.logPath)
		return
	}
	switch {
	case err != nil:
		t.Errorf("wait for nvmeof-tgt in %s: %v", p.g.name, err)
	case resp.Exit != 0:
		t.Errorf("nvmeof-tgt in %s ended with status %d (signal %d) after SIGTERM, want status 0", p.g.name, resp.Exit, resp.Signal)
	default:
		t.Logf("nvmeof-tgt in %s stopped cleanly in %v", p.g.name, time.Since(start).Round(time.Millisecond))
	}
}

// metrics scrapes the target's metrics (metricsURL, in its guest).
func (p *remoteTgt) metrics(t *testing.T) map[string]float64 {
	t.Helper()
	url := metricsURL
	if p.metricsAddr != "" {
		url = "http://" + p.metricsAddr + "/metrics"
	}
	return parseMetrics(t, p.g.mustRun(t, cmdTimeout, "curl", "-sSf", "--max-time", "20", url))
}

// ctl runs the CLI against the target's API in its guest and returns its standard output.
func (p *remoteTgt) ctl(t *testing.T, args ...string) []byte {
	t.Helper()
	return p.g.mustRun(t, cmdTimeout, append([]string{p.bin, "--socket", p.apiSock}, args...)...)
}

func (p *remoteTgt) logTail(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		t.Logf("nvmeof-tgt log: %v", err)
		return
	}
	t.Logf("nvmeof-tgt log tail (%s, in %s):\n%s", p.logPath, p.g.name, tail(b, 60))
}
