//go:build e2e

package e2e

import (
	"bytes"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma/rdmatest"
)

// Hostile capsules and the data they move (TestHostile): bad SGLs, duplicate
// CIDs, Get Features and Get Log Page at every edge, mutated and random
// capsules. The hostile host checks every buffer after the response.

// badSGLs: SGLs no host may send, on Read and Write of the own namespace.
// Each must fail and leave the queue serving.
func (hs *hostile) badSGLs() {
	const cat = "bad-sgl"
	const mdts = 1 * mib // the target's default; over it on either target
	// io makes sure the queue is up first: a command is built for the
	// connection it names the buffer of.
	// Reads go to the host's own namespace (a wrong success is checked
	// byte for byte), writes to the other one (a wrong success must not
	// spoil the reference).
	io := func(op uint8, nlb uint32) nvme.Command {
		hs.ensure(cat)
		nsid := nvme.NSID(hOwnNSID)
		if op == nvme.OpWrite {
			nsid = hNoiseNSID
		}
		return hs.io.IOCommand(op, hs.nextCID(), nsid, 0, nlb, hBig, int(nlb)*512)
	}
	send := func(cmd nvme.Command, icd []byte) {
		span := 64 * kib
		if cmd.NumBlocks() > 128 {
			span = 2 * mib
		}
		hs.do(call{cat: cat, c: hs.io, cmd: cmd, icd: icd, off: hBig, span: span, mustFail: true})
	}
	// Keyed lengths over MDTS: a transfer past MDTS, and SGLs up to the
	// 24-bit maximum; whatever the target answers, it writes nothing past
	// the data (checkData), but a transfer past MDTS must fail.
	for _, op := range []uint8{nvme.OpRead, nvme.OpWrite} {
		c := io(op, mdts/512+8)
		send(c, nil)
		c = io(op, mdts/512+8)
		hs.io.Keyed(c.SGL1(), hBig, 1<<24-1, false)
		send(c, nil)
		c = io(op, 8)
		hs.io.Keyed(c.SGL1(), hBig, 8*512-1, false) // shorter than the data
		send(c, nil)
		c = io(op, 8)
		hs.io.Keyed(c.SGL1(), hBig, 0, false)
		send(c, nil)
	}
	// A longer keyed SGL than the data is allowed: the target moves the data
	// only (checkData would catch more).
	for _, op := range []uint8{nvme.OpRead} {
		c := io(op, 8)
		hs.io.Keyed(c.SGL1(), hBig, 1<<24-1, false)
		hs.do(call{cat: cat, c: hs.io, cmd: c, off: hBig, span: 2 * mib, exact: hs.shadow[:8*512]})
		// checkData allows the whole SGL; the exact check covers the data,
		// and past it the marker must stay.
		if d := hs.io.Data()[hBig+8*512 : hBig+64*kib]; notMarker(d) >= 0 {
			hs.problem("%s: a 4 KiB read with a 16 MiB SGL wrote past its data", cat)
		}
	}
	// In-capsule offsets past the data, and lengths over what came.
	icd := make([]byte, 4*kib)
	for _, tc := range []struct{ off, n uint64 }{
		{8 << 10, 4 << 10}, // past the in-capsule data size
		{8<<10 + 16, 4 << 10},
		{4 << 10, 4 << 10}, // within the size, past the bytes sent
		{0, 8 << 10},       // longer than sent
		{1 << 63, 4 << 10}, // overflows
		{^uint64(0) - 100, 4 << 10},
	} {
		c := io(nvme.OpWrite, 8)
		nvme.SGLDescriptor(c.SGL1()).SetDataBlockOffset(tc.off, uint32(tc.n))
		send(c, icd)
	}
	// Wrong types and subtypes: every type, and every subtype of the two
	// types the transport takes.
	for typ := 0; typ < 16; typ++ {
		for sub := 0; sub < 16; sub++ {
			valid := (typ == nvme.SGLTypeKeyedDataBlock && (sub == nvme.SGLSubtypeAddress || sub == nvme.SGLSubtypeInvalidateKey)) ||
				(typ == nvme.SGLTypeDataBlock && sub == nvme.SGLSubtypeOffset)
			tried := typ == nvme.SGLTypeKeyedDataBlock || typ == nvme.SGLTypeDataBlock || sub == 0
			if valid || !tried {
				continue
			}
			for _, op := range []uint8{nvme.OpRead, nvme.OpWrite}[(typ+sub)%2:][:1] {
				c := io(op, 8)
				c[39] = byte(typ<<4 | sub)
				var data []byte
				if op == nvme.OpWrite && typ == nvme.SGLTypeDataBlock {
					data = icd
				}
				send(c, data)
			}
		}
	}
	// A data direction that contradicts the opcode: in-capsule data for a
	// read and for admin commands that return data.
	c := io(nvme.OpRead, 8)
	nvme.SGLDescriptor(c.SGL1()).SetDataBlockOffset(0, 4<<10)
	send(c, icd)
	for _, admin := range []nvme.Command{identifyCmd(hs.nextCID()), logPageCmd(hs.nextCID(), nvme.LogSMART, 128, 0)} {
		nvme.SGLDescriptor(admin.SGL1()).SetDataBlockOffset(0, 4<<10)
		hs.ensure(cat)
		hs.do(call{cat: cat, c: hs.admin, cmd: admin, icd: icd, off: hBig, span: 64 * kib, mustFail: true})
	}
	// PRPs (PSDT 00b); then PSDT 10b and the reserved 11b, whose answer is
	// only recorded.
	c = io(nvme.OpRead, 8)
	c.SetFlags(0)
	send(c, nil)
	for _, flags := range []uint8{2 << 6, 3 << 6} {
		c := io(nvme.OpRead, 8)
		c.SetFlags(flags)
		hs.do(call{cat: cat, c: hs.io, cmd: c, off: hBig, span: 64 * kib, exact: hs.shadow[:8*512]})
	}
	// Past the namespace's end.
	for _, slba := range []uint64{hNSBlocks, hNSBlocks - 1, ^uint64(0)} {
		c := io(nvme.OpRead, 8)
		c.SetSLBA(slba)
		send(c, nil)
	}
	// A command without data but a keyed SGL: it succeeds, and moves nothing.
	hs.ensure(cat)
	fl := hs.io.IOCommand(nvme.OpFlush, hs.nextCID(), hOwnNSID, 0, 1, hBig, 64*kib)
	hs.do(call{cat: cat, c: hs.io, cmd: fl, off: hBig, span: 128 * kib})
	if d := hs.io.Data()[hBig : hBig+128*kib]; notMarker(d) >= 0 {
		hs.problem("%s: a Flush with a keyed SGL moved data", cat)
	}
}

func identifyCmd(cid uint16) nvme.Command {
	c := rdmatest.NewCommand(nvme.OpAdminIdentify, cid)
	c.SetIdentify(1, 0, 0)
	return c
}

func logPageCmd(cid uint16, lid uint8, numd uint32, off uint64) nvme.Command {
	c := rdmatest.NewCommand(nvme.OpAdminGetLogPage, cid)
	c.SetNSID(nvme.NSIDAll)
	c.SetGetLogPage(lid, numd, off)
	return c
}

// duplicateCIDs: commands in flight together under one CID. Each gets its
// response, and reads return what was written.
func (hs *hostile) duplicateCIDs() {
	const cat = "duplicate-cid"
	hs.ensure(cat)
	const n = 8
	cid := hs.nextCID()
	// Writes of distinct data under one CID, to distinct blocks.
	for i := 0; i < n; i++ {
		off := hSlots + i*hSlotSize
		buf := hs.io.Data()[off : off+16*512]
		for j := range buf {
			buf[j] = byte(hs.rng.Uint32())
		}
		slba := uint64(4096 + i*16)
		copy(hs.shadow[slba*512:], buf)
		cmd := hs.io.IOCommand(nvme.OpWrite, cid, hOwnNSID, slba, 16, off, 16*512)
		hs.n.Sent[cat]++
		if err := hs.io.Send(cmd); err != nil {
			hs.problem("%s: send: %v", cat, err)
			return
		}
	}
	for i := 0; i < n; i++ {
		rsp, err := hs.io.RecvCID(int(cid), hTimeout)
		if err != nil {
			hs.problem("%s: %d of %d writes under CID %d answered: %v", cat, i, n, cid, err)
			return
		}
		hs.n.status(cat, rsp.Status())
		if !rsp.Status().IsSuccess() {
			// The data may or may not be there now.
			hs.problem("%s: a write under a duplicate CID failed: %s", cat, rsp.Status())
		}
	}
	// Reads under one CID.
	cid = hs.nextCID()
	for i := 0; i < n; i++ {
		off := hSlots + i*hSlotSize
		fill(hs.io.Data()[off:off+hSlotSize], hMarker)
		hs.n.Sent[cat]++
		if err := hs.io.Send(hs.io.IOCommand(nvme.OpRead, cid, hOwnNSID, uint64(4096+i*16), 16, off, 16*512)); err != nil {
			hs.problem("%s: send: %v", cat, err)
			return
		}
	}
	for i := 0; i < n; i++ {
		rsp, err := hs.io.RecvCID(int(cid), hTimeout)
		if err != nil {
			hs.problem("%s: %d of %d reads under CID %d answered: %v", cat, i, n, cid, err)
			return
		}
		hs.n.status(cat, rsp.Status())
		if !rsp.Status().IsSuccess() {
			hs.problem("%s: a read under a duplicate CID failed: %s", cat, rsp.Status())
		}
	}
	for i := 0; i < n; i++ {
		off := hSlots + i*hSlotSize
		slba := 4096 + i*16
		hs.n.DataChecks++
		hs.n.ExactChecks++
		got, want := hs.io.Data()[off:off+16*512], hs.shadow[slba*512:(slba+16)*512]
		if !bytes.Equal(got, want) {
			hs.problem("%s: read %d under a duplicate CID returned other data than was written", cat, i)
		}
		if rest := hs.io.Data()[off+16*512 : off+hSlotSize]; notMarker(rest) >= 0 {
			hs.problem("%s: read %d wrote past its data", cat, i)
		}
	}
	// Admin commands under one CID.
	cid = hs.nextCID()
	for i := 0; i < 4; i++ {
		c := identifyCmd(cid)
		hs.admin.Keyed(c.SGL1(), hSlots+i*hSlotSize, 4096, false)
		hs.n.Sent[cat]++
		if err := hs.admin.Send(c); err != nil {
			hs.problem("%s: send: %v", cat, err)
			return
		}
	}
	for i := 0; i < 4; i++ {
		rsp, err := hs.admin.RecvCID(int(cid), hTimeout)
		if err != nil {
			hs.problem("%s: %d of 4 Identify under CID %d answered: %v", cat, i, cid, err)
			return
		}
		hs.n.status(cat, rsp.Status())
	}
}

// features: Get Features for every FID and SEL.
func (hs *hostile) features() {
	const cat = "get-features"
	// The FIDs base and fabrics define, the edges of the vendor range, and
	// a few others at random.
	var fids []int
	for fid := 0; fid < 256; fid++ {
		if fid <= 0x20 || (fid >= 0x78 && fid <= 0x85) || fid == 0xbf || fid == 0xc0 || fid == 0xff || hs.rng.IntN(16) == 0 {
			fids = append(fids, fid)
		}
	}
	for _, fid := range fids {
		for sel := 0; sel < 4; sel++ {
			hs.ensure(cat)
			c := rdmatest.NewCommand(nvme.OpAdminGetFeatures, hs.nextCID())
			c.SetCDW(10, uint32(fid)|uint32(sel)<<8)
			if fid&1 == 1 {
				c.SetNSID(hOwnNSID)
			}
			hs.admin.Keyed(c.SGL1(), hBig, 4096, false)
			hs.do(call{cat: cat, c: hs.admin, cmd: c, off: hBig, span: 8 * kib})
		}
	}
}

// logPages: Get Log Page for every LID, at offsets and lengths on and past
// every edge, with LSP and RAE set now and then.
func (hs *hostile) logPages() {
	const cat = "get-log-page"
	edges := []struct {
		numd uint32
		off  uint64
	}{
		{1, 0}, {128, 0}, {1024, 0}, {1, 4}, {1, 1}, {2, 510}, {128, 511}, {128, 512}, {1024, 4096},
		{1, 1 << 32}, {1, ^uint64(0) - 3}, {1, ^uint64(0)}, {0x10000, 0}, // NUMDU
	}
	for lid := 0; lid < 256; lid++ {
		// Every edge for the LIDs base and fabrics define and the ends of
		// the ranges; two for the others.
		all := lid <= 0x12 || (lid >= 0x6f && lid <= 0x72) || (lid >= 0x7f && lid <= 0x82) || lid == 0xbf || lid == 0xc0 || lid == 0xff
		for i, e := range edges {
			if !all && i != 1 && i != 10 {
				continue
			}
			hs.ensure(cat)
			c := logPageCmd(hs.nextCID(), uint8(lid), e.numd, e.off)
			if i%4 == 3 {
				c.SetCDW(10, c.CDW(10)|uint32(hs.rng.IntN(16))<<8|1<<15) // LSP, RAE
			}
			n := int(min(uint64(e.numd)*4, 1*mib))
			hs.admin.Keyed(c.SGL1(), hBig, n, false)
			hs.do(call{cat: cat, c: hs.admin, cmd: c, off: hBig, span: n + 4*kib})
		}
	}
	// Past MDTS.
	hs.ensure(cat)
	c := logPageCmd(hs.nextCID(), nvme.LogSMART, (1*mib+4*kib)/4, 0)
	hs.admin.Keyed(c.SGL1(), hBig, 1*mib+4*kib, false)
	hs.do(call{cat: cat, c: hs.admin, cmd: c, off: hBig, span: 2 * mib, mustFail: true})
}

// baseCommands are well-formed commands to mutate, with their queue and the
// in-capsule data they carry.
func (hs *hostile) baseCommands() []call {
	cid := hs.nextCID()
	noise := func(op uint8, nlb uint32) nvme.Command {
		return hs.io.IOCommand(op, cid, hNoiseNSID, uint64(hs.rng.IntN(hNSBlocks-64)), nlb, hBig, int(nlb)*512)
	}
	icdWrite := noise(nvme.OpWrite, 8)
	nvme.SGLDescriptor(icdWrite.SGL1()).SetDataBlockOffset(0, 4096)
	feat := rdmatest.NewCommand(nvme.OpAdminGetFeatures, cid)
	feat.SetCDW(10, 0x07)
	hs.admin.Keyed(feat.SGL1(), hBig, 4096, false)
	id := identifyCmd(cid)
	hs.admin.Keyed(id.SGL1(), hBig, 4096, false)
	lp := logPageCmd(cid, nvme.LogSMART, 128, 0)
	hs.admin.Keyed(lp.SGL1(), hBig, 512, false)
	return []call{
		{c: hs.admin, cmd: id},
		{c: hs.admin, cmd: lp},
		{c: hs.admin, cmd: feat},
		{c: hs.admin, cmd: rdmatest.NewCommand(nvme.OpAdminKeepAlive, cid)},
		{c: hs.io, cmd: noise(nvme.OpRead, 8)},
		{c: hs.io, cmd: noise(nvme.OpWrite, 8)},
		{c: hs.io, cmd: noise(nvme.OpRead, 256)},
		{c: hs.io, cmd: icdWrite, icd: make([]byte, 4096)},
		{c: hs.io, cmd: rdmatest.NewCommand(nvme.OpFlush, cid)},
	}
}

// mutated: well-formed commands with one to three bytes changed. The SGL's
// address and key are left alone most of the time, so that the target's
// RDMA reaches the buffer and the data can be checked.
func (hs *hostile) mutated(n int) {
	const cat = "mutated-capsule"
	for i := 0; i < n; i++ {
		hs.ensure(cat)
		bases := hs.baseCommands()
		x := bases[hs.rng.IntN(len(bases))]
		x.cat, x.off, x.span = cat, hBig, 256*kib
		for k := 1 + hs.rng.IntN(3); k > 0; k-- {
			pos := hs.rng.IntN(nvme.CommandSize)
			// SGL1 is bytes 24-39: address 24-31, length 32-34, key 35-38,
			// type 39. Mostly its length and type, not its address or key.
			if pos >= 24 && pos < 39 && hs.rng.IntN(4) != 0 {
				pos = []int{32, 33, 34, 39}[hs.rng.IntN(4)]
			}
			x.cmd[pos] = byte(hs.rng.Uint32())
		}
		hs.tame(&x)
		hs.do(x)
	}
}

// random: capsules of random bytes, most with a keyed SGL into the buffer
// (so that the data can be checked), some with in-capsule data, some
// entirely random (a random key makes the target's RDMA fail, which must
// cost only the queue).
func (hs *hostile) random(n int) {
	const cat = "random-capsule"
	ops := []uint8{nvme.OpAdminGetLogPage, nvme.OpAdminIdentify, nvme.OpAdminGetFeatures, nvme.OpAdminSetFeatures,
		nvme.OpAdminKeepAlive, nvme.OpFabrics, nvme.OpAdminAbort, nvme.OpFlush, nvme.OpWrite, nvme.OpRead,
		nvme.OpWriteZeroes, nvme.OpDSM, nvme.OpCompare, nvme.OpVerify}
	for i := 0; i < n; i++ {
		hs.ensure(cat)
		x := call{cat: cat, c: hs.admin, cmd: make(nvme.Command, nvme.CommandSize), off: hBig, span: 1 * mib}
		if i%2 == 1 {
			x.c = hs.io
		}
		for j := range x.cmd {
			x.cmd[j] = byte(hs.rng.Uint32())
		}
		if hs.rng.IntN(2) == 0 {
			x.cmd.SetOpcode(ops[hs.rng.IntN(len(ops))])
		}
		if x.c == hs.io && hs.rng.IntN(4) != 0 {
			x.cmd.SetNSID(hNoiseNSID)
		}
		switch r := hs.rng.IntN(10); {
		case r < 7:
			x.c.Keyed(x.cmd.SGL1(), hBig+hs.rng.IntN(512*kib), hs.rng.IntN(256*kib), r == 0)
		case r < 9:
			x.icd = make([]byte, hs.rng.IntN(8*kib+1))
			for j := range x.icd {
				x.icd[j] = byte(hs.rng.Uint32())
			}
		}
		if hs.rng.IntN(4) != 0 {
			x.cmd.SetFlags(nvme.PSDTSGLContig << 6)
		}
		hs.tame(&x)
		hs.do(x)
	}
}

// tame keeps a random or mutated command off the host's own namespace (its
// data is checked exactly) and does not wait for an AER's response, which the
// target holds.
func (hs *hostile) tame(x *call) {
	x.cmd.SetCID(hs.nextCID())
	if x.c == hs.io && x.cmd.NSID() == hOwnNSID {
		x.cmd.SetNSID(hNoiseNSID)
	}
	// The data region must hold the SGL's window for checkData.
	x.noWait = x.c == hs.admin && x.cmd.Opcode() == nvme.OpAdminAsyncEvent
}
