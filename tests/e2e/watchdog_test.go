//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The systemd watchdog as a unit with WatchdogSec=1s would run it: WATCHDOG_USEC in the
// environment (no WATCHDOG_PID: go-systemd takes the watchdog as ours without it), so the target
// pings every 500ms on the harness's notify socket.
const (
	watchdogUSec = "1000000"
	pingEvery    = 500 * time.Millisecond
)

// note is one notify datagram and when it arrived.
type note struct {
	at  time.Time
	msg string
}

// notes records the datagrams of a target (withNotify).
type notes struct {
	mu   sync.Mutex
	list []note
}

func (n *notes) add(msg string) {
	n.mu.Lock()
	n.list = append(n.list, note{time.Now(), msg})
	n.mu.Unlock()
}

// match returns the notes since t0 whose message has a line for which keep is true.
func (n *notes) match(t0 time.Time, keep func(line string) bool) []note {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []note
	for _, x := range n.list {
		if x.at.Before(t0) {
			continue
		}
		if slices.ContainsFunc(strings.Split(x.msg, "\n"), keep) {
			out = append(out, x)
		}
	}
	return out
}

func (n *notes) pings(t0 time.Time) []note {
	return n.match(t0, func(l string) bool { return l == "WATCHDOG=1" })
}

// statusCounts reads a STATUS= line of a healthy target.
func statusCounts(line string) (controllers, queues int, ok bool) {
	_, err := fmt.Sscanf(line, "STATUS=controllers: %d, queues: %d", &controllers, &queues)
	return controllers, queues, err == nil
}

func (n *notes) statuses(t0 time.Time, substr string) []note {
	return n.match(t0, func(l string) bool { return strings.HasPrefix(l, "STATUS=") && strings.Contains(l, substr) })
}

// waitStatus waits for a STATUS= line since t0 that contains substr and returns its note.
func (n *notes) waitStatus(t *testing.T, t0 time.Time, substr string, timeout time.Duration) note {
	t.Helper()
	var got []note
	if err := waitFor(timeout, func() bool { got = n.statuses(t0, substr); return len(got) > 0 }); err != nil {
		t.Fatalf("no STATUS= with %q within %v; last notes: %q", substr, timeout, n.tail(5))
	}
	return got[0]
}

func (n *notes) tail(k int) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, x := range n.list[max(0, len(n.list)-k):] {
		out = append(out, x.msg)
	}
	return out
}

// checkCadence asserts that pings came about every pingEvery over span. The guest is emulated:
// the bounds are wide, but a watchdog that does not ping, or pings in bursts, fails.
func checkCadence(t *testing.T, what string, pings []note, span time.Duration) {
	t.Helper()
	want := int(span / pingEvery)
	if len(pings) < want/2 || len(pings) > 2*want+2 {
		t.Errorf("%s: %d pings in %v, want about %d", what, len(pings), span.Round(time.Millisecond), want)
	}
	if len(pings) < 3 {
		return
	}
	var gaps []time.Duration
	for i := 1; i < len(pings); i++ {
		gaps = append(gaps, pings[i].at.Sub(pings[i-1].at))
	}
	slices.Sort(gaps)
	if med := gaps[len(gaps)/2]; med < pingEvery/2 || med > 3*pingEvery {
		t.Errorf("%s: pings %v apart (median), want about %v", what, med.Round(time.Millisecond), pingEvery)
	}
	t.Logf("%s: %d pings in %v, median gap %v", what, len(pings), span.Round(time.Millisecond), gaps[len(gaps)/2].Round(time.Millisecond))
}

// TestWatchdog checks the target's systemd notifications: READY=1 with a STATUS= line, then
// WATCHDOG=1 at half the watchdog interval both while idle (its pollers asleep in the kernel,
// which must count as healthy) and with a host connected, and STATUS= lines that count the
// controllers and queues.
func TestWatchdog(t *testing.T) {
	requireTgt(t, "systemd notifications are nvmeof-tgt's")
	h := newHost(t)
	sub := nqn("watchdog")
	spec := Spec{Port: rdmaPort(), Subsystems: []Subsystem{{
		NQN: sub, AllowAnyHost: true, Namespaces: []Namespace{memNS(1, 16*mib, 4096, "")},
	}}}
	ns := &notes{}
	t0 := time.Now()
	p, _ := startTgt(t, spec, withEnv("WATCHDOG_USEC="+watchdogUSec), withNotify(ns.add))

	ready := ns.match(t0, func(l string) bool { return l == "READY=1" })
	if len(ready) != 1 || !strings.Contains(ready[0].msg, "\nSTATUS=controllers: 0, queues: 0") {
		t.Fatalf("READY=1 notes %+v, want one, with STATUS=controllers: 0, queues: 0", ready)
	}
	readyAt := ready[0].at

	const idle = 5 * time.Second
	time.Sleep(idle)
	checkCadence(t, "idle", ns.pings(readyAt), time.Since(readyAt))

	c := h.mustConnect(t, sub, 1)
	// The admin queue and at least one I/O queue.
	withIO := func(l string) bool { c, q, ok := statusCounts(l); return ok && c == 1 && q >= 2 }
	if err := waitFor(10*time.Second, func() bool { return len(ns.match(readyAt, withIO)) > 0 }); err != nil {
		t.Fatalf("connected: no STATUS= with 1 controller and its I/O queues; last notes %q", ns.tail(3))
	}
	connected := time.Now()
	time.Sleep(3 * time.Second)
	checkCadence(t, "connected", ns.pings(connected), time.Since(connected))

	c.disconnect(t)
	ns.waitStatus(t, connected, "STATUS=controllers: 0, queues: 0", 10*time.Second)
	if s := ns.statuses(t0, "stalled"); len(s) > 0 {
		t.Errorf("a healthy target reported a stall: %+v", s)
	}
	p.Stop(t)
}

// TestWatchdogStall runs the faultinject build (NVMEOF_TGT_FAULT_BIN) with NVMEOF_TGT_FAULT_STALL,
// which blocks poller 0 a few seconds after start: the pings must stop, with a STATUS= line that
// names the poller, while the notifier itself keeps running; systemd would then kill and restart
// the target. The stall ends when the poller is closed, so SIGTERM still stops it cleanly.
func TestWatchdogStall(t *testing.T) {
	bin := faultBin(t)
	spec := Spec{Port: rdmaPort(), Subsystems: []Subsystem{{
		NQN: nqn("watchdog-stall"), AllowAnyHost: true, Namespaces: []Namespace{memNS(1, 16*mib, 4096, "")},
	}}}
	ns := &notes{}
	t0 := time.Now()
	p, _ := startTgt(t, spec, withBinary(bin), withNotify(ns.add), withEnv(
		"WATCHDOG_USEC="+watchdogUSec,
		"NVMEOF_TGT_FAULT_STALL=6s",
		"GORACE=halt_on_error=1 exitcode=66",
	))
	logText := func() string {
		b, err := os.ReadFile(p.logPath)
		if err != nil {
			t.Fatalf("target log: %v", err)
		}
		return string(b)
	}
	if !strings.Contains(logText(), "poller 0 stalls on purpose") {
		t.Fatalf("%s does not announce the stall: not a faultinject build?", bin)
	}

	ready := ns.match(t0, func(l string) bool { return l == "READY=1" })
	if len(ready) != 1 {
		t.Fatalf("READY=1 notes %+v, want one", ready)
	}
	stalled := ns.waitStatus(t, t0, "stalled: ", 30*time.Second)
	if !strings.Contains(stalled.msg, "poller 0") {
		t.Errorf("stall STATUS %q does not name poller 0", stalled.msg)
	}
	checkCadence(t, "before the stall", ns.pings(ready[0].at), stalled.at.Sub(ready[0].at))

	const watch = 4 * time.Second
	time.Sleep(watch)
	if after := ns.pings(stalled.at); len(after) > 0 {
		t.Errorf("%d pings after the stall was reported (first %v later)", len(after), after[0].at.Sub(stalled.at))
	}
	if n := len(ns.statuses(stalled.at, "stalled: ")); n < int(watch/pingEvery)/2 {
		t.Errorf("%d stall STATUS lines in %v, want the notifier to go on ticking", n, watch)
	}
	text := logText()
	for _, want := range []string{"poller stalls on purpose", "pollers make no progress"} {
		if !strings.Contains(text, want) {
			t.Errorf("target log has no %q", want)
		}
	}
	p.Stop(t)
	if strings.Contains(logText(), "DATA RACE") {
		t.Errorf("the race detector reported a data race (see %s)", p.logPath)
	}
}
