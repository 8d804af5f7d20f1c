package nvme

import "testing"

func TestCAP(t *testing.T) {
	c := MakeCAP(127, true, 15, CAPCSSNVM, 0, 4)
	// MQES 127, CQR bit 16, TO 15 in 31:24, CSS bit 37, MPSMAX 4 in 55:52.
	const want = 127 | 1<<16 | 15<<24 | 1<<37 | 4<<52
	if c != want {
		t.Fatalf("MakeCAP = %#x, want %#x", uint64(c), uint64(want))
	}
	if c.MQES() != 127 || !c.CQR() || c.TO() != 15 || c.CSS() != 1 || c.MPSMIN() != 0 || c.MPSMAX() != 4 {
		t.Errorf("CAP accessors: %d %v %d %d %d %d", c.MQES(), c.CQR(), c.TO(), c.CSS(), c.MPSMIN(), c.MPSMAX())
	}
	if MakeCAP(0xffff, false, 0, 0, 1, 0).CQR() {
		t.Error("CQR set")
	}
}

func TestCC(t *testing.T) {
	// The Linux host writes EN, CSS NVM, MPS 0, AMS RR, IOSQES 6, IOCQES 4.
	cc := CC(1 | 6<<16 | 4<<20)
	if !cc.Enabled() || cc.IOSQES() != 6 || cc.IOCQES() != 4 || cc.MPS() != 0 || cc.AMS() != 0 || cc.CSS() != 0 || cc.SHN() != SHNNone {
		t.Errorf("CC %#x decoded wrong", uint32(cc))
	}
	cc = CC(SHNNormal<<14 | 3<<7 | 7<<11 | 6<<4)
	if cc.Enabled() || cc.SHN() != SHNNormal || cc.MPS() != 3 || cc.AMS() != 7 || cc.CSS() != 6 {
		t.Errorf("CC %#x decoded wrong", uint32(cc))
	}
	if CC(SHNAbrupt<<14).SHN() != SHNAbrupt {
		t.Error("SHN abrupt")
	}
}

func TestCSTS(t *testing.T) {
	s := CSTS(CSTSReady | CSTSShstComplete)
	if !s.Ready() || s.Fatal() || s.SHST() != 2 || uint32(s) != 0x9 {
		t.Errorf("CSTS %#x", uint32(s))
	}
	var raw uint32 = CSTSReady // untyped constants work with plain uint32
	raw = raw&^CSTSShstMask | CSTSShstOccurring
	if raw != 0x5 || !CSTS(CSTSFatal).Fatal() {
		t.Errorf("raw CSTS %#x", raw)
	}
}

func TestVersion(t *testing.T) {
	if MakeVS(1, 3, 0) != 0x00010300 || Version1_3 != 0x00010300 || Version1_4 != 0x00010400 || Version2_0 != 0x00020000 {
		t.Error("version encoding")
	}
	if MakeVS(1, 2, 1) != 0x00010201 {
		t.Error("tertiary")
	}
}
