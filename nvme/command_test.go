package nvme

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// sqeRef mirrors a submission queue entry for encoding/binary (base §4.2).
type sqeRef struct {
	Opcode, Flags uint8
	CID           uint16
	NSID          uint32
	CDW2, CDW3    uint32
	MPTR          uint64
	DPTR          [16]byte
	CDW10, CDW11  uint32
	CDW12, CDW13  uint32
	CDW14, CDW15  uint32
}

// connectRef mirrors a fabrics Connect command (NVMe-oF §3.3).
type connectRef struct {
	Opcode, Resv1 uint8
	CID           uint16
	FCType        uint8
	Resv2         [19]byte
	SGL1          [16]byte
	RECFMT, QID   uint16
	SQSize        uint16
	CATTR, Resv3  uint8
	KATO          uint32
	Resv4         [12]byte
}

// propertyRef mirrors Property Get/Set (NVMe-oF §3.4, §3.5).
type propertyRef struct {
	Head   [40]byte
	Attrib uint8
	Resv   [3]byte
	Offset uint32
	Value  uint64
	Resv2  [8]byte
}

// checkCommandRef decodes c with encoding/binary and compares every
// accessor with the reference.
func checkCommandRef(t *testing.T, c Command) {
	t.Helper()
	var r sqeRef
	if err := binary.Read(bytes.NewReader(c[:CommandSize]), binary.LittleEndian, &r); err != nil {
		t.Fatal(err)
	}
	cdws := []uint32{
		uint32(r.Opcode) | uint32(r.Flags)<<8 | uint32(r.CID)<<16, r.NSID, r.CDW2, r.CDW3,
		uint32(r.MPTR), uint32(r.MPTR >> 32),
		binary.LittleEndian.Uint32(r.DPTR[0:]), binary.LittleEndian.Uint32(r.DPTR[4:]),
		binary.LittleEndian.Uint32(r.DPTR[8:]), binary.LittleEndian.Uint32(r.DPTR[12:]),
		r.CDW10, r.CDW11, r.CDW12, r.CDW13, r.CDW14, r.CDW15,
	}
	for i, want := range cdws {
		if got := c.CDW(i); got != want {
			t.Errorf("CDW(%d) = %#x, want %#x", i, got, want)
		}
	}
	eq := func(name string, got, want uint64) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %#x, want %#x", name, got, want)
		}
	}
	eq("Opcode", uint64(c.Opcode()), uint64(r.Opcode))
	eq("Flags", uint64(c.Flags()), uint64(r.Flags))
	eq("PSDT", uint64(c.PSDT()), uint64(r.Flags>>6))
	eq("FUSE", uint64(c.FUSE()), uint64(r.Flags&3))
	eq("CID", uint64(c.CID()), uint64(r.CID))
	eq("NSID", uint64(c.NSID()), uint64(r.NSID))
	eq("MPTR", c.MPTR(), r.MPTR)
	if !bytes.Equal(c.SGL1(), r.DPTR[:]) {
		t.Errorf("SGL1 = %x, want %x", []byte(c.SGL1()), r.DPTR)
	}
	eq("SLBA", c.SLBA(), uint64(r.CDW11)<<32|uint64(r.CDW10))
	eq("NumBlocks", uint64(c.NumBlocks()), uint64(r.CDW12&0xffff)+1)
	eq("FUA", b2u(c.FUA()), uint64(r.CDW12>>30&1))
	eq("DEAC", b2u(c.DEAC()), uint64(r.CDW12>>25&1))
	eq("CNS", uint64(c.CNS()), uint64(r.CDW10&0xff))
	eq("CNTID", uint64(c.CNTID()), uint64(r.CDW10>>16))
	eq("CSI", uint64(c.CSI()), uint64(r.CDW11>>24))
	eq("LogPageID", uint64(c.LogPageID()), uint64(r.CDW10&0xff))
	eq("LogPageLSP", uint64(c.LogPageLSP()), uint64(r.CDW10>>8&0x7f))
	eq("LogPageRAE", b2u(c.LogPageRAE()), uint64(r.CDW10>>15&1))
	eq("LogPageNumDwords", uint64(c.LogPageNumDwords()), min(uint64(r.CDW11&0xffff)<<16|uint64(r.CDW10>>16)+1, 0xffffffff))
	eq("LogPageOffset", c.LogPageOffset(), uint64(r.CDW13)<<32|uint64(r.CDW12))
	eq("FeatureID", uint64(c.FeatureID()), uint64(r.CDW10&0xff))
	eq("FeatureSelect", uint64(c.FeatureSelect()), uint64(r.CDW10>>8&7))
	eq("FeatureSave", b2u(c.FeatureSave()), uint64(r.CDW10>>31))
	eq("DSMNumRanges", uint64(c.DSMNumRanges()), uint64(r.CDW10&0xff)+1)
	eq("DSMDeallocate", b2u(c.DSMDeallocate()), uint64(r.CDW11>>2&1))

	var cr connectRef
	if err := binary.Read(bytes.NewReader(c[:CommandSize]), binary.LittleEndian, &cr); err != nil {
		t.Fatal(err)
	}
	eq("FCType", uint64(c.FCType()), uint64(cr.FCType))
	eq("ConnectRECFMT", uint64(c.ConnectRECFMT()), uint64(cr.RECFMT))
	eq("ConnectQID", uint64(c.ConnectQID()), uint64(cr.QID))
	eq("ConnectSQSize", uint64(c.ConnectSQSize()), uint64(cr.SQSize))
	eq("ConnectCATTR", uint64(c.ConnectCATTR()), uint64(cr.CATTR))
	eq("ConnectKATO", uint64(c.ConnectKATO()), uint64(cr.KATO))

	var pr propertyRef
	if err := binary.Read(bytes.NewReader(c[:CommandSize]), binary.LittleEndian, &pr); err != nil {
		t.Fatal(err)
	}
	eq("PropertyAttrib", uint64(c.PropertyAttrib()), uint64(pr.Attrib))
	eq("PropertyOffset", uint64(c.PropertyOffset()), uint64(pr.Offset))
	eq("PropertyValue", c.PropertyValue(), pr.Value)
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func TestCommandReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		c := make(Command, CommandSize)
		for i := range c {
			c[i] = byte(r.Uint32())
		}
		checkCommandRef(t, c)
	}
}

func TestCommandAccessors(t *testing.T) {
	// A Read of 8 blocks at LBA 0x1122334455667788 with FUA, CID 0xbeef,
	// NSID 1, and a keyed SGL.
	raw := Command{
		0x02, 0x40, 0xef, 0xbe, 0x01, 0x00, 0x00, 0x00, // opcode, flags (PSDT 01b), CID, NSID
		0, 0, 0, 0, 0, 0, 0, 0, // CDW2-3
		0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, // MPTR
		0x00, 0x10, 0, 0, 0, 0, 0, 0, 0x00, 0x20, 0x00, 0x78, 0x56, 0x34, 0x12, 0x4f, // keyed SGL
		0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, // SLBA
		0x07, 0x00, 0x00, 0x40, // NLB 7 (8 blocks), FUA
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	}
	tests := []struct {
		name      string
		got, want any
	}{
		{"Opcode", raw.Opcode(), uint8(OpRead)},
		{"Flags", raw.Flags(), uint8(0x40)},
		{"PSDT", raw.PSDT(), uint8(PSDTSGLContig)},
		{"FUSE", raw.FUSE(), uint8(0)},
		{"CID", raw.CID(), uint16(0xbeef)},
		{"NSID", raw.NSID(), NSID(1)},
		{"MPTR", raw.MPTR(), uint64(0x8877665544332211)},
		{"SLBA", raw.SLBA(), uint64(0x1122334455667788)},
		{"NumBlocks", raw.NumBlocks(), uint32(8)},
		{"FUA", raw.FUA(), true},
		{"DEAC", raw.DEAC(), false},
		{"CDW12", raw.CDW(12), uint32(0x40000007)},
		{"SGL type", raw.SGL1().Type(), uint8(SGLTypeKeyedDataBlock)},
		{"SGL subtype", raw.SGL1().Subtype(), uint8(SGLSubtypeInvalidateKey)},
		{"SGL addr", raw.SGL1().Address(), uint64(0x1000)},
		{"SGL len", raw.SGL1().Length(), uint32(0x2000)},
		{"SGL key", raw.SGL1().Key(), uint32(0x12345678)},
		{"direction", OpcodeDataDirection(raw.Opcode()), uint8(DataDirCtrlToHost)},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %#v, want %#v", tt.name, tt.got, tt.want)
		}
	}
	checkCommandRef(t, raw)
}

func TestCommandSetters(t *testing.T) {
	c := make(Command, CommandSize)
	c.SetOpcode(OpWrite)
	c.SetFlags(PSDTSGLContig << 6)
	c.SetCID(0x1234)
	c.SetNSID(0xdeadbeef)
	c.SetSLBA(0x0102030405060708)
	c.SetCDW(12, 1<<30)
	c.SetNumBlocks(65536)
	want := []byte{
		0x01, 0x40, 0x34, 0x12, 0xef, 0xbe, 0xad, 0xde,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,
		0xff, 0xff, 0x00, 0x40,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	}
	if !bytes.Equal(c, want) {
		t.Fatalf("command = %x\nwant      %x", []byte(c), want)
	}
	if c.NumBlocks() != 65536 || !c.FUA() {
		t.Errorf("NumBlocks = %d FUA = %v", c.NumBlocks(), c.FUA())
	}
	c.SetNumBlocks(1)
	if c.CDW(12) != 1<<30 {
		t.Errorf("SetNumBlocks(1): CDW12 = %#x", c.CDW(12))
	}
}

func TestCommandFabrics(t *testing.T) {
	c := make(Command, CommandSize)
	c.SetOpcode(OpFabrics)
	c.SetFCType(FCTypeConnect)
	c.SetConnect(0, 3, 127, ConnectCATTRDisableSQFlow, 120000)
	for _, tt := range []struct {
		off  int
		want []byte
	}{
		{0, []byte{0x7f}},
		{4, []byte{0x01}},
		{40, []byte{0, 0, 3, 0, 127, 0, 0x04, 0}},
		{48, []byte{0xc0, 0xd4, 0x01, 0x00}},
	} {
		if got := c[tt.off : tt.off+len(tt.want)]; !bytes.Equal(got, tt.want) {
			t.Errorf("bytes at %d = %x, want %x", tt.off, got, tt.want)
		}
	}
	if c.ConnectQID() != 3 || c.ConnectSQSize() != 127 || c.ConnectKATO() != 120000 ||
		c.ConnectCATTR() != ConnectCATTRDisableSQFlow || c.ConnectRECFMT() != 0 {
		t.Errorf("connect fields: qid %d sqsize %d kato %d cattr %d", c.ConnectQID(), c.ConnectSQSize(), c.ConnectKATO(), c.ConnectCATTR())
	}

	p := make(Command, CommandSize)
	p.SetOpcode(OpFabrics)
	p.SetFCType(FCTypePropertySet)
	p.SetProperty(PropertySize8, PropCC, 0x0102030405060708)
	if p[40] != 1 || binary.LittleEndian.Uint32(p[44:]) != PropCC || binary.LittleEndian.Uint64(p[48:]) != 0x0102030405060708 {
		t.Errorf("property bytes %x", []byte(p[40:56]))
	}
	if p.PropertyAttrib() != 1 || p.PropertyOffset() != PropCC || p.PropertyValue() != 0x0102030405060708 {
		t.Error("property accessors disagree with setter")
	}
	checkCommandRef(t, c)
	checkCommandRef(t, p)
}

func TestCommandAdminFields(t *testing.T) {
	tests := []struct {
		name  string
		cdw10 uint32
		cdw11 uint32
		check func(c Command) bool
	}{
		{"identify", 0xabcd_0001, 0x02_000000, func(c Command) bool {
			return c.CNS() == CNSController && c.CNTID() == 0xabcd && c.CSI() == CSIZNS
		}},
		{"log page", 0x00ff_8002 | 0x7f00, 0x0001, func(c Command) bool {
			return c.LogPageID() == LogSMART && c.LogPageRAE() && c.LogPageLSP() == 0x7f &&
				c.LogPageNumDwords() == 0x1_00ff+1
		}},
		{"get features", 0x0000_0307, 0, func(c Command) bool {
			return c.FeatureID() == FeatNumberOfQueues && c.FeatureSelect() == FeatSelectSupported && !c.FeatureSave()
		}},
		{"set features save", 0x8000_000f, 0, func(c Command) bool {
			return c.FeatureID() == FeatKeepAliveTimer && c.FeatureSave()
		}},
		{"dsm", 0x0000_00ff, 0x4, func(c Command) bool {
			return c.DSMNumRanges() == 256 && c.DSMDeallocate()
		}},
		{"dsm no dealloc", 0, 0x3, func(c Command) bool {
			return c.DSMNumRanges() == 1 && !c.DSMDeallocate()
		}},
	}
	for _, tt := range tests {
		c := make(Command, CommandSize)
		c.SetCDW(10, tt.cdw10)
		c.SetCDW(11, tt.cdw11)
		if !tt.check(c) {
			t.Errorf("%s: accessors wrong for cdw10 %#x cdw11 %#x", tt.name, tt.cdw10, tt.cdw11)
		}
	}

	c := make(Command, CommandSize)
	c.SetCDW(11, 0xffff_0000) // LSI must survive
	c.SetGetLogPage(LogChangedNSList, 0x12345, 0x1_0000_0004)
	if c.LogPageID() != LogChangedNSList || c.LogPageNumDwords() != 0x12345 || c.LogPageOffset() != 0x1_0000_0004 ||
		c.CDW(11) != 0xffff_0001 || c.CDW(10) != 0x2344_0004 {
		t.Errorf("SetGetLogPage: cdw10 %#x cdw11 %#x", c.CDW(10), c.CDW(11))
	}
	c.SetIdentify(CNSNSDescriptorList, 7, CSINVM)
	if c.CDW(10) != 0x0007_0003 || c.CDW(11) != 0 {
		t.Errorf("SetIdentify: cdw10 %#x", c.CDW(10))
	}
	c.SetDSM(3, true)
	if c.CDW(10) != 2 || c.CDW(11) != 4 {
		t.Errorf("SetDSM: cdw10 %#x cdw11 %#x", c.CDW(10), c.CDW(11))
	}
}

func TestWriteZeroesDEAC(t *testing.T) {
	c := make(Command, CommandSize)
	c.SetOpcode(OpWriteZeroes)
	c[51] = 0x02 // CDW12 bit 25
	if !c.DEAC() || c.FUA() {
		t.Errorf("DEAC %v FUA %v", c.DEAC(), c.FUA())
	}
}

func TestOpcodeDataDirection(t *testing.T) {
	for _, tt := range []struct{ op, want uint8 }{
		{OpFlush, DataDirNone},
		{OpWrite, DataDirHostToCtrl},
		{OpRead, DataDirCtrlToHost},
		{OpCompare, DataDirHostToCtrl},
		{OpWriteZeroes, DataDirNone},
		{OpDSM, DataDirHostToCtrl},
		{OpAdminIdentify, DataDirCtrlToHost},
		{OpAdminGetLogPage, DataDirCtrlToHost},
		{OpAdminSetFeatures, DataDirHostToCtrl},
		{OpAdminKeepAlive, DataDirNone},
		{OpFabrics, DataDirBidirectional},
	} {
		if got := OpcodeDataDirection(tt.op); got != tt.want {
			t.Errorf("OpcodeDataDirection(%#x) = %d, want %d", tt.op, got, tt.want)
		}
	}
}

func TestCompletion(t *testing.T) {
	c := make(Completion, CompletionSize)
	for i := range c {
		c[i] = 0xff
	}
	c.Reset()
	if !bytes.Equal(c, make([]byte, CompletionSize)) {
		t.Fatalf("Reset left %x", []byte(c))
	}
	c.SetDW0(0x11223344)
	c.SetDW1(0x55667788)
	c.SetSQHD(0x0102)
	c.SetSQID(0x0304)
	c.SetCID(0x0506)
	c.SetStatus(StatusInvalidField.WithDNR())
	want := []byte{
		0x44, 0x33, 0x22, 0x11, 0x88, 0x77, 0x66, 0x55,
		0x02, 0x01, 0x04, 0x03, 0x06, 0x05,
		0x04, 0x80, // (0x4002 << 1) | phase 0
	}
	if !bytes.Equal(c, want) {
		t.Fatalf("completion = %x\nwant         %x", []byte(c), want)
	}
	if c.DW0() != 0x11223344 || c.DW1() != 0x55667788 || c.SQHD() != 0x0102 || c.SQID() != 0x0304 ||
		c.CID() != 0x0506 || c.Status() != StatusInvalidField.WithDNR() {
		t.Error("completion accessors disagree with setters")
	}
	c.SetResult64(0x0102030405060708)
	if c.DW0() != 0x05060708 || c.DW1() != 0x01020304 {
		t.Errorf("SetResult64: dw0 %#x dw1 %#x", c.DW0(), c.DW1())
	}
	// The phase tag is not part of Status.
	c[14] |= 1
	if c.Status() != StatusInvalidField.WithDNR() {
		t.Errorf("Status with phase = %v", c.Status())
	}
}

func BenchmarkCommandDecode(b *testing.B) {
	b.ReportAllocs()
	c := make(Command, CommandSize)
	c.SetOpcode(OpRead)
	c.SetNumBlocks(8)
	var sink uint64
	for b.Loop() {
		sink += uint64(c.Opcode()) + c.SLBA() + uint64(c.NumBlocks()) + uint64(c.SGL1().Length()) + uint64(c.CID())
	}
	_ = sink
}

func TestCommandFieldHelpers(t *testing.T) {
	tests := []struct {
		name      string
		set       func(c Command)
		got, want func(c Command) any
	}{
		{"property size 4", func(c Command) { c.SetProperty(0xf8, 0, 0) },
			func(c Command) any { return c.PropertySize() }, func(Command) any { return uint8(PropertySize4) }},
		{"property size 8, upper bits ignored", func(c Command) { c.SetProperty(0xf9, 0, 0) },
			func(c Command) any { return c.PropertySize() }, func(Command) any { return uint8(PropertySize8) }},
		{"number of queues", func(c Command) { c.SetCDW(11, 3|7<<16) },
			func(c Command) any { n, m := c.NumQueues(); return [2]uint16{n, m} }, func(Command) any { return [2]uint16{3, 7} }},
		{"EXHID set", func(c Command) { c.SetCDW(11, 1) },
			func(c Command) any { return c.HostIDExtended() }, func(Command) any { return true }},
		{"EXHID clear", func(c Command) { c.SetCDW(11, 2) },
			func(c Command) any { return c.HostIDExtended() }, func(Command) any { return false }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Command(make([]byte, CommandSize))
			tc.set(c)
			if got, want := tc.got(c), tc.want(c); got != want {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}

func TestResultBuilders(t *testing.T) {
	tests := []struct {
		name      string
		got, want uint32
	}{
		{"num queues", MakeNumQueuesResult(3, 5), 5<<16 | 3},
		{"connect invalid SQE QID", MakeConnectInvalidResult(false, ErrLocConnectQID), 42},
		{"connect invalid SQSIZE", MakeConnectInvalidResult(false, ErrLocConnectSQSize), 44},
		{"connect invalid SUBNQN", MakeConnectInvalidResult(true, IPOSubNQN), 1<<16 | 256},
		{"connect invalid HOSTNQN", MakeConnectInvalidResult(true, IPOHostNQN), 1<<16 | 512},
		{"SQES", uint32(QueueEntrySizes(CommandSizeShift)), 0x66},
		{"CQES", uint32(QueueEntrySizes(CompletionSizeShift)), 0x44},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s = %#x, want %#x", tc.name, tc.got, tc.want)
		}
	}
}
