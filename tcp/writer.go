package tcp

import (
	"errors"
	"hash/crc32"
	"net"
	"os"
	"sync/atomic"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// zeros pads a C2HData's header to the data alignment the host asked for.
var zeros [128]byte

// writeLoop sends what the connection queued while its reader is not at
// hand to (flushBeforeRead): responses that complete while the reader
// waits on the socket, and the C2HTermReq last.
func (c *conn) writeLoop() {
	defer close(c.writerDone)
	for {
		c.mu.Lock()
		for !c.closing && (c.flushing || (len(c.wq) == 0 && c.termLen == 0)) {
			c.wake.Wait()
		}
		if c.closing {
			c.writerGone = true
			c.mu.Unlock()
			return
		}
		batch, term := c.takeBatch()
		c.mu.Unlock()
		if err := c.send(batch, term, &c.t.stats.WriterSends); err != nil {
			c.writeFailed(err)
			return
		}
		if term > 0 {
			c.mu.Lock()
			c.writerGone = true
			c.mu.Unlock()
			return
		}
	}
}

// flushBeforeRead sends what is queued before the reader goes back to the
// socket: the responses and R2Ts of the PDUs it has just taken go out in
// one vectored write from the reader itself, with no hand-off to the
// writer. It leaves them to the writer when the writer is sending already.
// Called by the reader, without c.mu; an error is the write's.
func (c *conn) flushBeforeRead() error {
	c.mu.Lock()
	for len(c.wq) > 0 && !c.flushing && !c.closing && !c.writerGone && c.termLen == 0 {
		batch, _ := c.takeBatch()
		c.mu.Unlock()
		if err := c.send(batch, 0, &c.t.stats.ReaderSends); err != nil {
			// The reader returns the error and tears the connection down.
			c.close(c.sendFailure(err))
			return err
		}
		c.mu.Lock()
	}
	c.readerBusy = false
	c.mu.Unlock()
	return nil
}

// readerBack marks the reader busy again after a socket read: what is
// queued from now on waits for its next flushBeforeRead.
func (c *conn) readerBack() {
	c.mu.Lock()
	c.readerBusy = true
	c.mu.Unlock()
}

// takeBatch takes the queued work, and the C2HTermReq's length when that
// is the writer's to send (0 for none), for the caller to send; c.mu is
// held. Until send returns, no one else sends.
func (c *conn) takeBatch() (batch []*request, term int) {
	batch = c.wq
	c.wq = c.wqSpare[:0]
	c.flushing = true
	return batch, c.termLen
}

// send sends a batch taken by takeBatch: every PDU of it (headers, digests
// and data buffers in place) in one vectored write, counted in writes,
// then the C2HTermReq when term > 0. Responses are freed once written. On
// an error the requests left are the teardown's to free.
func (c *conn) send(batch []*request, term int, writes *atomic.Uint64) error {
	bufs, done := c.bufs[:0], c.done[:0]
	dataOnly := 0
	for i, r := range batch {
		batch[i] = nil
		switch r.send {
		case sendRun:
			c.toCore(r, nvme.StatusSuccess)
		case sendR2T:
			bufs = c.appendR2T(bufs, r)
		case sendResp:
			var only bool
			bufs, only = c.appendResponse(bufs, r)
			done = append(done, r)
			if only {
				dataOnly++
			}
		}
	}
	if term > 0 {
		bufs = append(bufs, c.term[:term])
	}
	if dataOnly > 0 {
		c.t.stats.DataOnlyReads.Add(uint64(dataOnly))
	}
	c.wqSpare = batch[:0]
	c.bufs, c.done = bufs[:0], done[:0]
	if len(bufs) > 0 {
		writes.Add(1)
		c.setSendDeadline()
		c.nb = bufs
		_, err := c.nb.WriteTo(c.nc)
		clear(bufs)
		if err != nil {
			return err
		}
	}
	for _, r := range done {
		c.t.pool.put(r)
	}
	c.mu.Lock()
	for i, r := range done {
		c.freeLocked(r)
		done[i] = nil
	}
	c.flushing = false
	c.mu.Unlock()
	return nil
}

// writeFailed ends a connection whose writes fail: the reader, woken by
// the closed socket, tears it down; the requests left in the writer's
// hands are the teardown's to free.
func (c *conn) writeFailed(err error) {
	reason := c.sendFailure(err)
	c.mu.Lock()
	c.writerGone = true
	c.mu.Unlock()
	c.close(reason)
}

// sendFailure counts and logs a failed write, the writer's or the
// reader's, and returns the reason to close the connection for.
func (c *conn) sendFailure(err error) string {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.t.stats.SendTimeouts.Add(1)
		c.log.Warn("host takes no more data: closing the connection", "timeout", c.t.cfg.SendTimeout)
		return "the host took nothing sent for " + c.t.cfg.SendTimeout.String()
	}
	if !errors.Is(err, net.ErrClosed) {
		c.log.Debug("write failed", "err", err)
	}
	return "write failed: " + err.Error()
}

// flags is the digest flags of the connection's PDUs, the data digest's
// only for a PDU with data.
func (c *conn) flags(data bool) uint8 {
	var fl uint8
	if c.f.hdgst {
		fl |= nvme.TCPFlagHDGST
	}
	if data && c.f.ddgst {
		fl |= nvme.TCPFlagDDGST
	}
	return fl
}

// header finishes a header of hlen bytes in b with its digest, and returns
// what is sent of it.
func (c *conn) header(b []byte, hlen int) []byte {
	if !c.f.hdgst {
		return b[:hlen]
	}
	putDigest(b[hlen:], b[:hlen])
	return b[:hlen+nvme.TCPDigestSize]
}

// appendR2T adds r's R2T: the whole transfer at once, which any MAXR2T
// allows (TCP §3.6.2.8); the host splits it into H2CData of at most
// MAXH2CDATA. The transfer tag is r's slot.
func (c *conn) appendR2T(bufs [][]byte, r *request) [][]byte {
	h := nvme.TCPHeader(r.xfer[:])
	hl := nvme.TCPDataHdrSize + c.f.hdgstLen()
	h.SetCommon(nvme.TCPR2T, c.flags(false), nvme.TCPDataHdrSize, 0, uint32(hl))
	h.SetData(r.fr.Cmd.CID(), r.idx, 0, r.fr.DataLen)
	return append(bufs, c.header(r.xfer[:], nvme.TCPDataHdrSize))
}

// appendResponse adds what ends r: a read's data in one C2HData, then the
// response capsule, unless the data stands for it (dataOnly). It does when
// the host disabled SQ flow control (the only case the SUCCESS flag is
// allowed, TCP §3.6.2.9) and the response says nothing but success: the
// host completes a C2HData with SUCCESS as a response of zeroes.
func (c *conn) appendResponse(bufs [][]byte, r *request) (_ [][]byte, dataOnly bool) {
	rsp := r.fr.Rsp
	st := rsp.Status()
	if r.fr.Dir == fabric.DirCtrlToHost && st.IsSuccess() && r.fr.DataLen > 0 {
		success := c.fq.SQFlowDisabled() && rsp.DW0() == 0 && rsp.DW1() == 0
		fl := c.flags(true) | nvme.TCPFlagLast
		if success {
			fl |= nvme.TCPFlagSuccess
		}
		dd := 0
		if c.f.ddgst {
			dd = nvme.TCPDigestSize
		}
		h := nvme.TCPHeader(r.xfer[:])
		h.SetCommon(nvme.TCPC2HData, fl, nvme.TCPDataHdrSize, uint8(c.pdo), uint32(c.pdo)+r.fr.DataLen+uint32(dd))
		h.SetData(r.fr.Cmd.CID(), 0, 0, r.fr.DataLen)
		hdr := c.header(r.xfer[:], nvme.TCPDataHdrSize)
		bufs = append(bufs, hdr)
		if pad := c.pdo - len(hdr); pad > 0 {
			bufs = append(bufs, zeros[:pad])
		}
		var crc uint32
		for _, s := range r.segs {
			bufs = append(bufs, s)
			if dd > 0 {
				crc = crc32.Update(crc, castagnoli, s)
			}
		}
		if dd > 0 {
			r.ddgst[0], r.ddgst[1], r.ddgst[2], r.ddgst[3] = byte(crc), byte(crc>>8), byte(crc>>16), byte(crc>>24)
			bufs = append(bufs, r.ddgst[:])
		}
		if success {
			return bufs, true
		}
	}
	h := nvme.TCPHeader(r.rsp[:])
	hl := nvme.TCPCapsuleRespHdr + c.f.hdgstLen()
	h.SetCommon(nvme.TCPCapsuleResp, c.flags(false), nvme.TCPCapsuleRespHdr, 0, uint32(hl))
	return append(bufs, c.header(r.rsp[:], nvme.TCPCapsuleRespHdr)), false
}
