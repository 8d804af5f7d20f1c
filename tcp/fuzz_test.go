package tcp

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/tcp/tcptest"
)

// Every parser of bytes from the network has a fuzz target; the seeds live
// in testdata/fuzz/<FuzzName>.

// FuzzPDUHeader checks any header against any framing: a header taken
// says where the PDU's parts are, within what was negotiated; one refused
// says why with a fatal error status.
func FuzzPDUHeader(f *testing.F) {
	f.Add(tcptest.ICReqPDU(0, 0, 3, 0), false, false, false)
	f.Add(tcptest.CapsulePDU(tcptest.Command(nvme.OpAdminIdentify, 1), nil, true, false), true, true, false)
	f.Add(tcptest.H2CDataPDU(1, 2, 0, make([]byte, 64), true, false, true), true, false, true)
	f.Fuzz(func(t *testing.T, data []byte, ready, hdgst, ddgst bool) {
		buf := make([]byte, nvme.TCPMaxHdrSize+nvme.TCPDigestSize)
		copy(buf, data)
		h := nvme.TCPHeader(buf)
		fr := framing{ready: ready, hdgst: hdgst, ddgst: ddgst, icd: 8 << 10, maxH2C: 128 << 10}
		l, fe := checkCommon(h, &fr)
		if fe != nil {
			if fe.fes < nvme.TCPFESInvalidHeaderField || fe.fes > nvme.TCPFESUnsupportedParameter || fe.Error() == "" {
				t.Fatalf("fatal error %+v", fe)
			}
			return
		}
		hlen := int(h.HLEN())
		if hlen != pduHLEN(h.Type()) || l.rest < hlen-nvme.TCPCommonHeaderSize || nvme.TCPCommonHeaderSize+l.rest > len(buf) {
			t.Fatalf("type %#x hlen %d: rest %d", h.Type(), hlen, l.rest)
		}
		if l.pad < 0 || l.data < 0 || l.pad > 255 {
			t.Fatalf("layout %+v", l)
		}
		if want := uint64(nvme.TCPCommonHeaderSize + l.rest + l.pad + l.data); h.Type() != nvme.TCPH2CTermReq && l.ddgst {
			want += nvme.TCPDigestSize
			if uint64(h.PLEN()) != want {
				t.Fatalf("plen %d, layout %+v adds up to %d", h.PLEN(), l, want)
			}
		} else if uint64(h.PLEN()) != want {
			t.Fatalf("plen %d, layout %+v adds up to %d", h.PLEN(), l, want)
		}
		switch h.Type() {
		case nvme.TCPCapsuleCmd:
			if l.data > int(fr.icd) {
				t.Fatalf("%d bytes of in-capsule data taken", l.data)
			}
		case nvme.TCPH2CData:
			if l.data == 0 || l.data > int(fr.maxH2C) {
				t.Fatalf("H2CData of %d bytes taken", l.data)
			}
			_ = checkH2CData(h, l)
		case nvme.TCPICReq:
			if ic, fe := checkICReq(h); fe == nil && ic.hpda > nvme.TCPMaxHPDA {
				t.Fatalf("HPDA %d taken", ic.hpda)
			}
		}
		if hdgst && hlen+nvme.TCPDigestSize <= len(buf) {
			_ = checkHeaderDigest(h, hlen)
		}
		if pdo := c2hDataPDO(hdgst, h.PDA()%(nvme.TCPMaxHPDA+1)); pdo > 255 || pdo%4 != 0 {
			t.Fatalf("C2HData PDO %d", pdo)
		}
	})
}

// streamConn is a connection whose host sends in and then closes; what
// the target sends is counted and dropped.
type streamConn struct {
	in      *bytes.Reader
	mu      sync.Mutex
	written int
	closed  bool
}

func (s *streamConn) Read(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, net.ErrClosed
	}
	return s.in.Read(b)
}

func (s *streamConn) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, net.ErrClosed
	}
	s.written += len(b)
	return len(b), nil
}

func (s *streamConn) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}

func (s *streamConn) LocalAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4420}
}
func (s *streamConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 9), Port: 40000}
}
func (s *streamConn) SetDeadline(time.Time) error      { return nil }
func (s *streamConn) SetReadDeadline(time.Time) error  { return nil }
func (s *streamConn) SetWriteDeadline(time.Time) error { return nil }

var _ io.ReadWriteCloser = (*streamConn)(nil)

// hostStream is what a well-behaved host sends to connect an admin queue
// and identify the controller: the fuzzer's start.
func hostStream(hdgst, ddgst bool) []byte {
	var dg uint8
	if hdgst {
		dg |= nvme.TCPDigestHeader
	}
	if ddgst {
		dg |= nvme.TCPDigestData
	}
	var b []byte
	b = append(b, tcptest.ICReqPDU(0, 0, dg, 0)...)
	conn := tcptest.Command(nvme.OpFabrics, 1)
	conn.SetFCType(nvme.FCTypeConnect)
	conn.SetConnect(0, 0, 31, nvme.ConnectCATTRDisableSQFlow, 0)
	conn.SGL1().SetDataBlockOffset(0, nvme.ConnectDataSize)
	b = append(b, tcptest.CapsulePDU(conn, tcptest.ConnectData(testNQN, testHostNQN, testHostID, nvme.CNTLIDDynamic), hdgst, ddgst)...)
	cc := tcptest.Command(nvme.OpFabrics, 2)
	cc.SetFCType(nvme.FCTypePropertySet)
	cc.SetProperty(nvme.PropertySize4, nvme.PropCC, 1|6<<16|4<<20)
	b = append(b, tcptest.CapsulePDU(cc, nil, hdgst, ddgst)...)
	id := tcptest.Command(nvme.OpAdminIdentify, 3)
	id.SetIdentify(nvme.CNSController, 0, 0)
	id.SGL1().SetTransportDataBlock(nvme.IdentifyDataSize)
	b = append(b, tcptest.CapsulePDU(id, nil, hdgst, ddgst)...)
	return b
}

// FuzzConn runs a connection's reader over any byte stream from a host,
// behind a real target: it must end (at the stream's end at the latest)
// with every request and pool buffer given back.
func FuzzConn(f *testing.F) {
	f.Add(hostStream(false, false))
	f.Add(hostStream(true, true))
	w := tcptest.IO(nvme.OpWrite, 4, 1, 0, 1)
	w.SGL1().SetTransportDataBlock(512)
	f.Add(append(append(hostStream(false, false), tcptest.CapsulePDU(w, nil, false, false)...), tcptest.H2CDataPDU(4, 0, 0, make([]byte, 512), true, false, false)...))
	r := newRig(f, Config{MaxQueueDepth: 16, ICReqTimeout: time.Second}, fabric.Options{})
	l := &listener{t: r.tr, tgt: r.tgt, port: r.port, log: r.tr.log, conns: map[*conn]struct{}{}}
	f.Fuzz(func(t *testing.T, stream []byte) {
		if !r.tr.claim("127.0.0.9") {
			t.Fatal("no room for a connection")
		}
		s := &streamConn{in: bytes.NewReader(stream)}
		c := newConn(l, s, "127.0.0.9")
		l.mu.Lock()
		l.conns[c] = struct{}{}
		l.mu.Unlock()
		l.live.Add(1)
		c.serve()
		done := make(chan struct{})
		go func() { l.live.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("connection not finished 10 s after its stream ended")
		}
		if n := r.tr.pool.out(); n != 0 {
			t.Fatalf("%d pool bytes out after the connection finished", n)
		}
		r.tr.pool.mu.Lock()
		held, waiting := c.held, c.line.head != nil
		r.tr.pool.mu.Unlock()
		if held != 0 || waiting {
			t.Fatalf("connection finished with %d units claimed of its share, requests in its line: %v", held, waiting)
		}
		if total, _ := r.tr.Connections(""); total != 0 {
			t.Fatalf("%d connections counted after the connection finished", total)
		}
	})
}
