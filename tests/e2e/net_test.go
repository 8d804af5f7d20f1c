//go:build e2e && netlab

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/tests/netlab"
)

// The network lab's own tests (tests/lab/e2e-net.sh): the lab does what the tests after them
// rely on.

// retransmits sums the rxe counters of a requester that resent packets (completer_retry_err: it
// timed out waiting for an ACK; rcvd_seq_err: it got a NAK for a sequence gap) and of a
// responder that got packets resent to it (duplicate_request).
func retransmits(d map[string]uint64) uint64 {
	return d["completer_retry_err"] + d["rcvd_seq_err"] + d["duplicate_request"]
}

func retransmitString(d map[string]uint64) string {
	return fmt.Sprintf("sent %d, received %d, completer_retry_err %d, rcvd_seq_err %d, duplicate_request %d, out_of_seq_request %d",
		d["sent_pkts"], d["rcvd_pkts"], d["completer_retry_err"], d["rcvd_seq_err"], d["duplicate_request"], d["out_of_seq_request"])
}

// TestNetSmoke: nvmeof-tgt in the target guest serves a memory namespace over link A to the
// kernel host in this guest, and fio verifies. With 1% loss on what the target sends on link A
// fio still verifies with no I/O error, and the target's rxe device on link A counts
// retransmissions: the RDMA traffic crosses the link netem acts on. With link A cut, writes
// stop completing; once it is restored they complete again, and fio's verify passes.
func TestNetSmoke(t *testing.T) {
	lab := needNetLab(t)
	tg, hg := lab.guest(t, "target"), lab.local()
	a := lab.link(t, "a")
	addr := a.addr(t, tg)
	sub := nqn("net-smoke")
	spec := Spec{Port: Port{Transport: "rdma", Address: addr, Service: portRDMA},
		Subsystems: []Subsystem{{NQN: sub, AllowAnyHost: true, Namespaces: []Namespace{memNS(1, 64*mib, 0, "")}}}}
	tgt := startRemoteTgt(t, tg, spec)
	dir := testDir(t)
	dumpDmesgOnFailure(t, dir)

	h := newHost(t)
	c, err := h.connectAddr(t, addr, sub, portRDMA)
	if err != nil {
		t.Fatalf("connect to %s at %s: %v", sub, addr, err)
	}
	dev := c.blockDev(t, 1)
	tdev, hdev := a.rdmaDev(t, tg), a.rdmaDev(t, hg)

	// A clean link.
	t0 := tg.rxeCounters(t, tdev)
	runFio(t, dev, dir, fioCase{rw: "randwrite", bs: 4 * kib, iodepth: 16, size: 8 * mib})
	t1 := tg.rxeCounters(t, tdev)
	clean := counterDelta(t0, t1)
	t.Logf("clean link A, target's %s: %s", tdev, retransmitString(clean))
	if clean["sent_pkts"] == 0 || clean["rcvd_pkts"] == 0 {
		t.Fatalf("the target's %s on link A moved no packets under fio: %s", tdev, retransmitString(clean))
	}

	// 1% loss on the target's side of link A.
	a.shape(t, tg, "loss", "1%")
	h1 := hg.rxeCounters(t, hdev)
	runFio(t, dev, dir, fioCase{rw: "randwrite", bs: 4 * kib, iodepth: 8, size: 8 * mib})
	t2, h2 := tg.rxeCounters(t, tdev), hg.rxeCounters(t, hdev)
	a.unshape(t, tg)
	lossy := counterDelta(t1, t2)
	t.Logf("1%% loss, target's %s: %s", tdev, retransmitString(lossy))
	t.Logf("1%% loss, host's %s: %s", hdev, retransmitString(counterDelta(h1, h2)))
	if retransmits(lossy) == 0 {
		t.Errorf("1%% loss on link A: the target's %s counted no retransmission (%s)", tdev, retransmitString(lossy))
	}

	// Link A cut for a while (both carriers gone, as with a pulled cable), under a time-based
	// verifying fio. Not `ip link set down`: on this kernel, a NIC set down under rxe while the
	// RDMA CM sends a disconnect over it leaves that device's GSI QP in the error state, and no
	// connection over it can be made again (README, "Testing").
	// Progress is counted where the I/O lands, in the target: the host's disk statistics also
	// count an I/O its error recovery fails over to be retried. Reads too: fio verifies as it
	// goes, so the cut may catch it reading.
	const downFor = 5 * time.Second
	ios := func() float64 {
		v, ok := metricSum(tgt.metrics(t), "nvmeof_tgt_namespace_ops_total", `subnqn="`+sub+`"`)
		if !ok {
			t.Fatal("no nvmeof_tgt_namespace_ops_total in the target's metrics")
		}
		return v
	}
	w0 := ios()
	done := netFio(t, dev, dir, 30*time.Second)
	if err := waitFor(30*time.Second, func() bool { return ios() > w0 }); err != nil {
		t.Fatalf("fio's I/O did not reach the target in 30 s")
	}
	time.Sleep(2 * time.Second)
	a.cut(t)
	cut := time.Now()
	time.Sleep(time.Second) // what was already on its way
	w1 := ios()
	time.Sleep(downFor - time.Since(cut))
	w2 := ios()
	a.restore(t)
	up := time.Now()
	if w2 != w1 {
		t.Errorf("link A cut: %v I/Os reached the target between 1 s and %v after the cut, want none", w2-w1, downFor)
	}
	if err := waitFor(90*time.Second, func() bool { return ios() > w2 }); err != nil {
		t.Errorf("no I/O reached the target within 90 s of link A's restore (controller %s: %s)", c.name, ctrlState(c.name))
	} else {
		t.Logf("I/O reached the target again %v after link A's restore (%v after the cut; controller %s)", time.Since(up).Round(100*time.Millisecond),
			time.Since(cut).Round(100*time.Millisecond), ctrlState(c.name))
	}
	for _, g := range []*labGuest{tg, hg} {
		if st := gsiState(t, g, a.rdmaDev(t, g)); st != "RTS" {
			t.Errorf("after the cut, %s's %s has its GSI QP in state %s, want RTS", g, a.rdmaDev(t, g), st)
		}
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("fio across the cut: %v", r.err)
	}
	t.Logf("fio across the cut: %d writes, %d verified reads, longest I/O %v", r.writes, r.reads, r.maxLat.Round(time.Millisecond))
	if r.maxLat < downFor-time.Second {
		t.Errorf("fio's longest I/O took %v: none waited out the %v cut", r.maxLat, downFor)
	}
}

// netFioResult is how a netFio run went.
type netFioResult struct {
	err           error
	writes, reads uint64
	maxLat        time.Duration // the longest read's or write's completion latency
}

// netFio runs a time-based 4 KiB random-write job on dev that verifies what it writes as it
// goes (verify_backlog), in the background.
func netFio(t *testing.T, dev, dir string, runtime time.Duration) <-chan netFioResult {
	report := filepath.Join(dir, "fio-net.json")
	args := []string{"--name=net", "--filename=" + dev, "--ioengine=libaio", "--direct=1",
		"--rw=randwrite", "--bs=4k", "--iodepth=8", "--size=32m", "--time_based",
		"--runtime=" + strconv.Itoa(int(runtime.Seconds())), "--verify=crc32c", "--verify_backlog=64",
		"--verify_fatal=1", "--verify_state_save=0", "--output-format=json", "--output=" + report}
	done := make(chan netFioResult, 1)
	go func() {
		r := execCmd(runtime+fioTimeout, "fio", args...)
		raw, _ := os.ReadFile(report)
		var rep struct {
			Jobs []struct {
				Error int `json:"error"`
				Read  struct {
					TotalIOs uint64 `json:"total_ios"`
					Clat     struct {
						Max float64 `json:"max"`
					} `json:"clat_ns"`
				} `json:"read"`
				Write struct {
					TotalIOs uint64 `json:"total_ios"`
					Clat     struct {
						Max float64 `json:"max"`
					} `json:"clat_ns"`
				} `json:"write"`
			} `json:"jobs"`
		}
		switch err := json.Unmarshal(fioJSON(raw), &rep); {
		case r.err != nil:
			done <- netFioResult{err: fmt.Errorf("%v\n%s\n%s", r.err, limit(r.stderr), limit(raw))}
		case err != nil:
			done <- netFioResult{err: fmt.Errorf("report %s: %v", report, err)}
		case len(rep.Jobs) != 1 || rep.Jobs[0].Error != 0:
			done <- netFioResult{err: fmt.Errorf("fio job failed: %s", limit(raw))}
		default:
			j := rep.Jobs[0]
			done <- netFioResult{writes: j.Write.TotalIOs, reads: j.Read.TotalIOs,
				maxLat: time.Duration(max(j.Write.Clat.Max, j.Read.Clat.Max))}
		}
	}()
	return done
}

// TestNetPowerCycle: the lab's power control. What the target guest wrote to its own disk and
// flushed survives a power cut (its QEMU killed with SIGKILL); its agent stops answering; the
// guest boots again on the same disk and answers from a new boot; RDMA works again over link A
// (rping from this guest).
func TestNetPowerCycle(t *testing.T) {
	lab := needNetLab(t)
	tg, hg := lab.guest(t, "target"), lab.local()
	a := lab.link(t, "a")
	dir := testDir(t)
	boot0 := tg.currentBoot()
	want := fmt.Sprintf("written before the power cut, %d", time.Now().UnixNano())
	const path = "/scratch/power-cycle.txt"
	tg.sh(t, `printf %s "$1" >"$2" && sync "$2"`, want, path)

	tg.powerKill(t)
	if r := tg.exec(10*time.Second, "true"); r.err == nil {
		t.Errorf("%s's agent answered after its power cut", tg)
	}
	tg.boot(t)
	tg.waitUp(t)
	if b := tg.currentBoot(); b == boot0 || b == "" {
		t.Errorf("%s answers from boot %q, before the cut %q: want a new boot", tg, b, boot0)
	}
	if got := string(tg.mustRun(t, cmdTimeout, "cat", path)); got != want {
		t.Errorf("%s after the power cut: %q, want %q", path, got, want)
	}

	addr := a.addr(t, tg)
	log := filepath.Join(dir, "rping-server.log")
	srv, err := tg.agent.Do(t.Context(), netlab.Request{Op: netlab.OpStart,
		Argv: []string{"rping", "-s", "-a", addr, "-C", "3", "-v"}, Log: log})
	if err != nil {
		t.Fatalf("rping server in %s: %v", tg, err)
	}
	var out string
	err = waitFor(30*time.Second, func() bool {
		r := hg.exec(cmdTimeout, "rping", "-c", "-a", addr, "-C", "3", "-v")
		out = string(r.stdout) + string(r.stderr)
		return r.err == nil
	})
	if err != nil || !strings.Contains(out, "rdma-ping-2") {
		t.Errorf("rping to %s over link A after the power cycle: %v\n%s", addr, err, out)
	}
	resp, err := tg.agent.Do(t.Context(), netlab.Request{Op: netlab.OpWait, PID: srv.PID, Timeout: 30 * time.Second})
	if err != nil || !resp.Exited || resp.Exit != 0 {
		b, _ := os.ReadFile(log)
		t.Errorf("rping server in %s: %v, exited %v with %d\n%s", tg, err, resp.Exited, resp.Exit, b)
	}
}
