package tcp

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/blockdev"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/tcp/tcptest"
)

// TestReadWrite runs a controller's life over 127.0.0.1 with the digests
// on and off: Connect (its data in the capsule), Identify, then writes and
// reads of several sizes (in the capsule, by one R2T answered with one or
// several H2CData, read back in one C2HData), each read checked, and a
// flush. With SQ flow control disabled at Connect, reads end with
// C2HData's SUCCESS flag and no response capsule.
func TestReadWrite(t *testing.T) {
	r := newRig(t, Config{}, fabric.Options{})
	for _, dg := range []struct {
		name         string
		hdgst, ddgst bool
	}{{"no digests", false, false}, {"header digest", true, false}, {"data digest", false, true}, {"both digests", true, true}} {
		for _, noSQFlow := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/sqflow-disabled=%v", dg.name, noSQFlow), func(t *testing.T) {
				o := tcptest.Options{HeaderDigest: dg.hdgst, DataDigest: dg.ddgst, H2CDataSize: 16 << 10}
				var cattr uint8
				if noSQFlow {
					cattr = nvme.ConnectCATTRDisableSQFlow
				}
				a, io := r.controller(t, o, cattr)
				id, err := a.Identify(nvme.CNSController, 0)
				if err != nil {
					t.Fatal(err)
				}
				idc := nvme.IdentifyController(id)
				if got, want := idc.IOCCSZ(), uint32(nvme.CommandSize+8<<10)/16; got != want {
					t.Errorf("IOCCSZ %d, want %d", got, want)
				}
				if idc.SGLS()&nvme.SGLSKeyed != 0 || idc.SGLS()&nvme.SGLSOffsetInData == 0 {
					t.Errorf("SGLS %#x: want offsets and no keyed data blocks", idc.SGLS())
				}
				cid := uint16(1)
				for i, tc := range []struct {
					size      int
					inCapsule bool
					r2tPDUs   int // H2CData PDUs of a write by R2T
				}{
					{512, true, 0},
					{4 << 10, true, 0},
					{8 << 10, true, 0},
					{4 << 10, false, 1},
					{16 << 10, false, 1},
					{128 << 10, false, 8},
					{1 << 20, false, 64},
				} {
					lba := uint64(i) * 4096
					nlb := uint32(tc.size / 512)
					want := make([]byte, tc.size)
					pattern(want, byte(i+1))
					r2ts := io.R2Ts
					cid++
					rsp, err := io.Do(tcptest.IO(nvme.OpWrite, cid, 1, lba, nlb), want, true, tc.inCapsule)
					if err != nil || !rsp.Status().IsSuccess() {
						t.Fatalf("write %d bytes (in capsule %v): %v %v", tc.size, tc.inCapsule, err, rsp.Status())
					}
					if n := io.R2Ts - r2ts; (n > 0) == tc.inCapsule || (!tc.inCapsule && n != 1) {
						t.Errorf("write %d bytes (in capsule %v): %d R2Ts", tc.size, tc.inCapsule, n)
					}
					got := make([]byte, tc.size)
					cid++
					resps, succ, dataOnly := io.Responses, io.Successes, r.tr.Stats().DataOnlyReads.Load()
					rsp, err = io.Do(tcptest.IO(nvme.OpRead, cid, 1, lba, nlb), got, false, false)
					if err != nil || !rsp.Status().IsSuccess() {
						t.Fatalf("read %d bytes: %v %v", tc.size, err, rsp.Status())
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("read %d bytes at LBA %d: data differs from what was written", tc.size, lba)
					}
					if got := r.tr.Stats().DataOnlyReads.Load() - dataOnly; noSQFlow != (got == 1) {
						t.Errorf("read with SQ flow control disabled %v: %d counted answered by their data alone", noSQFlow, got)
					}
					if noSQFlow && (io.Successes != succ+1 || io.Responses != resps) {
						t.Errorf("read with SQ flow control disabled: %d SUCCESS flags, %d responses; want the data alone", io.Successes-succ, io.Responses-resps)
					}
					if !noSQFlow && (io.Successes != succ || io.Responses != resps+1) {
						t.Errorf("read with SQ flow control: %d SUCCESS flags, %d responses; want a response", io.Successes-succ, io.Responses-resps)
					}
				}
				cid++
				if rsp, err := io.Do(tcptest.IO(nvme.OpFlush, cid, 1, 0, 1), nil, false, false); err != nil || !rsp.Status().IsSuccess() {
					t.Fatalf("flush: %v %v", err, rsp.Status())
				}
			})
		}
	}
}

// TestManyR2TsOutstanding submits writes that each need an R2T before
// waiting for any: the target has an R2T out for each at once.
func TestManyR2TsOutstanding(t *testing.T) {
	r := newRig(t, Config{}, fabric.Options{})
	_, io := r.controller(t, tcptest.Options{H2CDataSize: 4 << 10}, 0)
	const n = 32
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = make([]byte, 32<<10)
		pattern(bufs[i], byte(i))
		if err := io.Submit(tcptest.IO(nvme.OpWrite, uint16(i), 1, uint64(i)*64, 64), bufs[i], true, false); err != nil {
			t.Fatal(err)
		}
	}
	for i := range bufs {
		rsp, err := io.Wait(uint16(i))
		if err != nil || !rsp.Status().IsSuccess() {
			t.Fatalf("write %d: %v %v", i, err, rsp.Status())
		}
	}
	if io.R2Ts != n {
		t.Errorf("%d R2Ts for %d writes", io.R2Ts, n)
	}
	for i := range bufs {
		got := make([]byte, len(bufs[i]))
		if err := io.Submit(tcptest.IO(nvme.OpRead, uint16(i), 1, uint64(i)*64, 64), got, false, false); err != nil {
			t.Fatal(err)
		}
		rsp, err := io.Wait(uint16(i))
		if err != nil || !rsp.Status().IsSuccess() || !bytes.Equal(got, bufs[i]) {
			t.Fatalf("read %d: %v %v (data equal %v)", i, err, rsp.Status(), bytes.Equal(got, bufs[i]))
		}
	}
}

// TestKeepAliveTimeout: a host that sends nothing for its KATO loses its
// controller, and the target closes the connections; their places are
// given back.
func TestKeepAliveTimeout(t *testing.T) {
	r := newRig(t, Config{}, fabric.Options{})
	a, cntlid := r.admin(t, tcptest.Options{}, testNQN, 1000)
	io := r.io(t, tcptest.Options{}, 1, cntlid, 0)
	waitClosed(t, a, 10*time.Second)
	waitClosed(t, io, 5*time.Second)
	eventually(t, 5*time.Second, "connections given back", func() bool {
		total, _ := r.tr.Connections("127.0.0.1")
		return total == 0
	})
	if st := r.tgt.Stats(); st.KAExpired != 1 {
		t.Errorf("keep-alive expiries %d, want 1", st.KAExpired)
	}
}

// TestDiscoveryLog: the discovery log lists the tcp port with TRTYPE 3,
// its address family, TSAS of no security and SQ flow control disable
// supported.
func TestDiscoveryLog(t *testing.T) {
	r := newRig(t, Config{}, fabric.Options{})
	d, _ := r.admin(t, tcptest.Options{}, nvme.DiscoveryNQN, 0)
	b, err := d.GetLogPage(nvme.LogDiscovery, 4096, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, n, _ := nvme.ParseDiscoveryLogHeader(b)
	if n != 1 {
		t.Fatalf("%d entries", n)
	}
	e := nvme.UnmarshalDiscoveryLogEntry(b[nvme.DiscoveryLogHeaderSize:])
	if e.TRTYPE != nvme.TRTypeTCP || e.ADRFAM != nvme.AdrFamIPv4 || e.TRADDR != "127.0.0.1" || e.TRSVCID != r.port.Service ||
		e.SubNQN != testNQN || e.TREQ != nvme.TREQDisableSQFlow || e.TSAS != nvme.TCPTSAS(nvme.TCPSecTypeNone) {
		t.Fatalf("entry %+v", e)
	}
}

// TestHPDA: a host that asks for its data aligned (HPDA 3: 16 bytes) gets
// every C2HData's data at a PDO of that alignment, the gap padded.
func TestHPDA(t *testing.T) {
	r := newRig(t, Config{}, fabric.Options{})
	for _, hdgst := range []bool{false, true} {
		_, c := r.controller(t, tcptest.Options{HPDA: 3, HeaderDigest: hdgst}, 0)
		data := make([]byte, 8192)
		pattern(data, 7)
		if rsp, err := c.Do(tcptest.IO(nvme.OpWrite, 1, 1, 0, 16), data, true, true); err != nil || !rsp.Status().IsSuccess() {
			t.Fatalf("write: %v %v", err, rsp.Status())
		}
		got := make([]byte, len(data))
		// tcptest checks that PDO is a multiple of 16 and reads the pad.
		if rsp, err := c.Do(tcptest.IO(nvme.OpRead, 2, 1, 0, 16), got, false, false); err != nil || !rsp.Status().IsSuccess() || !bytes.Equal(got, data) {
			t.Fatalf("read (hdgst %v): %v %v, data equal %v", hdgst, err, rsp.Status(), bytes.Equal(got, data))
		}
	}
}

// TestBufferPoolWaits: with a pool of one transfer's buffers, commands
// past it wait for buffers, in line, without holding up their
// connections' readers, and every one completes once buffers come back:
// reads handed to the core and writes given their R2T from the goroutine
// that gave buffers back. Each connection has a host goroutine of its own,
// as hosts do: one connection's R2T may wait on another's data.
func TestBufferPoolWaits(t *testing.T) {
	const size, n = 128 << 10, 8
	r := newRig(t, Config{MDTS: size, BufferPoolSize: size}, fabric.Options{})
	conns := make([]*tcptest.Conn, 2)
	_, conns[0] = r.controller(t, tcptest.Options{}, 0)
	_, conns[1] = r.controller(t, tcptest.Options{DataDigest: true}, 0)
	errs := make(chan error, len(conns))
	for j, c := range conns {
		go func() {
			errs <- func() error {
				written := make([][]byte, n)
				for i := range n {
					written[i] = make([]byte, size)
					pattern(written[i], byte(2*i+j))
				}
				lba := func(i int) uint64 { return uint64(2*i+j) * size / 512 }
				// Every write at once, then every read.
				for i := range n {
					if err := c.Submit(tcptest.IO(nvme.OpWrite, uint16(i), 1, lba(i), size/512), written[i], true, false); err != nil {
						return err
					}
				}
				for i := range n {
					if rsp, err := c.Wait(uint16(i)); err != nil || !rsp.Status().IsSuccess() {
						return fmt.Errorf("connection %d write %d: %v %v", j, i, err, rsp)
					}
				}
				read := make([][]byte, n)
				for i := range n {
					read[i] = make([]byte, size)
					if err := c.Submit(tcptest.IO(nvme.OpRead, uint16(i), 1, lba(i), size/512), read[i], false, false); err != nil {
						return err
					}
				}
				for i := range n {
					if rsp, err := c.Wait(uint16(i)); err != nil || !rsp.Status().IsSuccess() {
						return fmt.Errorf("connection %d read %d: %v %v", j, i, err, rsp)
					}
					if !bytes.Equal(read[i], written[i]) {
						return fmt.Errorf("connection %d read %d: data differs", j, i)
					}
				}
				return nil
			}()
		}()
	}
	for range conns {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if w := r.tr.Stats().BufferWaits.Load(); w == 0 {
		t.Error("no command waited for buffers with a pool of one transfer")
	}
	eventually(t, 5*time.Second, "buffers given back", func() bool { return r.tr.pool.out() == 0 })
}

// TestBufferShare: one connection holds at most its share of the pool (half
// of it here), so a host that is sent R2Ts and sends no data leaves other
// connections buffers until the send timeout; its commands past the share
// wait in its own line and go on as its buffers come back.
func TestBufferShare(t *testing.T) {
	const size = 128 << 10
	r := newRig(t, Config{MDTS: size, BufferPoolSize: 4 * size}, fabric.Options{})
	_, a := r.controller(t, tcptest.Options{}, 0)
	tags := []uint16{r2tFor(t, a, 0, size, false), r2tFor(t, a, 1, size, false)}
	// Past a's share: no R2T for these while the first two hold theirs.
	for cid := uint16(2); cid < 4; cid++ {
		if err := a.Write(tcptest.CapsulePDU(writeCmd(cid, size), nil, false, false)); err != nil {
			t.Fatal(err)
		}
	}
	_, b := r.controller(t, tcptest.Options{Timeout: 3 * time.Second}, 0)
	data := make([]byte, size)
	pattern(data, 7)
	if rsp, err := b.Do(tcptest.IO(nvme.OpWrite, 1, 1, 0, size/512), data, true, false); err != nil || !rsp.Status().IsSuccess() {
		t.Fatalf("another connection's write while one holds R2Ts: %v %v", err, rsp)
	}
	// a's data for its first R2T: it completes, and its third write gets
	// the buffers back.
	if err := a.Write(tcptest.H2CDataPDU(0, tags[0], 0, make([]byte, size), true, false, false)); err != nil {
		t.Fatal(err)
	}
	var resp, r2t bool
	for !resp || !r2t {
		h, _, err := a.ReadPDU()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case h.Type() == nvme.TCPCapsuleResp && h.CQE().CID() == 0 && h.CQE().Status().IsSuccess():
			resp = true
		case h.Type() == nvme.TCPR2T && h.CCCID() == 2:
			r2t = true
		default:
			t.Fatalf("PDU type %#x for %#x", h.Type(), h.CCCID())
		}
	}
	if got := r.tr.pool.out(); got > 2*size {
		t.Errorf("%d bytes out of the pool, want at most a's share %d", got, 2*size)
	}
}

// TestReaderSends: on a namespace whose commands complete as they are
// taken (memory), every R2T and response goes out from the connection's
// reader before its next read, with no hand-off to the writer, one at a
// time (QD1) and in batches (QD32).
func TestReaderSends(t *testing.T) {
	r := newRig(t, Config{}, fabric.Options{})
	_, io := r.controller(t, tcptest.Options{H2CDataSize: 8 << 10}, 0)
	st := r.tr.Stats()
	for _, tc := range []struct {
		name      string
		depth     int
		size      int
		write     bool
		inCapsule bool
	}{
		{"read 4k qd1", 1, 4 << 10, false, false},
		{"write 4k in capsule qd1", 1, 4 << 10, true, true},
		{"write 16k by r2t qd1", 1, 16 << 10, true, false},
		{"read 4k qd32", 32, 4 << 10, false, false},
		{"write 16k by r2t qd32", 32, 16 << 10, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reader, writer := st.ReaderSends.Load(), st.WriterSends.Load()
			bufs := make([][]byte, tc.depth)
			const rounds = 8
			for round := range rounds {
				for i := range bufs {
					if bufs[i] == nil {
						bufs[i] = make([]byte, tc.size)
					}
					op := uint8(nvme.OpRead)
					if tc.write {
						op = nvme.OpWrite
					}
					cmd := tcptest.IO(op, uint16(i+1), 1, uint64(i*tc.size/512), uint32(tc.size/512))
					if err := io.Submit(cmd, bufs[i], tc.write, tc.inCapsule); err != nil {
						t.Fatal(err)
					}
				}
				for i := range bufs {
					if rsp, err := io.Wait(uint16(i + 1)); err != nil || !rsp.Status().IsSuccess() {
						t.Fatalf("round %d, command %d: %v %v", round, i, err, rsp.Status())
					}
				}
			}
			if n := st.WriterSends.Load() - writer; n != 0 {
				t.Errorf("the writer sent %d times; want every PDU sent by the reader", n)
			}
			if n := st.ReaderSends.Load() - reader; n < rounds {
				t.Errorf("the reader sent %d times for %d rounds of commands", n, rounds)
			}
		})
	}
}

// TestWorkerCompletions: on a namespace whose I/O runs on worker
// goroutines, responses complete while the reader waits on the socket or
// takes other commands: the writer sends some, the reader others, one at a
// time, and every read returns what was written, at QD1 and QD32.
func TestWorkerCompletions(t *testing.T) {
	r := newRig(t, Config{}, fabric.Options{})
	dev, err := blockdev.NewMemory(nsSize, 512)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.sub.AddNamespace(fabric.NamespaceConfig{NSID: 2, Device: dev, Workers: 2}); err != nil {
		t.Fatal(err)
	}
	_, io := r.controller(t, tcptest.Options{H2CDataSize: 8 << 10}, 0)
	st := r.tr.Stats()
	writer := st.WriterSends.Load()
	// do submits one command per buffer, then waits for them all.
	do := func(op uint8, bufs [][]byte, what string) {
		t.Helper()
		for i, b := range bufs {
			cmd := tcptest.IO(op, uint16(i+1), 2, uint64(i*32), uint32(len(b)/512))
			write := op == nvme.OpWrite
			if err := io.Submit(cmd, b, write, write && len(b) <= 8<<10); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
		for i := range bufs {
			if rsp, err := io.Wait(uint16(i + 1)); err != nil || !rsp.Status().IsSuccess() {
				t.Fatalf("%s, command %d: %v %v", what, i, err, rsp.Status())
			}
		}
	}
	for _, depth := range []int{1, 32} {
		for round := range 8 {
			what := fmt.Sprintf("depth %d, round %d", depth, round)
			want, got := make([][]byte, depth), make([][]byte, depth)
			for i := range want {
				size := (4 + 12*(i%2)) << 10 // 4 KiB in the capsule, 16 KiB by R2T
				want[i], got[i] = make([]byte, size), make([]byte, size)
				pattern(want[i], byte(round*depth+i))
			}
			do(nvme.OpWrite, want, what+": writes")
			do(nvme.OpRead, got, what+": reads")
			for i := range want {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("%s: read %d differs from what was written", what, i)
				}
			}
		}
	}
	if st.WriterSends.Load() == writer {
		t.Errorf("the writer sent nothing: every completion came before the reader's next read")
	}
}
