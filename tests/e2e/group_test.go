//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
)

// A gateway group: two nvmeof-tgt-rbd processes (gateways 1 and 2, ports 4420 and 4421 on the lab
// address) share their subsystems through one object in the guest's Ceph pool.

// groupLease is the gateways' lease: short, so that a failover takes seconds.
const groupLease = 3 * time.Second

// gatewayYAML is gateway id's file: its port, the group, its way to the cluster (conf), its
// metrics and state directory; no subsystems (the group's are served).
func gatewayYAML(group string, id, service int, conf, metrics, stateDir string) string {
	return fmt.Sprintf(`ports:
  - {id: %d, transport: rdma, address: %q, port: %d}
gateway_group: {name: %q, pool: %q, id: %d, ceph_conf: %q, lease: %v}
state_dir: %q
metrics: {listen: %q}
log: {level: debug}
`, id, labAddr, service, group, cephPool, id, conf, groupLease, stateDir, metrics)
}

// gwStatus is the part of `status --json` a gateway test reads.
type gwStatus struct {
	Subsystems []struct {
		NQN        string   `json:"nqn"`
		Hosts      []string `json:"hosts"`
		CNTLIDMin  int      `json:"cntlid_min"`
		CNTLIDMax  int      `json:"cntlid_max"`
		Namespaces []struct {
			NSID     uint32 `json:"nsid"`
			Size     int64  `json:"size"`
			ANAGroup uint32 `json:"ana_group"`
		} `json:"namespaces"`
	} `json:"subsystems"`
	Group *struct {
		Version   uint64 `json:"version"`
		Error     string `json:"error"`
		Fenced    bool   `json:"fenced"`
		Failovers uint64 `json:"failovers"`
		Conflicts uint64 `json:"conflicts"`
		Members   []struct {
			ID      int      `json:"id"`
			Alive   bool     `json:"alive"`
			Stopped bool     `json:"stopped"`
			Fenced  bool     `json:"fenced"`
			Addrs   []string `json:"addrs"`
		} `json:"members"`
		Owners map[string]int `json:"ana_owners"`
	} `json:"group"`
}

func (p *tgtProcess) gwStatus(t *testing.T) gwStatus {
	t.Helper()
	var st gwStatus
	out := p.ctl(t, "status", "--json")
	if err := json.Unmarshal(out, &st); err != nil || st.Group == nil {
		t.Fatalf("status --json: %v, group %v\n%s", err, st.Group, out)
	}
	return st
}

// nsGroups maps each namespace of subnqn to its ANA group (nil: no such subsystem).
func (st gwStatus) nsGroups(subnqn string) map[uint32]uint32 {
	for _, s := range st.Subsystems {
		if s.NQN == subnqn {
			m := map[uint32]uint32{}
			for _, n := range s.Namespaces {
				m[n.NSID] = n.ANAGroup
			}
			return m
		}
	}
	return nil
}

func (st gwStatus) member(id int) (alive, fenced bool, addrs []string) {
	for _, m := range st.Group.Members {
		if m.ID == id {
			return m.Alive, m.Fenced, m.Addrs
		}
	}
	return false, false, nil
}

// pathDiskSize is the size the host shows for namespace nsid through controller ctrl (its path
// disk nvmeXcYnZ), -1 without one.
func pathDiskSize(ctrl string, nsid uint32) int64 {
	inst := strings.TrimPrefix(ctrl, "nvme")
	ents, _ := os.ReadDir("/sys/block")
	for _, e := range ents {
		if m := pathDisk.FindStringSubmatch(e.Name()); m == nil || m[1] != inst {
			continue
		}
		if n, err := readSysUint(filepath.Join("/sys/block", e.Name(), "nsid")); err == nil && uint32(n) == nsid {
			s, _ := readSysUint(filepath.Join("/sys/block", e.Name(), "size"))
			return int64(s) * 512
		}
	}
	return -1
}

func radosCmd(t *testing.T, args ...string) cmdResult {
	t.Helper()
	return run(t, rbdTimeout, "rados", append([]string{"-c", cephConf, "-p", cephPool}, args...)...)
}

// TestGatewayGroup, acceptance 2-5 and 7 of issue 22 in one boot: two gateways serve one
// subsystem with two RBD namespaces, each namespace optimized on its own gateway, the host
// connected through native multipath; what is added through gateway A's API (a subsystem,
// namespaces, hosts) appears on B; `rbd resize` reaches the host through both; a reservation
// taken through A holds through B; a corrupt group object and concurrent changes get clear
// errors while both keep serving; and kill -9 of the gateway owning a namespace under fio verify
// loses nothing: B fences A's RADOS clients (`ceph osd blocklist`) and takes its ANA group over,
// and A restarted takes it back. A namespace masked to one host through A is hidden from the
// other's controller on B, until it is added to the mask through B.
func TestGatewayGroup(t *testing.T) {
	requireTgt(t, "gateway groups are nvmeof-tgt's")
	bin := needRBDBin(t)
	needCeph(t)
	dir := testDir(t)
	grp := "e2e" + strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	spec := Spec{Port: rdmaPort()}
	img := func(n int) string { return fmt.Sprintf("%s-img%d", grp, n) }
	// Cleanups run last first: the images and the group's objects go after the gateways stop
	// (an image a gateway still has open has a watcher, and rbd rm refuses it).
	t.Cleanup(func() {
		for _, o := range []string{"state", "leases"} {
			radosCmd(t, "rm", "nvmeof-tgt."+grp+"."+o)
		}
	})
	for n := 1; n <= 4; n++ {
		t.Cleanup(func() { removeImage(t, img(n)) })
	}
	dirA, dirB := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	// Each gateway reaches the cluster through its own file: B's is a copy elsewhere, and the
	// images A adds are opened on B through it (the group's state names no ceph_conf).
	confB := filepath.Join(dir, "ceph-b.conf")
	if data, err := os.ReadFile(cephConf); err != nil || os.WriteFile(confB, data, 0o644) != nil {
		t.Fatalf("copy %s for gateway 2: %v", cephConf, err)
	}
	a, _ := startTgt(t, spec, withBinary(bin), withDir(dirA),
		withConfig(gatewayYAML(grp, 1, portRDMA, cephConf, "127.0.0.1:9771", filepath.Join(dirA, "state"))))
	b, _ := startTgt(t, spec, withBinary(bin), withDir(dirB),
		withConfig(gatewayYAML(grp, 2, mpPort2, confB, "127.0.0.1:9772", filepath.Join(dirB, "state"))))
	if err := waitFor(15*time.Second, func() bool {
		alive, _, _ := a.gwStatus(t).member(2)
		return alive
	}); err != nil {
		t.Fatalf("gateway 1 does not see gateway 2 alive: %+v", a.gwStatus(t).Group)
	}

	// Acceptance 3 (the API part): a subsystem and two namespaces through A only.
	sub := nqn("group")
	a.ctl(t, "subsystem", "add", sub, "--allow-any-host")
	a.ctl(t, "ns", "add", sub, "--nsid", "1", "--pool", cephPool, "--image", img(1), "--size", "64MiB")
	a.ctl(t, "ns", "add", sub, "--nsid", "2", "--pool", cephPool, "--image", img(2), "--size", "64MiB")
	if g := a.gwStatus(t).nsGroups(sub); g[1] != 1 || g[2] != 2 {
		t.Fatalf("namespaces in ANA groups %v, want 1:1 2:2 (spread over the gateways)", g)
	}
	if err := waitFor(15*time.Second, func() bool { return len(b.gwStatus(t).nsGroups(sub)) == 2 }); err != nil {
		t.Fatalf("gateway 2 does not serve what was added through gateway 1: %+v", b.gwStatus(t).Subsystems)
	}
	for _, s := range b.gwStatus(t).Subsystems {
		if s.NQN == sub && (s.CNTLIDMin != 2041 || s.CNTLIDMax != 4080) {
			t.Errorf("gateway 2's controller IDs %d..%d, want 2041..4080", s.CNTLIDMin, s.CNTLIDMax)
		}
	}

	// Acceptance 2: one subsystem, two paths, each namespace optimized on its own gateway.
	h := newHost(t)
	ca := mpConnect(t, h, sub, labAddr, portRDMA)
	cb := mpConnect(t, h, sub, labAddr, mpPort2)
	if err := waitFor(15*time.Second, func() bool { return len(blockDevsOf(sub)) == 2 }); err != nil {
		t.Fatalf("the host made %d block devices of %s, want two namespace heads", len(blockDevsOf(sub)), sub)
	}
	owned := [3]map[uint32]string{{1: "optimized", 2: "inaccessible"}, {1: "inaccessible", 2: "optimized"}, nil}
	waitPathStates(t, "at connect", []string{ca, cb}, owned, 10*time.Second)
	if out := run(t, cmdTimeout, "nvme", "list-subsys", "-o", "json"); out.err == nil {
		t.Logf("nvme list-subsys: %s", limit(out.stdout))
	}

	// Acceptance 3 (resize): `rbd resize` reaches the host through both gateways.
	rbdResize(t, img(2), 80*mib)
	if err := waitFor(15*time.Second, func() bool {
		return pathDiskSize(ca, 2) == 80*mib && pathDiskSize(cb, 2) == 80*mib
	}); err != nil {
		t.Fatalf("after rbd resize: the paths show %d and %d bytes, want %d through both", pathDiskSize(ca, 2), pathDiskSize(cb, 2), 80*mib)
	}

	// Acceptance 3 (hosts) and 5: a subsystem with two hosts, the second added through A; host X
	// reaches it through A, host Y through B. X's reservation through A holds through B.
	sub2 := nqn("group-resv")
	hx, hy := newHost(t), newHost(t)
	a.ctl(t, "subsystem", "add", sub2, "--host", hx.NQN)
	a.ctl(t, "host", "add", sub2, hy.NQN)
	a.ctl(t, "ns", "add", sub2, "--nsid", "1", "--pool", cephPool, "--image", img(3), "--size", "16MiB", "--ana-group", "1")
	if err := waitFor(15*time.Second, func() bool {
		for _, s := range b.gwStatus(t).Subsystems {
			if s.NQN == sub2 && len(s.Hosts) == 2 && len(s.Namespaces) == 1 {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("gateway 2 does not allow the hosts added through gateway 1: %+v", b.gwStatus(t).Subsystems)
	}
	x := resvHost{host: hx, ctrl: "/dev/" + mpConnect(t, hx, sub2, labAddr, portRDMA), id: hx.ID}
	y := resvHost{host: hy, ctrl: "/dev/" + mpConnect(t, hy, sub2, labAddr, mpPort2), id: hy.ID}
	ycs := strings.TrimPrefix(y.ctrl, "/dev/")
	x.ok(t, "resv-register", "--nrkey=1", "--rrega=0")
	x.ok(t, "resv-acquire", "--crkey=1", "--rtype=1", "--racqa=0") // write exclusive, through A
	// The namespace moves to B's group (through A's API), so that Y's path is usable.
	a.ctl(t, "ns", "ana-group", sub2, "1", "2")
	waitPathStates(t, "namespace moved to gateway 2", []string{ycs}, [3]map[uint32]string{{1: "optimized"}, nil, nil}, 10*time.Second)
	y.conflicts(t, "Y's write through gateway 2 under X's reservation taken through gateway 1",
		"write", "-s", "0", "-c", "0", "-z", "512", "-d", "/dev/zero")
	if r := y.read(t); r.err != nil {
		t.Errorf("Y's read through gateway 2 under write exclusive: %v", r)
	}
	if rep := y.report(t); rep.RType != 1 || rep.RegCtl != 1 || !strings.EqualFold(rep.RegCtlExt[0].HostID, hostIDHex(hx.ID)) {
		t.Errorf("the report through gateway 2: %+v", rep)
	}
	// Y registers and preempts X through gateway 2; X, connected through gateway 1 only, is
	// told (Registration Preempted in its log page 80h), and Y writes.
	y.ok(t, "resv-register", "--nrkey=2", "--rrega=0")
	y.ok(t, "resv-acquire", "--crkey=2", "--prkey=1", "--rtype=1", "--racqa=1")
	if err := waitFor(10*time.Second, func() bool {
		typ, nsid := x.notification(t)
		return typ == 1 && nsid == 1
	}); err != nil {
		t.Errorf("X, connected through gateway 1, was not told of its preemption through gateway 2")
	}
	if r := y.write(t, dir); r.err != nil {
		t.Errorf("Y's write through gateway 2 after preempting X: %v", r)
	}

	// Namespace masking (issue 31) through the group: namespace 2 of sub2, masked to X, added
	// through A. X's controller (through A) gets the disk; Y's (through B) does not, B applying
	// the mask from the group's state. Y added to the mask through B: Y's controller gets it too,
	// X keeps it.
	xcs := strings.TrimPrefix(x.ctrl, "/dev/")
	a.ctl(t, "ns", "add", sub2, "--nsid", "2", "--pool", cephPool, "--image", img(4), "--size", "16MiB", "--ana-group", "2", "--host", hx.NQN)
	if err := waitFor(15*time.Second, func() bool { return pathDiskSize(xcs, 2) == 16*mib }); err != nil {
		t.Errorf("X, in the mask, has no disk of namespace 2 through gateway 1 (%d bytes)", pathDiskSize(xcs, 2))
	}
	if err := waitFor(15*time.Second, func() bool {
		for _, s := range b.gwStatus(t).Subsystems {
			if s.NQN == sub2 && len(s.Namespaces) == 2 {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("gateway 2 does not serve the masked namespace added through gateway 1: %+v", b.gwStatus(t).Subsystems)
	}
	// B serves it now; a host it is hidden from must still not get it (its rescans would have
	// found it by now: the namespace notice goes out as it is attached).
	time.Sleep(3 * time.Second)
	if n := pathDiskSize(ycs, 2); n != -1 {
		t.Errorf("Y, not in the mask, sees namespace 2 through gateway 2 (%d bytes)", n)
	}
	if out := run(t, cmdTimeout, "nvme", "list-ns", y.ctrl); out.err == nil && strings.Contains(string(out.stdout), "0x2") {
		t.Errorf("Y's controller lists namespace 2 as active: %s", out.stdout)
	}
	b.ctl(t, "ns", "host", "add", sub2, "2", hy.NQN)
	if err := waitFor(15*time.Second, func() bool { return pathDiskSize(ycs, 2) == 16*mib }); err != nil {
		t.Errorf("Y, added to the mask through gateway 2, has no disk of namespace 2 (%d bytes)", pathDiskSize(ycs, 2))
	}
	if n := pathDiskSize(xcs, 2); n != 16*mib {
		t.Errorf("X lost namespace 2 when Y was added to its mask (%d bytes)", n)
	}

	// Acceptance 7: a corrupt group object. Changes are refused with the reason, both gateways
	// go on serving, and once repaired the group works again.
	state := "nvmeof-tgt." + grp + ".state"
	saved := filepath.Join(dir, "state.data")
	if r := radosCmd(t, "get", state, saved); r.err != nil {
		t.Fatalf("rados get %s: %v", state, r)
	}
	garbage := filepath.Join(dir, "garbage")
	os.WriteFile(garbage, []byte("\x00\x01 not a group state \xff"), 0o644)
	if r := radosCmd(t, "put", state, garbage); r.err != nil {
		t.Fatalf("rados put: %v", r)
	}
	out, err := a.ctlErr("ns", "add", sub, "--nsid", "3", "--backend", "memory", "--size", "1MiB")
	if err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("a change on a corrupt group object: %v %s, want an error naming the corruption", err, out)
	}
	t.Logf("refused: %v", err)
	if err := waitFor(2*limits.GroupPoll, func() bool { return strings.Contains(b.gwStatus(t).Group.Error, "corrupt") }); err != nil {
		t.Errorf("gateway 2 does not report the corrupt object: %+v", b.gwStatus(t).Group)
	}
	dev2 := headDev(t, sub, 2)
	want := pattern(ddBlock, 31)
	ddWrite(t, dev2, 0, want)
	checkSame(t, "namespace 2 while the group object is corrupt", 0, ddRead(t, dev2, 0, ddBlock), want)
	if g := b.gwStatus(t).nsGroups(sub); len(g) != 2 {
		t.Errorf("gateway 2 stopped serving: %v", g)
	}
	if r := radosCmd(t, "put", state, saved); r.err != nil {
		t.Fatalf("rados put (repair): %v", r)
	}
	if err := waitFor(2*limits.GroupPoll, func() bool {
		return a.gwStatus(t).Group.Error == "" && b.gwStatus(t).Group.Error == ""
	}); err != nil {
		t.Errorf("after the repair: %+v / %+v", a.gwStatus(t).Group, b.gwStatus(t).Group)
	}

	// Acceptance 7: changes through both gateways at once. Each lands or is refused with a
	// clear conflict; both gateways end up serving exactly those that landed.
	var mu sync.Mutex
	var landed []string
	var wg sync.WaitGroup
	for i := range 8 {
		gw := a
		if i%2 == 1 {
			gw = b
		}
		name := nqn(fmt.Sprintf("group-race-%d", i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := gw.ctlErr("subsystem", "add", name, "--allow-any-host")
			switch {
			case err == nil:
				mu.Lock()
				landed = append(landed, name)
				mu.Unlock()
			case strings.Contains(err.Error(), "try again"):
				t.Logf("%s: refused as a conflict: %v", name, err)
			default:
				t.Errorf("%s: %v %s", name, err, out)
			}
		}()
	}
	wg.Wait()
	slices.Sort(landed)
	racers := func(st gwStatus) []string {
		var out []string
		for _, s := range st.Subsystems {
			if strings.Contains(s.NQN, "group-race-") {
				out = append(out, s.NQN)
			}
		}
		slices.Sort(out)
		return out
	}
	if err := waitFor(2*limits.GroupPoll, func() bool {
		return slices.Equal(racers(a.gwStatus(t)), landed) && slices.Equal(racers(b.gwStatus(t)), landed)
	}); err != nil {
		t.Errorf("concurrent changes: %d landed %v; gateway 1 serves %v, gateway 2 %v", len(landed), landed, racers(a.gwStatus(t)), racers(b.gwStatus(t)))
	}
	t.Logf("concurrent changes: %d of 8 landed; conflicts retried: gateway 1 %d, gateway 2 %d",
		len(landed), a.gwStatus(t).Group.Conflicts, b.gwStatus(t).Group.Conflicts)

	// Acceptance 4: kill -9 of gateway 1, which owns namespace 1, while fio verifies it.
	_, _, addrsA := b.gwStatus(t).member(1)
	if len(addrsA) < 2 {
		t.Errorf("gateway 1's lease records %v: want its group client's and its data path's addresses", addrsA)
	}
	dev1 := headDev(t, sub, 1)
	fio := mpFio(t, dev1, dir, 4096, 45*time.Second)
	time.Sleep(8 * time.Second)
	a.Crash(t)
	killed := time.Now()
	waitPathStates(t, "after gateway 1's kill", []string{cb}, [3]map[uint32]string{{1: "optimized", 2: "optimized"}, nil, nil}, 20*time.Second)
	t.Logf("gateway 2 took namespace 1 over %v after the kill", time.Since(killed).Round(time.Millisecond))
	st := b.gwStatus(t)
	if alive, fenced, _ := st.member(1); alive || !fenced || st.Group.Failovers != 1 || st.Group.Owners["1"] != 2 {
		t.Errorf("gateway 2's view after the kill: %+v", st.Group)
	}
	bl := run(t, rbdTimeout, "ceph", "-c", cephConf, "osd", "blocklist", "ls")
	for _, ad := range addrsA {
		if !strings.Contains(string(bl.stdout), ad) {
			t.Errorf("gateway 1's client %s is not blocklisted:\n%s%s", ad, bl.stdout, bl.stderr)
		}
	}
	// Each entry outlasts an outage of hours: "ADDR EXPIRY", EXPIRY a date a year away, not
	// Ceph's default hour after which a cut-off gateway's held writes could land.
	dated := 0
	for _, line := range strings.Split(string(bl.stdout), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !slices.ContainsFunc(addrsA, func(ad string) bool { return strings.Contains(f[0], ad) }) {
			continue
		}
		dated++
		if until, err := time.Parse("2006-01-02", f[1][:min(10, len(f[1]))]); err != nil || until.Before(time.Now().AddDate(0, 0, 300)) {
			t.Errorf("gateway 1's client %s is blocklisted until %s (%v), want a year", f[0], f[1], err)
		}
	}
	if dated < len(addrsA) {
		t.Errorf("%d of gateway 1's %d addresses listed with an expiry:\n%s", dated, len(addrsA), bl.stdout)
	}
	time.Sleep(5 * time.Second)
	a.Start(t, spec)
	if err := waitFor(time.Minute, func() bool { return ctrlState(ca) == "live" }); err != nil {
		t.Fatalf("gateway 1's path did not come back: %s is %s", ca, ctrlState(ca))
	}
	waitPathStates(t, "failback", []string{ca, cb}, owned, 20*time.Second)
	if err := <-fio; err != nil {
		t.Fatal(err)
	}
	if g := a.gwStatus(t).nsGroups(sub2); len(g) != 2 { // namespace 1 and the masked 2
		t.Errorf("restarted gateway 1 does not serve the group's second subsystem: %v", g)
	}
	if alive, _, _ := b.gwStatus(t).member(1); !alive {
		t.Errorf("gateway 2 does not see the restarted gateway 1 alive: %+v", b.gwStatus(t).Group)
	}
}
