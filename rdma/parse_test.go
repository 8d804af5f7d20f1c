package rdma

import (
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma/internal/verbs"
)

func cmReq(recfmt, qid, hrqsize, hsqsize uint16) []byte {
	b := make([]byte, nvme.RDMACMRequestSize)
	r := nvme.RDMACMRequest(b)
	r.SetRECFMT(recfmt)
	r.SetQID(qid)
	r.SetHRQSIZE(hrqsize)
	r.SetHSQSIZE(hsqsize)
	return b
}

func TestParseConnRequest(t *testing.T) {
	tests := []struct {
		name      string
		pd        []byte
		want      nvme.RDMACMRejectStatus
		wantDepth int
	}{
		{"admin as Linux sends it", cmReq(0, 0, 32, 31), 0, 32},
		{"I/O queue", cmReq(0, 1, 128, 127), 0, 128},
		{"padded private data", append(cmReq(0, 2, 64, 63), make([]byte, 24)...), 0, 64},
		{"short", cmReq(0, 0, 32, 31)[:31], nvme.RDMACMRejectInvalidLength, 0},
		{"empty", nil, nvme.RDMACMRejectInvalidLength, 0},
		{"RECFMT", cmReq(1, 0, 32, 31), nvme.RDMACMRejectInvalidRECFMT, 0},
		{"QID too large", cmReq(0, 17, 128, 127), nvme.RDMACMRejectInvalidQID, 0},
		{"admin deeper than 32", cmReq(0, 0, 64, 63), nvme.RDMACMRejectInvalidHSQSIZE, 0},
		{"I/O deeper than the limit", cmReq(0, 1, 256, 255), nvme.RDMACMRejectInvalidHSQSIZE, 0},
		{"depth 1", cmReq(0, 1, 1, 0), nvme.RDMACMRejectInvalidHSQSIZE, 0},
		{"HRQSIZE zero", cmReq(0, 1, 0, 127), nvme.RDMACMRejectInvalidHRQSIZE, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cr, sts, why := parseConnRequest(tc.pd, 16, 128)
			if sts != tc.want {
				t.Fatalf("status %v (%s), want %v", sts, why, tc.want)
			}
			if sts == 0 && cr.depth != tc.wantDepth {
				t.Fatalf("depth %d, want %d", cr.depth, tc.wantDepth)
			}
			if sts != 0 && why == "" {
				t.Fatal("a rejection without a reason")
			}
		})
	}
}

func sgl(f func(d nvme.SGLDescriptor)) nvme.SGLDescriptor {
	d := nvme.SGLDescriptor(make([]byte, nvme.SGLDescriptorSize))
	f(d)
	return d
}

func TestMapSGL(t *testing.T) {
	keyed := func(n uint32, inv bool) nvme.SGLDescriptor {
		return sgl(func(d nvme.SGLDescriptor) { d.SetKeyed(0xdead0000, n, 0x1234, inv) })
	}
	offset := func(off uint64, n uint32) nvme.SGLDescriptor {
		return sgl(func(d nvme.SGLDescriptor) { d.SetDataBlockOffset(off, n) })
	}
	tests := []struct {
		name   string
		d      nvme.SGLDescriptor
		dir    fabric.DataDir
		need   uint32
		icdLen int
		want   nvme.Status
		check  func(t *testing.T, m dataMap)
	}{
		{"keyed read", keyed(4096, false), fabric.DirCtrlToHost, 4096, 0, nvme.StatusSuccess, func(t *testing.T, m dataMap) {
			if m.inCapsule || m.addr != 0xdead0000 || m.key != 0x1234 || m.inv {
				t.Errorf("%+v", m)
			}
		}},
		{"keyed with invalidate", keyed(1<<20, true), fabric.DirHostToCtrl, 1 << 20, 0, nvme.StatusSuccess, func(t *testing.T, m dataMap) {
			if !m.inv {
				t.Error("invalidate lost")
			}
		}},
		{"keyed longer than the data", keyed(8192, false), fabric.DirCtrlToHost, 4096, 0, nvme.StatusSuccess, nil},
		{"keyed too short", keyed(512, false), fabric.DirHostToCtrl, 4096, 0, nvme.StatusDataSGLLengthInvalid.WithDNR(), nil},
		{"in-capsule write", offset(0, 4096), fabric.DirHostToCtrl, 4096, 4096, nvme.StatusSuccess, func(t *testing.T, m dataMap) {
			if !m.inCapsule || m.off != 0 {
				t.Errorf("%+v", m)
			}
		}},
		{"in-capsule at an offset", offset(512, 1024), fabric.DirHostToCtrl, 1024, 2048, nvme.StatusSuccess, nil},
		{"in-capsule read", offset(0, 4096), fabric.DirCtrlToHost, 4096, 4096, nvme.StatusInvalidField.WithDNR(), nil},
		{"in-capsule beyond the buffer", offset(4096, 8192), fabric.DirHostToCtrl, 8192, 8192, nvme.StatusSGLOffsetInvalid.WithDNR(), nil},
		{"in-capsule offset overflow", offset(1<<63, 16), fabric.DirHostToCtrl, 16, 8192, nvme.StatusSGLOffsetInvalid.WithDNR(), nil},
		{"in-capsule more than arrived", offset(0, 4096), fabric.DirHostToCtrl, 4096, 1024, nvme.StatusDataSGLLengthInvalid.WithDNR(), nil},
		// The descriptor names 8 KiB of the capsule; 4 KiB came, which is
		// all the command needs: the descriptor still points past the data
		// (found by tests/e2e TestHostile).
		{"in-capsule descriptor past what arrived", offset(0, 8192), fabric.DirHostToCtrl, 4096, 4096, nvme.StatusDataSGLLengthInvalid.WithDNR(), nil},
		{"in-capsule shorter than the command", offset(0, 512), fabric.DirHostToCtrl, 4096, 4096, nvme.StatusDataSGLLengthInvalid.WithDNR(), nil},
		{"last segment", sgl(func(d nvme.SGLDescriptor) { d[15] = nvme.SGLTypeLastSegment << 4 }), fabric.DirHostToCtrl, 16, 0, nvme.StatusSGLDescriptorTypeInvalid.WithDNR(), nil},
		{"bit bucket", sgl(func(d nvme.SGLDescriptor) { d[15] = nvme.SGLTypeBitBucket << 4 }), fabric.DirCtrlToHost, 16, 0, nvme.StatusSGLDescriptorTypeInvalid.WithDNR(), nil},
		{"keyed with no direction", keyed(4096, false), fabric.DirNone, 4096, 0, nvme.StatusInternalError.WithDNR(), nil},
		{"in-capsule with no direction", offset(0, 4096), fabric.DirNone, 4096, 4096, nvme.StatusInternalError.WithDNR(), nil},
		{"keyed odd subtype", sgl(func(d nvme.SGLDescriptor) { d[15] = nvme.SGLTypeKeyedDataBlock<<4 | 2 }), fabric.DirCtrlToHost, 16, 0, nvme.StatusSGLDescriptorTypeInvalid.WithDNR(), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, st := mapSGL(tc.d, tc.dir, tc.need, 8192, tc.icdLen)
			if st != tc.want {
				t.Fatalf("status %v, want %v", st, tc.want)
			}
			if tc.check != nil {
				tc.check(t, m)
			}
		})
	}
}

func FuzzConnectRequest(f *testing.F) {
	f.Add(cmReq(0, 0, 32, 31))
	f.Add(cmReq(0, 3, 128, 127))
	f.Add(cmReq(1, 0xffff, 0, 0xffff))
	f.Fuzz(func(t *testing.T, pd []byte) {
		cr, sts, _ := parseConnRequest(pd, 128, 128)
		if sts == 0 && (cr.depth < 2 || cr.depth > 128 || cr.qid > 128 || (cr.qid == 0 && cr.depth > fabric.AdminQueueDepth)) {
			t.Fatalf("accepted %+v", cr)
		}
	})
}

// FuzzMapSGL: SGL1 as a host may send it, for a command the core sized
// (dir, need), with icdLen bytes in the capsule. mapSGL must take exactly
// what NVMe/RDMA allows (sglAllowed), and the engine must then move exactly
// the command's data in its direction (checkWire).
func FuzzMapSGL(f *testing.F) {
	f.Add(make([]byte, 16), uint8(1), uint32(4096), 4096)
	k := sgl(func(d nvme.SGLDescriptor) { d.SetKeyed(1, 4096, 2, true) })
	f.Add([]byte(k), uint8(2), uint32(4096), 0)
	f.Add([]byte(k), uint8(1), uint32(4096), 0)
	f.Add([]byte(k), uint8(0x82), uint32(4096), 0) // the core fails the read
	f.Add([]byte(k), uint8(2), uint32(4095), 0)    // keyed longer than the data
	big := sgl(func(d nvme.SGLDescriptor) { d.SetKeyed(0x7000, 1<<20, 9, false) })
	f.Add([]byte(big), uint8(1), uint32(3*testUnit+1), 0) // a chain of READs
	f.Add([]byte(big), uint8(2), uint32(3*testUnit+1), 0) // a chain of WRITEs
	o := sgl(func(d nvme.SGLDescriptor) { d.SetDataBlockOffset(16, 4000) })
	f.Add([]byte(o), uint8(1), uint32(4000), 8192)
	o2 := sgl(func(d nvme.SGLDescriptor) { d.SetDataBlockOffset(16, 200) })
	f.Add([]byte(o2), uint8(1), uint32(100), 256)
	f.Add([]byte(o2), uint8(2), uint32(100), 256) // in-capsule for a read
	f.Fuzz(func(t *testing.T, b []byte, dir uint8, need uint32, icdLen int) {
		if len(b) < nvme.SGLDescriptorSize || icdLen < 0 || icdLen > 8192 {
			return
		}
		d := nvme.SGLDescriptor(b[:nvme.SGLDescriptorSize])
		dd := fabric.DataDir(dir & 3)
		m, st := mapSGL(d, dd, need, 8192, icdLen)
		checkMap(t, d, dd, need, 8192, icdLen, m, st)
		// The engine, with the core's promise kept: at most MDTS, and
		// in-capsule data no larger than the queue's.
		if need <= testMaxBytes && icdLen <= testICD {
			checkWire(t, d, dd, need, icdLen, dir&0x80 != 0)
		}
	})
}

// sglAllowed is NVMe-oF 1.1 §7.3.2 for SGL1 of a command with need bytes
// of data: a keyed data block (address or invalidate subtype) offering at
// least need bytes, or, for host-to-controller data only, an offset data
// block within the icd bytes a capsule may carry whose first need bytes
// arrived (icdLen). Data moves host-to-controller or controller-to-host,
// never "none".
func sglAllowed(d nvme.SGLDescriptor, dir fabric.DataDir, need uint32, icd, icdLen int) bool {
	if dir != fabric.DirHostToCtrl && dir != fabric.DirCtrlToHost {
		return false
	}
	n := uint64(d.Length())
	switch {
	case d.Type() == nvme.SGLTypeKeyedDataBlock:
		return (d.Subtype() == nvme.SGLSubtypeAddress || d.Subtype() == nvme.SGLSubtypeInvalidateKey) && n >= uint64(need)
	case d.Type() == nvme.SGLTypeDataBlock && d.Subtype() == nvme.SGLSubtypeOffset:
		off := d.Address()
		return dir == fabric.DirHostToCtrl && off <= uint64(icd) && n <= uint64(icd)-off &&
			n >= uint64(need) && off+n <= uint64(icdLen)
	}
	return false
}

// checkMap holds mapSGL to sglAllowed, and its map to the descriptor.
func checkMap(t *testing.T, d nvme.SGLDescriptor, dir fabric.DataDir, need uint32, icd, icdLen int, m dataMap, st nvme.Status) {
	t.Helper()
	if allowed := sglAllowed(d, dir, need, icd, icdLen); st.IsSuccess() != allowed {
		t.Fatalf("SGL %x, %v, %d bytes, %d in the capsule: status %v, allowed %v", []byte(d), dir, need, icdLen, st, allowed)
	}
	switch {
	case !st.IsSuccess():
		if !st.DNR() {
			t.Fatalf("a refused SGL without DNR: %v (retrying it cannot help)", st)
		}
	case m.inCapsule:
		if d.Type() != nvme.SGLTypeDataBlock || m.off != d.Address() || m.off+uint64(d.Length()) > uint64(icdLen) {
			t.Fatalf("in-capsule map %+v of %x: off %d need %d, %d bytes arrived", m, []byte(d), m.off, need, icdLen)
		}
	default:
		inv := d.Subtype() == nvme.SGLSubtypeInvalidateKey
		if d.Type() != nvme.SGLTypeKeyedDataBlock || m.addr != d.Address() || m.key != d.Key() || m.inv != inv {
			t.Fatalf("keyed map %+v of %x", m, []byte(d))
		}
	}
}

// sizedCore is a core whose Parse gives every command the direction and
// length under test. Execute keeps the host's data it was handed and
// fills a read's with a pattern; fail makes it fail the command.
type sizedCore struct {
	fakeCore
	dir  fabric.DataDir
	need uint32
	fail bool
	got  []byte
}

func (c *sizedCore) Parse(r *fabric.Request) nvme.Status {
	r.Dir, r.DataLen, r.Data = c.dir, c.need, nil
	return nvme.StatusSuccess
}

func (c *sizedCore) Execute(r *fabric.Request) {
	c.executed = append(c.executed, r.Cmd.CID())
	n := 0
	for _, seg := range r.Data {
		if c.dir == fabric.DirHostToCtrl {
			c.got = append(c.got, seg...)
		}
		n += len(seg)
	}
	if n != int(c.need) {
		c.q.e.log.Error("data of the wrong length", "have", n, "need", c.need)
		c.fail = true
	}
	st := nvme.StatusSuccess
	if c.fail {
		st = nvme.StatusInternalError
	}
	c.respond(r, st)
}

// checkWire runs one command with SGL d through the engine: RDMA READs of
// exactly need bytes from the host's keyed buffer before a host-to-
// controller command executes, RDMA WRITEs of exactly need bytes to it
// before the response of a controller-to-host command that succeeded, and
// nothing else: no READ for in-capsule data or a read, no WRITE for a write
// or a failed read, no data at all for a refused SGL.
func checkWire(t *testing.T, d nvme.SGLDescriptor, dir fabric.DataDir, need uint32, icdLen int, fail bool) {
	h := newBench(t, benchOpts{})
	q, c, _ := h.open(benchOpts{})
	core := &sizedCore{fakeCore: fakeCore{q: q}, dir: dir, need: need, fail: fail}
	q.core = core
	m, st := mapSGL(d, dir, need, testICD, icdLen)
	mapped := need > 0 && st.IsSuccess()
	keyed := mapped && !m.inCapsule

	cmd := nvme.Command(make([]byte, nvme.CommandSize))
	cmd.SetOpcode(nvme.OpWrite)
	cmd.SetCID(7)
	copy(cmd.SGL1(), d)
	w := c.recvs[0]
	c.recvs = c.recvs[1:]
	_, _, _, slot := splitWRID(w.WRID)
	copy(q.mem.cmdBuf(int(slot)), cmd)
	icd := q.mem.icdBuf(int(slot), testICD)
	for i := range icd {
		icd[i] = byte(i*7 + 1)
	}
	h.e.complete(&verbs.WC{WRID: w.WRID, Status: verbs.WCSuccess, ByteLen: uint32(nvme.CommandSize + icdLen)})
	h.e.flush()

	// checkData: ws move need bytes with op, to or from [addr, addr+need)
	// of the host's key, out of the pool's buffers.
	pool := h.e.pool.mem
	checkData := func(ws []verbs.SendWR, op verbs.WROpcode) {
		t.Helper()
		next := m.addr
		for _, w := range ws {
			if w.Opcode != op || w.RKey != m.key || w.RemoteAddr != next {
				t.Fatalf("%v of %d bytes: WR %+v, want opcode %v key %#x at %#x", dir, need, w, op, m.key, next)
			}
			for _, sge := range w.SGE[:w.NumSGE] {
				if sge.Addr < verbs.Addr(pool) || sge.Addr+uint64(sge.Length) > verbs.Addr(pool)+uint64(len(pool)) {
					t.Fatalf("an SGE outside the data buffers: %+v", sge)
				}
				next += uint64(sge.Length)
			}
		}
		if next-m.addr != uint64(need) {
			t.Fatalf("%v: %d bytes moved, want %d", dir, next-m.addr, need)
		}
	}

	if keyed && dir == fabric.DirHostToCtrl {
		if len(c.sends) == 0 || len(core.executed) != 0 {
			t.Fatalf("host-to-controller data: %v posted, %d executed; want its READs first", kinds(c.sends), len(core.executed))
		}
		checkData(c.sends, verbs.WRRDMARead)
		h.finish(q, c, kindRead, verbs.WCSuccess)
	}
	if len(core.executed)+core.failed != 1 {
		t.Fatalf("executed %d, failed %d: want one", len(core.executed), core.failed)
	}
	if len(c.sends) == 0 {
		t.Fatal("no response")
	}
	resp := c.sends[len(c.sends)-1]
	if resp.Opcode != verbs.WRSend && resp.Opcode != verbs.WRSendWithInv {
		t.Fatalf("response chain %v does not end in a SEND", kinds(c.sends))
	}
	_, _, _, idx := splitWRID(resp.WRID)
	got := q.reqs[idx].fr.Rsp.Status()
	switch {
	case need > 0 && !st.IsSuccess():
		if got != st {
			t.Fatalf("refused SGL answered %v, want %v", got, st)
		}
	case fail:
		if got.IsSuccess() {
			t.Fatal("the core failed the command, and the host was told success")
		}
	case !got.IsSuccess():
		t.Fatalf("status %v", got)
	}
	data := c.sends[:len(c.sends)-1]
	if keyed && dir == fabric.DirCtrlToHost && got.IsSuccess() {
		checkData(data, verbs.WRRDMAWrite)
	} else if len(data) > 0 {
		t.Fatalf("%v of %d bytes (mapped %v, status %v): response chain %v, want only the SEND", dir, need, mapped, got, kinds(c.sends))
	}
	if inv := resp.Opcode == verbs.WRSendWithInv; inv != (keyed && m.inv) || inv && resp.InvRKey != m.key {
		t.Fatalf("SEND with invalidate %v (key %#x), want %v for the mapped key %#x", inv, resp.InvRKey, keyed && m.inv, m.key)
	}
	switch {
	case mapped && m.inCapsule:
		if want := icd[m.off : m.off+uint64(need)]; string(core.got) != string(want) {
			t.Fatalf("in-capsule data at %d: executed with %x, want %x", m.off, core.got, want)
		}
	case keyed && dir == fabric.DirHostToCtrl:
		if len(core.got) != int(need) {
			t.Fatalf("executed with %d bytes, want %d", len(core.got), need)
		}
	case len(core.got) > 0:
		t.Fatalf("%v, mapped %v: executed with %d bytes of host data", dir, mapped, len(core.got))
	}
	h.finish(q, c, kindSend, verbs.WCSuccess)
	if len(q.free) != len(q.reqs) || len(c.sends) != 0 {
		t.Fatalf("after the SEND: %d of %d requests free, %v posted", len(q.free), len(q.reqs), kinds(c.sends))
	}
	h.check(q)
}
