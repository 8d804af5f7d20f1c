package nvme

import (
	"bytes"
	"strings"
	"testing"
)

func TestConnectData(t *testing.T) {
	b := make([]byte, ConnectDataSize)
	for i := 0; i < 16; i++ {
		b[i] = byte(i + 1)
	}
	b[16], b[17] = 0xff, 0xff
	copy(b[256:], "nqn.2024-01.io.example:sub1")
	copy(b[512:], "nqn.2014-08.org.nvmexpress:uuid:1234")
	b[512+300] = 'x' // past the field: ignored
	d := ConnectData(b)
	if d.HostID() != [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16} {
		t.Errorf("HostID = %x", d.HostID())
	}
	if d.CNTLID() != CNTLIDDynamic {
		t.Errorf("CNTLID = %#x", d.CNTLID())
	}
	if d.SubNQN() != "nqn.2024-01.io.example:sub1" {
		t.Errorf("SubNQN = %q", d.SubNQN())
	}
	if d.HostNQN() != "nqn.2014-08.org.nvmexpress:uuid:1234" {
		t.Errorf("HostNQN = %q", d.HostNQN())
	}

	// A 256-byte NQN with no terminator is taken whole.
	full := strings.Repeat("a", NQNFieldSize)
	d.SetSubNQN(full + "overflow")
	if d.SubNQN() != full || b[512] != 'n' {
		t.Errorf("full-field SubNQN = %d bytes", len(d.SubNQN()))
	}
	d.SetSubNQN(DiscoveryNQN)
	if d.SubNQN() != DiscoveryNQN || !bytes.Equal(b[256+len(DiscoveryNQN):512], make([]byte, 256-len(DiscoveryNQN))) {
		t.Error("SetSubNQN did not NUL pad")
	}

	e := ConnectData(make([]byte, ConnectDataSize))
	e.SetHostID([16]byte{0xaa, 15: 0xbb})
	e.SetCNTLID(0x0102)
	e.SetHostNQN("host")
	if e[0] != 0xaa || e[15] != 0xbb || e[16] != 0x02 || e[17] != 0x01 || string(e[512:516]) != "host" || e[516] != 0 {
		t.Error("ConnectData setters wrote the wrong bytes")
	}
}

func TestRDMACMRequest(t *testing.T) {
	raw := []byte{0, 0, 2, 0, 0x80, 0, 0x7f, 0, 0x01, 0x00, 22: 0, 31: 0}
	r := RDMACMRequest(raw)
	if r.RECFMT() != 0 || r.QID() != 2 || r.HRQSIZE() != 128 || r.HSQSIZE() != 127 || r.CNTLID() != 1 {
		t.Errorf("request: recfmt %d qid %d hrq %d hsq %d cntlid %d", r.RECFMT(), r.QID(), r.HRQSIZE(), r.HSQSIZE(), r.CNTLID())
	}
	w := RDMACMRequest(make([]byte, RDMACMRequestSize))
	w.SetRECFMT(0)
	w.SetQID(2)
	w.SetHRQSIZE(128)
	w.SetHSQSIZE(127)
	w.SetCNTLID(1)
	if !bytes.Equal(w, raw) {
		t.Errorf("setters = %x, want %x", []byte(w), raw)
	}
}

func TestRDMACMAcceptReject(t *testing.T) {
	b := bytes.Repeat([]byte{0xff}, 40)
	PutRDMACMAccept(b, 128)
	want := append([]byte{0, 0, 0x80, 0}, make([]byte, 28)...)
	if !bytes.Equal(b[:RDMACMAcceptSize], want) || b[32] != 0xff {
		t.Errorf("accept = %x", b)
	}
	if a := RDMACMAccept(b); a.RECFMT() != 0 || a.CRQSIZE() != 128 {
		t.Error("accept accessors")
	}
	rej := make([]byte, RDMACMRejectSize)
	PutRDMACMReject(rej, RDMACMRejectInvalidHSQSIZE)
	if !bytes.Equal(rej, []byte{0, 0, 4, 0}) || RDMACMReject(rej).STS() != RDMACMRejectInvalidHSQSIZE {
		t.Errorf("reject = %x", rej)
	}
}

func TestRDMACMRejectStatus(t *testing.T) {
	// Values from Linux include/linux/nvme-rdma.h and NVMe-oF Figure 50.
	for _, tt := range []struct {
		s    RDMACMRejectStatus
		v    uint16
		name string
	}{
		{RDMACMRejectInvalidLength, 1, "invalid private data length"},
		{RDMACMRejectInvalidRECFMT, 2, "invalid record format"},
		{RDMACMRejectInvalidQID, 3, "invalid queue ID"},
		{RDMACMRejectInvalidHSQSIZE, 4, "invalid host SQ size"},
		{RDMACMRejectInvalidHRQSIZE, 5, "invalid host RQ size"},
		{RDMACMRejectNoResources, 6, "no resources"},
		{RDMACMRejectInvalidIRD, 7, "invalid IRD"},
		{RDMACMRejectInvalidORD, 8, "invalid ORD"},
		{RDMACMRejectInvalidCNTLID, 9, "invalid controller ID"},
		{0, 0, "unknown reject status 0"},
		{0x99, 0x99, "unknown reject status 153"},
	} {
		if uint16(tt.s) != tt.v || tt.s.String() != tt.name {
			t.Errorf("%d: %q", tt.v, tt.s.String())
		}
	}
}
