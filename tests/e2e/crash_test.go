//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// The target killed with SIGKILL under load and restarted as its systemd unit would restart it.
// A process crash, unlike a power loss, leaves the kernel (page cache, block layer, the drive)
// running: every write the target acknowledged must be there, and the hosts must come back by
// themselves.

const (
	killCycles = 3
	// supervisorPause is deploy/nvmeof-tgt.service's RestartSec.
	supervisorPause = 2 * time.Second
	// killAfterWrites is how many writes the target must have completed on each namespace,
	// in the cycle, before it is killed: about a quarter of a job's (some 4000; the 64 KiB ones
	// are cut short where the random map finds blocks already written), so the kill lands
	// mid-run with writes done on both sides of it.
	killAfterWrites = 1000
	// killCtrlLossTmo is the host's ctrl_loss_tmo here: the target's restart under TCG, on a
	// busy machine, has taken 18 s, and the test is about data, not a deadline.
	killCtrlLossTmo = 60 * time.Second
)

// crashJob is one fio writer whose verify state (which writes completed) outlives the target.
type crashJob struct {
	nsid uint32
	what string
	dev  string
	dir  string // fio's --aux-path: the verify state, and the reports
	seed int
}

// crashReport is the part of a fio JSON job report the kill test reads.
type crashReport struct {
	Error    int      `json:"error"`
	TotalErr uint64   `json:"total_err"` // with continue_on_error: every failed verify
	Read     fioStats `json:"read"`
	Write    fioStats `json:"write"`
}

// args is the job both phases run: the same seed regenerates the same writes in the same order,
// and the random map makes each block written once, so a verify-only pass knows what each block
// must hold. 4 KiB writes travel in the command capsule, 64 KiB ones through RDMA READ.
func (j crashJob) args(report string) []string {
	return []string{"--name=kill", "--filename=" + j.dev, "--ioengine=libaio", "--direct=1",
		"--rw=randwrite", "--bssplit=4k/80:64k/20", "--iodepth=16", "--size=32m", "--offset=0",
		"--randrepeat=1", "--randseed=" + strconv.Itoa(j.seed), "--verify=crc32c",
		"--aux-path=" + j.dir, "--output-format=json", "--output=" + report}
}

func (j crashJob) run(phase string, extra ...string) (crashReport, error) {
	report := filepath.Join(j.dir, phase+".json")
	r := execCmd(fioTimeout, "fio", append(j.args(report), extra...)...)
	_ = os.WriteFile(filepath.Join(j.dir, phase+".stderr"), r.stderr, 0o644)
	raw, rerr := os.ReadFile(report)
	if r.err != nil {
		return crashReport{}, fmt.Errorf("fio %s on %s: %v\n%s\nreport:\n%s", phase, j.dev, r.err, limit(r.stderr), limit(raw))
	}
	var rep struct{ Jobs []crashReport }
	if rerr == nil {
		rerr = json.Unmarshal(fioJSON(raw), &rep)
	}
	if rerr != nil {
		return crashReport{}, fmt.Errorf("fio %s report: %v", phase, rerr)
	}
	if len(rep.Jobs) != 1 {
		return crashReport{}, fmt.Errorf("fio %s report has %d jobs, want 1", phase, len(rep.Jobs))
	}
	return rep.Jobs[0], nil
}

// write runs the write phase, saving at its end which writes completed.
func (j crashJob) write() (crashReport, error) {
	return j.run("write", "--do_verify=0", "--verify_state_save=1")
}

// verify reads back every write the saved state lists and checks it, going on past a bad block
// so that TotalErr counts them all.
func (j crashJob) verify() (crashReport, error) {
	return j.run("verify", "--verify_only", "--verify_state_load=1", "--continue_on_error=verify")
}

// TestKillUnderLoad: while fio writes to a file namespace and to the guest's NVMe namespace, the
// target is killed with SIGKILL, several times. Each time it is restarted from its configuration
// file after the unit's RestartSec, the host reconnects within ctrl_loss_tmo without an I/O
// error, fio finishes through the new process, and a verify-only pass finds every write fio saw
// completed intact: none lost.
func TestKillUnderLoad(t *testing.T) {
	requireTgt(t, "the kernel's nvmet is not a process to kill and restart")
	h := newHost(t)
	h.CtrlLossTmo = killCtrlLossTmo
	sub := nqn("kill")
	spec := Spec{Port: rdmaPort(), Subsystems: []Subsystem{{NQN: sub, AllowAnyHost: true, Namespaces: []Namespace{
		fileNS(t, 1, 64*mib, 512, ""),
		localNVMeNS(t, 2),
	}}}}
	p, dir := startTgt(t, spec)
	c := h.mustConnect(t, sub, 1, 2)
	what := map[uint32]string{1: "file", 2: "block " + localNVMe}

	for i := 1; i <= killCycles; i++ {
		var jobs []crashJob
		for nsid := uint32(1); nsid <= 2; nsid++ {
			d := filepath.Join(dir, fmt.Sprintf("kill%d-nsid%d", i, nsid))
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			jobs = append(jobs, crashJob{nsid: nsid, what: what[nsid], dev: c.blockDev(t, nsid), dir: d, seed: 10*i + int(nsid)})
		}
		ok := t.Run(fmt.Sprintf("kill-%d", i), func(t *testing.T) {
			killCycle(t, p, c, h, jobs)
		})
		if !ok {
			return
		}
	}
}

func killCycle(t *testing.T, p *tgtProcess, c *controller, h host, jobs []crashJob) {
	writes := func(m map[string]float64, nsid uint32) float64 {
		v, _ := metricSum(m, "nvmeof_tgt_namespace_ops_total", `subnqn="`+c.subnqn+`"`,
			fmt.Sprintf(`nsid="%d"`, nsid), `op="write"`)
		return v
	}
	base := scrapeMetrics(t)
	type result struct {
		rep crashReport
		err error
	}
	done := make([]chan result, len(jobs))
	for k, j := range jobs {
		done[k] = make(chan result, 1)
		go func() {
			rep, err := j.write()
			done[k] <- result{rep, err}
		}()
	}
	// Whatever happens, no fio outlives the cycle.
	results := make([]*result, len(jobs))
	collect := func(k int) result {
		if results[k] == nil {
			r := <-done[k]
			results[k] = &r
		}
		return *results[k]
	}
	defer func() {
		for k := range jobs {
			collect(k)
		}
	}()

	var atKill map[string]float64
	err := waitFor(fioTimeout, func() bool {
		for k := range jobs {
			select {
			case r := <-done[k]:
				results[k] = &r
				t.Fatalf("fio on nsid %d ended before the kill (%v): the job is too short", jobs[k].nsid, r.err)
			default:
			}
		}
		atKill = scrapeMetrics(t)
		for _, j := range jobs {
			if writes(atKill, j.nsid)-writes(base, j.nsid) < killAfterWrites {
				return false
			}
		}
		return true
	})
	if err != nil {
		t.Fatalf("the target did not complete %d writes on each namespace within %v", killAfterWrites, fioTimeout)
	}

	p.Crash(t)
	killed := time.Now()
	time.Sleep(supervisorPause)
	p.RestartKeep(t)
	// The new process knows only controllers that connected to it.
	if err := waitFor(h.ctrlLossTmo(), func() bool { return p.status(t).connected(c.subnqn, h.NQN) }); err != nil {
		t.Fatalf("the host did not reconnect within its ctrl_loss_tmo (%v)", h.ctrlLossTmo())
	}
	back := time.Since(killed)
	state := filepath.Join("/sys/class/nvme", c.name, "state")
	if err := waitFor(deviceTimeout, func() bool { return readSys(state) == "live" }); err != nil {
		t.Fatalf("host controller %s is %q after the reconnect, want live", c.name, readSys(state))
	}
	t.Logf("killed with SIGKILL; restarted after %v; host controller %s live again %v after the kill",
		supervisorPause, c.name, back.Round(time.Millisecond))

	for k, j := range jobs {
		r := collect(k)
		if r.err != nil {
			t.Fatalf("nsid %d (%s): %v", j.nsid, j.what, r.err)
		}
		if r.rep.Error != 0 || r.rep.Write.TotalIOs == 0 {
			t.Fatalf("nsid %d (%s): fio write phase: error %d, %d writes", j.nsid, j.what, r.rep.Error, r.rep.Write.TotalIOs)
		}
	}
	after := scrapeMetrics(t) // the restarted process's own counters
	for k, j := range jobs {
		w := results[k].rep.Write.TotalIOs
		if writes(after, j.nsid) == 0 {
			t.Errorf("nsid %d (%s): the restarted target served no write: fio did not go on through it", j.nsid, j.what)
		}
		v, err := j.verify()
		if err != nil {
			t.Errorf("nsid %d (%s): %v", j.nsid, j.what, err)
			continue
		}
		t.Logf("nsid %d (%s): fio completed %d writes (at least %d by the killed target before the kill, %d by the restarted one); "+
			"verify-only checked %d, lost %d", j.nsid, j.what, w, int64(writes(atKill, j.nsid)-writes(base, j.nsid)),
			int64(writes(after, j.nsid)), v.Read.TotalIOs, v.TotalErr)
		if v.TotalErr != 0 || v.Error != 0 {
			t.Errorf("nsid %d (%s): %d of the %d writes fio saw completed are lost or corrupt (fio error %d); "+
				"fio's messages in %s", j.nsid, j.what, v.TotalErr, w, v.Error, filepath.Join(j.dir, "verify.stderr"))
		}
		if v.Read.TotalIOs != w {
			t.Errorf("nsid %d (%s): verify-only checked %d writes, want all %d that completed", j.nsid, j.what, v.Read.TotalIOs, w)
		}
	}
}
