//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Namespace masking and QoS, as the Linux host sees them (nvmeof-tgt only).

const maskOnly = "namespace masks and QoS are nvmeof-tgt's"

// pathNSIDs are the namespaces controller c has a disk (a path) for: its
// nvmeXcYnZ entries, or with multipath off its nvmeXnY ones.
func pathNSIDs(c *controller) []uint32 {
	var ids []uint32
	dir := filepath.Join("/sys/class/nvme", c.name)
	ents, _ := os.ReadDir(dir)
	re := regexp.MustCompile(`^nvme[0-9]+(c[0-9]+)?n[0-9]+$`)
	for _, e := range ents {
		if !re.MatchString(e.Name()) {
			continue
		}
		if n, err := readSysUint(filepath.Join(dir, e.Name(), "nsid")); err == nil {
			ids = append(ids, uint32(n))
		}
	}
	slices.Sort(ids)
	return ids
}

// identifyDescs runs Identify CNS 03h for nsid through controller c: the target's
// answer for a namespace the host may have no disk for.
func identifyDescs(t *testing.T, c *controller, nsid uint32) error {
	t.Helper()
	return run(t, cmdTimeout, "nvme", "ns-descs", c.charDev(), "--namespace-id="+strconv.Itoa(int(nsid))).err
}

// idNSZE is Identify Namespace's NSZE for nsid through controller c.
func idNSZE(t *testing.T, c *controller, nsid uint32) uint64 {
	t.Helper()
	r := run(t, cmdTimeout, "nvme", "id-ns", c.charDev(), "--namespace-id="+strconv.Itoa(int(nsid)), "-o", "json")
	var v struct {
		NSZE uint64 `json:"nsze"`
	}
	if r.err != nil || json.Unmarshal(r.stdout, &v) != nil {
		t.Fatalf("nvme id-ns %s -n %d: %v %s", c.charDev(), nsid, r.err, limit(r.stdout))
	}
	return v.NSZE
}

// TestNamespaceMasking: a namespace masked to some hosts is attached to
// their controllers only: another host's controller lists it not, reads
// zeroes for it and fails I/O to it. A mask changed live makes the host
// add or remove the disk, on the controller it had.
func TestNamespaceMasking(t *testing.T) {
	requireTgt(t, maskOnly)
	a, b := newHost(t), newHost(t)
	sub := nqn("mask")
	nobody := "nqn.2026-11.io.example:e2e-nobody"
	// Host B connects through a second port, a TCP one: nvme-cli refuses a second controller
	// of a subsystem through the same address and port, whatever the host NQN, even with
	// --duplicate-connect.
	requireNVMeTCP(t)
	p, _ := startTgt(t, Spec{Port: rdmaPort(), Subsystems: []Subsystem{{NQN: sub, AllowAnyHost: true, Namespaces: []Namespace{
		memNS(1, 8*mib, 512, ""),
		withExtra(memNS(2, 8*mib, 512, ""), fmt.Sprintf("hosts: [%q]", a.NQN)),
		withExtra(memNS(3, 8*mib, 512, ""), fmt.Sprintf("hosts: [%q]", b.NQN)),
		withExtra(memNS(4, 8*mib, 512, ""), fmt.Sprintf("hosts: [%q]", nobody)),
	}}}}, withConfigEdit(withTCPPort))
	ca := a.mustConnect(t, sub, 1, 2)
	cb, err := b.connectOver(t, "tcp", sub, portTCP)
	if err != nil {
		t.Fatalf("host B's connect: %v", err)
	}
	cb.blockDev(t, 1)
	cb.blockDev(t, 3)
	for _, tc := range []struct {
		c    *controller
		want []uint32
	}{{ca, []uint32{1, 2}}, {cb, []uint32{1, 3}}} {
		if got := listNS(t, tc.c.name, 0); !slices.Equal(got, tc.want) {
			t.Errorf("%s lists namespaces %v, want %v", tc.c.host.NQN, got, tc.want)
		}
		if got := pathNSIDs(tc.c); !slices.Equal(got, tc.want) {
			t.Errorf("%s has disks for namespaces %v, want %v", tc.c.host.NQN, got, tc.want)
		}
	}
	// The host sends no I/O to a namespace it has no disk for: the unit
	// tests (fabric TestNamespaceMask) check that I/O to it fails.
	if err := identifyDescs(t, ca, 3); err == nil {
		t.Error("host A's Identify of namespace 3's descriptors, masked to B, succeeded")
	}
	if err := identifyDescs(t, ca, 2); err != nil {
		t.Errorf("host A's Identify of its namespace 2's descriptors: %v", err)
	}
	if n := idNSZE(t, ca, 4); n != 0 {
		t.Errorf("Identify Namespace 4 through A (not attached): NSZE %d, want 0", n)
	}
	if n := idNSZE(t, ca, 2); n != 8*mib/512 {
		t.Errorf("Identify Namespace 2 through A: NSZE %d, want %d", n, 8*mib/512)
	}

	// Live: namespace 4 shown to A, then hidden again; A's controller
	// stays the one it had.
	p.ctl(t, "ns", "host", "add", sub, "4", a.NQN)
	if err := waitFor(deviceTimeout, func() bool { return slices.Contains(pathNSIDs(ca), 4) }); err != nil {
		t.Fatalf("host A has no disk for namespace 4 after it was shown to A: %v", pathNSIDs(ca))
	}
	if got := listNS(t, cb.name, 0); !slices.Equal(got, []uint32{1, 3}) {
		t.Errorf("B lists %v after a change for A, want [1 3]", got)
	}
	p.ctl(t, "ns", "host", "remove", sub, "4", a.NQN)
	if err := waitFor(deviceTimeout, func() bool { return !slices.Contains(pathNSIDs(ca), 4) }); err != nil {
		t.Fatalf("host A still has a disk for namespace 4 after it was hidden: %v", pathNSIDs(ca))
	}
	if got := controllersOf(sub, a.NQN); !slices.Equal(got, []string{ca.name}) || readSys("/sys/class/nvme/"+ca.name+"/state") != "live" {
		t.Fatalf("A's controllers %v (state %s), want %s live: the host reconnected", got, readSys("/sys/class/nvme/"+ca.name+"/state"), ca.name)
	}
	if _, err := p.ctlErr("ns", "host", "remove", sub, "4", nobody); err == nil {
		t.Fatal("the last host of a mask was removed: the namespace would be every host's")
	}
}

// withExtra is ns with more keys.
func withExtra(ns Namespace, kv ...string) Namespace {
	ns.Extra = append(ns.Extra, kv...)
	return ns
}

// fioRate runs fio on dev for d, time-based, and returns the IOPS and
// bytes per second of rw's direction.
// Any goroutine may call it.
func fioRate(dev, rw string, bs, qd int, d time.Duration, outDir string) (iops, bw float64, err error) {
	local := func(timeout time.Duration, argv ...string) cmdResult { return execCmd(timeout, argv[0], argv[1:]...) }
	return fioRateBy(local, "", dev, rw, bs, qd, d, outDir)
}

// fioRateBy is fioRate run by exec (execCmd here, or a lab guest's exec, whose outDir must be
// one that guest mounts at the same path), its report named with tag.
func fioRateBy(exec func(time.Duration, ...string) cmdResult, tag, dev, rw string, bs, qd int, d time.Duration, outDir string) (iops, bw float64, err error) {
	name := fmt.Sprintf("%s%s-%s-%d", tag, filepath.Base(dev), rw, bs)
	report := filepath.Join(outDir, "fio-"+name+".json")
	r := exec(d+fioTimeout, "fio", "--name="+name, "--filename="+dev, "--ioengine=libaio", "--direct=1",
		"--rw="+rw, "--bs="+strconv.Itoa(bs), "--iodepth="+strconv.Itoa(qd), "--time_based",
		"--runtime="+strconv.Itoa(int(d.Seconds())), "--norandommap", "--output-format=json", "--output="+report)
	raw, _ := os.ReadFile(report)
	if r.err != nil {
		return 0, 0, fmt.Errorf("fio %s: %v\n%s", name, r.err, limit(raw))
	}
	var rep fioReport
	if err := json.Unmarshal(fioJSON(raw), &rep); err != nil || len(rep.Jobs) != 1 || rep.Jobs[0].Error != 0 {
		return 0, 0, fmt.Errorf("fio %s: %v %s", name, err, limit(raw))
	}
	st := rep.Jobs[0].Read
	if strings.Contains(rw, "write") {
		st = rep.Jobs[0].Write
	}
	return st.IOPS, st.BW, nil
}

// TestQoSAccuracy: fio against namespaces limited in IOPS or bandwidth
// gets within 5 % of the limit over 30 s, for 4 KiB and 128 KiB, the four
// at once; a command over the limit waits and none fails (fio would stop).
func TestQoSAccuracy(t *testing.T) {
	requireTgt(t, maskOnly)
	h := newHost(t)
	sub := nqn("qos")
	type job struct {
		nsid   uint32
		qos    string
		rw     string
		bs     int
		iops   float64 // the limit, in IOPS or bytes/s
		bw     float64
		gotOps float64
		gotBW  float64
		err    error
	}
	jobs := []*job{
		// Far below what the emulated guest moves (about 1500 IOPS and 17 MiB/s
		// in all): the limit, not the guest, must set the rate.
		{nsid: 1, qos: "qos: {iops: 100}", rw: "randread", bs: 4096, iops: 100},
		{nsid: 2, qos: "qos: {write_iops: 10}", rw: "randwrite", bs: 128 << 10, iops: 10},
		{nsid: 3, qos: "qos: {bw: 512KiB}", rw: "randwrite", bs: 4096, bw: 512 << 10},
		{nsid: 4, qos: "qos: {read_bw: 1MiB}", rw: "randread", bs: 128 << 10, bw: 1 << 20},
	}
	var nss []Namespace
	for _, j := range jobs {
		nss = append(nss, withExtra(memNS(j.nsid, 64*mib, 512, ""), j.qos))
	}
	p, dir := startTgt(t, Spec{Port: rdmaPort(), Subsystems: []Subsystem{{NQN: sub, AllowAnyHost: true, Namespaces: nss}}})
	c := h.mustConnect(t, sub, 1, 2, 3, 4)
	done := make(chan *job, len(jobs))
	for _, j := range jobs {
		dev := c.blockDev(t, j.nsid)
		go func() {
			j.gotOps, j.gotBW, j.err = fioRate(dev, j.rw, j.bs, 8, 30*time.Second, dir)
			done <- j
		}()
	}
	for range jobs {
		if j := <-done; j.err != nil {
			t.Fatal(j.err)
		}
	}
	for _, j := range jobs {
		got, want, unit := j.gotOps, j.iops, "IOPS"
		if j.bw > 0 {
			got, want, unit = j.gotBW, j.bw, "B/s"
		}
		t.Logf("namespace %d %s %d B: %.1f %s, limit %.0f (%+.2f %%)", j.nsid, j.rw, j.bs, got, unit, want, 100*(got-want)/want)
		if got < want*0.95 || got > want*1.05 {
			t.Errorf("namespace %d (%s, %d B): %.1f %s, want %.0f ± 5 %%", j.nsid, j.rw, j.bs, got, unit, want)
		}
	}
	m := scrapeMetrics(t)
	if v, ok := metricSum(m, "nvmeof_tgt_namespace_qos_wait_seconds_total", `nsid="1"`); !ok || v <= 0 {
		t.Errorf("metrics show %v s waited on namespace 1 (found %v)", v, ok)
	}
	if v, ok := metricSum(m, "nvmeof_tgt_namespace_qos_limit", `nsid="3"`, `limit="bw"`); !ok || v != 512<<10 {
		t.Errorf("metrics show namespace 3's bw limit as %v (found %v)", v, ok)
	}
	_ = p
}

// TestQoSLiveAndPerHost: a limit changed while fio runs applies at once;
// a per-host limit holds one host to its share of a namespace whose own
// limit is higher; removing the limits lets I/O go unheld; status shows the
// limits and the time waited.
func TestQoSLiveAndPerHost(t *testing.T) {
	requireTgt(t, maskOnly)
	h := newHost(t)
	sub := nqn("qos-live")
	p, dir := startTgt(t, Spec{Port: rdmaPort(), Subsystems: []Subsystem{{NQN: sub, AllowAnyHost: true, Namespaces: []Namespace{
		withExtra(memNS(1, 64*mib, 512, ""), "qos: {iops: 50}"),
	}}}})
	c := h.mustConnect(t, sub, 1)
	dev := c.blockDev(t, 1)
	check := func(what string, want float64, tol float64) {
		t.Helper()
		got, _, err := fioRate(dev, "randread", 4096, 8, 8*time.Second, dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %.1f IOPS, want %.0f (%+.2f %%)", what, got, want, 100*(got-want)/want)
		if got < want*(1-tol) || got > want*(1+tol) {
			t.Errorf("%s: %.1f IOPS, want %.0f ± %.0f %%", what, got, want, 100*tol)
		}
	}
	check("namespace limit 50", 50, 0.05)
	p.ctl(t, "ns", "qos", sub, "1", "--iops", "200")
	p.ctl(t, "ns", "qos", sub, "1", "--host", "default", "--iops", "80")
	check("per-host limit 80 under a namespace limit 200", 80, 0.05)
	p.ctl(t, "ns", "qos", sub, "1", "--host", h.NQN, "--iops", "140")
	check("the host's own limit 140", 140, 0.05)

	var st struct {
		Subsystems []struct {
			NQN        string `json:"nqn"`
			Namespaces []struct {
				QoS *struct {
					Limits struct {
						IOPS uint64 `json:"iops"`
					} `json:"limits"`
					PerHost struct {
						IOPS uint64 `json:"iops"`
					} `json:"per_host"`
					HeldTotal     uint64  `json:"held_total"`
					WaitedSeconds float64 `json:"waited_seconds"`
				} `json:"qos"`
			} `json:"namespaces"`
		} `json:"subsystems"`
	}
	if err := json.Unmarshal(p.ctl(t, "status", "--json"), &st); err != nil {
		t.Fatal(err)
	}
	q := st.Subsystems[0].Namespaces[0].QoS
	if q == nil || q.Limits.IOPS != 200 || q.PerHost.IOPS != 80 || q.HeldTotal == 0 || q.WaitedSeconds <= 0 {
		t.Fatalf("status shows QoS %+v", q)
	}
	p.ctl(t, "ns", "qos", sub, "1")
	p.ctl(t, "ns", "qos", sub, "1", "--host", "default")
	p.ctl(t, "ns", "qos", sub, "1", "--host", h.NQN, "--remove")
	got, _, err := fioRate(dev, "randread", 4096, 8, 5*time.Second, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("no limit: %.1f IOPS", got)
	if got < 1.5*140 {
		t.Errorf("%.1f IOPS with the limits removed: still held", got)
	}
}
