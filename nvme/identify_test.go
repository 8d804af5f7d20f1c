package nvme

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func sampleIdentifyController() IdentifyController {
	return IdentifyController{
		VID: 0x1b36, SSVID: 0x1af4,
		SerialNumber: "SN0001", ModelNumber: "nvmeof-tgt", FirmwareRevision: "0.1",
		RAB: 6, IEEE: [3]byte{1, 2, 3}, CMIC: 2, MDTS: 5, CNTLID: 0x0102,
		Version: Version1_3, RTD3R: 11, RTD3E: 12, OAES: 1 << 8, CTRATT: 1,
		CNTRLTYPE: ControllerTypeIO, OACS: 0x0004, ACL: 3, AERL: 3, FRMW: 3, LPA: 4,
		ELPE: 63, NPSS: 0, AVSCC: 1, APSTA: 0, WCTEMP: 0x157, CCTEMP: 0x175, KAS: 50,
		SQES: 0x66, CQES: 0x44, MAXCMD: 128, NN: 1024, ONCS: 0x0c, FUSES: 0, FNA: 0, VWC: 1,
		AWUN: 7, AWUPF: 8, NVSCC: 1, ACWU: 9, SGLS: 1 | 1<<2 | 1<<20, MNAN: 1024,
		SubNQN: "nqn.2024-01.io.example:sub1", IOCCSZ: 260, IORCSZ: 1, ICDOFF: 0,
		FCATT: 0, MSDBD: 1, OFCS: 1, PSD0MaxPower: 900,
	}
}

func TestIdentifyControllerOffsets(t *testing.T) {
	id := sampleIdentifyController()
	b := bytes.Repeat([]byte{0xee}, IdentifyDataSize)
	id.MarshalTo(b)
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
		{"reserved@100", uint64(b[100]), 0},
		{"last byte", uint64(b[IdentifyDataSize-1]), 0},
	} {
		if tt.got != tt.want {
			t.Errorf("%s = %#x, want %#x", tt.name, tt.got, tt.want)
		}
	}
	for _, tt := range []struct {
		name string
		off  int
		want string
	}{
		{"SN@4", 4, "SN0001" + strings.Repeat(" ", 14)},
		{"MN@24", 24, "nvmeof-tgt" + strings.Repeat(" ", 30)},
		{"FR@64", 64, "0.1     "},
		{"SUBNQN@768", 768, "nqn.2024-01.io.example:sub1" + strings.Repeat("\x00", 256-27)},
	} {
		if got := string(b[tt.off : tt.off+len(tt.want)]); got != tt.want {
			t.Errorf("%s = %q, want %q", tt.name, got, tt.want)
		}
	}
	if got := UnmarshalIdentifyController(b); got != id {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, id)
	}
}

func TestIdentifyControllerDefaultPower(t *testing.T) {
	var id IdentifyController
	b := make([]byte, IdentifyDataSize)
	id.MarshalTo(b)
	if binary.LittleEndian.Uint16(b[2048:]) != DefaultMaxPower || b[2051] != 0 {
		t.Errorf("PSD0 = %x", b[2048:2052])
	}
}

func TestIdentifyNamespace(t *testing.T) {
	id := IdentifyNamespace{
		NSZE: 0x100000, NCAP: 0x100000, NUSE: 0x80000,
		NSFEAT: 1 << 2, FLBAS: 1, MC: 0, DPC: 0, DPS: 0, NMIC: 1, RESCAP: 0, FPI: 0, DLFEAT: 1 | 1<<3,
		NAWUN: 1, NAWUPF: 2, NACWU: 3, NABSN: 4, NABO: 5, NABSPF: 6, NOIOB: 7, NVMCAP: 1 << 40,
		NPWG: 8, NPWA: 9, NPDG: 10, NPDA: 11, NOWS: 12, ANAGRPID: 13, NSATTR: 1, NVMSETID: 14, ENDGID: 15,
		NGUID:      [16]byte{0x10, 15: 0x1f},
		EUI64:      [8]byte{0x20, 7: 0x27},
		LBAFormats: []LBAFormat{{LBADS: 9}, {LBADS: 12, RP: 1}, {MS: 8, LBADS: 12, RP: 2}},
	}
	b := bytes.Repeat([]byte{0xee}, IdentifyDataSize)
	id.MarshalTo(b)
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
	} {
		if tt.got != tt.want {
			t.Errorf("%s = %#x, want %#x", tt.name, tt.got, tt.want)
		}
	}
	want := id
	want.NLBAF = 2
	if got := UnmarshalIdentifyNamespace(b); !reflect.DeepEqual(got, want) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
	}

	// One format: NLBAF 0.
	one := IdentifyNamespace{NSZE: 8, LBAFormats: []LBAFormat{{LBADS: 12}}}
	one.MarshalTo(b)
	if b[25] != 0 || b[130] != 12 {
		t.Errorf("single format: NLBAF %d LBADS %d", b[25], b[130])
	}
	if got := UnmarshalIdentifyNamespace(b); !reflect.DeepEqual(got, one) {
		t.Errorf("round trip: %+v", got)
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
// field at the wrong offset or width changes the dump.
func TestIdentifyGolden(t *testing.T) {
	b := bytes.Repeat([]byte{0xee}, IdentifyDataSize)
	ctrl := IdentifyController{
		VID: 0x1b36, SSVID: 0x1af4,
		SerialNumber: "SN0001", ModelNumber: strings.Repeat("M", 39) + "n", FirmwareRevision: "FR345678",
		RAB: 0x06, IEEE: [3]byte{0x07, 0x08, 0x09}, CMIC: 0x0a, MDTS: 0x0b, CNTLID: 0x0c0d,
		Version: 0x0e0f1011, RTD3R: 0x12131415, RTD3E: 0x16171819, OAES: 0x1a1b1c1d, CTRATT: 0x1e1f2021,
		CNTRLTYPE: 0x22, OACS: 0x2324, ACL: 0x25, AERL: 0x26, FRMW: 0x27, LPA: 0x28,
		ELPE: 0x29, NPSS: 0x2a, AVSCC: 0x2b, APSTA: 0x2c, WCTEMP: 0x2d2e, CCTEMP: 0x2f30, KAS: 0x3132,
		SQES: 0x33, CQES: 0x34, MAXCMD: 0x3536, NN: 0x3738393a, ONCS: 0x3b3c, FUSES: 0x3d3e,
		FNA: 0x3f, VWC: 0x40, AWUN: 0x4142, AWUPF: 0x4344, NVSCC: 0x45, ACWU: 0x4647,
		SGLS: 0x48494a4b, MNAN: 0x4c4d4e4f,
		SubNQN: "nqn.2024-01.io.example:sub1", IOCCSZ: 0x50515253, IORCSZ: 0x54555657,
		ICDOFF: 0x5859, FCATT: 0x5a, MSDBD: 0x5b, OFCS: 0x5c5d, PSD0MaxPower: 0x5e5f,
	}
	ctrl.MarshalTo(b)
	checkGolden(t, "identify-controller.hex", b)

	ns := IdentifyNamespace{
		NSZE: 0x0102030405060708, NCAP: 0x090a0b0c0d0e0f10, NUSE: 0x1112131415161718,
		NSFEAT: 0x19, NLBAF: MaxLBAFormats - 1, FLBAS: 0x1a, MC: 0x1b, DPC: 0x1c, DPS: 0x1d,
		NMIC: 0x1e, RESCAP: 0x1f, FPI: 0x20, DLFEAT: 0x21,
		NAWUN: 0x2223, NAWUPF: 0x2425, NACWU: 0x2627, NABSN: 0x2829, NABO: 0x2a2b, NABSPF: 0x2c2d,
		NOIOB: 0x2e2f, NVMCAP: 0x3031323334353637,
		NPWG: 0x3839, NPWA: 0x3a3b, NPDG: 0x3c3d, NPDA: 0x3e3f, NOWS: 0x4041,
		ANAGRPID: 0x42434445, NSATTR: 0x46, NVMSETID: 0x4748, ENDGID: 0x494a,
		NGUID: [16]byte{0x4b, 0x4c, 0x4d, 0x4e, 0x4f, 0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a},
		EUI64: [8]byte{0x5b, 0x5c, 0x5d, 0x5e, 0x5f, 0x60, 0x61, 0x62},
	}
	for i := range MaxLBAFormats {
		ns.LBAFormats = append(ns.LBAFormats, LBAFormat{MS: 0x100 + uint16(i), LBADS: 9 + uint8(i%8), RP: uint8(i)})
	}
	ns.MarshalTo(b)
	checkGolden(t, "identify-namespace.hex", b)
}
