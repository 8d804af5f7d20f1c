package tcp

import (
	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// reqState is where a request is in its life. Its changes are made under
// the connection's mutex: the reader, the writer, the core's completions
// and the pool's grants all move requests.
type reqState uint8

const (
	// rsFree: on the connection's free list.
	rsFree reqState = iota
	// rsNew: the reader is reading its capsule and mapping its data.
	rsNew
	// rsBuffers: waiting in the pool's line for data buffers.
	rsBuffers
	// rsReady: given buffers off the reader; queued for the writer, which
	// hands it to the core (a read).
	rsReady
	// rsData: its R2T is queued or sent; the reader takes its H2CData.
	rsData
	// rsExecuting: the core has it (backend I/O, a held AER).
	rsExecuting
	// rsSend: its response (and a read's data) is queued for the writer or
	// being written.
	rsSend
	rsCount
)

var reqStateNames = [rsCount]string{"free", "new", "buffers", "ready", "data", "executing", "send"}

func (s reqState) String() string { return reqStateNames[s] }

// What the writer does with a request it is given.
const (
	sendNone = iota
	sendR2T  // send its R2T
	sendRun  // hand it to the core (buffers came off the reader)
	sendResp // send its data, if any, and its response
)

// request is one slot of a connection's request table. Everything the
// target sends for it is built in its own arrays: no I/O allocates.
type request struct {
	fr    fabric.Request
	c     *conn
	idx   uint16
	state reqState
	send  uint8
	cmd   [nvme.CommandSize]byte
	// xfer is the header (and header digest) of its R2T or C2HData; rsp
	// its CapsuleResp PDU, whose CQE the core fills in place (fr.Rsp);
	// ddgst the data digest of its C2HData.
	xfer  [nvme.TCPDataHdrSize + nvme.TCPDigestSize]byte
	rsp   [nvme.TCPCapsuleRespHdr + nvme.TCPDigestSize]byte
	ddgst [nvme.TCPDigestSize]byte
	// chunks are the pool buffers it holds; segs its data in them
	// (fr.Data).
	chunks [][]byte
	segs   [][]byte
	// icd is the in-capsule data that came with the command.
	icd int
	// got is the H2CData received; badDigest: one of its data PDUs had a
	// data digest error, so it is failed instead of executed.
	got       uint32
	badDigest bool
	// The pool's lines (pool.go): need is the units asked for, waiting
	// whether r is in a line (inConn: its connection's, for its share;
	// else the pool's), next the one after it, granted the next of a
	// grant's list; claimed is the units r counts against its
	// connection's share, from when it joins the pool's line or gets
	// units until it gives them back. Guarded by the pool's mutex.
	need    int
	claimed int
	waiting bool
	inConn  bool
	next    *request
	granted *request
}

func newRequest(c *conn, idx uint16) *request {
	r := &request{c: c, idx: idx}
	r.fr.Cmd = r.cmd[:]
	r.fr.Rsp = r.rsp[nvme.TCPCommonHeaderSize:nvme.TCPCapsuleRespHdr]
	r.fr.Tag = uint32(idx)
	return r
}

// setSegs makes r's data the n bytes at off of its chunks.
func (r *request) setSegs(off, n int) {
	r.segs = r.segs[:0]
	for _, ch := range r.chunks {
		if n == 0 {
			break
		}
		if off >= len(ch) {
			off -= len(ch)
			continue
		}
		part := ch[off:min(len(ch), off+n)]
		r.segs = append(r.segs, part)
		n -= len(part)
		off = 0
	}
	r.fr.Data = r.segs
}

// mapSGL checks SGL1 of a command over NVMe/TCP (TCP §3.3): an offset data
// block for in-capsule data (host to controller only, within the icd bytes
// that came), or a Transport SGL Data Block for data moved by R2T/H2CData
// or C2HData. It reports whether the data is in the capsule, and where.
func mapSGL(sgl nvme.SGLDescriptor, dir fabric.DataDir, need uint32, icd int) (inCapsule bool, off int, st nvme.Status) {
	if dir != fabric.DirHostToCtrl && dir != fabric.DirCtrlToHost {
		// Data with no direction is the core's mistake: buffers nothing
		// fills would reach the host.
		return false, 0, nvme.StatusInternalError.WithDNR()
	}
	switch {
	case sgl.Type() == nvme.SGLTypeDataBlock && sgl.Subtype() == nvme.SGLSubtypeOffset:
		if dir != fabric.DirHostToCtrl {
			return false, 0, nvme.StatusInvalidField.WithDNR()
		}
		o, n := sgl.Address(), uint64(sgl.Length())
		if o > uint64(icd) {
			return false, 0, nvme.StatusSGLOffsetInvalid.WithDNR()
		}
		if n < uint64(need) || n > uint64(icd)-o {
			return false, 0, nvme.StatusDataSGLLengthInvalid.WithDNR()
		}
		return true, int(o), nvme.StatusSuccess
	case sgl.Type() == nvme.SGLTypeTransportDataBlock && sgl.Subtype() == nvme.SGLSubtypeTransportA:
		if sgl.Length() < need {
			return false, 0, nvme.StatusDataSGLLengthInvalid.WithDNR()
		}
		if icd > 0 {
			// Data in the capsule that the command does not point at.
			return false, 0, nvme.StatusInvalidField.WithDNR()
		}
		return false, 0, nvme.StatusSuccess
	}
	return false, 0, nvme.StatusSGLDescriptorTypeInvalid.WithDNR()
}
