package nvme

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

func TestDiscoveryLogHeader(t *testing.T) {
	b := bytes.Repeat([]byte{0xee}, DiscoveryLogHeaderSize)
	PutDiscoveryLogHeader(b, 7, 2)
	if binary.LittleEndian.Uint64(b) != 7 || binary.LittleEndian.Uint64(b[8:]) != 2 || !bytes.Equal(b[16:], make([]byte, DiscoveryLogHeaderSize-16)) {
		t.Errorf("header = %x", b[:24])
	}
	g, n, f := ParseDiscoveryLogHeader(b)
	if g != 7 || n != 2 || f != 0 {
		t.Errorf("parse = %d %d %d", g, n, f)
	}
}

func TestDiscoveryLogEntry(t *testing.T) {
	e := DiscoveryLogEntry{
		TRTYPE: TRTypeRDMA, ADRFAM: AdrFamIPv4, SUBTYPE: SubtypeNVMe, TREQ: TREQNotSpecified,
		PORTID: 1, CNTLID: CNTLIDDynamic, ASQSZ: 32, EFLAGS: 0,
		TRSVCID: "4420", SubNQN: "nqn.2024-01.io.example:sub1", TRADDR: "192.168.1.10",
		TSAS: RDMATSAS(RDMAQPTypeConnected, RDMAPRTypeNotSpecified, RDMACMSRDMACM, 0),
	}
	b := bytes.Repeat([]byte{0xee}, DiscoveryLogEntrySize)
	e.MarshalTo(b)
	le := binary.LittleEndian
	// Offsets from NVMe-oF 1.1 Figure 38 and Linux nvmf_disc_rsp_page_entry.
	if b[0] != 1 || b[1] != 1 || b[2] != 2 || b[3] != 0 || le.Uint16(b[4:]) != 1 || le.Uint16(b[6:]) != 0xffff ||
		le.Uint16(b[8:]) != 32 || le.Uint16(b[10:]) != 0 || !bytes.Equal(b[12:32], make([]byte, 20)) {
		t.Errorf("fixed fields = %x", b[:32])
	}
	if got := string(b[32:64]); got != "4420"+strings.Repeat(" ", 28) {
		t.Errorf("TRSVCID = %q", got)
	}
	if !bytes.Equal(b[64:256], make([]byte, 192)) {
		t.Error("reserved 64-255 not zero")
	}
	if got := string(b[256:283]); got != e.SubNQN || b[283] != 0 || b[511] != 0 {
		t.Errorf("SUBNQN = %q", got)
	}
	if got := string(b[512:768]); got != "192.168.1.10"+strings.Repeat(" ", 244) {
		t.Errorf("TRADDR = %q", got)
	}
	if b[768] != 1 || b[769] != 1 || b[770] != 1 || b[776] != 0 || !bytes.Equal(b[771:1024], make([]byte, 253)) {
		t.Errorf("TSAS = %x", b[768:780])
	}
	if got := UnmarshalDiscoveryLogEntry(b); got != e {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, e)
	}
	// Linux nvmet pads TRADDR with NULs; both paddings decode.
	clear(b[512+12 : 768])
	if got := UnmarshalDiscoveryLogEntry(b); got.TRADDR != "192.168.1.10" {
		t.Errorf("NUL padded TRADDR = %q", got.TRADDR)
	}
}

func TestRDMATSAS(t *testing.T) {
	ts := RDMATSAS(RDMAQPTypeConnected, RDMAPRTypeRoCEv2, RDMACMSRDMACM, 0xffff)
	if ts[0] != 1 || ts[1] != 4 || ts[2] != 1 || ts[8] != 0xff || ts[9] != 0xff || ts[10] != 0 {
		t.Errorf("TSAS = %x", ts[:12])
	}
}
