package tcp

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/tcp/tcptest"
)

// writeCmd is a write of n bytes whose data the target fetches with R2T.
func writeCmd(cid uint16, n int) nvme.Command {
	c := tcptest.IO(nvme.OpWrite, cid, 1, 0, uint32(n/512))
	c.SGL1().SetTransportDataBlock(uint32(n))
	return c
}

// r2tFor sends a write of n bytes and returns the transfer tag of the R2T
// the target answers with.
func r2tFor(t *testing.T, c *tcptest.Conn, cid uint16, n int, hdgst bool) uint16 {
	t.Helper()
	if err := c.Write(tcptest.CapsulePDU(writeCmd(cid, n), nil, hdgst, false)); err != nil {
		t.Fatal(err)
	}
	h, _, err := c.ReadPDU()
	if err != nil {
		t.Fatal(err)
	}
	if h.Type() != nvme.TCPR2T || h.CCCID() != cid || h.DATAO() != 0 || h.DATAL() != uint32(n) {
		t.Fatalf("PDU type %#x for %#x: %d bytes at %d, want an R2T for all %d", h.Type(), h.CCCID(), h.DATAL(), h.DATAO(), n)
	}
	return h.TTAG()
}

func set(b []byte, off int, v byte) []byte {
	b[off] = v
	return b
}

// TestFatalErrors: a host that breaks the protocol gets a C2HTermReq with
// the Fatal Error Status (and for a bad field its byte offset) that names
// what it did, quoting its PDU's header, and then the connection closes.
func TestFatalErrors(t *testing.T) {
	ident := tcptest.Command(nvme.OpAdminIdentify, 7)
	ident.SetIdentify(nvme.CNSController, 0, 0)
	icd := func(n int) []byte { return make([]byte, n) }
	type stage int
	const (
		raw   stage = iota // nothing sent before
		ready              // ICResp received
		queue              // an I/O queue connected
	)
	for _, tc := range []struct {
		name  string
		cfg   Config
		o     tcptest.Options
		stage stage
		// send writes the bad PDU; it may first set up what it needs.
		send func(t *testing.T, c *tcptest.Conn) []byte
		fes  nvme.TCPFES
		fei  uint32
	}{
		{name: "icreq pfv 1", send: func(*testing.T, *tcptest.Conn) []byte { return tcptest.ICReqPDU(1, 0, 0, 0) },
			fes: nvme.TCPFESUnsupportedParameter, fei: nvme.TCPOffPFV},
		{name: "icreq hpda 32", send: func(*testing.T, *tcptest.Conn) []byte { return tcptest.ICReqPDU(0, 32, 0, 0) },
			fes: nvme.TCPFESInvalidHeaderField, fei: nvme.TCPOffPDA},
		{name: "icreq hlen 100", send: func(*testing.T, *tcptest.Conn) []byte { return set(tcptest.ICReqPDU(0, 0, 0, 0), 2, 100) },
			fes: nvme.TCPFESInvalidHeaderField, fei: nvme.TCPOffHLEN},
		{name: "icreq pdo 8", send: func(*testing.T, *tcptest.Conn) []byte { return set(tcptest.ICReqPDU(0, 0, 0, 0), 3, 8) },
			fes: nvme.TCPFESInvalidHeaderField, fei: nvme.TCPOffPDO},
		{name: "icreq plen 129", send: func(*testing.T, *tcptest.Conn) []byte { return set(tcptest.ICReqPDU(0, 0, 0, 0), 4, 129) },
			fes: nvme.TCPFESInvalidHeaderField, fei: nvme.TCPOffPLEN},
		{name: "capsule before icreq", send: func(*testing.T, *tcptest.Conn) []byte { return tcptest.CapsulePDU(ident, nil, false, false) },
			fes: nvme.TCPFESPDUSequenceError},
		{name: "second icreq", stage: ready, send: func(*testing.T, *tcptest.Conn) []byte { return tcptest.ICReqPDU(0, 0, 0, 0) },
			fes: nvme.TCPFESPDUSequenceError},
		{name: "unknown pdu type", stage: ready, send: func(*testing.T, *tcptest.Conn) []byte {
			return append([]byte{0x0a, 0, 24, 0, 24, 0, 0, 0}, make([]byte, 16)...)
		}, fes: nvme.TCPFESInvalidHeaderField, fei: nvme.TCPOffType},
		{name: "controller pdu type from the host", stage: ready, send: func(*testing.T, *tcptest.Conn) []byte {
			return append([]byte{nvme.TCPCapsuleResp, 0, 24, 0, 24, 0, 0, 0}, make([]byte, 16)...)
		}, fes: nvme.TCPFESInvalidHeaderField, fei: nvme.TCPOffType},
		{name: "capsule hlen 24", stage: ready, send: func(*testing.T, *tcptest.Conn) []byte {
			return set(tcptest.CapsulePDU(ident, nil, false, false), 2, 24)
		}, fes: nvme.TCPFESInvalidHeaderField, fei: nvme.TCPOffHLEN},
		{name: "capsule hdgstf without header digests", stage: ready, send: func(*testing.T, *tcptest.Conn) []byte {
			return set(tcptest.CapsulePDU(ident, nil, false, false), 1, nvme.TCPFlagHDGST)
		}, fes: nvme.TCPFESInvalidHeaderField, fei: nvme.TCPOffFlags},
		{name: "capsule without hdgstf under header digests", stage: ready, o: tcptest.Options{HeaderDigest: true}, send: func(*testing.T, *tcptest.Conn) []byte {
			return tcptest.CapsulePDU(ident, nil, false, false)
		}, fes: nvme.TCPFESInvalidHeaderField, fei: nvme.TCPOffFlags},
		{name: "capsule ddgstf without data digests", stage: ready, send: func(*testing.T, *tcptest.Conn) []byte {
			return tcptest.CapsulePDU(ident, icd(512), false, true)
		}, fes: nvme.TCPFESInvalidHeaderField, fei: nvme.TCPOffFlags},
		{name: "capsule plen past its header without pdo", stage: ready, send: func(*testing.T, *tcptest.Conn) []byte {
			return append(set(tcptest.CapsulePDU(ident, nil, false, false), 4, 80), make([]byte, 8)...)
		}, fes: nvme.TCPFESInvalidHeaderField, fei: nvme.TCPOffPLEN},
		{name: "capsule pdo inside the header", stage: ready, send: func(*testing.T, *tcptest.Conn) []byte {
			return set(tcptest.CapsulePDU(ident, icd(512), false, false), 3, 68)
		}, fes: nvme.TCPFESInvalidHeaderField, fei: nvme.TCPOffPDO},
		{name: "capsule pdo not a dword", stage: ready, send: func(*testing.T, *tcptest.Conn) []byte {
			return set(tcptest.CapsulePDU(ident, icd(512), false, false), 3, 74)
		}, fes: nvme.TCPFESInvalidHeaderField, fei: nvme.TCPOffPDO},
		{name: "capsule plen ends at pdo", stage: ready, send: func(*testing.T, *tcptest.Conn) []byte {
			b := tcptest.CapsulePDU(ident, icd(512), false, false)
			binary.LittleEndian.PutUint32(b[4:], 72)
			return b[:72]
		}, fes: nvme.TCPFESInvalidHeaderField, fei: nvme.TCPOffPLEN},
		{name: "capsule data past IOCCSZ", stage: ready, send: func(*testing.T, *tcptest.Conn) []byte {
			return tcptest.CapsulePDU(ident, icd(8<<10+16), false, false)
		}, fes: nvme.TCPFESDataLimitExceeded},
		{name: "capsule header digest error", stage: ready, o: tcptest.Options{HeaderDigest: true}, send: func(*testing.T, *tcptest.Conn) []byte {
			b := tcptest.CapsulePDU(ident, nil, true, false)
			b[nvme.TCPCapsuleCmdHdr] ^= 1
			return b
		}, fes: nvme.TCPFESHeaderDigestError},
		{name: "h2cdata for no r2t", stage: queue, send: func(*testing.T, *tcptest.Conn) []byte {
			return tcptest.H2CDataPDU(1, 0, 0, icd(512), true, false, false)
		}, fes: nvme.TCPFESInvalidHeaderField, fei: nvme.TCPOffTTAG},
		{name: "h2cdata for an unknown tag", stage: queue, send: func(t *testing.T, c *tcptest.Conn) []byte {
			tag := r2tFor(t, c, 5, 16<<10, false)
			return tcptest.H2CDataPDU(5, tag+1000, 0, icd(512), true, false, false)
		}, fes: nvme.TCPFESInvalidHeaderField, fei: nvme.TCPOffTTAG},
		{name: "h2cdata of another command", stage: queue, send: func(t *testing.T, c *tcptest.Conn) []byte {
			tag := r2tFor(t, c, 5, 16<<10, false)
			return tcptest.H2CDataPDU(6, tag, 0, icd(16<<10), true, false, false)
		}, fes: nvme.TCPFESInvalidHeaderField, fei: nvme.TCPOffCCCID},
		{name: "h2cdata skipping ahead", stage: queue, send: func(t *testing.T, c *tcptest.Conn) []byte {
			tag := r2tFor(t, c, 5, 16<<10, false)
			return tcptest.H2CDataPDU(5, tag, 4096, icd(4096), false, false, false)
		}, fes: nvme.TCPFESDataOutOfRange},
		{name: "h2cdata past the r2t", stage: queue, send: func(t *testing.T, c *tcptest.Conn) []byte {
			tag := r2tFor(t, c, 5, 16<<10, false)
			return tcptest.H2CDataPDU(5, tag, 0, icd(20<<10), true, false, false)
		}, fes: nvme.TCPFESDataOutOfRange},
		{name: "h2cdata second pdu past the r2t", stage: queue, send: func(t *testing.T, c *tcptest.Conn) []byte {
			tag := r2tFor(t, c, 5, 16<<10, false)
			if err := c.Write(tcptest.H2CDataPDU(5, tag, 0, icd(12<<10), false, false, false)); err != nil {
				t.Fatal(err)
			}
			return tcptest.H2CDataPDU(5, tag, 12<<10, icd(8<<10), true, false, false)
		}, fes: nvme.TCPFESDataOutOfRange},
		{name: "h2cdata datal not its data", stage: queue, send: func(t *testing.T, c *tcptest.Conn) []byte {
			tag := r2tFor(t, c, 5, 16<<10, false)
			b := tcptest.H2CDataPDU(5, tag, 0, icd(16<<10), true, false, false)
			binary.LittleEndian.PutUint32(b[nvme.TCPOffDATAL:], 8<<10)
			return b
		}, fes: nvme.TCPFESInvalidHeaderField, fei: nvme.TCPOffDATAL},
		{name: "h2cdata past maxh2cdata", cfg: Config{MaxH2CData: 8 << 10}, stage: queue, send: func(t *testing.T, c *tcptest.Conn) []byte {
			tag := r2tFor(t, c, 5, 16<<10, false)
			return tcptest.H2CDataPDU(5, tag, 0, icd(16<<10), true, false, false)
		}, fes: nvme.TCPFESDataLimitExceeded},
		{name: "h2cdata last too early", stage: queue, send: func(t *testing.T, c *tcptest.Conn) []byte {
			tag := r2tFor(t, c, 5, 16<<10, false)
			return tcptest.H2CDataPDU(5, tag, 0, icd(8<<10), true, false, false)
		}, fes: nvme.TCPFESInvalidHeaderField, fei: nvme.TCPOffFlags},
		{name: "h2cdata end without last", stage: queue, send: func(t *testing.T, c *tcptest.Conn) []byte {
			tag := r2tFor(t, c, 5, 16<<10, false)
			return tcptest.H2CDataPDU(5, tag, 0, icd(16<<10), false, false, false)
		}, fes: nvme.TCPFESInvalidHeaderField, fei: nvme.TCPOffFlags},
		{name: "h2cdata without data", stage: queue, send: func(t *testing.T, c *tcptest.Conn) []byte {
			tag := r2tFor(t, c, 5, 16<<10, false)
			b := tcptest.H2CDataPDU(5, tag, 0, nil, true, false, false)
			b[3] = 0 // PDO
			return b
		}, fes: nvme.TCPFESInvalidHeaderField, fei: nvme.TCPOffPDO},
		{name: "h2cdata header digest error", stage: queue, o: tcptest.Options{HeaderDigest: true}, send: func(t *testing.T, c *tcptest.Conn) []byte {
			tag := r2tFor(t, c, 5, 16<<10, true)
			b := tcptest.H2CDataPDU(5, tag, 0, icd(16<<10), true, true, false)
			b[nvme.TCPDataHdrSize+2] ^= 0x80
			return b
		}, fes: nvme.TCPFESHeaderDigestError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.cfg, fabric.Options{})
			var c *tcptest.Conn
			var err error
			switch tc.stage {
			case raw:
				c, err = tcptest.DialRaw(r.addr, tc.o)
				if err == nil {
					t.Cleanup(func() { c.Close() })
				}
			case ready:
				c = r.dial(t, tc.o)
			case queue:
				_, c = r.controller(t, tc.o, 0)
			}
			if err != nil {
				t.Fatal(err)
			}
			pdu := tc.send(t, c)
			if err := c.Write(pdu); err != nil {
				t.Fatal(err)
			}
			term, err := c.ReadTerm()
			if err != nil {
				t.Fatalf("no C2HTermReq: %v", err)
			}
			if term.FES != tc.fes || term.FEI != tc.fei {
				t.Errorf("C2HTermReq %s fei %d, want %s fei %d", term.FES, term.FEI, tc.fes, tc.fei)
			}
			if n := min(len(pdu), 8); !bytes.Equal(term.PDU[:min(len(term.PDU), n)], pdu[:n]) {
				t.Errorf("quoted header %x, want %x", term.PDU, pdu[:n])
			}
			waitClosed(t, c, 5*time.Second)
			if got := r.tr.Stats().TermReqsSent.Load(); got != 1 {
				t.Errorf("%d termination requests counted", got)
			}
		})
	}
}

// TestDataDigestError: a data digest error fails its command with
// Transient Transport Error, in the capsule's data or an H2CData's, and the
// connection goes on.
func TestDataDigestError(t *testing.T) {
	r := newRig(t, Config{}, fabric.Options{})
	o := tcptest.Options{DataDigest: true}
	_, c := r.controller(t, o, 0)
	data := make([]byte, 4096)
	pattern(data, 3)

	w := tcptest.IO(nvme.OpWrite, 1, 1, 0, 8)
	w.SGL1().SetDataBlockOffset(0, 4096)
	b := tcptest.CapsulePDU(w, data, false, true)
	b[len(b)-1] ^= 0xff
	if err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	h, _, err := c.ReadPDU()
	if err != nil || h.Type() != nvme.TCPCapsuleResp || h.CQE().Status() != nvme.StatusTransientTransportError {
		t.Fatalf("in-capsule write with a bad digest: %v type %#x status %v", err, h.Type(), h.CQE().Status())
	}

	tag := r2tFor(t, c, 2, 4096, false)
	b = tcptest.H2CDataPDU(2, tag, 0, data, true, false, true)
	b[len(b)-2] ^= 0xff
	if err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	h, _, err = c.ReadPDU()
	if err != nil || h.Type() != nvme.TCPCapsuleResp || h.CQE().CID() != 2 || h.CQE().Status() != nvme.StatusTransientTransportError {
		t.Fatalf("H2CData with a bad digest: %v type %#x status %v", err, h.Type(), h.CQE().Status())
	}
	if got := r.tr.Stats().DataDigestErrors.Load(); got != 2 {
		t.Errorf("%d data digest errors counted", got)
	}
	// Neither write was executed; the queue goes on.
	got := make([]byte, 4096)
	rsp, err := c.Do(tcptest.IO(nvme.OpRead, 3, 1, 0, 8), got, false, false)
	if err != nil || !rsp.Status().IsSuccess() {
		t.Fatalf("read after digest errors: %v %v", err, rsp.Status())
	}
	if bytes.Equal(got, data) {
		t.Error("a write whose data digest failed was executed")
	}
}

// TestHostTermReq: a host's H2CTermReq closes the connection, with no
// termination request of ours.
func TestHostTermReq(t *testing.T) {
	r := newRig(t, Config{}, fabric.Options{})
	c := r.dial(t, tcptest.Options{})
	b := make([]byte, nvme.TCPTermReqHdrSize+8)
	h := nvme.TCPHeader(b)
	h.SetCommon(nvme.TCPH2CTermReq, 0, nvme.TCPTermReqHdrSize, 0, uint32(len(b)))
	h.SetTermReq(nvme.TCPFESR2TLimitExceeded, 0)
	if err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.ReadPDU(); err == nil {
		t.Fatal("a PDU after the host's termination request")
	}
	eventually(t, 5*time.Second, "H2CTermReq counted", func() bool { return r.tr.Stats().TermReqsReceived.Load() == 1 })
	if got := r.tr.Stats().TermReqsSent.Load(); got != 0 {
		t.Errorf("%d termination requests sent", got)
	}
}

// TestTrickle: a host that sends every PDU one byte at a time is served
// the same.
func TestTrickle(t *testing.T) {
	r := newRig(t, Config{}, fabric.Options{})
	o := tcptest.Options{Trickle: true, HeaderDigest: true, DataDigest: true, H2CDataSize: 4096}
	_, c := r.controller(t, o, 0)
	data := make([]byte, 12<<10)
	pattern(data, 9)
	if rsp, err := c.Do(tcptest.IO(nvme.OpWrite, 1, 1, 8, 24), data, true, false); err != nil || !rsp.Status().IsSuccess() {
		t.Fatalf("write by R2T: %v %v", err, rsp.Status())
	}
	if rsp, err := c.Do(tcptest.IO(nvme.OpWrite, 2, 1, 40, 8), data[:4096], true, true); err != nil || !rsp.Status().IsSuccess() {
		t.Fatalf("write in capsule: %v %v", err, rsp.Status())
	}
	got := make([]byte, len(data))
	if rsp, err := c.Do(tcptest.IO(nvme.OpRead, 3, 1, 8, 24), got, false, false); err != nil || !rsp.Status().IsSuccess() || !bytes.Equal(got, data) {
		t.Fatalf("read: %v %v, data equal %v", err, rsp.Status(), bytes.Equal(got, data))
	}
}

// TestICReqTimeout: a connection that sends no ICReq, or only part of one,
// holds no queue and is closed after ICReqTimeout; its place is given back.
func TestICReqTimeout(t *testing.T) {
	r := newRig(t, Config{ICReqTimeout: 200 * time.Millisecond}, fabric.Options{})
	silent, err := tcptest.DialRaw(r.addr, tcptest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	partial, err := tcptest.DialRaw(r.addr, tcptest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer partial.Close()
	if err := partial.Write(tcptest.ICReqPDU(0, 0, 0, 0)[:100]); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "both counted", func() bool { total, _ := r.tr.Connections("127.0.0.1"); return total == 2 })
	if q := r.tgt.Stats().Queues; q != 0 {
		t.Errorf("%d queues for connections without an ICReq", q)
	}
	waitClosed(t, silent, 5*time.Second)
	waitClosed(t, partial, 5*time.Second)
	eventually(t, 5*time.Second, "places given back", func() bool { total, _ := r.tr.Connections("127.0.0.1"); return total == 0 })
	if got := r.tr.Stats().ICReqTimeouts.Load(); got != 2 {
		t.Errorf("%d ICReq timeouts counted", got)
	}
}

// TestConnectionLimits: connections past the limit of their address, or of
// the transport, are closed at once; a place given back is taken again.
func TestConnectionLimits(t *testing.T) {
	r := newRig(t, Config{MaxConnections: 3, MaxConnectionsPerAddress: 2}, fabric.Options{})
	open := func(from string) *tcptest.Conn {
		t.Helper()
		c, err := tcptest.Dial(r.addr, tcptest.Options{LocalAddr: from, Timeout: 2 * time.Second})
		if err != nil {
			return nil
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	a1, a2 := open("127.0.0.1"), open("127.0.0.1")
	if a1 == nil || a2 == nil {
		t.Fatal("the first two connections of an address were refused")
	}
	if open("127.0.0.1") != nil {
		t.Error("a third connection of one address was taken (limit 2)")
	}
	if open("127.0.0.2") == nil {
		t.Fatal("another address's first connection was refused")
	}
	if open("127.0.0.3") != nil {
		t.Error("a fourth connection was taken (limit 3)")
	}
	if got := r.tr.Stats().Refused.Load(); got != 2 {
		t.Errorf("%d refusals counted", got)
	}
	a1.Close()
	eventually(t, 5*time.Second, "a place given back", func() bool { _, n := r.tr.Connections("127.0.0.1"); return n == 1 })
	if open("127.0.0.1") == nil {
		t.Error("a connection was refused after one of its address closed")
	}
}

// TestQueueDepthExceeded: a host with more commands out than the SQ size
// it was granted at Connect is disconnected; as many as that are taken.
// The port's admin queue of 32 entries is taken where I/O queues have 16.
func TestQueueDepthExceeded(t *testing.T) {
	for _, tc := range []struct {
		name   string
		depth  int    // the port's deepest I/O queue
		sqsize uint16 // asked at Connect, 0's based
	}{
		{"port's depth", 16, 15},
		{"below the port's depth", 0, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Config{MaxQueueDepth: tc.depth}, fabric.Options{})
			_, cntlid := r.admin(t, tcptest.Options{}, testNQN, 0)
			c := r.dial(t, tcptest.Options{})
			if _, err := c.Connect(1, tc.sqsize, 0, 0, testNQN, testHostNQN, testHostID, cntlid); err != nil {
				t.Fatal(err)
			}
			// Writes whose data never comes: each holds its slot.
			n := int(tc.sqsize) + 1
			for i := range n {
				r2tFor(t, c, uint16(i), 4096, false)
			}
			if err := c.Write(tcptest.CapsulePDU(writeCmd(uint16(n), 4096), nil, false, false)); err != nil {
				t.Fatal(err)
			}
			waitClosed(t, c, 5*time.Second)
		})
	}
}

// TestHostGoesMidTransfer: commands in flight when the host goes are let
// go of; nothing stays held.
func TestHostGoesMidTransfer(t *testing.T) {
	r := newRig(t, Config{}, fabric.Options{})
	_, c := r.controller(t, tcptest.Options{}, 0)
	tag := r2tFor(t, c, 1, 64<<10, false)
	// Half the data, then the host is gone.
	if err := c.Write(tcptest.H2CDataPDU(1, tag, 0, make([]byte, 32<<10), false, false, false)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	eventually(t, 5*time.Second, "pool buffers given back", func() bool { return r.tr.pool.out() == 0 })
}

// TestR2TDataTimeout: a host that is sent R2Ts and sends no data for them
// (holding their buffers from every other host) is disconnected after the
// send timeout, though it keeps its controller alive; a host whose data
// comes slowly but comes is not.
func TestR2TDataTimeout(t *testing.T) {
	r := newRig(t, Config{SendTimeout: 400 * time.Millisecond}, fabric.Options{})
	a, c := r.controller(t, tcptest.Options{}, 0)
	r2tFor(t, c, 1, 64<<10, false)
	// Slow: one H2CData every 100 ms on another connection of the host.
	_, slow := r.controller(t, tcptest.Options{}, 0)
	tag := r2tFor(t, slow, 1, 64<<10, false)
	for i := range 8 {
		if err := a.KeepAlive(); err != nil {
			t.Fatal(err)
		}
		if err := slow.Write(tcptest.H2CDataPDU(1, tag, uint32(i)*8192, make([]byte, 8192), i == 7, false, false)); err != nil {
			t.Fatalf("slow host: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	h, _, err := slow.ReadPDU()
	if err != nil || h.Type() != nvme.TCPCapsuleResp || !h.CQE().Status().IsSuccess() {
		t.Fatalf("slow host's write: %v type %#x", err, h.Type())
	}
	waitClosed(t, c, 5*time.Second)
	if got := r.tr.Stats().DataTimeouts.Load(); got != 1 {
		t.Errorf("%d data timeouts counted", got)
	}
	eventually(t, 5*time.Second, "buffers given back", func() bool { return r.tr.pool.out() == 0 })
}

// TestSlowData: H2CData whose data comes in pieces far apart, as over a
// slow or lossy link: the writes complete with their data whole, and a
// command that comes alone after each is taken at once. (It caught a
// socket low-water mark for the rest of a PDU's data that was left set.)
func TestSlowData(t *testing.T) {
	r := newRig(t, Config{}, fabric.Options{})
	for _, dg := range []bool{false, true} {
		o := tcptest.Options{HeaderDigest: dg, DataDigest: dg, H2CDataSize: 64 << 10, DataPause: 20 * time.Millisecond, DataPiece: 9000}
		_, c := r.controller(t, o, 0)
		for i, size := range []int{64 << 10, 128 << 10, 20 << 10} {
			data := make([]byte, size)
			pattern(data, byte(i+3))
			lba := uint64(i) * 512
			if rsp, err := c.Do(tcptest.IO(nvme.OpWrite, 1, 1, lba, uint32(size/512)), data, true, false); err != nil || !rsp.Status().IsSuccess() {
				t.Fatalf("digests %v: write %d bytes: %v %v", dg, size, err, rsp.Status())
			}
			got := make([]byte, 512)
			if rsp, err := c.Do(tcptest.IO(nvme.OpRead, 2, 1, lba, 1), got, false, false); err != nil || !rsp.Status().IsSuccess() || !bytes.Equal(got, data[:512]) {
				t.Fatalf("digests %v: a read alone after the slow write: %v %v, data equal %v", dg, err, rsp.Status(), bytes.Equal(got, data[:512]))
			}
			got = make([]byte, size)
			if rsp, err := c.Do(tcptest.IO(nvme.OpRead, 3, 1, lba, uint32(size/512)), got, false, false); err != nil || !rsp.Status().IsSuccess() || !bytes.Equal(got, data) {
				t.Fatalf("digests %v: read %d bytes back: %v %v, data equal %v", dg, size, err, rsp.Status(), bytes.Equal(got, data))
			}
		}
	}
}

// TestHostStopsReading: a host that sends reads and takes none of their
// data is disconnected after the send timeout, whoever was sending when
// the socket filled up (the connection's reader, for a memory namespace),
// the timeout is counted, and every buffer comes back.
func TestHostStopsReading(t *testing.T) {
	r := newRig(t, Config{SendTimeout: 400 * time.Millisecond}, fabric.Options{})
	_, c := r.controller(t, tcptest.Options{}, 0)
	if tc, ok := c.NetConn().(*net.TCPConn); ok {
		tc.SetReadBuffer(4 << 10)
	}
	// 64 reads of 128 KiB, 8 MiB: more than the sockets hold.
	for i := range 64 {
		if err := c.Submit(tcptest.IO(nvme.OpRead, uint16(i+1), 1, 0, 256), make([]byte, 128<<10), false, false); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
	}
	// Not read from c meanwhile, which would take the data; nor after: what
	// the target had sent comes through a 4 KiB window at the pace of TCP's
	// zero-window probes.
	eventually(t, 10*time.Second, "the target closes the connection", func() bool {
		total, _ := r.tr.Connections("")
		return total == 1 // the admin queue's
	})
	c.Close()
	if got := r.tr.Stats().SendTimeouts.Load(); got != 1 {
		t.Errorf("%d send timeouts counted, want 1", got)
	}
	eventually(t, 5*time.Second, "buffers given back", func() bool { return r.tr.pool.out() == 0 })
}
