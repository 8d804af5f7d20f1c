package fabric

import (
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// TestTransportSQFlowAndSGL: a port whose transport serves hosts that
// disable SQ flow control (NVMe/TCP) says so in TREQ, and takes a
// Connect's CATTR bit 2 (Queue.SQFlowDisabled); a port whose transport
// does not (RDMA, loop) keeps TREQ 0 and ignores the bit, as before. A
// transport with Transport SGL Data Blocks leaves the keyed bit out of
// SGLS.
func TestTransportSQFlowAndSGL(t *testing.T) {
	r := newRig(t)
	tcpish := NewLoopTransport(TransportLimits{MDTS: 128 << 10, MaxQueueDepth: 64, MaxIOQueues: 4, DisableSQFlow: true, TransportSGL: true})
	if err := r.tgt.AddPort(tcpish, &Port{Address: "tcpish", Service: "1"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		lt         *LoopTransport
		addr       string
		cattr      uint8
		wantOff    bool
		wantTREQ   uint8
		wantKeyed  bool
		wantOffset bool
	}{
		{"plain port, bit clear", r.lt, "loop0", 0, false, 0, true, true},
		{"plain port, bit set: ignored", r.lt, "loop0", nvme.ConnectCATTRDisableSQFlow, false, 0, true, true},
		{"sq flow port, bit clear", tcpish, "tcpish", 0, false, nvme.TREQDisableSQFlow, false, true},
		{"sq flow port, bit set", tcpish, "tcpish", nvme.ConnectCATTRDisableSQFlow, true, nvme.TREQDisableSQFlow, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lq, err := tc.lt.Dial(tc.addr, 0, 32)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(lq.Close)
			h := &host{t: t, lq: lq}
			c := newCmd(nvme.OpFabrics, 1)
			c.SetFCType(nvme.FCTypeConnect)
			c.SetConnect(0, 0, 31, tc.cattr, 0)
			h.mustOK(withData(c, nvme.ConnectDataSize), connectData(testNQN, testHostNQN, testHostID, 0xffff))
			if got := lq.q.SQFlowDisabled(); got != tc.wantOff {
				t.Errorf("SQFlowDisabled = %v, want %v", got, tc.wantOff)
			}
			h.propSet(nvme.PropCC, ccEnable)
			id, st := identify(h, nvme.CNSController, 0)
			if !st.IsSuccess() {
				t.Fatal(st)
			}
			sgls := nvme.IdentifyController(id).SGLS()
			if keyed := sgls&nvme.SGLSKeyed != 0; keyed != tc.wantKeyed {
				t.Errorf("SGLS %#x: keyed %v, want %v", sgls, keyed, tc.wantKeyed)
			}
			if off := sgls&nvme.SGLSOffsetInData != 0; off != tc.wantOffset {
				t.Errorf("SGLS %#x: offsets %v, want %v", sgls, off, tc.wantOffset)
			}

			dq, err := tc.lt.Dial(tc.addr, 0, 32)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(dq.Close)
			d := &host{t: t, lq: dq}
			d.mustOK(connectCmd(0, 31, 0), connectData(nvme.DiscoveryNQN, testHostNQN, testHostID, 0xffff))
			d.propSet(nvme.PropCC, ccEnable)
			b, st := getLog(d, nvme.LogDiscovery, 4096, 0)
			if !st.IsSuccess() {
				t.Fatal(st)
			}
			_, n, _ := nvme.ParseDiscoveryLogHeader(b)
			if n != 2 {
				t.Fatalf("%d entries, want 2 (one per port)", n)
			}
			for i := range 2 {
				e := nvme.UnmarshalDiscoveryLogEntry(b[nvme.DiscoveryLogHeaderSize+i*nvme.DiscoveryLogEntrySize:])
				want := uint8(0)
				if e.TRADDR == "tcpish" {
					want = nvme.TREQDisableSQFlow
				}
				if e.TREQ != want {
					t.Errorf("entry for %s: TREQ %#x, want %#x", e.TRADDR, e.TREQ, want)
				}
			}
		})
	}
}

// TestTCPReferral: a tcp referral is listed with TRTYPE 3 and a TSAS of
// no security.
func TestTCPReferral(t *testing.T) {
	r := newRig(t)
	r.tgt.SetReferrals([]Referral{{Transport: "tcp", Address: "fd00::2", Service: "8009", PortID: 4}})
	disc := r.connectOn("loop0", nvme.DiscoveryNQN)
	b, st := getLog(disc, nvme.LogDiscovery, 4096, 0)
	if !st.IsSuccess() {
		t.Fatal(st)
	}
	e := nvme.UnmarshalDiscoveryLogEntry(b[nvme.DiscoveryLogHeaderSize+nvme.DiscoveryLogEntrySize:])
	if e.SUBTYPE != nvme.SubtypeReferral || e.TRTYPE != nvme.TRTypeTCP || e.ADRFAM != nvme.AdrFamIPv6 ||
		e.TRADDR != "fd00::2" || e.TRSVCID != "8009" || e.TSAS != nvme.TCPTSAS(nvme.TCPSecTypeNone) {
		t.Fatalf("referral %+v", e)
	}
}
