package fabric

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

func identify(h *host, cns uint8, nsid nvme.NSID) ([]byte, nvme.Status) {
	c := newCmd(nvme.OpAdminIdentify, 10)
	c.SetIdentify(cns, 0, 0)
	c.SetNSID(nsid)
	buf := bytes.Repeat([]byte{0xee}, nvme.IdentifyDataSize)
	rsp := h.submit(withData(c, len(buf)), buf)
	return buf, rsp.Status()
}

func TestIdentifyController(t *testing.T) {
	r := newRig(t)
	h, cntlid := r.adminConnect(testNQN, testHostNQN, 0)
	b, st := identify(h, nvme.CNSController, 0)
	if !st.IsSuccess() {
		t.Fatal(st)
	}
	id := nvme.IdentifyController(b)
	checks := []struct {
		name      string
		got, want any
	}{
		{"CNTLID", id.CNTLID(), cntlid},
		{"SubNQN", id.SubNQN(), testNQN},
		{"CNTRLTYPE", id.CNTRLTYPE(), uint8(1)},
		{"MDTS (128 KiB / 4 KiB = 2^5)", id.MDTS(), uint8(5)},
		{"SGLS keyed", id.SGLS() & (1 << 2), uint32(1 << 2)},
		{"SGLS offsets (in-capsule data)", id.SGLS() & (1 << 20), uint32(1 << 20)},
		{"IOCCSZ", id.IOCCSZ(), uint32(4)}, // loop port: no in-capsule data
		{"IORCSZ", id.IORCSZ(), uint32(1)},
		{"KAS", id.KAS(), uint16(10)},
		{"NN", id.NN(), uint32(1024)},
		{"ONCS DSM+WZ+reservations", id.ONCS(), uint16(1<<2 | 1<<3 | 1<<5)},
		{"SQES", id.SQES(), uint8(0x66)},
		{"CQES", id.CQES(), uint8(0x44)},
		{"MAXCMD", id.MAXCMD(), uint16(64)},
		{"VWC", id.VWC(), uint8(1)},
		{"CTRATT 128-bit host ID", id.CTRATT() & 1, uint32(1)},
		{"Model", id.ModelNumber(), "nvmeof-tgt"},
		{"PSD0 MP (25 W)", id.PSD(0).MP(), uint16(2500)},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestIdentifyNamespaces(t *testing.T) {
	r := newRig(t)
	h, _ := r.adminConnect(testNQN, testHostNQN, 0)
	tests := []struct {
		name   string
		cns    uint8
		nsid   nvme.NSID
		want   nvme.Status
		verify func(t *testing.T, b []byte)
	}{
		{"namespace", nvme.CNSNamespace, 1, nvme.StatusSuccess, func(t *testing.T, b []byte) {
			id := nvme.IdentifyNamespace(b)
			if id.NSZE() != 8192 || id.NCAP() != 8192 || id.NLBAF() != 0 || id.LBAF(0).LBADS() != 9 || id.NGUID() != [16]byte{0xbb, 2} {
				t.Errorf("NSZE %d NCAP %d NLBAF %d LBADS %d NGUID %x", id.NSZE(), id.NCAP(), id.NLBAF(), id.LBAF(0).LBADS(), id.NGUID())
			}
			if id.DLFEAT()&7 != 1 {
				t.Errorf("DLFEAT %#x: memory reads deallocated blocks as zeroes", id.DLFEAT())
			}
		}},
		{"inactive namespace is zeroes", nvme.CNSNamespace, 7, nvme.StatusSuccess, func(t *testing.T, b []byte) {
			if !bytes.Equal(b, make([]byte, len(b))) {
				t.Error("inactive NSID returned data")
			}
		}},
		{"NSID 0", nvme.CNSNamespace, 0, nvme.StatusInvalidNamespace.WithDNR(), nil},
		{"NSID above NN", nvme.CNSNamespace, 5000, nvme.StatusInvalidNamespace.WithDNR(), nil},
		{"active list", nvme.CNSActiveNSList, 0, nvme.StatusSuccess, func(t *testing.T, b []byte) {
			if binary.LittleEndian.Uint32(b) != 1 || binary.LittleEndian.Uint32(b[4:]) != 0 {
				t.Errorf("list %x", b[:8])
			}
		}},
		{"active list after last", nvme.CNSActiveNSList, 1, nvme.StatusSuccess, func(t *testing.T, b []byte) {
			if binary.LittleEndian.Uint32(b) != 0 {
				t.Errorf("list %x", b[:8])
			}
		}},
		{"descriptors", nvme.CNSNSDescriptorList, 1, nvme.StatusSuccess, func(t *testing.T, b []byte) {
			d, err := nvme.ParseNSDescriptors(b)
			if err != nil || d.UUID == nil || *d.UUID != [16]byte{0xaa, 1} || d.NGUID == nil {
				t.Errorf("descriptors %+v, %v", d, err)
			}
		}},
		{"descriptors of inactive", nvme.CNSNSDescriptorList, 3, nvme.StatusInvalidNamespace.WithDNR(), nil},
		{"unknown CNS", 0x1f, 0, nvme.StatusInvalidField.WithDNR(), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, st := identify(h, tc.cns, tc.nsid)
			if st != tc.want {
				t.Fatalf("status %v, want %v", st, tc.want)
			}
			if tc.verify != nil {
				tc.verify(t, b)
			}
		})
	}
}

// TestIdentifyNamespaceIDs: the NGUID and EUI64 configured for a namespace
// are what Identify Namespace (bytes 104-127) and the Namespace
// Identification Descriptor list (CNS 03h, NIDT 1 and 2) report, and an
// all-zero one is absent from the list (base 1.4 §5.15.2).
func TestIdentifyNamespaceIDs(t *testing.T) {
	nguid := [16]byte{0x6e, 0x3f, 0x1a, 0x2b, 0x4c, 0x5d, 0x4e, 0x6f, 0x8a, 0x9b, 0x0c, 0x1d, 0x2e, 0x3f, 0x4a, 0x5b}
	eui64 := [8]byte{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77}
	tests := []struct {
		name  string
		nguid [16]byte
		eui64 [8]byte
	}{
		{"both", nguid, eui64},
		{"nguid only", nguid, [8]byte{}},
		{"eui64 only", [16]byte{}, eui64},
		{"neither", [16]byte{}, [8]byte{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, func(_ *SubsystemConfig, nc *NamespaceConfig) { nc.NGUID, nc.EUI64 = tc.nguid, tc.eui64 })
			h, _ := r.adminConnect(testNQN, testHostNQN, 0)
			b, st := identify(h, nvme.CNSNamespace, 1)
			if !st.IsSuccess() {
				t.Fatal(st)
			}
			id := nvme.IdentifyNamespace(b)
			if id.NGUID() != tc.nguid || id.EUI64() != tc.eui64 {
				t.Errorf("Identify Namespace NGUID %x EUI64 %x, want %x %x", id.NGUID(), id.EUI64(), tc.nguid, tc.eui64)
			}
			b, st = identify(h, nvme.CNSNSDescriptorList, 1)
			if !st.IsSuccess() {
				t.Fatal(st)
			}
			d, err := nvme.ParseNSDescriptors(b)
			if err != nil {
				t.Fatal(err)
			}
			if (d.NGUID != nil) != (tc.nguid != [16]byte{}) || d.NGUID != nil && *d.NGUID != tc.nguid {
				t.Errorf("NGUID descriptor %x, want %x (none if zero)", d.NGUID, tc.nguid)
			}
			if (d.EUI64 != nil) != (tc.eui64 != [8]byte{}) || d.EUI64 != nil && *d.EUI64 != tc.eui64 {
				t.Errorf("EUI64 descriptor %x, want %x (none if zero)", d.EUI64, tc.eui64)
			}
			if d.UUID == nil || *d.UUID != [16]byte{0xaa, 1} {
				t.Errorf("UUID descriptor %x, want the configured one", d.UUID)
			}
		})
	}
}

func getLog(h *host, lid uint8, n int, off uint64) ([]byte, nvme.Status) {
	c := newCmd(nvme.OpAdminGetLogPage, 11)
	c.SetNSID(nvme.NSIDAll)
	c.SetGetLogPage(lid, uint32(n/4), off)
	buf := bytes.Repeat([]byte{0xee}, n)
	return buf, h.submit(withData(c, n), buf).Status()
}

func TestGetLogPage(t *testing.T) {
	r := newRig(t)
	h, _ := r.adminConnect(testNQN, testHostNQN, 0)
	// One failed command so the error log has an entry.
	bad := newCmd(nvme.OpAdminIdentify, 77)
	bad.SetIdentify(0x1f, 0, 0)
	h.submit(withData(bad, 4096), make([]byte, 4096))
	tests := []struct {
		name   string
		lid    uint8
		n      int
		off    uint64
		want   nvme.Status
		verify func(t *testing.T, b []byte)
	}{
		{"smart", nvme.LogSMART, 512, 0, nvme.StatusSuccess, func(t *testing.T, b []byte) {
			s := nvme.UnmarshalSMARTLog(b)
			if s.Temperature == 0 || s.AvailableSpare != 100 || s.NumErrLogEntries != 1 {
				t.Errorf("%+v", s)
			}
		}},
		{"error log newest first", nvme.LogError, 128, 0, nvme.StatusSuccess, func(t *testing.T, b []byte) {
			e := nvme.UnmarshalErrorLogEntry(b)
			if e.ErrorCount != 1 || e.CID != 77 || e.Status != nvme.StatusInvalidField.WithDNR() {
				t.Errorf("%+v", e)
			}
			if !bytes.Equal(b[64:], make([]byte, 64)) {
				t.Error("unused entries are not zero")
			}
		}},
		{"firmware", nvme.LogFirmwareSlot, 512, 0, nvme.StatusSuccess, func(t *testing.T, b []byte) {
			if f := nvme.UnmarshalFirmwareSlotLog(b); f.AFI != 1 || f.FRS[0] != "0.1" {
				t.Errorf("%+v", f)
			}
		}},
		{"changed namespaces", nvme.LogChangedNSList, 4096, 0, nvme.StatusSuccess, nil},
		{"supported pages", nvme.LogSupportedPages, 1024, 0, nvme.StatusSuccess, func(t *testing.T, b []byte) {
			for _, lid := range []int{0, 1, 2, 3, 4, 5} {
				if b[lid*4]&1 == 0 {
					t.Errorf("LID %d not marked supported", lid)
				}
			}
		}},
		{"effects", nvme.LogCommandEffects, 4096, 0, nvme.StatusSuccess, func(t *testing.T, b []byte) {
			if w := binary.LittleEndian.Uint32(b[(256+nvme.OpWrite)*4:]); w != 3 {
				t.Errorf("write effects %#x, want CSUPP|LBCC", w)
			}
		}},
		{"offset within", nvme.LogSMART, 8, 0, nvme.StatusSuccess, nil},
		{"longer than the page is zero-filled", nvme.LogFirmwareSlot, 1024, 0, nvme.StatusSuccess, func(t *testing.T, b []byte) {
			if !bytes.Equal(b[512:], make([]byte, 512)) {
				t.Error("tail not zeroed")
			}
		}},
		{"unaligned offset", nvme.LogSMART, 8, 2, nvme.StatusInvalidField.WithDNR(), nil},
		{"offset past the end", nvme.LogSMART, 8, 1024, nvme.StatusInvalidField.WithDNR(), nil},
		{"unknown page", 0x7f, 64, 0, nvme.StatusInvalidLogPage.WithDNR(), nil},
		{"discovery page on an I/O controller", nvme.LogDiscovery, 1024, 0, nvme.StatusInvalidLogPage.WithDNR(), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, st := getLog(h, tc.lid, tc.n, tc.off)
			if st != tc.want {
				t.Fatalf("status %v, want %v", st, tc.want)
			}
			if tc.verify != nil {
				tc.verify(t, b)
			}
		})
	}
}

func TestFeatures(t *testing.T) {
	r := newRig(t)
	h, _ := r.adminConnect(testNQN, testHostNQN, 0)
	set := func(fid uint8, v uint32, save bool) nvme.Completion {
		c := newCmd(nvme.OpAdminSetFeatures, 12)
		dw10 := uint32(fid)
		if save {
			dw10 |= 1 << 31
		}
		c.SetCDW(10, dw10)
		c.SetCDW(11, v)
		return h.submit(c, nil)
	}
	get := func(fid uint8, sel uint32) nvme.Completion {
		c := newCmd(nvme.OpAdminGetFeatures, 13)
		c.SetCDW(10, uint32(fid)|sel<<8)
		return h.submit(c, nil)
	}
	tests := []struct {
		name    string
		fid     uint8
		set     uint32
		save    bool
		wantSet nvme.Status
		wantDW0 uint32 // from the set
		wantGet uint32 // current value after
	}{
		{"queues granted up to the limit", nvme.FeatNumberOfQueues, 7 | 7<<16, false, nvme.StatusSuccess, 3 | 3<<16, 3 | 3<<16},
		{"queues 0xffff", nvme.FeatNumberOfQueues, 0xffff, false, nvme.StatusInvalidField.WithDNR(), 0, 3 | 3<<16},
		{"keep-alive rounds to KAS", nvme.FeatKeepAliveTimer, 1500, false, nvme.StatusSuccess, 0, 2000},
		{"async event config", nvme.FeatAsyncEventConfig, 1 << 8, false, nvme.StatusSuccess, 0, 1 << 8},
		{"write cache off", nvme.FeatVolatileWriteCache, 0, false, nvme.StatusSuccess, 0, 0},
		{"arbitration", nvme.FeatArbitration, 3, false, nvme.StatusSuccess, 0, 3},
		{"not saveable", nvme.FeatArbitration, 3, true, nvme.StatusFeatureNotSaveable.WithDNR(), 0, 3},
		{"unknown feature", 0x7e, 0, false, nvme.StatusInvalidField.WithDNR(), 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rsp := set(tc.fid, tc.set, tc.save)
			if rsp.Status() != tc.wantSet {
				t.Fatalf("set: %v, want %v", rsp.Status(), tc.wantSet)
			}
			if tc.wantSet.IsSuccess() && rsp.DW0() != tc.wantDW0 {
				t.Fatalf("set DW0 %#x, want %#x", rsp.DW0(), tc.wantDW0)
			}
			g := get(tc.fid, 0)
			if tc.fid == 0x7e {
				if g.Status() != nvme.StatusInvalidField.WithDNR() {
					t.Fatalf("get unknown: %v", g.Status())
				}
				return
			}
			if !g.Status().IsSuccess() || g.DW0() != tc.wantGet {
				t.Fatalf("get: %v DW0 %#x, want %#x", g.Status(), g.DW0(), tc.wantGet)
			}
		})
	}
	if g := get(nvme.FeatTemperatureThreshold, 1); g.DW0() != 343 {
		t.Errorf("default temperature threshold %d", g.DW0())
	}
	if g := get(nvme.FeatKeepAliveTimer, 3); g.DW0() != 1<<2 {
		t.Errorf("capabilities %#x, want changeable", g.DW0())
	}
	c := newCmd(nvme.OpAdminGetFeatures, 14)
	c.SetCDW(10, nvme.FeatHostIdentifier)
	c.SetCDW(11, 1)
	buf := make([]byte, 16)
	if st := h.submit(withData(c, 16), buf).Status(); !st.IsSuccess() || [16]byte(buf) != testHostID {
		t.Errorf("host identifier: %v %x", st, buf)
	}
}

func TestAsyncEventRequest(t *testing.T) {
	r := newRig(t)
	h, _ := r.adminConnect(testNQN, testHostNQN, 0)
	done := make(chan nvme.Completion, aerLimit+1)
	for i := 0; i < aerLimit; i++ {
		go func(i int) {
			rsp := nvme.Completion(make([]byte, 16))
			if err := h.lq.Submit(newCmd(nvme.OpAdminAsyncEvent, uint16(100+i)), nil, rsp); err == nil {
				done <- rsp
			}
		}(i)
	}
	// Wait until all are held, then one more exceeds the limit.
	for r.sub.controllers[1] == nil || len(h.lq.q.Controller().events.heldCIDs()) < aerLimit {
		select {
		case rsp := <-done:
			t.Fatalf("AER completed early: %v", rsp.Status())
		default:
		}
	}
	if st := h.submit(newCmd(nvme.OpAdminAsyncEvent, 200), nil).Status(); st != nvme.StatusAsyncEventLimitExceeded.WithDNR() {
		t.Fatalf("extra AER: %v", st)
	}
	ctrl := h.lq.q.Controller()
	ctrl.postEvent(nvme.MakeAsyncEventResult(2, 0, nvme.LogChangedNSList))
	rsp := <-done
	if !rsp.Status().IsSuccess() || rsp.DW0() != nvme.MakeAsyncEventResult(2, 0, nvme.LogChangedNSList) {
		t.Fatalf("event: %v %#x", rsp.Status(), rsp.DW0())
	}
}

func TestAdminBeforeEnable(t *testing.T) {
	r := newRig(t)
	h := r.dial(0, 32)
	h.mustOK(connectCmd(0, 31, 0), connectData(testNQN, testHostNQN, testHostID, 0xffff))
	if _, st := identify(h, nvme.CNSController, 0); st != nvme.StatusCommandSequenceError.WithDNR() {
		t.Fatalf("identify before CC.EN: %v", st)
	}
}

func TestDiscovery(t *testing.T) {
	r := newRig(t, func(sc *SubsystemConfig, _ *NamespaceConfig) {
		sc.AllowAnyHost = false
		sc.Hosts = []string{testHostNQN}
	})
	if _, err := r.tgt.AddSubsystem(SubsystemConfig{NQN: "nqn.2026-11.io.example:open", AllowAnyHost: true}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		hostnqn string
		want    []string
	}{
		{"allowed host sees both", testHostNQN, []string{"nqn.2026-11.io.example:open", testNQN}},
		{"other host sees only the open one", "nqn.2026-11.io.example:other", []string{"nqn.2026-11.io.example:open"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := r.adminConnect(nvme.DiscoveryNQN, tc.hostnqn, 0)
			id, st := identify(h, nvme.CNSController, 0)
			if !st.IsSuccess() || nvme.IdentifyController(id).CNTRLTYPE() != 2 {
				t.Fatalf("discovery identify: %v", st)
			}
			if _, st := identify(h, nvme.CNSNamespace, 1); st != nvme.StatusInvalidField.WithDNR() {
				t.Fatalf("namespace identify on discovery: %v", st)
			}
			b, st := getLog(h, nvme.LogDiscovery, 4096, 0)
			if !st.IsSuccess() {
				t.Fatal(st)
			}
			gen, n, _ := nvme.ParseDiscoveryLogHeader(b)
			if gen == 0 || int(n) != len(tc.want) {
				t.Fatalf("genctr %d numrec %d, want %d records", gen, n, len(tc.want))
			}
			for i, nqn := range tc.want {
				e := nvme.UnmarshalDiscoveryLogEntry(b[nvme.DiscoveryLogHeaderSize+i*nvme.DiscoveryLogEntrySize:])
				if e.SubNQN != nqn || e.TRTYPE != nvme.TRTypeLoop || e.SUBTYPE != nvme.SubtypeNVMe || e.CNTLID != 0xffff || e.TRADDR != "loop0" || e.TRSVCID != "1" {
					t.Errorf("entry %d: %+v", i, e)
				}
			}
			if _, st := getLog(h, nvme.LogSMART, 512, 0); st != nvme.StatusInvalidLogPage.WithDNR() {
				t.Errorf("SMART on discovery: %v", st)
			}
			if st := h.submit(newCmd(nvme.OpAdminKeepAlive, 5), nil).Status(); !st.IsSuccess() {
				t.Errorf("keep alive: %v", st)
			}
		})
	}
}

// TestIdentifyGolden pins the Identify data hosts see from an NVM
// controller, a discovery controller and a namespace: a change shows as a
// diff of testdata/*.hex (rewrite them with -update when it is meant).
func TestIdentifyGolden(t *testing.T) {
	r := newRig(t)
	h, _ := r.adminConnect(testNQN, testHostNQN, 0)
	for _, tt := range []struct {
		file string
		cns  uint8
		nsid nvme.NSID
	}{
		{"identify-controller.hex", nvme.CNSController, 0},
		{"identify-namespace.hex", nvme.CNSNamespace, 1},
	} {
		b, st := identify(h, tt.cns, tt.nsid)
		if !st.IsSuccess() {
			t.Fatalf("%s: %v", tt.file, st)
		}
		checkGolden(t, tt.file, b)
	}
	d, _ := r.adminConnect(nvme.DiscoveryNQN, testHostNQN, 0)
	b, st := identify(d, nvme.CNSController, 0)
	if !st.IsSuccess() {
		t.Fatalf("discovery: %v", st)
	}
	checkGolden(t, "identify-discovery-controller.hex", b)
}
