//go:build e2e && netlab

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

	"github.com/nvmeof-tgt/nvmeof-tgt/tests/netlab"
)

// Power loss: of the target's machine (TestNetTargetPowerLoss), and of a host's
// (TestNetHostVanishes).

// powerRun is one power cut of the target guest under fio.
type powerRun struct {
	name string
	// cacheOn is the volatile write cache as the host leaves it for the writes (Set Features
	// 06h; a new controller starts with it on).
	cacheOn bool
	// fdatasync is fio's fdatasync=N: the workload's own flushes, one every N writes (0: none).
	fdatasync int
	// fua makes the writes O_SYNC, which the kernel sends as NVMe writes with FUA.
	fua bool
	// flushAtCut: fio's trigger sends an NVMe Flush to each namespace once the writes have
	// drained, before it cuts the power.
	flushAtCut bool
}

const (
	powerIODepth = 16
	powerNSSize  = 256 * mib
	// powerMinWrites is how many writes each namespace takes before the cut: 1 MiB, seconds
	// here, most of it in ext4's last commit interval (5 s) or the target guest's page cache,
	// where a write the target did not make durable is lost with the power. (A buffered
	// namespace takes durable writes one at a time, each an ext4 journal commit: some 25 a
	// second here.)
	powerMinWrites = 256
	// powerWriteBound bounds the wait for those writes: minutes of emulation on a loaded machine.
	powerWriteBound = 2 * time.Minute
)

// powerJobs are fio's jobs, one per namespace: NSID 1 on O_DIRECT (the default), NSID 2
// buffered (the target guest's page cache, which the power cut empties).
var powerJobs = [2]string{"direct", "buffered"}

// TestNetTargetPowerLoss: nvmeof-tgt in the target guest serves two file namespaces on that
// guest's own disk (an image with cache=writeback on the machine, which honours flushes), one
// on O_DIRECT and one buffered, over link A to the kernel host here. fio writes to both with
// verify data and saves its verify state at its trigger; the trigger waits for the writes in
// flight to complete and cuts the target guest's power (SIGKILL of its QEMU): its page cache and
// ext4's uncommitted journal go. The guest boots again on the same disk, nvmeof-tgt serves the
// same images, and fio verifies every write its state says completed. Each run is one cut:
//
//   - cache-on-flush: the volatile write cache on, fio flushing every 64 writes, and the trigger
//     sending an NVMe Flush to each namespace after the writes drain: every write fio verifies
//     was acknowledged before that last completed flush.
//   - cache-off: the host turns the volatile write cache off (Set Features 06h); no flush, no
//     FUA: each write must be durable at its completion.
//   - fua: the cache on, every write with FUA (O_SYNC), no flush: FUA alone makes each durable.
//
// The host's own flush count on each path says which runs sent flushes (only the first).
func TestNetTargetPowerLoss(t *testing.T) {
	lab := needNetLab(t)
	tg := lab.guest(t, "target")
	addr := lab.link(t, "a").addr(t, tg)
	labnet := labnetBin(t)
	h := newHost(t)
	runs := []powerRun{
		{name: "cache-on-flush", cacheOn: true, fdatasync: 64, flushAtCut: true},
		{name: "cache-off"},
		{name: "fua", cacheOn: true, fua: true},
	}
	for _, run := range runs {
		t.Run(run.name, func(t *testing.T) { powerLossRun(t, tg, addr, h, run, labnet) })
	}
}

func powerLossRun(t *testing.T, tg *labGuest, addr string, h host, run powerRun, labnet string) {
	start := time.Now()
	dir := testDir(t)
	dumpDmesgOnFailure(t, dir)
	sub := nqn("net-power-" + run.name)

	// Fresh sparse images, so that every write allocates (ext4's extent changes sit in its
	// journal until a commit). Synced before nvmeof-tgt opens them: that they exist after the
	// cut is the filesystem's doing, not the target's.
	var ns []Namespace
	var paths []string
	for i, job := range powerJobs {
		p := fmt.Sprintf("/scratch/net-power-%s-%s.img", run.name, job)
		ns = append(ns, Namespace{NSID: uint32(i + 1), Backend: BackendFile, Path: p, Size: powerNSSize, BufferedIO: job == "buffered"})
		paths = append(paths, p)
	}
	tg.sh(t, `rm -f "$2" "$3" && truncate -s "$1" "$2" "$3" && sync -f "$2"`, strconv.Itoa(powerNSSize), paths[0], paths[1])
	t.Cleanup(func() {
		if !tg.isOff() {
			_ = tg.exec(cmdTimeout, "rm", "-f", paths[0], paths[1])
		}
	})
	spec := Spec{Port: Port{Transport: "rdma", Address: addr, Service: portRDMA},
		Subsystems: []Subsystem{{NQN: sub, AllowAnyHost: true, Namespaces: ns}}}
	p := startRemoteTgt(t, tg, spec)

	c, err := h.connectAddr(t, addr, sub, portRDMA)
	if err != nil {
		t.Fatalf("connect to %s at %s: %v", sub, addr, err)
	}
	var devs, stats [2]string
	for i := range powerJobs {
		devs[i] = c.blockDev(t, uint32(i+1))
		stats[i] = pathDir(t, c.name, uint32(i+1))
	}

	// The volatile write cache: advertised (Identify Controller VWC bit 0), changeable through
	// Set Features 06h, on by default, and as the run wants it.
	var idc struct {
		VWC int `json:"vwc"`
	}
	nvmeJSON(t, &idc, "id-ctrl", c.charDev(), "-o", "json")
	if idc.VWC&1 == 0 {
		t.Fatalf("Identify Controller VWC %#x: no volatile write cache", idc.VWC)
	}
	if caps := getFeature(t, c.charDev(), 6, 3); caps&(1<<2) == 0 {
		t.Errorf("Get Features 06h capabilities %#x: not changeable", caps)
	}
	if v := getFeature(t, c.charDev(), 6, 0); v != 1 {
		t.Fatalf("volatile write cache of a new controller: %d, want 1 (on)", v)
	}
	if !run.cacheOn {
		mustRun(t, cmdTimeout, "nvme", "set-feature", c.charDev(), "-f", "6", "-v", "0")
		if v := getFeature(t, c.charDev(), 6, 0); v != 0 {
			t.Fatalf("volatile write cache after Set Features 06h to 0: %d", v)
		}
	}
	if run.fua {
		// The kernel sends O_SYNC direct writes as writes with FUA when the queue supports it
		// (VWC present); otherwise it would add a flush after each, which this run must not see.
		for i := range devs {
			q := filepath.Join("/sys/block", filepath.Base(devs[i]), "queue", "fua")
			if v := readSys(q); v != "1" {
				t.Fatalf("%s: %q, want 1: the host would not send FUA", q, v)
			}
		}
	}

	// fio: the write job with its verify state saved at the trigger, and the verify job.
	stateDir := filepath.Join(dir, "fio-state")
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeJob, verifyJob := filepath.Join(dir, "write.fio"), filepath.Join(dir, "verify.fio")
	cutLog, cut, trigger := filepath.Join(dir, "cut.log"), filepath.Join(dir, "cut.sh"), filepath.Join(dir, "trigger")
	for path, text := range map[string]string{
		writeJob:  powerJob(run, devs, false),
		verifyJob: powerJob(run, devs, true),
		cut:       cutScript(run, cutLog, devs, stats, labnet, tg.lab.power, tg.name),
	} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var before [2]diskStat
	for i := range stats {
		before[i] = readDiskStat(t, stats[i])
	}
	writeReport := filepath.Join(dir, "write.json")
	done := make(chan cmdResult, 1)
	go func() {
		done <- execCmd(fioTimeout, "fio", "--output-format=json", "--output="+writeReport, "--aux-path="+stateDir,
			"--trigger-file="+trigger, "--trigger=sh "+cut, writeJob)
	}()
	writing := time.Now()
	var fioRun cmdResult
	fioDone := false
	took, ok := waitHolds(powerWriteBound, func() bool {
		select {
		case fioRun = <-done:
			fioDone = true
			return true
		default:
		}
		for i := range stats {
			if readDiskStat(t, stats[i]).writes-before[i].writes < powerMinWrites {
				return false
			}
		}
		return true
	})
	switch {
	case fioDone:
		t.Fatalf("fio ended before the trigger: %v", fioRun)
	case !ok:
		t.Fatalf("fewer than %d writes to each namespace within %v", powerMinWrites, powerWriteBound)
	}
	t.Logf("%d writes to each namespace after %v", powerMinWrites, took.Round(100*time.Millisecond))
	if err := os.WriteFile(trigger, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	triggered := time.Now()
	select {
	case fioRun = <-done:
	case <-time.After(fioTimeout + time.Minute):
		t.Fatal("fio did not end after its trigger")
	}
	logText, _ := os.ReadFile(cutLog)
	if !strings.Contains(string(logText), "\ncut ") {
		t.Fatalf("fio's trigger did not cut the power (%s):\n%s\nfio: %v", cutLog, logText, fioRun)
	}
	tg.lostPower(t)
	t.Logf("fio's trigger (%v after the writes began; fio ended %v after it):\n%s", triggered.Sub(writing).Round(100*time.Millisecond),
		time.Since(triggered).Round(100*time.Millisecond), strings.TrimSpace(string(logText)))
	if fioRun.err != nil {
		t.Fatalf("fio's write phase: %v", fioRun)
	}
	written := readFioReport(t, writeReport)
	for i, job := range powerJobs {
		after := readDiskStat(t, stats[i])
		flushes := after.flushes - before[i].flushes
		j, ok := written[job]
		switch {
		case !ok:
			t.Fatalf("no job %s in %s", job, writeReport)
		case j.Error != 0:
			t.Errorf("job %s: error %d in the write phase", job, j.Error)
		case j.Write.TotalIOs < powerMinWrites:
			t.Errorf("job %s: %d writes, want at least %d", job, j.Write.TotalIOs, powerMinWrites)
		case run.fdatasync > 0 && flushes == 0:
			t.Errorf("%s: no flush reached nsid %d under fdatasync=%d", stats[i], i+1, run.fdatasync)
		case run.fdatasync == 0 && flushes != 0:
			// Passthrough commands (the trigger's nvme flush) are not counted here.
			t.Errorf("%s: %d flushes reached nsid %d: this run must need none", stats[i], flushes, i+1)
		}
		t.Logf("job %s: %d writes, %d flushes from the host", job, j.Write.TotalIOs, flushes)
	}
	if t.Failed() {
		return
	}

	// The target guest boots again on the same disk; nvmeof-tgt serves the same images.
	c.disconnect(t) // reconnecting to the dead target until now
	bootStart := time.Now()
	tg.boot(t)
	tg.waitUp(t)
	booted := time.Since(bootStart)
	p.Stop(t) // gone with the power
	p.Start(t, spec)
	c2, err := h.connectAddr(t, addr, sub, portRDMA)
	if err != nil {
		t.Fatalf("connect to %s at %s after the power cut: %v", sub, addr, err)
	}
	for i := range powerJobs {
		devs[i] = c2.blockDev(t, uint32(i+1))
	}
	// Not saveable (Get Features 06h capabilities): a new controller has the cache on again.
	if v := getFeature(t, c2.charDev(), 6, 0); v != 1 {
		t.Errorf("volatile write cache of the controller after the power cut: %d, want 1 (on)", v)
	}
	if err := os.WriteFile(verifyJob, []byte(powerJob(run, devs, true)), 0o644); err != nil {
		t.Fatal(err)
	}
	verifyReport := filepath.Join(dir, "verify.json")
	verifying := time.Now()
	r := execCmd(fioTimeout, "fio", "--output-format=json", "--output="+verifyReport, "--aux-path="+stateDir, verifyJob)
	if r.err != nil {
		raw, _ := os.ReadFile(verifyReport)
		t.Fatalf("fio's verify after the power cut: %v\n%s", r, limit(raw))
	}
	verified := readFioReport(t, verifyReport)
	for _, job := range powerJobs {
		w, v := written[job], verified[job]
		// fio verifies every write its state says completed: all it issued up to iodepth before
		// the state was saved, then, of the last iodepth, those the state saw complete, stopping
		// at the first it did not (verify_state_should_stop). So all but at most 2*iodepth of
		// the writes it counted, which include those that completed after the save.
		switch {
		case v.Error != 0:
			t.Errorf("job %s: verify error %d", job, v.Error)
		case v.Read.TotalIOs+2*powerIODepth < w.Write.TotalIOs || v.Read.TotalIOs == 0:
			t.Errorf("job %s: %d blocks verified of %d written, want all but at most %d", job, v.Read.TotalIOs, w.Write.TotalIOs, 2*powerIODepth)
		}
		t.Logf("job %s: %d of %d writes verified after the power cut", job, v.Read.TotalIOs, w.Write.TotalIOs)
	}
	c2.disconnect(t)
	t.Logf("run %s: %v in all (boot %v, verify %v)", run.name, time.Since(start).Round(time.Second),
		booted.Round(100*time.Millisecond), time.Since(verifying).Round(100*time.Millisecond))
}

// powerJob is the fio job file of a run: its write phase (the trigger saves fio's verify state)
// or the verify after the cut (that state loaded). The verify job leaves out the write phase's
// flushes: fio 3.33's verify_only replay of a job with fdatasync=N went past the writes the state
// held (seen here: it read blocks never written).
func powerJob(run powerRun, devs [2]string, verify bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[global]\nioengine=libaio\ndirect=1\nrw=randwrite\nbs=4k\niodepth=%d\nsize=%d\nverify=crc32c\n",
		powerIODepth, powerNSSize)
	if verify {
		b.WriteString("do_verify=1\nverify_only=1\nverify_state_load=1\nverify_fatal=1\n")
	} else {
		b.WriteString("do_verify=0\nverify_state_save=1\n")
		if run.fdatasync > 0 {
			fmt.Fprintf(&b, "fdatasync=%d\n", run.fdatasync)
		}
		if run.fua {
			b.WriteString("sync=1\n")
		}
	}
	for i, job := range powerJobs {
		fmt.Fprintf(&b, "[%s]\nfilename=%s\n", job, devs[i])
	}
	return b.String()
}

// cutScript is fio's trigger command: fio has saved its verify state and stopped issuing I/O.
// It waits for the writes in flight to complete (the host's in-flight count on each path: none
// left, so every write fio counted as issued was acknowledged before the cut), flushes each
// namespace if the run says so, and cuts the target guest's power. The drain is bounded at 30 s,
// room for an emulator's stall; a write still in flight then fails the run rather than being cut
// unacknowledged.
func cutScript(run powerRun, log string, devs, stats [2]string, labnet, orderDir, guest string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "exec >>%q 2>&1\necho \"trigger $(date +%%s.%%N)\"\n", log)
	fmt.Fprintf(&b, `for d in %q %q; do
  i=0
  while :; do
    set -- $(cat "$d/inflight")
    [ "$1" = 0 ] && [ "$2" = 0 ] && break
    i=$((i+1))
    [ $i -gt 600 ] && { echo "still in flight on $d after 30 s: $*"; exit 1; }
    sleep 0.05
  done
done
echo "drained $(date +%%s.%%N)"
`, stats[0], stats[1])
	if run.flushAtCut {
		// Through each namespace's disk: the kernel takes I/O commands on the controller's
		// device only while it has a single namespace.
		for i := range powerJobs {
			fmt.Fprintf(&b, "nvme flush %q -n %d || { echo \"flush of nsid %d failed\"; exit 1; }\n", devs[i], i+1, i+1)
		}
		b.WriteString("echo \"flushed $(date +%s.%N)\"\n")
	}
	fmt.Fprintf(&b, "LAB_ORDER_DIR=%q %q order %q %s || { echo \"power cut failed\"; exit 1; }\n", orderDir, labnet, guest, netlab.PowerKill)
	b.WriteString("echo \"cut $(date +%s.%N)\"\n")
	return b.String()
}

// featureValue is the value nvme-cli 2.3 prints in hex, with 0x unless it is 0 (printf's %#x).
var featureValue = regexp.MustCompile(`value:\s*(?:0x)?([0-9a-fA-F]+)\b`)

// getFeature is Get Features fid with select sel (0 current, 3 supported capabilities) on
// the controller dev.
func getFeature(t *testing.T, dev string, fid, sel int) uint32 {
	t.Helper()
	out := mustRun(t, cmdTimeout, "nvme", "get-feature", dev, "-f", strconv.Itoa(fid), "-s", strconv.Itoa(sel))
	m := featureValue.FindSubmatch(out)
	if m == nil {
		t.Fatalf("get-feature %d (select %d) on %s printed %q", fid, sel, dev, out)
	}
	v, err := strconv.ParseUint(string(m[1]), 16, 32)
	if err != nil {
		t.Fatalf("get-feature %d on %s: value %q", fid, dev, m[1])
	}
	return uint32(v)
}

// TestNetHostVanishes: host A, the kernel initiator of guest target2, connects to nvmeof-tgt in
// the target guest over link D (keep-alive timeout 5 s). First the two hosts share a namespace
// under per-host QoS limits, each getting its own (qosShare). Then A registers with PTPL on and holds a
// Write Exclusive reservation; host B, this guest, is registered over link A. A writes with fio,
// and its guest's power is cut under it: no disconnect, its queues' peer just goes silent. The
// target deletes A's controller by keep-alive expiry and tears down its queues (its metrics: B's
// controller and queues alone are left). A's registration and reservation stay, as the
// reservation belongs to the host, not its controller: B's report lists them, and B's writes
// still conflict. B preempts A and writes. When B leaves, the target holds no queue, no queue
// pair and no buffer.
func TestNetHostVanishes(t *testing.T) {
	lab := needNetLab(t)
	tg, ga := lab.guest(t, "target"), lab.guest(t, "target2")
	linkA, linkD := lab.link(t, "a"), lab.link(t, "d")
	dir := testDir(t)
	dumpDmesgOnFailure(t, dir)
	// target2 is off until a test boots it; this test leaves it off again (its power cut), and
	// on if it found it on.
	if ga.isOff() {
		ga.boot(t)
		t.Cleanup(func() {
			if !ga.isOff() {
				ga.powerOff(t)
			}
		})
	} else {
		t.Cleanup(func() {
			if ga.isOff() {
				ga.boot(t)
				ga.waitUp(t)
			}
		})
	}
	ga.waitUp(t)

	sub, qosSub := nqn("net-host-vanish"), nqn("net-qos-share")
	ha, hb := newHost(t), newHost(t)
	// Every address: B comes over link A, A over link D. qosSub's namespace is the two hosts'
	// shared namespace under per-host QoS limits (qosShare); a subsystem of its own, as the
	// kernel sends no reservation command to a controller with more than one namespace.
	spec := Spec{Port: Port{Transport: "rdma", Address: "0.0.0.0", Service: portRDMA},
		Subsystems: []Subsystem{{NQN: sub, AllowAnyHost: true, Namespaces: []Namespace{memNS(1, 64*mib, 0, "")}},
			{NQN: qosSub, AllowAnyHost: true, Namespaces: []Namespace{withExtra(memNS(1, 64*mib, 512, ""),
				fmt.Sprintf("qos_per_host: {default: {iops: %d}, hosts: [{nqn: %q, iops: %d}]}", qosShareB, ha.NQN, qosShareA))}}}}
	tgt := startRemoteTgt(t, tg, spec)
	qa := connectFrom(t, ga, ha, linkD.addr(t, tg), qosSub, portRDMA)
	qb, err := hb.connectAddr(t, linkA.addr(t, tg), qosSub, portRDMA)
	if err != nil {
		t.Fatalf("host B: connect to %s: %v", qosSub, err)
	}
	qosShare(t, ga, qa.blockDev(t, 1), qb.blockDev(t, 1), dir)
	qa.disconnect(t)
	qb.disconnect(t)
	// Everything of theirs gone, queue pairs too (a QP goes up to 5 s after its queue), before
	// the baselines below.
	if err := waitFor(30*time.Second, func() bool {
		m := tgt.metrics(t)
		for _, n := range []string{"nvmeof_tgt_controllers", "nvmeof_tgt_queues", "nvmeof_tgt_rdma_queues_live", "nvmeof_tgt_rdma_buffers_in_use", "nvmeof_tgt_rdma_srq_held"} {
			if v, ok := metricSum(m, n); ok && v != 0 {
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatalf("the shared namespace's hosts disconnected, and the target still holds their controllers, queues or queue pairs after 30 s")
	}
	metric := func(m map[string]float64, name string, labels ...string) float64 {
		v, ok := metricSum(m, name, labels...)
		if !ok {
			t.Fatalf("no %s in the target's metrics", name)
		}
		return v
	}

	cb, err := hb.connectAddr(t, linkA.addr(t, tg), sub, portRDMA)
	if err != nil {
		t.Fatalf("host B: connect: %v", err)
	}
	devB := cb.blockDev(t, 1)
	b := resvHost{host: hb, ctrl: cb.charDev(), id: hb.ID}
	m0 := tgt.metrics(t)
	bQueues, bQPs := metric(m0, "nvmeof_tgt_queues"), metric(m0, "nvmeof_tgt_rdma_queues_live")
	kaExpired := metric(m0, "nvmeof_tgt_keepalive_expired_total")

	const kato = 5 * time.Second
	ca := connectFrom(t, ga, ha, linkD.addr(t, tg), sub, portRDMA, fmt.Sprintf("--keep-alive-tmo=%d", int(kato.Seconds())))
	devA := ca.blockDev(t, 1)
	const keyA, keyB = "161", "178"
	ca.ok(t, "resv-register", "--nrkey="+keyA, "--rrega=0", "--cptpl=3") // PTPL on
	b.ok(t, "resv-register", "--nrkey="+keyB, "--rrega=0")
	ca.ok(t, "resv-acquire", "--crkey="+keyA, "--rtype=1", "--racqa=0") // Write Exclusive
	checkHolder := func(when string, regs int, holder host, key string) {
		t.Helper()
		rep := b.report(t)
		if rep.RType != 1 || rep.RegCtl != regs || rep.PTPLS != 1 || len(rep.RegCtlExt) != regs {
			t.Fatalf("%s: reservation report %+v: want Write Exclusive (1), %d registrants, PTPL on", when, rep, regs)
		}
		for _, r := range rep.RegCtlExt {
			if strings.EqualFold(r.HostID, hostIDHex(holder.ID)) {
				if strconv.FormatUint(r.RKey, 10) != key || r.RCSTS&1 == 0 {
					t.Fatalf("%s: the holder %s: key %d, status %#x; want key %s holding", when, holder.NQN, r.RKey, r.RCSTS, key)
				}
				return
			}
		}
		t.Fatalf("%s: reservation report %+v: no registrant with host ID %s", when, rep, holder.ID)
	}
	checkHolder("A holds", 2, ha, keyA)
	b.conflicts(t, "B's write under A's Write Exclusive", "write", "-s", "0", "-c", "0", "-z", "512", "-d", "/dev/zero")

	// A writes; its power is cut once its writes reach the target.
	writes := func() float64 {
		return metric(tgt.metrics(t), "nvmeof_tgt_namespace_ops_total", `subnqn="`+sub+`"`, `op="write"`)
	}
	w0 := writes()
	fioLog := filepath.Join(dir, "fio-host-a.log")
	if _, err := ga.agent.Do(t.Context(), netlab.Request{Op: netlab.OpStart, Log: fioLog, Argv: []string{"fio",
		"--name=a", "--filename=" + devA, "--ioengine=libaio", "--direct=1", "--rw=randwrite", "--bs=4k",
		"--iodepth=16", "--time_based", "--runtime=600"}}); err != nil {
		t.Fatalf("fio in %s: %v", ga, err)
	}
	// 256 writes: A is well into its run, its queue full (iodepth 16) when the power goes.
	if err := waitFor(time.Minute, func() bool { return writes()-w0 >= 256 }); err != nil {
		out, _ := os.ReadFile(fioLog)
		t.Fatalf("A's writes did not reach the target within a minute; fio:\n%s", out)
	}
	m1 := tgt.metrics(t)
	if n := metric(m1, "nvmeof_tgt_controllers"); n != 2 {
		t.Fatalf("%v controllers with A writing, want 2", n)
	}
	aQueues := metric(m1, "nvmeof_tgt_queues") - bQueues
	ga.powerOff(t)
	cut := time.Now()

	// The target frees A's controller when its keep-alive timeout expires (KATO after the
	// last command A sent), and its queues with it. Bound: KATO, plus the teardown of queue
	// pairs whose peer is gone (the target waits up to 5 s for a queue pair's last WQE on a
	// shared receive queue), plus a minute for an emulator on a loaded machine.
	bound := kato + 5*time.Second + time.Minute
	var last map[string]float64
	took, freed := waitHolds(bound, func() bool {
		last = tgt.metrics(t)
		return metric(last, "nvmeof_tgt_controllers") == 1 && metric(last, "nvmeof_tgt_queues") == bQueues &&
			metric(last, "nvmeof_tgt_rdma_queues_live") == bQPs
	})
	if !freed {
		t.Fatalf("%v after A's power cut the target still has %v controllers, %v queues, %v queue pairs; want B's alone: 1, %v, %v",
			bound, metric(last, "nvmeof_tgt_controllers"), metric(last, "nvmeof_tgt_queues"),
			metric(last, "nvmeof_tgt_rdma_queues_live"), bQueues, bQPs)
	}
	t.Logf("A's controller and its %v queues freed %v after its power cut (KATO %v)", aQueues, took.Round(100*time.Millisecond), kato)
	if n := metric(last, "nvmeof_tgt_keepalive_expired_total") - kaExpired; n != 1 {
		t.Errorf("keep-alive expiries: %v, want 1 (A's controller); target log on A:\n%s", n, tail(tgtLogLines(t, tgt, ha.NQN), 10))
	}
	var st ctlStatus
	if err := json.Unmarshal(tgt.ctl(t, "status", "--json"), &st); err != nil {
		t.Fatalf("status --json: %v", err)
	}
	if len(st.Controllers) != 1 || st.Controllers[0].HostNQN != hb.NQN {
		t.Errorf("controllers after A's power cut: %+v, want B's alone", st.Controllers)
	}
	t.Logf("%v after the cut", time.Since(cut).Round(100*time.Millisecond))

	// A's registration and reservation outlive its controller.
	checkHolder("after A's power cut", 2, ha, keyA)
	b.conflicts(t, "B's write after A's power cut", "write", "-s", "0", "-c", "0", "-z", "512", "-d", "/dev/zero")

	// B preempts A (Preempt, Write Exclusive): A's registration goes, B holds.
	b.ok(t, "resv-acquire", "--crkey="+keyB, "--prkey="+keyA, "--rtype=1", "--racqa=1")
	checkHolder("after B preempted A", 1, hb, keyB)
	data := pattern(64*kib, 42)
	ddWrite(t, devB, 0, data)
	checkSame(t, "B's write after the preempt", 0, ddRead(t, devB, 0, len(data)), data)

	// B leaves: nothing of A's or B's is held.
	cb.disconnect(t)
	var held []string
	if err := waitFor(30*time.Second, func() bool {
		m := tgt.metrics(t)
		held = nil
		for _, n := range []string{"nvmeof_tgt_controllers", "nvmeof_tgt_queues", "nvmeof_tgt_rdma_queues_live", "nvmeof_tgt_rdma_buffers_in_use", "nvmeof_tgt_rdma_srq_held"} {
			if v, ok := metricSum(m, n); ok && v != 0 {
				held = append(held, fmt.Sprintf("%s %v", n, v))
			}
		}
		return len(held) == 0
	}); err != nil {
		t.Errorf("30 s after every host left, the target holds %s", strings.Join(held, ", "))
	}
}

// The per-host QoS limits of TestNetHostVanishes's shared namespace, in 4 KiB IOPS: host B has the
// default, host A its own.
const qosShareA, qosShareB = 120, 60

// qosShare: two hosts on two machines, A (guest g, disk devA) and B (here, devB), read the
// namespace they share at once, each with more queue depth than its limit needs; each gets its
// own per-host limit within 5 % over 20 s, neither starved by the other nor held to the other's.
func qosShare(t *testing.T, g *labGuest, devA, devB, dir string) {
	t.Helper()
	const d = 20 * time.Second
	type res struct {
		iops float64
		err  error
	}
	ra, rb := make(chan res, 1), make(chan res, 1)
	go func() {
		iops, _, err := fioRateBy(g.exec, "A-", devA, "randread", 4096, 8, d, dir)
		ra <- res{iops, err}
	}()
	go func() {
		iops, _, err := fioRate(devB, "randread", 4096, 8, d, dir)
		rb <- res{iops, err}
	}()
	a, b := <-ra, <-rb
	for _, r := range []struct {
		who  string
		got  res
		want float64
	}{{"host A (its own limit)", a, qosShareA}, {"host B (the default)", b, qosShareB}} {
		if r.got.err != nil {
			t.Fatalf("%s: %v", r.who, r.got.err)
		}
		t.Logf("shared namespace, both hosts at once: %s %.1f IOPS, limit %.0f (%+.2f %%)", r.who, r.got.iops, r.want, 100*(r.got.iops-r.want)/r.want)
		if r.got.iops < r.want*0.95 || r.got.iops > r.want*1.05 {
			t.Errorf("shared namespace, both hosts at once: %s %.1f IOPS, want %.0f ± 5 %%", r.who, r.got.iops, r.want)
		}
	}
}

// tgtLogLines are the lines of the remote target's log that mention s.
func tgtLogLines(t *testing.T, p *remoteTgt, s string) []byte {
	t.Helper()
	raw, err := os.ReadFile(p.logPath)
	if err != nil {
		return []byte(err.Error())
	}
	var out []byte
	for _, line := range strings.SplitAfter(string(raw), "\n") {
		if strings.Contains(line, s) {
			out = append(out, line...)
		}
	}
	return out
}
