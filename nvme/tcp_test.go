package nvme

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// encoding/binary references of the NVMe/TCP headers (TCP §3.6.2): the
// views must read every field where these put it.
type tcpCommonRef struct {
	Type, Flags, HLEN, PDO uint8
	PLEN                   uint32
}

type tcpICRef struct {
	tcpCommonRef
	PFV       uint16
	PDA, DGST uint8
	Max       uint32 // MAXR2T or MAXH2CDATA
}

type tcpTermRef struct {
	tcpCommonRef
	FES uint16
	FEI uint32
}

type tcpDataRef struct {
	tcpCommonRef
	CCCID, TTAG  uint16
	DATAO, DATAL uint32
}

func readRef(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := binary.Read(bytes.NewReader(b), binary.LittleEndian, v); err != nil {
		t.Fatal(err)
	}
}

// checkTCPHeaderRef compares every accessor of h, long enough for any PDU
// header, with the references.
func checkTCPHeaderRef(t *testing.T, h TCPHeader) {
	t.Helper()
	var c tcpCommonRef
	var ic tcpICRef
	var term tcpTermRef
	var d tcpDataRef
	readRef(t, h, &c)
	readRef(t, h, &ic)
	readRef(t, h, &term)
	readRef(t, h, &d)
	eq := func(name string, got, want uint64) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %#x, want %#x", name, got, want)
		}
	}
	eq("Type", uint64(h.Type()), uint64(c.Type))
	eq("Flags", uint64(h.Flags()), uint64(c.Flags))
	eq("HLEN", uint64(h.HLEN()), uint64(c.HLEN))
	eq("PDO", uint64(h.PDO()), uint64(c.PDO))
	eq("PLEN", uint64(h.PLEN()), uint64(c.PLEN))
	eq("PFV", uint64(h.PFV()), uint64(ic.PFV))
	eq("PDA", uint64(h.PDA()), uint64(ic.PDA))
	eq("DGST", uint64(h.DGST()), uint64(ic.DGST))
	eq("MAXR2T", uint64(h.MAXR2T()), uint64(ic.Max))
	eq("MAXH2CDATA", uint64(h.MAXH2CDATA()), uint64(ic.Max))
	eq("FES", uint64(h.FES()), uint64(term.FES))
	eq("FEI", uint64(h.FEI()), uint64(term.FEI))
	eq("CCCID", uint64(h.CCCID()), uint64(d.CCCID))
	eq("TTAG", uint64(h.TTAG()), uint64(d.TTAG))
	eq("DATAO", uint64(h.DATAO()), uint64(d.DATAO))
	eq("DATAL", uint64(h.DATAL()), uint64(d.DATAL))
	if !bytes.Equal(h.SQE(), h[8:72]) {
		t.Errorf("SQE = %x", []byte(h.SQE()))
	}
	if !bytes.Equal(h.CQE(), h[8:24]) {
		t.Errorf("CQE = %x", []byte(h.CQE()))
	}
}

func TestTCPHeaderRef(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"zero", make([]byte, TCPMaxHdrSize)},
		{"ones", bytes.Repeat([]byte{0xff}, TCPMaxHdrSize)},
		{"counting", func() []byte {
			b := make([]byte, TCPMaxHdrSize)
			for i := range b {
				b[i] = byte(i*7 + 1)
			}
			return b
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) { checkTCPHeaderRef(t, TCPHeader(tc.b)) })
	}
}

// TestTCPHeaderLayout pins the setters against PDUs written out by hand
// from the specification's figures.
func TestTCPHeaderLayout(t *testing.T) {
	for _, tc := range []struct {
		name string
		put  func(h TCPHeader)
		want []byte
	}{
		{"icresp", func(h TCPHeader) {
			h.SetCommon(TCPICResp, 0, TCPICReqSize, 0, TCPICReqSize)
			h.SetICResp(TCPPFV10, 0, TCPDigestHeader|TCPDigestData, 128<<10)
		}, []byte{0x01, 0, 128, 0, 128, 0, 0, 0, 0, 0, 0, 3, 0, 0, 2, 0}},
		{"r2t", func(h TCPHeader) {
			h.SetCommon(TCPR2T, TCPFlagHDGST, TCPDataHdrSize, 0, TCPDataHdrSize+TCPDigestSize)
			h.SetData(0x1234, 7, 0, 0x10000)
		}, []byte{0x09, 1, 24, 0, 28, 0, 0, 0, 0x34, 0x12, 7, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0}},
		{"c2hdata", func(h TCPHeader) {
			h.SetCommon(TCPC2HData, TCPFlagLast|TCPFlagSuccess, TCPDataHdrSize, 24, 24+4096)
			h.SetData(9, 0, 0, 4096)
		}, []byte{0x07, 0x0c, 24, 24, 0x18, 0x10, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0}},
		{"c2htermreq", func(h TCPHeader) {
			h.SetCommon(TCPC2HTermReq, 0, TCPTermReqHdrSize, 0, TCPTermReqHdrSize+8)
			h.SetTermReq(TCPFESInvalidHeaderField, 2)
		}, []byte{0x03, 0, 24, 0, 32, 0, 0, 0, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := TCPHeader(bytes.Repeat([]byte{0xee}, TCPMaxHdrSize))
			tc.put(h)
			if got := h[:len(tc.want)]; !bytes.Equal(got, tc.want) {
				t.Errorf("got  %x\nwant %x", []byte(got), tc.want)
			}
			checkTCPHeaderRef(t, h)
		})
	}
}

func TestTCPFESString(t *testing.T) {
	for fes, want := range map[TCPFES]string{
		TCPFESHeaderDigestError:    "header digest error",
		TCPFESUnsupportedParameter: "unsupported parameter",
		0:                          "unknown fatal error status 0",
		0x99:                       "unknown fatal error status 153",
	} {
		if got := fes.String(); got != want {
			t.Errorf("%d: %q, want %q", fes, got, want)
		}
	}
}

func TestTCPTSAS(t *testing.T) {
	ts := TCPTSAS(TCPSecTypeNone)
	if ts != ([256]byte{}) {
		t.Fatalf("TSAS of no security is not all zero: %x", ts[:8])
	}
	if ts = TCPTSAS(TCPSecTypeTLS13); ts[0] != 2 {
		t.Fatalf("SECTYPE = %d", ts[0])
	}
}
