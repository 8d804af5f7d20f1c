//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// A hostile host over a real connection (issue 11, "Trust"): a raw initiator
// (rdma/rdmatest) sends what no well-behaved host does, while the kernel host
// runs a verifying fio on another subsystem of the same target. TestHostile
// runs the attacks one after another; they live by kind in
// hostile_connect_test.go (connection requests and Connects),
// hostile_data_test.go (capsules, SGLs and the data they move) and
// hostile_resources_test.go (what a host holds or leaves behind, and
// TestVanishedHost); hostile_auth_test.go has TestAuthFlood. The hostile host
// itself, which sends them and checks every response and buffer, is in
// harness_hostile_test.go.

// kernelRecovery matches the Linux host's log of a controller that lost a queue or timed out.
var kernelRecovery = regexp.MustCompile(`(?i)reconnect|error recovery|timeout|resetting|failed to connect`)

// TestHostile: a raw initiator sends the target random and mutated capsules,
// bad SGLs, bogus CM private data, duplicate CIDs, Connect floods and
// pipelined Connects, Get Features and Get Log Page at every edge, AER
// floods, queues that never post receives and disconnects mid-transfer,
// while the kernel host runs fio with pattern verification on another
// subsystem. The target must not crash (it stops cleanly at the end, exit
// 0), the kernel host's verify must pass, every byte the hostile host gets
// back for a successful command must be what was written for it (its own
// namespace byte for byte; nothing anywhere holding the kernel host's
// pattern; nothing outside the command's SGL touched), and afterwards the
// metrics and status must show every queue, controller and buffer released.
func TestHostile(t *testing.T) {
	kh := newHost(t)
	kernSub, hostSub := nqn("hostile-victim"), nqn("hostile")
	spec := Spec{Port: rdmaPort(), Subsystems: []Subsystem{
		{NQN: kernSub, AllowAnyHost: true, Namespaces: []Namespace{memNS(1, 64*mib, 512, "")}},
		{NQN: hostSub, AllowAnyHost: true, Namespaces: []Namespace{memNS(hOwnNSID, 16*mib, 512, ""), memNS(hNoiseNSID, 16*mib, 512, "")}},
	}}
	tgt, dir := startTarget(t, spec)
	kc := kh.mustConnect(t, kernSub, 1)
	dmesgBefore := dmesgText(t)
	fio := backgroundFioVerify(t, kc.blockDev(t, 1), dir, 85*time.Second, "--verify=pattern", "--verify_pattern="+fioPattern)
	start := time.Now()

	hs := newHostile(t, hostSub)
	defer hs.save(dir)
	t.Cleanup(hs.closeController)

	// Each phase timed; those that move the most data first, while the
	// kernel host's fio runs.
	phase := func(name string, fn func()) {
		t0 := time.Now()
		fn()
		t.Logf("phase %s: %v", name, time.Since(t0).Round(time.Millisecond))
	}
	var rejects, pipelined []string
	var held int
	phase("cm private data", func() { rejects = hs.cmPrivateData() })
	phase("own writes", func() {
		hs.controllerUp()
		for b := 0; b < 2048; b += 256 {
			hs.writeOwnData("own-writes", uint64(b), 256)
		}
		hs.verifyOwn("own-reads", 4096)
	})
	phase("bad SGLs", hs.badSGLs)
	phase("duplicate CIDs", hs.duplicateCIDs)
	phase("mutated", func() { hs.mutated(250) })
	phase("random", func() { hs.random(250) })
	phase("own reads", func() { hs.ensure("own-reads"); hs.verifyOwn("own-reads", 8192) })
	phase("mid-transfer disconnects", hs.midTransfer)
	phase("no receives", hs.noReceives)
	phase("features", func() { hs.ensure("get-features"); hs.features() })
	phase("log pages", hs.logPages)
	phase("connects", func() { pipelined = hs.connects() })
	phase("AER flood", func() { held = hs.aerFlood() })
	phase("own reads", func() {
		hs.controllerUp()
		hs.verifyOwn("own-reads", 8192)
		hs.closeController()
	})
	t.Logf("hostile phase took %v", time.Since(start).Round(time.Millisecond))

	t.Run("kernel host verify", func(t *testing.T) {
		if err := <-fio; err != nil {
			t.Fatal(err)
		}
		// fio would pass over a reconnect too: the kernel host's queues must not have been
		// torn down under it.
		for _, line := range strings.Split(strings.TrimPrefix(dmesgText(t), dmesgBefore), "\n") {
			if strings.Contains(line, kc.name+":") && kernelRecovery.MatchString(line) {
				t.Errorf("the kernel host's controller went through recovery: %s", line)
			}
		}
	})
	t.Run("nvmeof-tgt answers", func(t *testing.T) {
		requireTgt(t, "its reject statuses, one Connect per queue, AER limit", fmt.Sprint(rejects, pipelined, held))
		for _, m := range rejects {
			t.Errorf("CM private data: %s", m)
		}
		for _, m := range pipelined {
			t.Errorf("pipelined Connects: %s; want exactly one", m)
		}
		if held != 4 {
			t.Errorf("the controller held %d of 64 AERs, want its AERL+1 = 4", held)
		}
		for _, m := range hs.dropped {
			t.Errorf("queue lost where a status was due: %s", m)
		}
	})
	t.Run("released", func(t *testing.T) {
		requireTgt(t, "status and metrics")
		p := tgt.(*tgtProcess)
		if err := waitFor(15*time.Second, func() bool { return !p.status(t).connected(hostSub, hs.h.NQN) }); err != nil {
			t.Errorf("status still lists the hostile host's controller: %+v", p.status(t).Controllers)
		}
		kc.disconnect(t)
		waitTornDown(t)
		checkBuffersReleased(t)
		if st := p.status(t); len(st.Controllers) != 0 {
			t.Errorf("status lists controllers after every host left: %+v", st.Controllers)
		}
		m := scrapeMetrics(t)
		errs, _ := metricSum(m, "nvmeof_tgt_command_errors_total")
		rej, _ := metricSum(m, "nvmeof_tgt_rdma_connections_total", `event="rejected"`)
		t.Logf("target counted %v command errors and %v rejected connections", errs, rej)
		p.Stop(t)
		if b, _ := os.ReadFile(p.logPath); strings.Contains(string(b), "wait line full") || strings.Contains(string(b), "panic") {
			t.Errorf("the target's log reports a wait line full or a panic (see %s)", p.logPath)
		}
	})
}
