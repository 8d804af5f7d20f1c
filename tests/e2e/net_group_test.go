//go:build e2e && netlab

package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
)

// Gateway groups under a network partition (issue "A network that fails"): a gateway cut off
// from the cluster while the host still reaches it.

// TestNetGroupPartition: gateway A (ID 1, guest "target", link a to the host) and gateway B
// (ID 2, guest "target2", link c to the host) serve one RBD namespace in A's ANA group from a
// one-node Ceph cluster in target2, which A reaches over link d only. The host writes P1 through
// A just after link d is cut: A's librbd holds it (its bytes sit in A's kernel, unacknowledged).
// B blocklists every client of A, its data path's included, and takes A's group over; A gives
// it up on its own once its lease lapses. A's librbd gives the write up after
// limits.RBDOSDOpTimeout and the host retries it through B, then writes P2 over it through B.
// The partition heals while A is paused (a gateway that stalled): its kernel delivers the
// held writes to the OSD after the takeover, and the cluster refuses them, so the image keeps
// P2. A, resumed, learns it was fenced and exits; started again (the documented recovery, a
// new client), it takes its group back. fio verifies through multipath across the cut.
//
// E2E_NETGROUP_UNFENCE=1 checks the check: A's data-path addresses are taken off the
// blocklist before the heal (a fence that missed the data client, the audit's split brain),
// and the test must then fail, the held P1 landing over P2.
func TestNetGroupPartition(t *testing.T) {
	lab := needNetLab(t)
	begin := time.Now()
	tg, t2 := lab.guest(t, "target"), lab.guest(t, "target2")
	la, lc, ld := lab.link(t, "a"), lab.link(t, "c"), lab.link(t, "d")
	dir := testDir(t)
	dumpDmesgOnFailure(t, dir)
	needRBDBin(t)

	cephAddr := ld.addr(t, t2)
	ceph := startNetCeph(t, t2, cephAddr)
	cephUp := time.Since(begin)
	grp := "net" + strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	image := grp + "-img1"
	addrA, addrB := la.addr(t, tg), lc.addr(t, t2)
	gwA := startNetGateway(t, tg, ceph, grp, 1, addrA)
	gwB := startNetGateway(t, t2, ceph, grp, 2, addrB)
	// Each reads the other's lease every lease/4 once it has started.
	if err := waitFor(15*time.Second, func() bool {
		alive, _, _ := gwA.gwStatus(t).member(2)
		return alive
	}); err != nil {
		t.Fatalf("gateway 1 does not see gateway 2 alive: %+v", gwA.gwStatus(t).Group)
	}

	sub := nqn("net-group")
	gwA.ctl(t, "subsystem", "add", sub, "--allow-any-host")
	gwA.ctl(t, "ns", "add", sub, "--nsid", "1", "--pool", cephPool, "--image", image, "--size", "64MiB", "--ana-group", "1")
	if err := waitFor(15*time.Second, func() bool { return len(gwB.gwStatus(t).nsGroups(sub)) == 1 }); err != nil {
		t.Fatalf("gateway 2 does not serve what was added through gateway 1: %+v", gwB.gwStatus(t).Subsystems)
	}
	h := newHost(t)
	// The host keeps reconnecting to a path for 5 minutes: A is paused, then exits, then starts
	// again, and its path must come back.
	ca := mpConnectTmo(t, h, sub, addrA, portRDMA, 5*time.Minute)
	cb := mpConnectTmo(t, h, sub, addrB, portRDMA, 5*time.Minute)
	owned := [3]map[uint32]string{{1: "optimized"}, {1: "inaccessible"}, nil}
	waitPathStates(t, "at connect", []string{ca, cb}, owned, 20*time.Second)
	dev := headDev(t, sub, 1)

	// A's clients: its group client holds its lease lock; the others are its data path's.
	_, _, addrsA := gwB.gwStatus(t).member(1)
	holder := ceph.lockHolder(t, "nvmeof-tgt."+grp+".leases", "gw.1")
	dataA := slices.DeleteFunc(slices.Clone(addrsA), func(a string) bool { return a == holder })
	if holder == "" || !slices.Contains(addrsA, holder) || len(dataA) == 0 {
		t.Fatalf("gateway 1's lease, as gateway 2 trusts it, names %v; its lock is held from %q: want its group client and its data path's client", addrsA, holder)
	}
	t.Logf("gateway 1's clients: group %s, data path %v", holder, dataA)

	// P0 through A lands on the image (fio uses the first 16 MiB, these blocks are apart).
	const pOff, pLen = 32 * mib, 1 * mib
	p0, p1, p2 := pattern(pLen, 0x60), pattern(pLen, 0x61), pattern(pLen, 0x62)
	ddWrite(t, dev, pOff, p0)
	checkSame(t, "the image after P0 through gateway 1", pOff, ceph.readImage(t, image, pOff, pLen), p0)

	writes := func(p *remoteTgt) float64 {
		return p.nsMetric(t, "nvmeof_tgt_namespace_ops_total", `subnqn="`+sub+`"`, `op="write"`)
	}
	errorsA := func() float64 { return gwA.nsMetric(t, "nvmeof_tgt_namespace_errors_total", `subnqn="`+sub+`"`) }
	fio := mpFio(t, dev, dir, 4096, 40*time.Second)
	w0 := writes(gwA)
	if err := waitFor(30*time.Second, func() bool { return writes(gwA) > w0 }); err != nil {
		t.Fatal("fio's writes do not reach gateway 1 within 30 s")
	}
	time.Sleep(2 * time.Second)
	e0 := errorsA()

	// The cut: A loses the cluster, the host still reaches A. P1 at once, through A: B reports
	// A's group inaccessible until it has fenced A, a lease at the least.
	ld.cut(t)
	cut := time.Now()
	p1Done := make(chan cmdResult, 1)
	go func() { p1Done <- ddOnce(dir, dev, pOff, p1) }()
	time.Sleep(2 * time.Second)
	select {
	case r := <-p1Done:
		t.Fatalf("P1 through gateway 1 completed 2 s after the cut, with no way to the cluster: %v", r)
	default:
	}
	// What A completed after this is nothing: every write it took after the cut is held or fails.
	wA1 := writes(gwA)
	heldCut, ssCut := tcpHeld(t, tg, cephAddr)
	t.Logf("2 s after the cut, gateway 1's kernel holds %d bytes toward the cluster:\n%s", heldCut, ssCut)
	if heldCut == 0 {
		t.Errorf("gateway 1's kernel holds nothing toward the cluster after the cut: the writes sent through it never left it, and the partition's heal proves nothing")
	}

	// B fences A, its data path's client included, and takes its group over. Bound: a lease (A's
	// lock lapses and B's view of it ages) and B's next heartbeat, then the blocklist (a monitor
	// command) and B's clients' wait for the OSD map with it; 45 s leaves the emulator, with
	// Ceph in B's guest, room for slow commands.
	if err := waitFor(45*time.Second, func() bool { return gwB.gwStatus(t).Group.Owners["1"] == 2 }); err != nil {
		t.Fatalf("gateway 2 did not take gateway 1's group over within 45 s of the cut: %+v", gwB.gwStatus(t).Group)
	}
	took := time.Since(cut)
	stB := gwB.gwStatus(t)
	if alive, fenced, _ := stB.member(1); alive || !fenced || stB.Group.Failovers != 1 {
		t.Errorf("gateway 2's view after the takeover: %+v", stB.Group)
	}
	bl := ceph.blocklist(t)
	for _, a := range addrsA {
		if _, ok := bl[a]; !ok {
			t.Errorf("gateway 1's client %s (data path: %v) is not blocklisted after the takeover: %v", a, slices.Contains(dataA, a), bl)
		}
	}
	t.Logf("gateway 2 fenced gateway 1 (%v) and took its group over %v after the cut", addrsA, took.Round(time.Millisecond))
	waitPathStates(t, "gateway 2 took the group over", []string{cb}, [3]map[uint32]string{{1: "optimized"}, nil, nil}, 20*time.Second)

	// A gives its group up: its heartbeat fails once its group client's operation times out
	// (limits.RBDConnectTimeout), and without a lease its ports report every group
	// inaccessible. From then on the host must never see A's path optimized again until A is a
	// new client: the zombie serves nothing.
	waitPathStates(t, "gateway 1 gave its group up", []string{ca}, [3]map[uint32]string{{1: "inaccessible"}, nil, nil},
		limits.RBDConnectTimeout+limits.RBDOSDOpTimeout+15*time.Second)
	gaveUp := time.Since(cut)
	t.Logf("gateway 1 gave its group up %v after the cut; its status:\n%s", gaveUp.Round(time.Millisecond), gwA.ctl(t, "status"))
	var zombieMu sync.Mutex
	var zombieSeen []string
	stopWatch := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			if s := pathState(ca, 1); s == "optimized" || s == "non-optimized" {
				zombieMu.Lock()
				zombieSeen = append(zombieSeen, time.Since(cut).Round(time.Millisecond).String()+" "+s)
				zombieMu.Unlock()
			}
			select {
			case <-stopWatch:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	defer func() {
		select {
		case <-stopWatch:
		default:
			close(stopWatch)
		}
	}()

	// P1 completes through B: A's librbd gives the held write up after
	// limits.RBDOSDOpTimeout, A fails it with a path error, the host retries it through B.
	// Bound: that timeout, the host's retry, and 60 s for the emulator.
	var r1 cmdResult
	select {
	case r1 = <-p1Done:
	case <-time.After(limits.RBDOSDOpTimeout + 60*time.Second):
		t.Fatalf("P1 did not complete within %v of the cut", limits.RBDOSDOpTimeout+60*time.Second)
	}
	if r1.err != nil {
		t.Fatalf("P1, sent through gateway 1 at the cut, failed on the host instead of failing over: %v", r1)
	}
	t.Logf("P1 completed %v after the cut (gateway 1's librbd gives an operation up after %v)", time.Since(cut).Round(time.Millisecond), limits.RBDOSDOpTimeout)
	if got := writes(gwA); got != wA1 {
		t.Errorf("gateway 1 completed %v writes after the cut, with no way to the cluster", got-wA1)
	}
	if e := errorsA(); e <= e0 {
		t.Errorf("gateway 1 counted no backend error after the cut (%v before, %v after): P1 did not fail there", e0, e)
	}
	checkSame(t, "the image after P1 failed over to gateway 2", pOff, ceph.readImage(t, image, pOff, pLen), p1)

	// P2 over P1, through B.
	wB := writes(gwB)
	ddWrite(t, dev, pOff, p2)
	if got := writes(gwB); got <= wB {
		t.Errorf("P2 did not go through gateway 2 (its writes %v, before %v)", got, wB)
	}
	checkSame(t, "the image after P2 through gateway 2", pOff, ceph.readImage(t, image, pOff, pLen), p2)
	held, ss := tcpHeld(t, tg, cephAddr)
	t.Logf("before the heal (%v after the cut), gateway 1's kernel holds %d bytes toward the cluster:\n%s", time.Since(cut).Round(time.Millisecond), held, ss)
	if os.Getenv("E2E_NETGROUP_UNFENCE") == "1" {
		for _, a := range dataA {
			ceph.cmd(t, "ceph", "osd", "blocklist", "rm", a)
		}
		t.Logf("E2E_NETGROUP_UNFENCE: gateway 1's data path %v taken off the blocklist: this test must fail", dataA)
	}

	// The heal, with A paused: A's kernel delivers what it held to the OSD by itself, after the
	// takeover and P2, and A cannot discard it first by exiting. Bound: TCP's retransmission
	// timer backs off to at most 120 s (TCP_RTO_MAX), so within that of the heal every byte is
	// acknowledged or its connection reset; 30 s more for the emulator.
	t.Cleanup(func() { _ = gwA.signal(syscall.SIGCONT) })
	if err := gwA.signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP gateway 1: %v", err)
	}
	ld.restore(t)
	healed := time.Now()
	var ssHeal string
	if err := waitFor(150*time.Second, func() bool {
		var n int
		n, ssHeal = tcpHeld(t, tg, cephAddr)
		return n == 0
	}); err != nil {
		t.Fatalf("gateway 1's kernel still holds bytes toward the cluster 150 s after the heal:\n%s", ssHeal)
	}
	t.Logf("gateway 1's held bytes reached the cluster %v after the heal", time.Since(healed).Round(time.Millisecond))
	// They were refused: the blocks read P2. (Read again at the end, long after.)
	checkSame(t, "the image after the heal (gateway 1's held writes delivered)", pOff, ceph.readImage(t, image, pOff, pLen), p2)

	// A, resumed, learns that it was fenced and exits (status 1), to be restarted as a new
	// client. Bound: its next heartbeat is refused (blocklisted) once it reaches the cluster
	// again; 60 s for a client that reconnects to the monitor first.
	if err := gwA.signal(syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT gateway 1: %v", err)
	}
	code, exited := gwA.exited(t, 60*time.Second)
	if !exited {
		t.Fatalf("gateway 1 did not exit within 60 s of resuming after it was fenced: %+v", gwA.gwStatus(t).Group)
	}
	logA, _ := os.ReadFile(gwA.logPath)
	if code != 1 || !strings.Contains(string(logA), "fenced by the gateway group") {
		t.Errorf("gateway 1 exited with status %d; its log says it was fenced: %v", code, strings.Contains(string(logA), "fenced by the gateway group"))
	}
	t.Logf("gateway 1 exited (status %d) %v after the heal", code, time.Since(healed).Round(time.Millisecond))
	if err := <-fio; err != nil {
		t.Errorf("fio through multipath across the partition: %v", err)
	}

	// The documented recovery: A started again, a new client, takes its group back. Bound: the
	// host's reconnect (every second), B seeing A's new lease, and both applying the owners.
	close(stopWatch)
	<-watched
	gwA.startGateway(t)
	waitPathStates(t, "gateway 1 took its group back", []string{ca, cb}, owned, 60*time.Second)
	zombieMu.Lock()
	if len(zombieSeen) > 0 {
		t.Errorf("the host saw gateway 1's path usable after it gave its group up and before it started again: %v", zombieSeen)
	}
	zombieMu.Unlock()
	if alive, fenced, addrs := gwB.gwStatus(t).member(1); !alive || fenced || slices.ContainsFunc(addrs, func(a string) bool { return slices.Contains(addrsA, a) }) {
		t.Errorf("gateway 2's view of the restarted gateway 1: alive %v, fenced %v, addresses %v (the old ones %v)", alive, fenced, addrs, addrsA)
	}
	checkSame(t, "P2 read through the restarted gateway 1", pOff, ddRead(t, dev, pOff, pLen), p2)
	checkSame(t, "the image at the end", pOff, ceph.readImage(t, image, pOff, pLen), p2)
	t.Logf("phases: Ceph up %v (target2 booted too), takeover %v after the cut, gateway 1 gave up at %v, whole test %v",
		cephUp.Round(time.Second), took.Round(time.Millisecond), gaveUp.Round(time.Millisecond), time.Since(begin).Round(time.Second))
}

// ddOnce writes data at off of dev in one O_DIRECT write and flushes: one bio for the kernel,
// split only at the transport's limit, every piece on one path.
func ddOnce(dir, dev string, off int64, data []byte) cmdResult {
	src := filepath.Join(dir, "p1.pattern")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		return cmdResult{err: err}
	}
	return execCmd(3*time.Minute, "dd", "if="+src, "of="+dev, "bs="+strconv.Itoa(len(data)), "count=1",
		"seek="+strconv.FormatInt(off/int64(len(data)), 10), "oflag=direct", "conv=notrunc,fsync", "status=none")
}
