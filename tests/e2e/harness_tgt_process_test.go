//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	tgtReadyTimeout = 60 * time.Second
	tgtStopTimeout  = 20 * time.Second
	// tgtLogName is the target's log (its output and the harness's notes) in its directory.
	tgtLogName = "nvmeof-tgt.log"
)

// tgtProcess is nvmeof-tgt under test, a child process: `serve --config FILE`, with readiness
// reported through the systemd notify protocol (a READY=1 datagram on $NOTIFY_SOCKET). startTgt
// makes one; its options (tgtOption) set the fields above spec.
type tgtProcess struct {
	bin string
	dir string   // config and log go here
	env []string // added to the target's environment
	// onNotify, if set, sees every notify datagram as it arrives.
	onNotify func(msg string)
	// config, if set, makes the configuration file from the one rendered from spec (withConfig).
	config func(rendered string) string

	spec      Spec
	cfgPath   string
	logPath   string
	cmd       *exec.Cmd
	exited    chan struct{} // closed once cmd has been waited for
	waitErr   error
	notify    *net.UnixConn
	ready     chan struct{}
	cleanupOn bool
	loops     map[string]string // BackendBlock image → its loop device (a device → itself), kept across restarts
	// apiSock is the management API's socket, for ctl.
	apiSock string
	// keepConfig starts with the configuration file as the target left it
	// (changes made through the API), instead of writing it from spec.
	keepConfig bool
}

func (p *tgtProcess) Start(t *testing.T, spec Spec) {
	t.Helper()
	if err := spec.validate(); err != nil {
		t.Fatalf("spec: %v", err)
	}
	if p.cmd != nil {
		t.Fatal("nvmeof-tgt: Start while running")
	}
	p.spec = spec
	createImages(t, spec)
	p.attachLoops(t, spec)

	// A unix socket path must fit in 108 bytes: keep them out of the (long) results path.
	sockDir, err := os.MkdirTemp("", "e2e-notify-")
	if err != nil {
		t.Fatalf("socket dir: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	p.apiSock = filepath.Join(sockDir, "api.sock")
	p.cfgPath = filepath.Join(p.dir, "nvmeof-tgt.yaml")
	if !p.keepConfig {
		if err := os.WriteFile(p.cfgPath, []byte(p.configYAML(t, spec)), 0o600); err != nil {
			t.Fatalf("write config: %v", err)
		}
	} else if err := setAPISocket(p.cfgPath, p.apiSock); err != nil {
		t.Fatal(err)
	}
	p.logPath = filepath.Join(p.dir, tgtLogName)
	logf, err := os.OpenFile(p.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("target log: %v", err)
	}
	defer logf.Close() // the child holds its own descriptor
	fmt.Fprintf(logf, "=== e2e: %s serve --config %s (%s)\n", p.bin, p.cfgPath, time.Now().Format(time.RFC3339))

	sock := filepath.Join(sockDir, "notify.sock")
	p.notify, err = net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatalf("notify socket: %v", err)
	}
	p.ready = make(chan struct{})
	go p.readNotify(logf.Name())

	p.cmd = exec.Command(p.bin, "serve", "--config", p.cfgPath)
	p.cmd.Env = append(withoutEnv(os.Environ(), "NOTIFY_SOCKET"), "NOTIFY_SOCKET="+sock)
	p.cmd.Env = append(p.cmd.Env, p.env...)
	p.cmd.Stdout = logf
	p.cmd.Stderr = logf
	// If the test binary dies, the target goes with it.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		p.notify.Close()
		p.cmd = nil
		t.Fatalf("start %s: %v", p.bin, err)
	}
	p.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) {
		p.waitErr = cmd.Wait()
		close(exited)
	}(p.cmd, p.exited)

	if !p.cleanupOn {
		p.cleanupOn = true
		t.Cleanup(func() {
			if p.cmd != nil {
				p.Stop(t)
			}
			if t.Failed() {
				p.logTail(t)
			}
		})
	}

	start := time.Now()
	select {
	case <-p.ready:
		t.Logf("nvmeof-tgt pid %d ready after %v", p.cmd.Process.Pid, time.Since(start).Round(time.Millisecond))
	case <-p.exited:
		p.closeNotify()
		err := p.waitErr
		p.cmd = nil
		p.logTail(t)
		t.Fatalf("nvmeof-tgt exited before READY=1: %v", err)
	case <-time.After(tgtReadyTimeout):
		p.kill()
		p.logTail(t)
		t.Fatalf("nvmeof-tgt sent no READY=1 within %v", tgtReadyTimeout)
	}
}

// readNotify reads notify datagrams until the socket closes, closing p.ready at READY=1 and
// recording every message in the target's log.
func (p *tgtProcess) readNotify(logName string) {
	conn, ready, onNotify := p.notify, p.ready, p.onNotify
	logf, _ := os.OpenFile(logName, os.O_WRONLY|os.O_APPEND, 0)
	if logf != nil {
		defer logf.Close()
	}
	buf := make([]byte, 4096)
	seen := false
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return
		}
		msg := string(buf[:n])
		if logf != nil {
			fmt.Fprintf(logf, "=== e2e: notify %q\n", msg)
		}
		if onNotify != nil {
			onNotify(msg)
		}
		for _, line := range strings.Split(msg, "\n") {
			if line == "READY=1" && !seen {
				seen = true
				close(ready)
			}
		}
	}
}

func (p *tgtProcess) closeNotify() {
	if p.notify != nil {
		p.notify.Close()
		p.notify = nil
	}
}

func (p *tgtProcess) Stop(t *testing.T) {
	t.Helper()
	if p.cmd == nil {
		return
	}
	defer func() { p.cmd = nil; p.closeNotify() }()
	select {
	case <-p.exited:
		p.logTail(t)
		t.Errorf("nvmeof-tgt had already exited before Stop: %v", p.waitErr)
		return
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Errorf("SIGTERM nvmeof-tgt: %v", err)
	}
	start := time.Now()
	select {
	case <-p.exited:
	case <-time.After(tgtStopTimeout):
		// SIGQUIT makes the Go runtime write every goroutine's stack to the log.
		_ = p.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-p.exited:
		case <-time.After(5 * time.Second):
		}
		p.kill()
		p.logTail(t)
		t.Errorf("nvmeof-tgt did not exit within %v of SIGTERM; stacks (SIGQUIT) in %s; killed", tgtStopTimeout, p.logPath)
		return
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		p.logTail(t)
		t.Errorf("nvmeof-tgt exited with %v after SIGTERM, want status 0", p.waitErr)
		return
	}
	t.Logf("nvmeof-tgt stopped cleanly in %v", time.Since(start).Round(time.Millisecond))
}

func (p *tgtProcess) Restart(t *testing.T) {
	t.Helper()
	spec := p.spec
	p.Stop(t)
	if t.Failed() {
		t.FailNow()
	}
	p.Start(t, spec)
}

// Crash kills the target with SIGKILL: no shutdown, nothing said to the hosts, nothing flushed
// that the process still held. Start (or RestartKeep) brings it back.
func (p *tgtProcess) Crash(t *testing.T) {
	t.Helper()
	if p.cmd == nil {
		t.Fatal("nvmeof-tgt: Crash while not running")
	}
	select {
	case <-p.exited:
		p.logTail(t)
		t.Fatalf("nvmeof-tgt had already exited before the kill: %v", p.waitErr)
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL nvmeof-tgt: %v", err)
	}
	select {
	case <-p.exited:
	case <-time.After(tgtStopTimeout):
		t.Fatalf("nvmeof-tgt still running %v after SIGKILL", tgtStopTimeout)
	}
	ws, _ := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("nvmeof-tgt ended with %v, want killed by SIGKILL", p.waitErr)
	}
	p.closeNotify()
	p.cmd = nil
	if f, err := os.OpenFile(p.logPath, os.O_WRONLY|os.O_APPEND, 0); err == nil {
		fmt.Fprintf(f, "=== e2e: killed with SIGKILL (%s)\n", time.Now().Format(time.RFC3339Nano))
		f.Close()
	}
}

// RestartKeep restarts the target with its configuration file as it is,
// as a supervisor would.
func (p *tgtProcess) RestartKeep(t *testing.T) {
	t.Helper()
	p.keepConfig = true
	defer func() { p.keepConfig = false }()
	p.Restart(t)
}

// setAPISocket points the api.socket of the configuration file at path (the
// socket directory is new at each start).
func setAPISocket(cfgPath, sock string) error {
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		return err
	}
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		// socket is api's only key, whatever the indentation the target
		// wrote it with.
		if rest := strings.TrimLeft(l, " "); strings.HasPrefix(rest, "socket:") {
			lines[i] = l[:len(l)-len(rest)] + "socket: " + strconv.Quote(sock)
		}
	}
	return os.WriteFile(cfgPath, []byte(strings.Join(lines, "\n")), 0o644)
}

// ctl runs the CLI against the running target's API and returns its
// standard output; a failure fails the test.
func (p *tgtProcess) ctl(t *testing.T, args ...string) []byte {
	t.Helper()
	out, err := p.ctlErr(args...)
	if err != nil {
		t.Fatalf("nvmeof-tgt %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// ctlErr is ctl that returns the error, with the CLI's own message.
func (p *tgtProcess) ctlErr(args ...string) ([]byte, error) {
	cmd := exec.Command(p.bin, append([]string{"--socket", p.apiSock}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// attachLoops gives each block namespace's image a loop device with the namespace's logical block
// size, once; the devices are detached when the test ends, after the target has stopped.
func (p *tgtProcess) attachLoops(t *testing.T, spec Spec) {
	t.Helper()
	for _, ss := range spec.Subsystems {
		for _, ns := range ss.Namespaces {
			if ns.Backend != BackendBlock || p.loops[ns.Path] != "" {
				continue
			}
			if p.loops == nil {
				p.loops = map[string]string{}
			}
			if isBlockDevice(ns.Path) { // a device of its own (localNVMeNS): served as it is
				p.loops[ns.Path] = ns.Path
				continue
			}
			dev, detach, err := attachLoop(ns)
			if err != nil {
				t.Fatal(err)
			}
			p.loops[ns.Path] = dev
			t.Cleanup(func() {
				if err := detach(); err != nil {
					t.Errorf("losetup -d %s: %v", dev, err)
				}
			})
		}
	}
}

func (p *tgtProcess) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
	p.closeNotify()
	p.cmd = nil
}

func (p *tgtProcess) logTail(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		t.Logf("nvmeof-tgt log: %v", err)
		return
	}
	t.Logf("nvmeof-tgt log tail (%s):\n%s", p.logPath, tail(b, 60))
}

func withoutEnv(env []string, key string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// configYAML is the configuration file of a start with spec: the one rendered from it, or what
// the withConfig options make of that, and the api section, which only the harness writes.
func (p *tgtProcess) configYAML(t *testing.T, spec Spec) string {
	t.Helper()
	y := tgtConfigYAML(spec, p.loops)
	if p.config != nil {
		y = p.config(y)
		if apiKey.MatchString(y) {
			t.Fatalf("withConfig: the harness writes the api section (its socket is new at each start); leave it out of:\n%s", y)
		}
		if y != "" && !strings.HasSuffix(y, "\n") {
			y += "\n"
		}
	}
	// On a line of its own: RestartKeep rewrites it.
	return y + fmt.Sprintf("api:\n  socket: %s\n", strconv.Quote(p.apiSock))
}

// apiKey matches the top-level api key of a configuration file.
var apiKey = regexp.MustCompile(`(?m)^api\s*:`)

// tgtConfigYAML renders spec in nvmeof-tgt's configuration format, without the api section.
// Strings are double-quoted (JSON-style escapes are valid YAML), so NQNs with colons need no
// care.
func tgtConfigYAML(spec Spec, loops map[string]string) string {
	var b bytes.Buffer
	q := strconv.Quote
	b.WriteString("# written by tests/e2e\n")
	b.WriteString("ports:\n")
	for _, p := range append([]Port{spec.Port}, spec.More...) {
		fmt.Fprintf(&b, "  - {transport: %s, address: %s, port: %d}\n", q(p.Transport), q(p.Address), p.Service)
	}
	b.WriteString("subsystems:\n")
	for _, ss := range spec.Subsystems {
		fmt.Fprintf(&b, "  - nqn: %s\n", q(ss.NQN))
		if ss.AllowAnyHost {
			b.WriteString("    allow_any_host: true\n")
		} else {
			quoted := make([]string, len(ss.Hosts))
			var hash, group string
			for i, h := range ss.Hosts {
				quoted[i] = q(h)
				if a, ok := ss.Auth[h]; ok {
					quoted[i] = fmt.Sprintf("{nqn: %s, dhchap_key: %s", q(h), q(a.Key))
					if a.CtrlKey != "" {
						quoted[i] += ", dhchap_ctrl_key: " + q(a.CtrlKey)
					}
					quoted[i] += "}"
					hash, group = a.Hash, a.DHGroup
				}
			}
			fmt.Fprintf(&b, "    hosts: [%s]\n", strings.Join(quoted, ", "))
			if hash != "" {
				fmt.Fprintf(&b, "    dhchap_hashes: [%s]\n    dhchap_dhgroups: [%s]\n", q(hash), q(group))
			}
		}
		b.WriteString("    namespaces:\n")
		for _, ns := range ss.Namespaces {
			f := []string{fmt.Sprintf("nsid: %d", ns.NSID)}
			switch ns.Backend {
			case BackendFile:
				f = append(f, "path: "+q(ns.Path))
			case BackendBlock:
				f = append(f, "backend: block", "path: "+q(loops[ns.Path]))
			case BackendRBD:
				f = append(f, "backend: rbd", "pool: "+q(ns.Pool), "image: "+q(ns.Image))
			default:
				f = append(f, "backend: "+q(string(ns.Backend)))
			}
			f = append(f, "size: "+yamlSize(ns.Size))
			if ns.UUID != "" {
				f = append(f, "uuid: "+q(ns.UUID))
			}
			if ns.NGUID != "" {
				f = append(f, "nguid: "+q(ns.NGUID))
			}
			if ns.EUI64 != "" {
				f = append(f, "eui64: "+q(ns.EUI64))
			}
			if ns.BufferedIO {
				f = append(f, "buffered_io: true")
			}
			if ns.BlockSize != 0 && ns.Backend != BackendBlock { // a block device has its own
				f = append(f, fmt.Sprintf("block_size: %d", ns.BlockSize))
			}
			f = append(f, ns.Extra...)
			fmt.Fprintf(&b, "      - {%s}\n", strings.Join(f, ", "))
		}
	}
	b.WriteString("metrics: {listen: \"127.0.0.1:9771\"}\n")
	b.WriteString("log: {level: debug}\n")
	return b.String()
}

func yamlSize(n int64) string {
	if n%mib == 0 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return strconv.FormatInt(n, 10)
}

// ctlStatus is `status --json`.
type ctlStatus struct {
	Subsystems  []ctlSubsystem `json:"subsystems"`
	Controllers []struct {
		SubNQN      string `json:"subnqn"`
		HostNQN     string `json:"hostnqn"`
		HostAddress string `json:"host_address"`
		CNTLID      uint16 `json:"cntlid"`
		IOQueues    int    `json:"io_queues"`
	} `json:"controllers"`
}

type ctlSubsystem struct {
	NQN        string   `json:"nqn"`
	Hosts      []string `json:"hosts"`
	Namespaces []struct {
		NSID uint32 `json:"nsid"`
		Size int64  `json:"size"`
	} `json:"namespaces"`
}

// status is the running target's `status --json`.
func (p *tgtProcess) status(t *testing.T) ctlStatus {
	t.Helper()
	var st ctlStatus
	out := p.ctl(t, "status", "--json")
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	return st
}

// connected reports whether hostnqn has a controller on subnqn.
func (st ctlStatus) connected(subnqn, hostnqn string) bool {
	for _, c := range st.Controllers {
		if c.SubNQN == subnqn && c.HostNQN == hostnqn {
			return true
		}
	}
	return false
}

// withSubsystem adds a subsystem (a YAML flow mapping) to the subsystems
// list of a configuration file, with the list's own indentation: the file
// may be one the target wrote.
func withSubsystem(t *testing.T, file, entry string) string {
	t.Helper()
	lines := strings.Split(file, "\n")
	i := slices.Index(lines, "subsystems:")
	if i < 0 || i+1 >= len(lines) {
		t.Fatalf("no subsystems list in:\n%s", file)
	}
	next := lines[i+1]
	indent := next[:len(next)-len(strings.TrimLeft(next, " "))]
	return strings.Join(slices.Insert(lines, i+1, indent+"- "+entry), "\n")
}
