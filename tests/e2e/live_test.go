//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Changes made to a running nvmeof-tgt, as the Linux host sees them: the
// management CLI (and its API), SIGHUP reload, and persistence across a
// restart. The kernel target has no such API: these run on nvmeof-tgt only.

// liveOnly is why these tests need nvmeof-tgt.
const liveOnly = "the kernel target is changed through configfs, not nvmeof-tgt's API"

// TestLiveNamespaces: while fio verifies on namespace 1, namespace 2 is
// added, grown and removed through the CLI; the host follows each change
// without reconnecting, and fio never sees an error.
func TestLiveNamespaces(t *testing.T) {
	requireTgt(t, liveOnly)
	h := newHost(t)
	sub := nqn("live-ns")
	ns1 := fileNS(t, 1, 64*mib, 512, "")
	p, dir := startTgt(t, Spec{Port: rdmaPort(), Subsystems: []Subsystem{{NQN: sub, AllowAnyHost: true, Namespaces: []Namespace{ns1}}}})
	c := h.mustConnect(t, sub, 1)
	fio := backgroundFio(t, c.blockDev(t, 1), dir, 40*time.Second)

	img2 := filepath.Join(scratchDir, filepath.Base(dir)+"-ns2.img")
	t.Cleanup(func() { os.Remove(img2) })
	p.ctl(t, "ns", "add", sub, "--nsid", "2", "--backend", "file", "--path", img2, "--size", "32MiB")
	start := time.Now()
	dev2 := c.blockDev(t, 2) // waits for the host to show it
	t.Logf("host lists namespace 2 as %s after %v", dev2, time.Since(start).Round(time.Millisecond))
	sizeOf := func() uint64 {
		n, _ := readSysUint(filepath.Join("/sys/block", filepath.Base(dev2), "size"))
		return n
	}
	if got := sizeOf(); got != 32*mib/512 {
		t.Fatalf("namespace 2 is %d sectors, want %d", got, 32*mib/512)
	}
	ddWrite(t, dev2, 0, pattern(mib, 21))

	p.ctl(t, "ns", "resize", sub, "2", "64MiB")
	if err := waitFor(deviceTimeout, func() bool { return sizeOf() == 64*mib/512 }); err != nil {
		t.Fatalf("host's size of namespace 2 is %d sectors after the resize, want %d", sizeOf(), 64*mib/512)
	}
	ddWrite(t, dev2, 63*mib, pattern(mib, 22)) // the new end is usable
	checkSame(t, "namespace 2 start after resize", 0, ddRead(t, dev2, 0, mib), pattern(mib, 21))
	if _, err := p.ctlErr("ns", "resize", sub, "2", "16MiB"); err == nil {
		t.Fatal("a shrink without --force was accepted")
	}

	p.ctl(t, "ns", "remove", sub, "2")
	if err := waitFor(deviceTimeout, func() bool { _, ok := blockDevsOf(sub)[filepath.Base(dev2)]; return !ok }); err != nil {
		t.Fatalf("the host still has %s after the namespace was removed", dev2)
	}
	if err := <-fio; err != nil {
		t.Fatal(err)
	}
	st := p.status(t)
	if len(st.Subsystems) != 1 || len(st.Subsystems[0].Namespaces) != 1 {
		t.Fatalf("status after the changes: %+v", st.Subsystems)
	}
}

// TestLiveHostsAndReload: status shows who is connected; removing a host
// disconnects it; SIGHUP with a broken file changes nothing, with a new
// subsystem adds it and moves the discovery generation; an API change is
// still there after a restart.
func TestLiveHostsAndReload(t *testing.T) {
	requireTgt(t, liveOnly)
	h := newHost(t)
	subA, subB := nqn("live-a"), nqn("live-b")
	p, _ := startTgt(t, Spec{Port: rdmaPort(), Subsystems: []Subsystem{
		// Two hosts: a subsystem must keep one, or allow any host.
		{NQN: subA, Hosts: []string{h.NQN, "nqn.2026-11.io.example:e2e-other"}, Namespaces: []Namespace{memNS(1, 16*mib, 512, "")}},
		{NQN: subB, AllowAnyHost: true, Namespaces: []Namespace{memNS(1, 16*mib, 512, "")}},
	}})
	cA := h.mustConnect(t, subA, 1)
	cB := h.mustConnect(t, subB, 1)

	st := p.status(t)
	found := false
	for _, c := range st.Controllers {
		if c.SubNQN == subA && c.HostNQN == h.NQN {
			found = true
			if !strings.HasPrefix(c.HostAddress, labAddr) || c.IOQueues < 1 {
				t.Errorf("controller %+v: want the host's address %s and its I/O queues", c, labAddr)
			}
		}
	}
	if !found {
		t.Fatalf("status --json does not list host %s on %s: %+v", h.NQN, subA, st.Controllers)
	}

	// host remove: the target drops the host's controller on A, and only it.
	p.ctl(t, "host", "remove", subA, h.NQN)
	if err := waitFor(deviceTimeout, func() bool { return !p.status(t).connected(subA, h.NQN) }); err != nil {
		t.Fatalf("status still lists %s on %s after host remove", h.NQN, subA)
	}
	if err := waitFor(deviceTimeout, func() bool { return readSys("/sys/class/nvme/"+cA.name+"/state") != "live" }); err != nil {
		t.Fatalf("host's controller %s on %s still live", cA.name, subA)
	}
	if readSys("/sys/class/nvme/"+cB.name+"/state") != "live" {
		t.Fatalf("the host's controller on %s, untouched by the change, is %s", subB, readSys("/sys/class/nvme/"+cB.name+"/state"))
	}
	cA.disconnect(t)

	// SIGHUP with a broken file: refused whole, the target serves on.
	saved, err := os.ReadFile(p.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	gen0 := h.discover(t).Genctr
	if err := os.WriteFile(p.cfgPath, []byte("ports: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.cmd.Process.Signal(syscall.SIGHUP)
	if err := waitFor(10*time.Second, func() bool {
		b, _ := os.ReadFile(p.logPath)
		return strings.Contains(string(b), "reload failed")
	}); err != nil {
		t.Fatal("no \"reload failed\" in the target's log after SIGHUP with a broken file")
	}
	ddWrite(t, cB.blockDev(t, 1), 0, pattern(mib, 31))
	checkSame(t, "after a refused reload", 0, ddRead(t, cB.blockDev(t, 1), 0, mib), pattern(mib, 31))

	// SIGHUP with a new subsystem.
	subC := nqn("live-c")
	added := withSubsystem(t, string(saved), fmt.Sprintf("{nqn: %q, allow_any_host: true, namespaces: [{nsid: 1, backend: memory, size: 8MiB}]}", subC))
	if err := os.WriteFile(p.cfgPath, []byte(added), 0o644); err != nil {
		t.Fatal(err)
	}
	p.cmd.Process.Signal(syscall.SIGHUP)
	var log discoveryLog
	if err := waitFor(10*time.Second, func() bool {
		log = h.discover(t)
		return slices.ContainsFunc(log.Records, func(r discoveryRecord) bool { return r.Subnqn == subC })
	}); err != nil {
		t.Fatalf("discovery does not list %s after SIGHUP: %+v", subC, log.Records)
	}
	if log.Genctr <= gen0 {
		t.Fatalf("discovery generation %d after reload, was %d", log.Genctr, gen0)
	}
	h.mustConnect(t, subC, 1).disconnect(t)

	// An API change survives a restart: the target saved it to its file.
	subD := nqn("live-d")
	p.ctl(t, "subsystem", "add", subD, "--allow-any-host")
	p.ctl(t, "ns", "add", subD, "--nsid", "3", "--backend", "memory", "--size", "8MiB")
	cB.disconnect(t)
	waitTornDown(t)
	p.RestartKeep(t)
	st = p.status(t)
	i := slices.IndexFunc(st.Subsystems, func(s ctlSubsystem) bool { return s.NQN == subD })
	if i < 0 || len(st.Subsystems[i].Namespaces) != 1 || st.Subsystems[i].Namespaces[0].NSID != 3 {
		t.Fatalf("after a restart, status lists %+v; want %s with namespace 3", st.Subsystems, subD)
	}
	h.mustConnect(t, subD, 3)
}

// TestLiveGrowBackend: the README's grow workflow under a connected host.
// A file namespace's file is grown from outside (truncate), and a block
// namespace's loop device is grown (its file, then losetup -c, as
// lvextend grows a volume); `ns resize NQN NSID 0` then reads the
// backend's size again and the host's block device follows within a few
// seconds, with no rescan. A reload does the same for a namespace of size
// 0, and a backend cut shorter than the host sees is refused.
func TestLiveGrowBackend(t *testing.T) {
	requireTgt(t, liveOnly)
	h := newHost(t)
	sub := nqn("live-grow")
	ns1 := fileNS(t, 1, 32*mib, 512, "")
	p, dir := startTgt(t, Spec{Port: rdmaPort(), Subsystems: []Subsystem{{NQN: sub, AllowAnyHost: true, Namespaces: []Namespace{ns1}}}})
	c := h.mustConnect(t, sub, 1)
	const followWithin = 5 * time.Second
	sectors := func(dev string) uint64 {
		n, _ := readSysUint(filepath.Join("/sys/block", filepath.Base(dev), "size"))
		return n
	}
	follows := func(what, dev string, size int64) {
		t.Helper()
		start := time.Now()
		if err := waitFor(followWithin, func() bool { return sectors(dev) == uint64(size/512) }); err != nil {
			t.Fatalf("%s: the host's %s is %d sectors, want %d", what, dev, sectors(dev), size/512)
		}
		t.Logf("%s: the host's %s is %d MiB after %v", what, dev, size/mib, time.Since(start).Round(time.Millisecond))
	}
	grow := func(path string, size int64) {
		t.Helper()
		if err := os.Truncate(path, size); err != nil {
			t.Fatal(err)
		}
	}

	// A file namespace: the file grows, then resize 0.
	dev1 := c.blockDev(t, 1)
	ddWrite(t, dev1, 0, pattern(mib, 41))
	grow(ns1.Path, 48*mib)
	p.ctl(t, "ns", "resize", sub, "1", "0")
	follows("file grown, resize 0", dev1, 48*mib)
	ddWrite(t, dev1, 47*mib, pattern(mib, 42)) // the new end is usable
	checkSame(t, "file namespace start after growing", 0, ddRead(t, dev1, 0, mib), pattern(mib, 41))

	// A block namespace on a loop device, added with no size (the whole
	// device): the device grows, then resize 0.
	img := filepath.Join(scratchDir, filepath.Base(dir)+"-lv.img")
	t.Cleanup(func() { os.Remove(img) })
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	grow(img, 16*mib)
	loop, detach, err := attachLoop(Namespace{Path: img, BlockSize: 512})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := detach(); err != nil {
			t.Errorf("losetup -d %s: %v", loop, err)
		}
	})
	p.ctl(t, "ns", "add", sub, "--nsid", "2", "--path", loop)
	dev2 := c.blockDev(t, 2)
	follows("block namespace added", dev2, 16*mib)
	ddWrite(t, dev2, 0, pattern(mib, 43))
	grow(img, 40*mib)
	if out, err := runOut(30*time.Second, "losetup", "-c", loop); err != nil {
		t.Fatalf("losetup -c %s: %v %s", loop, err, out)
	}
	p.ctl(t, "ns", "resize", sub, "2", "0")
	follows("device grown, resize 0", dev2, 40*mib)
	ddWrite(t, dev2, 39*mib, pattern(mib, 44))
	checkSame(t, "block namespace start after growing", 0, ddRead(t, dev2, 0, mib), pattern(mib, 43))

	// Reload: namespace 1 now has size 0 in the file, so it follows its
	// file there too.
	grow(ns1.Path, 64*mib)
	p.ctl(t, "reload")
	follows("file grown, reload", dev1, 64*mib)

	// Cut shorter than the host sees: refused, and the host keeps its size.
	grow(ns1.Path, 8*mib)
	if out, err := p.ctlErr("ns", "resize", sub, "1", "0"); err == nil || !strings.Contains(err.Error(), "shrink") {
		t.Fatalf("a backend cut shorter was accepted: %s %v", out, err)
	}
	grow(ns1.Path, 64*mib)
	if got := sectors(dev1); got != 64*mib/512 {
		t.Fatalf("the host's size of namespace 1 changed to %d sectors after a refused resize", got)
	}
	if out := p.ctl(t, "ns", "resize", sub, "1", "0"); !strings.Contains(string(out), "nothing to change") {
		t.Fatalf("resize 0 with nothing grown: %s", out)
	}
	checkSame(t, "file namespace start at the end", 0, ddRead(t, dev1, 0, mib), pattern(mib, 41))

	p.ctl(t, "ns", "remove", sub, "2")
	if err := waitFor(deviceTimeout, func() bool { _, ok := blockDevsOf(sub)[filepath.Base(dev2)]; return !ok }); err != nil {
		t.Fatalf("the host still has %s after the namespace was removed", dev2)
	}
	st := p.status(t)
	if len(st.Subsystems) != 1 || len(st.Subsystems[0].Namespaces) != 1 || st.Subsystems[0].Namespaces[0].Size != 64*mib {
		t.Fatalf("status at the end: %+v", st.Subsystems)
	}
}
