package fabric

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"slices"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/blockdev"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// anaRig is the rig with a second loop port, "loop1", and namespaces 1 (ANA
// group 1), 2 and 3 (group 2).
func anaRig(t *testing.T) (*rig, *Port, *Port) {
	t.Helper()
	r := newRig(t)
	for _, nsid := range []uint32{2, 3} {
		dev, err := blockdev.NewMemory(1<<20, 512)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.sub.AddNamespace(NamespaceConfig{NSID: nsid, Device: dev, ANAGroup: 2}); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.tgt.AddPort(r.lt, &Port{ID: 7, Address: "loop1", Service: "1"}); err != nil {
		t.Fatal(err)
	}
	ports := r.tgt.Ports()
	return r, ports[0], ports[1]
}

// connectOn connects and enables a controller through the loop port at
// addr.
func (r *rig) connectOn(addr, subnqn string) *host {
	r.t.Helper()
	lq, err := r.lt.Dial(addr, 0, 32)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(lq.Close)
	h := &host{t: r.t, lq: lq}
	h.mustOK(connectCmd(0, 31, 0), connectData(subnqn, testHostNQN, testHostID, 0xffff))
	h.propSet(nvme.PropCC, ccEnable)
	return h
}

func anaLog(t *testing.T, h *host, lsp uint8, rae bool) []nvme.ANAGroupDesc {
	t.Helper()
	c := newCmd(nvme.OpAdminGetLogPage, 11)
	c.SetNSID(nvme.NSIDAll)
	c.SetGetLogPage(nvme.LogANA, 4096/4, 0)
	c.SetCDW(10, c.CDW(10)|uint32(lsp)<<8)
	if rae {
		c.SetCDW(10, c.CDW(10)|1<<15)
	}
	buf := make([]byte, 4096)
	h.mustOK(withData(c, len(buf)), buf)
	_, groups, ok := nvme.ParseANALog(buf)
	if !ok {
		t.Fatalf("ANA log does not parse: % x", buf[:64])
	}
	return groups
}

func TestANAIdentify(t *testing.T) {
	r, _, _ := anaRig(t)
	h, _ := r.adminConnect(testNQN, testHostNQN, 0)
	b, st := identify(h, nvme.CNSController, 0)
	if !st.IsSuccess() {
		t.Fatal(st)
	}
	id := nvme.IdentifyController(b)
	if id.CMIC() != nvme.CMICMultiController|nvme.CMICANAReporting || id.ANACAP() != 0x1f || id.ANATT() != 10 ||
		id.ANAGRPMAX() != 128 || id.NANAGRPID() != 128 || id.MNAN() != id.NN() || id.MNAN() != 1024 ||
		id.OAES()&nvme.OAESANAChange == 0 {
		t.Errorf("CMIC %#x ANACAP %#x ANATT %d ANAGRPMAX %d NANAGRPID %d MNAN %d NN %d OAES %#x",
			id.CMIC(), id.ANACAP(), id.ANATT(), id.ANAGRPMAX(), id.NANAGRPID(), id.MNAN(), id.NN(), id.OAES())
	}
	for nsid, want := range map[nvme.NSID]uint32{1: 1, 2: 2, 3: 2} {
		b, st := identify(h, nvme.CNSNamespace, nsid)
		if ns := nvme.IdentifyNamespace(b); !st.IsSuccess() || ns.ANAGRPID() != want || ns.NMIC()&nvme.NMICShared == 0 {
			t.Errorf("namespace %d: %v ANAGRPID %d NMIC %#x, want group %d", nsid, st, ns.ANAGRPID(), ns.NMIC(), want)
		}
	}
}

// TestANALog: a descriptor per group with namespaces, NSIDs ascending, the
// state through the controller's own port; with RGO no NSIDs; any offset.
func TestANALog(t *testing.T) {
	r, p0, p1 := anaRig(t)
	if err := r.tgt.SetANAStates(p1.ID, map[uint32]nvme.ANAState{1: nvme.ANAInaccessible, 2: nvme.ANANonOptimized, 9: nvme.ANAChange}); err != nil {
		t.Fatal(err)
	}
	h0 := r.connectOn("loop0", testNQN)
	h1 := r.connectOn("loop1", testNQN)
	want := func(s1, s2 nvme.ANAState, nsids bool) []nvme.ANAGroupDesc {
		g := []nvme.ANAGroupDesc{{GroupID: 1, State: s1, NSIDs: []nvme.NSID{1}}, {GroupID: 2, State: s2, NSIDs: []nvme.NSID{2, 3}}}
		if !nsids {
			g[0].NSIDs, g[1].NSIDs = nil, nil
		}
		return g
	}
	same := func(a, b []nvme.ANAGroupDesc) bool {
		return slices.EqualFunc(a, b, func(x, y nvme.ANAGroupDesc) bool {
			return x.GroupID == y.GroupID && x.State == y.State && slices.Equal(x.NSIDs, y.NSIDs)
		})
	}
	if got := anaLog(t, h0, 0, false); !same(got, want(nvme.ANAOptimized, nvme.ANAOptimized, true)) {
		t.Errorf("through %d: %+v", p0.ID, got)
	}
	if got := anaLog(t, h1, 0, false); !same(got, want(nvme.ANAInaccessible, nvme.ANANonOptimized, true)) {
		t.Errorf("through %d: %+v", p1.ID, got)
	}
	if got := anaLog(t, h1, nvme.LSPANAReturnGroupsOnly, false); !same(got, want(nvme.ANAInaccessible, nvme.ANANonOptimized, false)) {
		t.Errorf("RGO: %+v", got)
	}
	// The host reads it in pieces: the bytes at an offset are those of
	// the whole page there.
	whole, st := getLog(h1, nvme.LogANA, 4096, 0)
	part, st2 := getLog(h1, nvme.LogANA, 36, 48)
	if !st.IsSuccess() || !st2.IsSuccess() || !slices.Equal(part, whole[48:84]) {
		t.Errorf("piece at 48: %v %v % x, want % x", st, st2, part, whole[48:84])
	}
	if n := binary.LittleEndian.Uint64(whole); n == 0 {
		t.Error("change count 0 after a change")
	}
}

// TestANAPathStatus: I/O to a namespace whose group is not accessible
// through the port fails with the Path Related status, without DNR, so the
// host retries elsewhere; the admin queue works, and other groups and ports
// are untouched.
func TestANAPathStatus(t *testing.T) {
	r, _, p1 := anaRig(t)
	h1 := r.connectOn("loop1", testNQN)
	h0 := r.connectOn("loop0", testNQN)
	q0 := r.ioConnectOn(h0, 1, h0.lq.q.Controller().ID())
	q1 := r.ioConnectOn(h1, 1, h1.lq.q.Controller().ID())
	io := func(h *host, nsid nvme.NSID) nvme.Status {
		q := q0
		if h == h1 {
			q = q1
		}
		c := ioCmd(nvme.OpRead, 40, 0, 8)
		c.SetNSID(nsid)
		return q.submit(c, make([]byte, 4096)).Status()
	}
	cases := []struct {
		state nvme.ANAState
		want  nvme.Status
	}{
		{nvme.ANAOptimized, nvme.StatusSuccess},
		{nvme.ANANonOptimized, nvme.StatusSuccess},
		{nvme.ANAInaccessible, nvme.StatusANAInaccessible},
		{nvme.ANAPersistentLoss, nvme.StatusANAPersistentLoss},
		{nvme.ANAChange, nvme.StatusANATransition},
	}
	for _, c := range cases {
		if err := r.tgt.SetANAStates(p1.ID, map[uint32]nvme.ANAState{2: c.state}); err != nil {
			t.Fatal(err)
		}
		if st := io(h1, 2); st != c.want || st.DNR() {
			t.Errorf("%v through port %d: %v, want %v without DNR", c.state, p1.ID, st, c.want)
		}
		if st := io(h1, 1); !st.IsSuccess() {
			t.Errorf("%v of group 2: group 1 got %v", c.state, st)
		}
		if st := io(h0, 2); !st.IsSuccess() {
			t.Errorf("%v through port %d: the other port got %v", c.state, p1.ID, st)
		}
		if _, st := identify(h1, nvme.CNSController, 0); !st.IsSuccess() {
			t.Errorf("%v: admin Identify %v", c.state, st)
		}
	}
}

// ioConnectOn connects I/O queue qid of controller cntlid, whose admin queue
// is h, over the same loop port.
func (r *rig) ioConnectOn(h *host, qid nvme.QID, cntlid nvme.CNTLID) *host {
	r.t.Helper()
	lq, err := r.lt.Dial(h.lq.l.p.Address, int(qid), 64)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(lq.Close)
	q := &host{t: r.t, lq: lq}
	q.mustOK(connectCmd(qid, 63, 0), connectData(testNQN, testHostNQN, testHostID, cntlid))
	return q
}

// TestANAChangeNotice: a change of a group's state through a port tells the
// controllers on that port whose subsystem has a namespace in the group,
// once until they read the log page (without RAE); moving a namespace to
// another group tells every controller.
func TestANAChangeNotice(t *testing.T) {
	r, p0, p1 := anaRig(t)
	h0 := r.connectOn("loop0", testNQN)
	h1 := r.connectOn("loop1", testNQN)
	setAEC(h0, nvme.AECANAChange)
	setAEC(h1, nvme.AECANAChange)
	ev := nvme.MakeAsyncEventResult(nvme.AsyncEventTypeNotice, nvme.AsyncInfoANAChange, nvme.LogANA)
	a0, a1 := aer(h0, 100), aer(h1, 101)
	if err := r.tgt.SetANAStates(p1.ID, map[uint32]nvme.ANAState{2: nvme.ANAInaccessible}); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, a1, ev)
	// A group with no namespace draws no notice.
	if err := r.tgt.SetANAStates(p0.ID, map[uint32]nvme.ANAState{40: nvme.ANAInaccessible}); err != nil {
		t.Fatal(err)
	}
	// Masked until read: another change sends nothing.
	a1 = aer(h1, 102)
	if err := r.tgt.SetANAStates(p1.ID, map[uint32]nvme.ANAState{2: nvme.ANAOptimized}); err != nil {
		t.Fatal(err)
	}
	anaLog(t, h1, 0, true) // RAE keeps it masked
	if err := r.tgt.SetANAStates(p1.ID, map[uint32]nvme.ANAState{2: nvme.ANAChange}); err != nil {
		t.Fatal(err)
	}
	select {
	case rsp := <-a1:
		t.Fatalf("a second notice before the log was read: %#x", rsp.DW0())
	case rsp := <-a0:
		t.Fatalf("a notice on the port that did not change: %#x", rsp.DW0())
	default:
	}
	anaLog(t, h1, 0, false)
	if err := r.tgt.SetANAStates(p1.ID, nil); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, a1, ev)
	// Moving a namespace between groups: both ports' controllers hear.
	if err := r.sub.SetNamespaceANAGroup(1, 3); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, a0, ev)
	if got := anaLog(t, h0, 0, false); len(got) != 2 || got[1].GroupID != 3 || !slices.Equal(got[1].NSIDs, []nvme.NSID{1}) {
		t.Errorf("after the move: %+v", got)
	}
}

// TestSubsystemPorts: a subsystem served on some ports only is, through the
// others, as unknown: Connect refuses it and discovery does not list it.
// Taking a port away deletes the controllers connected through it.
func TestSubsystemPorts(t *testing.T) {
	r, p0, p1 := anaRig(t)
	r.sub.SetPorts([]uint16{p1.ID})
	lq, err := r.lt.Dial("loop0", 0, 32)
	if err != nil {
		t.Fatal(err)
	}
	h := &host{t: t, lq: lq}
	t.Cleanup(lq.Close)
	if rsp := h.submit(connectCmd(0, 31, 0), connectData(testNQN, testHostNQN, testHostID, 0xffff)); rsp.Status() != nvme.StatusConnectInvalidParameters.WithDNR() || rsp.DW0() != 1<<16|256 {
		t.Fatalf("Connect through a port that does not serve it: %v %#x", rsp.Status(), rsp.DW0())
	}
	disc := r.connectOn("loop0", nvme.DiscoveryNQN)
	b, st := getLog(disc, nvme.LogDiscovery, 4096, 0)
	if !st.IsSuccess() {
		t.Fatal(st)
	}
	_, n, _ := nvme.ParseDiscoveryLogHeader(b)
	if e := nvme.UnmarshalDiscoveryLogEntry(b[nvme.DiscoveryLogHeaderSize:]); n != 1 || e.PORTID != p1.ID || e.TRADDR != "loop1" {
		t.Fatalf("discovery lists %d entries, the first %+v; want one, through port %d", n, e, p1.ID)
	}
	h1 := r.connectOn("loop1", testNQN)
	if got := r.sub.SetPorts([]uint16{p0.ID}); got != 1 {
		t.Fatalf("%d controllers deleted, want 1", got)
	}
	waitDisconnected(t, h1, "controller on a port taken away")
	r.connectOn("loop0", testNQN)
}

// TestCNTLIDRange: controller IDs come from the subsystem's range; past it,
// Connect is refused with Controller Busy.
func TestCNTLIDRange(t *testing.T) {
	r := newRig(t, func(sc *SubsystemConfig, _ *NamespaceConfig) { sc.CNTLIDMin, sc.CNTLIDMax = 10, 12 })
	var got []nvme.CNTLID
	for range 3 {
		_, id := r.adminConnect(testNQN, testHostNQN, 0)
		got = append(got, id)
	}
	if !slices.Equal(got, []nvme.CNTLID{10, 11, 12}) {
		t.Fatalf("CNTLIDs %v, want 10 11 12", got)
	}
	h := r.dial(0, 32)
	if st := h.submit(connectCmd(0, 31, 0), connectData(testNQN, testHostNQN, testHostID, 0xffff)).Status(); st != nvme.StatusConnectControllerBusy {
		t.Fatalf("a fourth controller: %v", st)
	}
	if _, err := r.tgt.AddSubsystem(SubsystemConfig{NQN: testNQN + "2", AllowAnyHost: true, CNTLIDMin: 9, CNTLIDMax: 3}); err == nil {
		t.Fatal("range 9..3 accepted")
	}
}

// TestReferrals: the discovery log lists referrals after the subsystems.
func TestReferrals(t *testing.T) {
	r := newRig(t)
	r.tgt.SetReferrals([]Referral{{Transport: "rdma", Address: "10.0.0.2", Service: "4420", PortID: 9}})
	disc := r.connectOn("loop0", nvme.DiscoveryNQN)
	b, st := getLog(disc, nvme.LogDiscovery, 4096, 0)
	if !st.IsSuccess() {
		t.Fatal(st)
	}
	_, n, _ := nvme.ParseDiscoveryLogHeader(b)
	e := nvme.UnmarshalDiscoveryLogEntry(b[nvme.DiscoveryLogHeaderSize+nvme.DiscoveryLogEntrySize:])
	if n != 2 || e.SUBTYPE != nvme.SubtypeReferral || e.SubNQN != nvme.DiscoveryNQN || e.TRADDR != "10.0.0.2" ||
		e.TRSVCID != "4420" || e.PORTID != 9 || e.TRTYPE != nvme.TRTypeRDMA || e.ADRFAM != nvme.AdrFamIPv4 {
		t.Fatalf("%d entries; referral %+v", n, e)
	}
}

// TestANALogAsNvmeCLIReadsIt: nvme-cli's ana-log sizes its buffer from
// Identify (header, NANAGRPID descriptors, MNAN NSIDs) and reads it in
// 4 KiB pieces, so it asks for offsets past the descriptors there are. The
// page is as long as that maximum, zero after its descriptors; past it the
// offset is an invalid field.
func TestANALogAsNvmeCLIReadsIt(t *testing.T) {
	r, _, _ := anaRig(t)
	h := r.connectOn("loop1", testNQN)
	b, st := identify(h, nvme.CNSController, 0)
	if !st.IsSuccess() {
		t.Fatal(st)
	}
	id := nvme.IdentifyController(b)
	for _, rgo := range []bool{false, true} {
		max := nvme.ANALogHeaderSize + int(id.NANAGRPID())*nvme.ANADescriptorSize
		if !rgo {
			max += 4 * int(id.MNAN())
		}
		lsp := uint8(0)
		if rgo {
			lsp = nvme.LSPANAReturnGroupsOnly
		}
		read := func(off, n int) ([]byte, nvme.Status) {
			c := newCmd(nvme.OpAdminGetLogPage, 12)
			c.SetGetLogPage(nvme.LogANA, uint32(n/4), uint64(off))
			c.SetCDW(10, c.CDW(10)|uint32(lsp)<<8)
			buf := make([]byte, n)
			return buf, h.submit(withData(c, n), buf).Status()
		}
		page := make([]byte, 0, max)
		for off := 0; off < max; off += 4096 {
			buf, st := read(off, min(4096, max-off))
			if !st.IsSuccess() {
				t.Fatalf("rgo %v: piece at %d of %d: %v", rgo, off, max, st)
			}
			page = append(page, buf...)
		}
		_, descs, ok := nvme.ParseANALog(page)
		if !ok || len(descs) != 2 {
			t.Fatalf("rgo %v: %d descriptors", rgo, len(descs))
		}
		end := nvme.ANALogSize(descs, rgo)
		if slices.ContainsFunc(page[end:], func(b byte) bool { return b != 0 }) {
			t.Errorf("rgo %v: bytes after the descriptors are not zero", rgo)
		}
		if _, st := read(max+4, 4); st != nvme.StatusInvalidField.WithDNR() {
			t.Errorf("rgo %v: offset past the page: %v", rgo, st)
		}
	}
}

// readANA reads n bytes of the ANA log page at off, as a host would.
func readANA(h *host, off uint64, n int, rgo bool) ([]byte, nvme.Status) {
	c := newCmd(nvme.OpAdminGetLogPage, 13)
	c.SetNSID(nvme.NSIDAll)
	c.SetGetLogPage(nvme.LogANA, uint32(n/4), off)
	if rgo {
		c.SetCDW(10, c.CDW(10)|uint32(nvme.LSPANAReturnGroupsOnly)<<8)
	}
	buf := bytes.Repeat([]byte{0xee}, n)
	return buf, h.submit(withData(c, n), buf).Status()
}

// TestANALogWindows: any window of the ANA log page (offset and length
// multiples of 4, as the host reads it in pieces) holds the bytes the whole
// page has there.
func TestANALogWindows(t *testing.T) {
	r, _, _ := anaRig(t)
	h := r.connectOn("loop1", testNQN)
	for _, rgo := range []bool{false, true} {
		size := int(nvme.ANALogMaxSize(128, 1024, rgo))
		page, st := readANA(h, 0, size, rgo)
		if !st.IsSuccess() {
			t.Fatalf("rgo %v: the whole page: %v", rgo, st)
		}
		if _, descs, ok := nvme.ParseANALog(page); !ok || len(descs) != 2 {
			t.Fatalf("rgo %v: %d descriptors", rgo, len(descs))
		}
		for _, w := range [][2]int{{0, 4}, {4, 8}, {12, 40}, {16, 32}, {44, 4}, {48, 4096}, {64, 100}, {size - 4, 4}, {size - 8, 64}, {size, 4}} {
			off, n := w[0], w[1]
			got, st := readANA(h, uint64(off), n, rgo)
			if !st.IsSuccess() {
				t.Fatalf("rgo %v: window %d+%d: %v", rgo, off, n, st)
			}
			want := make([]byte, n)
			copy(want, page[off:])
			if !bytes.Equal(got, want) {
				t.Errorf("rgo %v: window %d+%d:\n got % x\nwant % x", rgo, off, n, got, want)
			}
		}
	}
}

// TestANALogLargeNSID: the ANA log page is as long as Identify implies, 4
// bytes a possible namespace (MNAN = NN, the largest NSID): 256 MiB with a
// namespace at NSID 4000000h, 16 GiB at FFFFFFFDh. Any connected host may
// read it, so a Get Log Page sends its window without building the page:
// what one read allocates does not grow with the NSID, and every window
// holds the page's bytes. The 256 MiB case goes first so that, were the
// page built, the test fails on its bound before the 16 GiB one runs.
func TestANALogLargeNSID(t *testing.T) {
	const bound = 64 << 10 // bytes one 4 KiB read may allocate, loop transport and all (5 KiB measured)
	for _, nsid := range []nvme.NSID{1 << 26, nvme.MaxNSID} {
		r, _, _ := anaRig(t)
		dev, err := blockdev.NewMemory(1<<20, 512)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.sub.AddNamespace(NamespaceConfig{NSID: uint32(nsid), Device: dev, ANAGroup: 3}); err != nil {
			t.Fatal(err)
		}
		h := r.connectOn("loop0", testNQN)
		b, st := identify(h, nvme.CNSController, 0)
		if !st.IsSuccess() {
			t.Fatal(st)
		}
		id := nvme.IdentifyController(b)
		if id.MNAN() != uint32(nsid) {
			t.Fatalf("NSID %#x: MNAN %#x", nsid, id.MNAN())
		}
		descs := []nvme.ANAGroupDesc{
			{GroupID: 1, State: nvme.ANAOptimized, NSIDs: []nvme.NSID{1}},
			{GroupID: 2, State: nvme.ANAOptimized, NSIDs: []nvme.NSID{2, 3}},
			{GroupID: 3, State: nvme.ANAOptimized, NSIDs: []nvme.NSID{nsid}},
		}
		for _, rgo := range []bool{false, true} {
			size := uint64(nvme.ANALogHeaderSize + nvme.ANADescriptorSize*id.NANAGRPID())
			if !rgo {
				size += 4 * uint64(id.MNAN())
			}
			content := make([]byte, nvme.ANALogSize(descs, rgo))
			nvme.PutANALog(content, 0, descs, rgo)
			for _, off := range []uint64{0, 16, 4096, size / 2 &^ 3, size - 4096, size - 4} {
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				before := ms.TotalAlloc
				got, st := readANA(h, off, 4096, rgo)
				runtime.ReadMemStats(&ms)
				if a := ms.TotalAlloc - before; a > bound {
					t.Fatalf("NSID %#x rgo %v: a read at %d of a %d-byte page allocated %d bytes, over %d", nsid, rgo, off, size, a, bound)
				}
				if !st.IsSuccess() {
					t.Fatalf("NSID %#x rgo %v: read at %d of %d: %v", nsid, rgo, off, size, st)
				}
				want := make([]byte, 4096)
				if off < uint64(len(content)) {
					copy(want, content[off:])
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("NSID %#x rgo %v: window at %d:\n got % x\nwant % x", nsid, rgo, off, got[:64], want[:64])
				}
			}
			if _, st := readANA(h, size+4, 4, rgo); st != nvme.StatusInvalidField.WithDNR() {
				t.Errorf("NSID %#x rgo %v: offset past the page: %v", nsid, rgo, st)
			}
		}
	}
}
