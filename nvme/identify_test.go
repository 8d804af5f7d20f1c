package nvme

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func TestIdentifyControllerOffsets(t *testing.T) {
	b := make([]byte, IdentifyDataSize)
	id := IdentifyController(b)
	id.SetVID(0x1b36)
	id.SetSSVID(0x1af4)
	id.SetSerialNumber("SN0001")
	id.SetModelNumber("nvmeof-tgt")
	id.SetFirmwareRevision("0.1")
	id.SetRAB(6)
	id.SetIEEE([3]byte{1, 2, 3})
	id.SetCMIC(2)
	id.SetMDTS(5)
	id.SetCNTLID(0x0102)
	id.SetVersion(Version1_3)
	id.SetOAES(1 << 8)
	id.SetCTRATT(1)
	id.SetCNTRLTYPE(ControllerTypeIO)
	id.SetOACS(0x0004)
	id.SetAERL(3)
	id.SetLPA(4)
	id.SetELPE(63)
	id.SetWCTEMP(0x157)
	id.SetKAS(50)
	id.SetSQES(0x66)
	id.SetCQES(0x44)
	id.SetMAXCMD(128)
	id.SetNN(1024)
	id.SetONCS(0x0c)
	id.SetVWC(1)
	id.SetACWU(9)
	id.SetSGLS(1 | 1<<2 | 1<<20)
	id.SetMNAN(1024)
	id.SetSubNQN("nqn.2024-01.io.example:sub1")
	id.SetIOCCSZ(260)
	id.SetIORCSZ(1)
	id.SetMSDBD(1)
	id.SetOFCS(1)
	id.PSD(0).SetMP(900)
	id.PSD(MaxPowerStates - 1).SetMP(901)
	le := binary.LittleEndian
	for _, tt := range []struct {
		name      string
		got, want uint64
	}{
		// Offsets from base 1.4 Figure 247 and Linux struct nvme_id_ctrl.
		{"VID@0", uint64(le.Uint16(b[0:])), 0x1b36},
		{"SSVID@2", uint64(le.Uint16(b[2:])), 0x1af4},
		{"RAB@72", uint64(b[72]), 6},
		{"IEEE@73", uint64(b[73]), 1},
		{"CMIC@76", uint64(b[76]), 2},
		{"MDTS@77", uint64(b[77]), 5},
		{"CNTLID@78", uint64(le.Uint16(b[78:])), 0x0102},
		{"VER@80", uint64(le.Uint32(b[80:])), 0x00010300},
		{"OAES@92", uint64(le.Uint32(b[92:])), 1 << 8},
		{"CTRATT@96", uint64(le.Uint32(b[96:])), 1},
		{"CNTRLTYPE@111", uint64(b[111]), 1},
		{"OACS@256", uint64(le.Uint16(b[256:])), 4},
		{"AERL@259", uint64(b[259]), 3},
		{"LPA@261", uint64(b[261]), 4},
		{"ELPE@262", uint64(b[262]), 63},
		{"WCTEMP@266", uint64(le.Uint16(b[266:])), 0x157},
		{"KAS@320", uint64(le.Uint16(b[320:])), 50},
		{"SQES@512", uint64(b[512]), 0x66},
		{"CQES@513", uint64(b[513]), 0x44},
		{"MAXCMD@514", uint64(le.Uint16(b[514:])), 128},
		{"NN@516", uint64(le.Uint32(b[516:])), 1024},
		{"ONCS@520", uint64(le.Uint16(b[520:])), 0x0c},
		{"VWC@525", uint64(b[525]), 1},
		{"ACWU@532", uint64(le.Uint16(b[532:])), 9},
		{"SGLS@536", uint64(le.Uint32(b[536:])), 1 | 1<<2 | 1<<20},
		{"MNAN@540", uint64(le.Uint32(b[540:])), 1024},
		{"IOCCSZ@1792", uint64(le.Uint32(b[1792:])), 260},
		{"IORCSZ@1796", uint64(le.Uint32(b[1796:])), 1},
		{"MSDBD@1803", uint64(b[1803]), 1},
		{"OFCS@1804", uint64(le.Uint16(b[1804:])), 1},
		{"PSD0.MP@2048", uint64(le.Uint16(b[2048:])), 900},
		{"PSD31.MP@3040", uint64(le.Uint16(b[3040:])), 901},
		{"reserved@100", uint64(b[100]), 0},
		{"last byte", uint64(b[IdentifyDataSize-1]), 0},
	} {
		if tt.got != tt.want {
			t.Errorf("%s = %#x, want %#x", tt.name, tt.got, tt.want)
		}
	}
	for _, tt := range []struct {
		name      string
		off       int
		want      string
		got, read string // the raw field and what the getter reads
	}{
		{"SN@4", 4, "SN0001" + strings.Repeat(" ", 14), "SN0001", id.SerialNumber()},
		{"MN@24", 24, "nvmeof-tgt" + strings.Repeat(" ", 30), "nvmeof-tgt", id.ModelNumber()},
		{"FR@64", 64, "0.1     ", "0.1", id.FirmwareRevision()},
		{"SUBNQN@768", 768, "nqn.2024-01.io.example:sub1" + strings.Repeat("\x00", 256-27), "nqn.2024-01.io.example:sub1", id.SubNQN()},
	} {
		if raw := string(b[tt.off : tt.off+len(tt.want)]); raw != tt.want {
			t.Errorf("%s = %q, want %q", tt.name, raw, tt.want)
		}
		if tt.read != tt.got {
			t.Errorf("%s reads %q, want %q", tt.name, tt.read, tt.got)
		}
	}
}

func TestIdentifyControllerStrings(t *testing.T) {
	id := IdentifyController(bytes.Repeat([]byte{0xee}, IdentifyDataSize))
	for _, tt := range []struct {
		name     string
		set      string
		raw      string // SN@4, 20 bytes
		readBack string
	}{
		{"padded", "abc", "abc" + strings.Repeat(" ", 17), "abc"},
		{"truncated", strings.Repeat("x", 25), strings.Repeat("x", 20), strings.Repeat("x", 20)},
		{"trailing spaces lost", "ab  ", "ab" + strings.Repeat(" ", 18), "ab"},
	} {
		id.SetSerialNumber(tt.set)
		if raw := string(id[4:24]); raw != tt.raw {
			t.Errorf("%s: SN = %q, want %q", tt.name, raw, tt.raw)
		}
		if got := id.SerialNumber(); got != tt.readBack {
			t.Errorf("%s: SerialNumber() = %q, want %q", tt.name, got, tt.readBack)
		}
	}
	// Linux nvmet pads with NULs; both paddings read back the same.
	copy(id[4:24], "nvmet\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00")
	if got := id.SerialNumber(); got != "nvmet" {
		t.Errorf("NUL padded SN reads %q", got)
	}
	id.SetSubNQN(strings.Repeat("n", 300))
	if got := id.SubNQN(); got != strings.Repeat("n", NQNFieldSize) || id[768+NQNFieldSize] != 0xee {
		t.Errorf("SUBNQN truncation: %d bytes, byte after %#x", len(got), id[768+NQNFieldSize])
	}
}

func TestIdentifyNamespace(t *testing.T) {
	b := make([]byte, IdentifyDataSize)
	id := IdentifyNamespace(b)
	id.SetNSZE(0x100000)
	id.SetNCAP(0x100000)
	id.SetNUSE(0x80000)
	id.SetNSFEAT(1 << 2)
	id.SetNLBAF(2)
	id.SetFLBAS(1)
	id.SetNMIC(1)
	id.SetDLFEAT(1 | 1<<3)
	id.SetNAWUN(1)
	id.SetNOIOB(7)
	id.SetNVMCAP(1 << 40)
	id.SetNPWG(8)
	id.SetNOWS(12)
	id.SetANAGRPID(13)
	id.SetNSATTR(1)
	id.SetENDGID(15)
	id.SetNGUID([16]byte{0x10, 15: 0x1f})
	id.SetEUI64([8]byte{0x20, 7: 0x27})
	id.LBAF(0).SetLBADS(9)
	id.LBAF(1).SetLBADS(12)
	id.LBAF(1).SetRP(1)
	id.LBAF(2).SetMS(8)
	id.LBAF(2).SetLBADS(12)
	id.LBAF(2).SetRP(2 | 0xfc) // reserved bits 7:2 are not written
	id.LBAF(MaxLBAFormats - 1).SetLBADS(13)
	le := binary.LittleEndian
	for _, tt := range []struct {
		name      string
		got, want uint64
	}{
		// Offsets from base 1.4 Figure 245 and Linux struct nvme_id_ns.
		{"NSZE@0", le.Uint64(b[0:]), 0x100000},
		{"NCAP@8", le.Uint64(b[8:]), 0x100000},
		{"NUSE@16", le.Uint64(b[16:]), 0x80000},
		{"NSFEAT@24", uint64(b[24]), 4},
		{"NLBAF@25", uint64(b[25]), 2},
		{"FLBAS@26", uint64(b[26]), 1},
		{"NMIC@30", uint64(b[30]), 1},
		{"DLFEAT@33", uint64(b[33]), 9},
		{"NAWUN@34", uint64(le.Uint16(b[34:])), 1},
		{"NOIOB@46", uint64(le.Uint16(b[46:])), 7},
		{"NVMCAP@48", le.Uint64(b[48:]), 1 << 40},
		{"NVMCAP hi@56", le.Uint64(b[56:]), 0},
		{"NPWG@64", uint64(le.Uint16(b[64:])), 8},
		{"NOWS@72", uint64(le.Uint16(b[72:])), 12},
		{"ANAGRPID@92", uint64(le.Uint32(b[92:])), 13},
		{"NSATTR@99", uint64(b[99]), 1},
		{"ENDGID@102", uint64(le.Uint16(b[102:])), 15},
		{"NGUID@104", uint64(b[104]), 0x10},
		{"NGUID end@119", uint64(b[119]), 0x1f},
		{"EUI64@120", uint64(b[120]), 0x20},
		{"EUI64 end@127", uint64(b[127]), 0x27},
		{"LBAF0@128", uint64(le.Uint32(b[128:])), 9 << 16},
		{"LBAF1@132", uint64(le.Uint32(b[132:])), 12<<16 | 1<<24},
		{"LBAF2@136", uint64(le.Uint32(b[136:])), 8 | 12<<16 | 2<<24},
		{"LBAF3@140", uint64(le.Uint32(b[140:])), 0},
		{"LBAF63@380", uint64(le.Uint32(b[380:])), 13 << 16},
		{"after LBAF63@384", uint64(b[384]), 0},
	} {
		if tt.got != tt.want {
			t.Errorf("%s = %#x, want %#x", tt.name, tt.got, tt.want)
		}
	}
	if f := id.LBAF(2); f.MS() != 8 || f.LBADS() != 12 || f.RP() != 2 {
		t.Errorf("LBAF2 reads MS %d LBADS %d RP %d", f.MS(), f.LBADS(), f.RP())
	}
	b[139] |= 0xfc
	if id.LBAF(2).RP() != 2 {
		t.Errorf("RP reads reserved bits: %#x", id.LBAF(2).RP())
	}
}

func TestPutNSList(t *testing.T) {
	b := bytes.Repeat([]byte{0xee}, IdentifyDataSize)
	PutNSList(b, []NSID{1, 2, 0x10})
	if binary.LittleEndian.Uint32(b[0:]) != 1 || binary.LittleEndian.Uint32(b[8:]) != 0x10 || !bytes.Equal(b[12:], make([]byte, IdentifyDataSize-12)) {
		t.Errorf("PutNSList = %x", b[:16])
	}
	many := make([]NSID, 2000)
	for i := range many {
		many[i] = NSID(i + 1)
	}
	PutNSList(b, many)
	if binary.LittleEndian.Uint32(b[4092:]) != 1024 {
		t.Error("PutNSList did not fill 1024 entries")
	}
}

func TestNSDescriptors(t *testing.T) {
	eui := [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
	nguid := [16]byte{0x10, 15: 0x1f}
	uuid := [16]byte{0x20, 15: 0x2f}
	csi := uint8(CSINVM)
	b := bytes.Repeat([]byte{0xee}, IdentifyDataSize)
	PutNSDescriptors(b, NSDescriptors{EUI64: &eui, NGUID: &nguid, UUID: &uuid, CSI: &csi})
	want := []byte{1, 8, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}
	want = append(want, 2, 16, 0, 0)
	want = append(want, nguid[:]...)
	want = append(want, 3, 16, 0, 0)
	want = append(want, uuid[:]...)
	want = append(want, 4, 1, 0, 0, 0)
	if !bytes.Equal(b[:len(want)], want) || !bytes.Equal(b[len(want):], make([]byte, IdentifyDataSize-len(want))) {
		t.Fatalf("PutNSDescriptors = %x\nwant %x", b[:len(want)+4], want)
	}
	d, err := ParseNSDescriptors(b)
	if err != nil {
		t.Fatal(err)
	}
	if *d.EUI64 != eui || *d.NGUID != nguid || *d.UUID != uuid || *d.CSI != csi {
		t.Errorf("parse = %+v", d)
	}

	// Only NGUID.
	PutNSDescriptors(b, NSDescriptors{NGUID: &nguid})
	if b[0] != NIDTNGUID || b[1] != 16 || b[20] != 0 {
		t.Errorf("NGUID only = %x", b[:24])
	}

	for _, tt := range []struct {
		name string
		b    []byte
		ok   bool
	}{
		{"empty", nil, true},
		{"zero", make([]byte, 64), true},
		{"unknown type skipped", []byte{9, 2, 0, 0, 1, 2, 0, 0, 0, 0}, true},
		{"bad eui length", []byte{1, 4, 0, 0, 1, 2, 3, 4}, false},
		{"truncated", []byte{2, 16, 0, 0, 1, 2}, false},
		{"type without length", []byte{3, 0, 0, 0}, false},
		{"duplicate", []byte{4, 1, 0, 0, 0, 4, 1, 0, 0, 2}, false},
	} {
		_, err := ParseNSDescriptors(tt.b)
		if (err == nil) != tt.ok {
			t.Errorf("%s: err = %v", tt.name, err)
		}
		if err != nil && !errors.Is(err, ErrInvalidNSDescriptor) {
			t.Errorf("%s: %v is not ErrInvalidNSDescriptor", tt.name, err)
		}
	}
}

// TestIdentifyGolden pins the bytes of fully populated Identify Controller
// and Identify Namespace structures: every field non-zero and distinct, so a
// field at the wrong offset or width changes the dump. The dumps were taken
// from the struct encoders the views replaced.
func TestIdentifyGolden(t *testing.T) {
	b := make([]byte, IdentifyDataSize)
	c := IdentifyController(b)
	c.SetVID(0x1b36)
	c.SetSSVID(0x1af4)
	c.SetSerialNumber("SN0001")
	c.SetModelNumber(strings.Repeat("M", 39) + "n")
	c.SetFirmwareRevision("FR345678")
	c.SetRAB(0x06)
	c.SetIEEE([3]byte{0x07, 0x08, 0x09})
	c.SetCMIC(0x0a)
	c.SetMDTS(0x0b)
	c.SetCNTLID(0x0c0d)
	c.SetVersion(0x0e0f1011)
	c.SetRTD3R(0x12131415)
	c.SetRTD3E(0x16171819)
	c.SetOAES(0x1a1b1c1d)
	c.SetCTRATT(0x1e1f2021)
	c.SetCNTRLTYPE(0x22)
	c.SetOACS(0x2324)
	c.SetACL(0x25)
	c.SetAERL(0x26)
	c.SetFRMW(0x27)
	c.SetLPA(0x28)
	c.SetELPE(0x29)
	c.SetNPSS(0x2a)
	c.SetAVSCC(0x2b)
	c.SetAPSTA(0x2c)
	c.SetWCTEMP(0x2d2e)
	c.SetCCTEMP(0x2f30)
	c.SetKAS(0x3132)
	c.SetSQES(0x33)
	c.SetCQES(0x34)
	c.SetMAXCMD(0x3536)
	c.SetNN(0x3738393a)
	c.SetONCS(0x3b3c)
	c.SetFUSES(0x3d3e)
	c.SetFNA(0x3f)
	c.SetVWC(0x40)
	c.SetAWUN(0x4142)
	c.SetAWUPF(0x4344)
	c.SetNVSCC(0x45)
	c.SetACWU(0x4647)
	c.SetSGLS(0x48494a4b)
	c.SetMNAN(0x4c4d4e4f)
	c.SetSubNQN("nqn.2024-01.io.example:sub1")
	c.SetIOCCSZ(0x50515253)
	c.SetIORCSZ(0x54555657)
	c.SetICDOFF(0x5859)
	c.SetFCATT(0x5a)
	c.SetMSDBD(0x5b)
	c.SetOFCS(0x5c5d)
	c.PSD(0).SetMP(0x5e5f)
	checkGolden(t, "identify-controller.hex", b)

	clear(b)
	ns := IdentifyNamespace(b)
	ns.SetNSZE(0x0102030405060708)
	ns.SetNCAP(0x090a0b0c0d0e0f10)
	ns.SetNUSE(0x1112131415161718)
	ns.SetNSFEAT(0x19)
	ns.SetNLBAF(MaxLBAFormats - 1)
	ns.SetFLBAS(0x1a)
	ns.SetMC(0x1b)
	ns.SetDPC(0x1c)
	ns.SetDPS(0x1d)
	ns.SetNMIC(0x1e)
	ns.SetRESCAP(0x1f)
	ns.SetFPI(0x20)
	ns.SetDLFEAT(0x21)
	ns.SetNAWUN(0x2223)
	ns.SetNAWUPF(0x2425)
	ns.SetNACWU(0x2627)
	ns.SetNABSN(0x2829)
	ns.SetNABO(0x2a2b)
	ns.SetNABSPF(0x2c2d)
	ns.SetNOIOB(0x2e2f)
	ns.SetNVMCAP(0x3031323334353637)
	ns.SetNPWG(0x3839)
	ns.SetNPWA(0x3a3b)
	ns.SetNPDG(0x3c3d)
	ns.SetNPDA(0x3e3f)
	ns.SetNOWS(0x4041)
	ns.SetANAGRPID(0x42434445)
	ns.SetNSATTR(0x46)
	ns.SetNVMSETID(0x4748)
	ns.SetENDGID(0x494a)
	ns.SetNGUID([16]byte{0x4b, 0x4c, 0x4d, 0x4e, 0x4f, 0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a})
	ns.SetEUI64([8]byte{0x5b, 0x5c, 0x5d, 0x5e, 0x5f, 0x60, 0x61, 0x62})
	for i := range MaxLBAFormats {
		f := ns.LBAF(i)
		f.SetMS(0x100 + uint16(i))
		f.SetLBADS(9 + uint8(i%8))
		f.SetRP(uint8(i))
	}
	checkGolden(t, "identify-namespace.hex", b)
}

// identifyField is one accessor pair of an Identify view, found by
// reflection so that a new pair is tested without listing it here.
type identifyField struct {
	name     string
	get, set reflect.Value
}

// identifyFields returns the accessor pairs of the Identify Controller (with
// every power state descriptor) or the Identify Namespace (with every LBA
// format) over b.
func identifyFields(b []byte, namespace bool) []identifyField {
	type view struct {
		prefix string
		v      any
	}
	var views []view
	if namespace {
		id := IdentifyNamespace(b)
		views = append(views, view{"", id})
		for i := range MaxLBAFormats {
			views = append(views, view{lbafNames[i], id.LBAF(i)})
		}
	} else {
		id := IdentifyController(b)
		views = append(views, view{"", id})
		for i := range MaxPowerStates {
			views = append(views, view{psdNames[i], id.PSD(i)})
		}
	}
	var fields []identifyField
	for _, v := range views {
		rv := reflect.ValueOf(v.v)
		for _, p := range accessorPairs()[rv.Type()] {
			fields = append(fields, identifyField{v.prefix + p.name, rv.Method(p.get), rv.Method(p.set)})
		}
	}
	return fields
}

type accessorPair struct {
	name     string
	get, set int // method indices
}

// accessorPairs finds, once, the accessor pairs of each Identify view type:
// each method X with no argument and one result that has a SetX taking that
// result, by method index.
var accessorPairs = sync.OnceValue(func() map[reflect.Type][]accessorPair {
	m := map[reflect.Type][]accessorPair{}
	for _, v := range []any{IdentifyController(nil), PowerState(nil), IdentifyNamespace(nil), LBAFormat(nil)} {
		rt := reflect.TypeOf(v)
		for i := range rt.NumMethod() {
			get := rt.Method(i)
			set, ok := rt.MethodByName("Set" + get.Name)
			if ok && get.Type.NumIn() == 1 && get.Type.NumOut() == 1 &&
				set.Type.NumIn() == 2 && set.Type.In(1) == get.Type.Out(0) {
				m[rt] = append(m[rt], accessorPair{get.Name, i, set.Index})
			}
		}
	}
	return m
})

// psdNames and lbafNames name the power state descriptors and LBA formats.
var psdNames, lbafNames = func() (psd, lbaf []string) {
	for i := range MaxLBAFormats {
		psd, lbaf = append(psd, fmt.Sprintf("PSD(%d).", i)), append(lbaf, fmt.Sprintf("LBAF(%d).", i))
	}
	return psd, lbaf
}()

// TestIdentifyFieldsDisjoint sets each field, alone, to all ones and checks
// that no two fields share a byte: an offset typo in a new accessor pair
// shows here.
func TestIdentifyFieldsDisjoint(t *testing.T) {
	for _, namespace := range []bool{false, true} {
		b := make([]byte, IdentifyDataSize)
		owner := make([]string, IdentifyDataSize)
		fields := identifyFields(b, namespace)
		if len(fields) < 30 {
			t.Fatalf("found only %d accessor pairs", len(fields))
		}
		for _, f := range fields {
			clear(b)
			typ := f.get.Type().Out(0)
			v := reflect.New(typ).Elem()
			switch typ.Kind() {
			case reflect.String:
				v.SetString(strings.Repeat("~", IdentifyDataSize))
			case reflect.Array:
				for i := range v.Len() {
					v.Index(i).SetUint(0xff)
				}
			default:
				v.SetUint(^uint64(0))
			}
			f.set.Call([]reflect.Value{v})
			n := 0
			for i, x := range b {
				if x == 0 {
					continue
				}
				n++
				if owner[i] != "" {
					t.Errorf("%s and %s share byte %d", owner[i], f.name, i)
				}
				owner[i] = f.name
			}
			if n == 0 {
				t.Errorf("%s writes nothing", f.name)
			}
		}
	}
}
