package tcp

import (
	"bufio"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// readBufSize is the reader's buffer: many small PDUs per read call, while
// data of this size or more is read straight into its buffers.
const readBufSize = 32 << 10

// drainTimeout bounds how long a connection that sent a C2HTermReq reads
// what the host still sends, so that closing with unread data (a reset)
// does not make the host's stack drop the termination request.
const drainTimeout = time.Second

// errHostTerminated ends a connection whose host sent an H2CTermReq.
var errHostTerminated = errors.New("host sent a termination request")

// errQueueDepth ends a connection whose host has more commands out than
// any queue of the port may hold.
var errQueueDepth = errors.New("host exceeded the queue depth")

// errWriterGone ends the reader of a connection whose writer failed.
var errWriterGone = errors.New("connection's writer stopped")

// conn is one NVMe/TCP connection: one queue. Its reader goroutine (serve)
// runs the connection's set-up, parses what the host sends and ends with
// the teardown; its writer goroutine (writeLoop) sends. A request's state
// changes under mu.
type conn struct {
	t    *Transport
	l    *listener
	nc   net.Conn
	addr string // the host's IP address, the per-address count's key
	log  *slog.Logger

	// Set by the reader before the writer starts.
	f   framing
	pdo int // PDO of the target's C2HData
	fq  *fabric.Queue
	br  *bufio.Reader
	// maxActive bounds the commands the host may have out before
	// Connect: the port's deepest queue. Connect grants the queue its
	// size, the bound after (sqSize, the reader's, 0 until then).
	maxActive int
	sqSize    int

	// Reader only: the header being parsed (and how much of it was read,
	// for a termination request that quotes it), and a data digest.
	hdr     [nvme.TCPMaxHdrSize + nvme.TCPDigestSize]byte
	hdrHave int
	dg      [nvme.TCPDigestSize]byte

	mu sync.Mutex
	// reqs is the request table, 2 × maxActive slots made as first
	// needed: a request lingers until its response is written, while the
	// host may already reuse its command slot. free lists the free slots.
	reqs   []*request
	free   []uint16
	made   int
	active int // requests not free
	// sending is the active requests whose response is queued or being
	// written: the host may have sent as many new commands already.
	sending int
	// freed wakes the reader waiting for a free request.
	freed sync.Cond
	// wq is the PDUs to send; wake wakes the writer. readerBusy: the
	// reader is taking what it has read, and sends what is queued before
	// its next read (flushBeforeRead), so queueing wakes no one.
	// flushing: a batch is being sent (send), by the reader or the
	// writer, one at a time; its sender sends what is queued meanwhile.
	wq                   []*request
	wake                 sync.Cond
	readerBusy, flushing bool
	// term is a C2HTermReq for the writer to send last; termLen its
	// length, 0 for none.
	term    [nvme.TCPTermReqHdrSize + nvme.TCPTermReqMaxData]byte
	termLen int
	// closing: the connection is being torn down; the writer stops and
	// requests coming back are freed. writerGone: the writer returned.
	// tornDown: the teardown has let go of everything it holds, so the
	// connection is finished once its last request is free.
	closing, writerGone, tornDown, finished bool
	reason                                  string
	writerDone                              chan struct{}

	// r2tOut counts the requests whose R2T is out (rsData), progress the
	// H2CData PDUs received: the listener's sweep closes a connection
	// whose host sends no data for its R2Ts (checkDataStall).
	r2tOut   atomic.Int32
	progress atomic.Uint64
	// The sweep's own: progress at its last look, and since when it has
	// not moved with R2Ts out.
	lastProgress uint64
	stalledSince time.Time

	// held is the pool units the connection's requests claimed of its
	// share, line its requests waiting for room in it; the pool's mutex
	// guards both (pool.go).
	held int
	line line

	// The sender's (flushing set) only.
	wqSpare []*request
	bufs    [][]byte
	nb      net.Buffers
	done    []*request
}

func newConn(l *listener, nc net.Conn, addr string) *conn {
	c := &conn{t: l.t, l: l, nc: nc, addr: addr, log: l.log.With("remote", nc.RemoteAddr().String()), writerDone: make(chan struct{})}
	c.freed.L = &c.mu
	c.wake.L = &c.mu
	c.f.icd = l.t.cfg.InCapsuleDataSize
	c.f.maxH2C = l.t.cfg.MaxH2CData
	return c
}

// serve runs the connection from its ICReq to its teardown.
func (c *conn) serve() {
	err := c.handshake()
	if err == nil {
		local := ""
		if a, ok := c.nc.LocalAddr().(*net.TCPAddr); ok {
			local = a.IP.String()
		}
		// The queue is an admin or an I/O queue: as deep as either may be.
		c.maxActive = max(c.t.cfg.MaxQueueDepth, fabric.AdminQueueDepth)
		c.reqs = make([]*request, 2*c.maxActive)
		c.free = make([]uint16, 0, 2*c.maxActive)
		c.br = bufio.NewReaderSize(sockReader{c}, readBufSize)
		// The host names its queue only in Connect: any QID, and up to
		// the port's deepest queue (fabric checks the admin queue's).
		c.fq = c.l.tgt.NewQueue(c.l.port, c, fabric.QueueHint{QID: -1, Depth: c.maxActive, Remote: c.nc.RemoteAddr().String(), LocalIP: local})
		go c.writeLoop()
		err = c.readLoop()
	}
	c.teardown(err)
}

// handshake takes the ICReq and answers it (TCP §3.3), within
// ICReqTimeout: until then the connection holds no queue.
func (c *conn) handshake() error {
	c.nc.SetReadDeadline(time.Now().Add(c.t.cfg.ICReqTimeout))
	h := nvme.TCPHeader(c.hdr[:])
	if _, err := io.ReadFull(c.nc, c.hdr[:nvme.TCPCommonHeaderSize]); err != nil {
		return c.icReqErr(err)
	}
	c.hdrHave = nvme.TCPCommonHeaderSize
	l, f := checkCommon(h, &c.f)
	if f != nil {
		return f
	}
	if _, err := io.ReadFull(c.nc, c.hdr[nvme.TCPCommonHeaderSize:nvme.TCPCommonHeaderSize+l.rest]); err != nil {
		return c.icReqErr(err)
	}
	c.hdrHave += l.rest
	ic, f := checkICReq(h)
	if f != nil {
		return f
	}
	c.nc.SetReadDeadline(time.Time{})
	c.f.hdgst, c.f.ddgst = ic.hdgst, ic.ddgst
	c.pdo = c2hDataPDO(ic.hdgst, ic.hpda)
	var dgst uint8
	if ic.hdgst {
		dgst |= nvme.TCPDigestHeader
	}
	if ic.ddgst {
		dgst |= nvme.TCPDigestData
	}
	var resp [nvme.TCPICReqSize]byte
	rh := nvme.TCPHeader(resp[:])
	rh.SetCommon(nvme.TCPICResp, 0, nvme.TCPICReqSize, 0, nvme.TCPICReqSize)
	// CPDA 0: the host's data may start at any dword.
	rh.SetICResp(nvme.TCPPFV10, 0, dgst, c.f.maxH2C)
	c.setSendDeadline()
	if _, err := c.nc.Write(resp[:]); err != nil {
		return fmt.Errorf("write ICResp: %w", err)
	}
	c.f.ready = true
	c.log.Debug("connection initialized", "hdgst", ic.hdgst, "ddgst", ic.ddgst, "hpda", ic.hpda, "maxr2t", ic.maxR2T+1)
	return nil
}

func (c *conn) icReqErr(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.stats.ICReqTimeouts.Add(1)
		return fmt.Errorf("no ICReq within %v", c.t.cfg.ICReqTimeout)
	}
	return fmt.Errorf("read ICReq: %w", err)
}

func (c *conn) setSendDeadline() {
	c.nc.SetWriteDeadline(time.Now().Add(c.t.cfg.SendTimeout))
}

// readLoop parses the host's PDUs until the connection ends.
func (c *conn) readLoop() error {
	h := nvme.TCPHeader(c.hdr[:])
	for {
		c.hdrHave = 0
		if _, err := io.ReadFull(c.br, c.hdr[:nvme.TCPCommonHeaderSize]); err != nil {
			return err
		}
		c.hdrHave = nvme.TCPCommonHeaderSize
		l, f := checkCommon(h, &c.f)
		if f != nil {
			return f
		}
		if _, err := io.ReadFull(c.br, c.hdr[nvme.TCPCommonHeaderSize:nvme.TCPCommonHeaderSize+l.rest]); err != nil {
			return err
		}
		c.hdrHave += l.rest
		typ := h.Type()
		if typ == nvme.TCPH2CTermReq {
			return c.termReceived(h, l)
		}
		if c.f.hdgst {
			if f := checkHeaderDigest(h, int(h.HLEN())); f != nil {
				c.t.stats.HeaderDigestErrors.Add(1)
				return f
			}
		}
		if l.pad > 0 {
			if _, err := c.br.Discard(l.pad); err != nil {
				return err
			}
		}
		var err error
		switch typ {
		case nvme.TCPCapsuleCmd:
			err = c.capsule(h, l)
		case nvme.TCPH2CData:
			err = c.h2cData(h, l)
		}
		if err != nil {
			return err
		}
	}
}

// sockReader is the reader's way to its socket: what is queued to send
// goes first (flushBeforeRead).
type sockReader struct{ c *conn }

func (s sockReader) Read(p []byte) (int, error) {
	c := s.c
	if err := c.flushBeforeRead(); err != nil {
		return 0, err
	}
	n, err := c.nc.Read(p)
	c.readerBack()
	return n, err
}

// termReceived logs the host's H2CTermReq (TCP §3.6.2.4); the connection
// then closes without one of ours.
func (c *conn) termReceived(h nvme.TCPHeader, l layout) error {
	var quoted [nvme.TCPTermReqMaxData]byte
	n, _ := io.ReadFull(c.br, quoted[:l.data])
	c.t.stats.TermReqsReceived.Add(1)
	c.log.Warn("host terminated the connection", "fes", h.FES().String(), "fei", h.FEI(), "pdu", fmt.Sprintf("%x", quoted[:n]))
	return errHostTerminated
}

// readInto reads n bytes into segs from byte off on, with their CRC32C.
func (c *conn) readInto(segs [][]byte, off, n int) (uint32, error) {
	var crc uint32
	for _, s := range segs {
		if n == 0 {
			break
		}
		if off >= len(s) {
			off -= len(s)
			continue
		}
		part := s[off:min(len(s), off+n)]
		if _, err := io.ReadFull(c.br, part); err != nil {
			return 0, err
		}
		if c.f.ddgst {
			crc = crc32.Update(crc, castagnoli, part)
		}
		n -= len(part)
		off = 0
	}
	return crc, nil
}

// dataDigestOK reads the data digest after a PDU's data and compares it
// with crc.
func (c *conn) dataDigestOK(crc uint32) (bool, error) {
	if _, err := io.ReadFull(c.br, c.dg[:]); err != nil {
		return false, err
	}
	if uint32(c.dg[0])|uint32(c.dg[1])<<8|uint32(c.dg[2])<<16|uint32(c.dg[3])<<24 != crc {
		c.t.stats.DataDigestErrors.Add(1)
		return false, nil
	}
	return true, nil
}

// takeRequest gives the reader a free request, waiting for the writer to
// free one when every slot holds a response on its way: the host may have
// had those responses and sent the commands that follow.
func (c *conn) takeRequest() (*request, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if c.writerGone || c.closing || c.reason != "" {
			return nil, errWriterGone
		}
		if c.active-c.sending >= c.depth() {
			return nil, errQueueDepth
		}
		var r *request
		switch {
		case len(c.free) > 0:
			r = c.reqs[c.free[len(c.free)-1]]
			c.free = c.free[:len(c.free)-1]
		case c.made < len(c.reqs):
			r = newRequest(c, uint16(c.made))
			c.reqs[c.made] = r
			c.made++
		default:
			// The responses that would free a slot may be queued behind
			// this read: the writer sends them.
			c.readerBusy = false
			if len(c.wq) > 0 && !c.flushing {
				c.wake.Signal()
			}
			c.freed.Wait()
			c.readerBusy = true
			continue
		}
		r.state = rsNew
		c.active++
		return r, nil
	}
}

// depth is the most commands the host may have out: the SQ size granted
// at Connect (the host's queue holds no more: NVMe-oF 1.1 §3.3, SQSIZE),
// or the port's deepest queue before. Reader only.
func (c *conn) depth() int {
	if c.sqSize == 0 {
		c.sqSize = min(c.fq.Size(), c.maxActive)
		if c.sqSize == 0 {
			return c.maxActive
		}
	}
	return c.sqSize
}

// capsule takes a command capsule: the command, its in-capsule data and
// their digest.
func (c *conn) capsule(h nvme.TCPHeader, l layout) error {
	r, err := c.takeRequest()
	if err != nil {
		return err
	}
	copy(r.cmd[:], h.SQE())
	r.icd = l.data
	r.got = 0
	r.badDigest = false
	if l.data > 0 {
		c.t.pool.getNow(r, uint32(l.data))
		crc, err := c.readInto(r.chunks, 0, l.data)
		if err != nil {
			return err
		}
		if l.ddgst {
			ok, err := c.dataDigestOK(crc)
			if err != nil {
				return err
			}
			r.badDigest = !ok
		}
	}
	c.start(r)
	return nil
}

// start parses r's command and gets its data to it: in the capsule, by
// R2T, or buffers for a read.
func (c *conn) start(r *request) {
	st := c.fq.Parse(&r.fr)
	if r.badDigest && st.IsSuccess() {
		// A data digest error fails the command, not the connection
		// (TCP §3.6.2.1: Transient Transport Error).
		st = nvme.StatusTransientTransportError
	}
	if !st.IsSuccess() || r.fr.DataLen == 0 {
		c.toCore(r, st)
		return
	}
	inCapsule, off, st := mapSGL(r.fr.Cmd.SGL1(), r.fr.Dir, r.fr.DataLen, r.icd)
	switch {
	case !st.IsSuccess():
		c.toCore(r, st)
		return
	case inCapsule:
		r.setSegs(off, int(r.fr.DataLen))
		c.toCore(r, nvme.StatusSuccess)
		return
	}
	c.mu.Lock()
	r.state = rsBuffers
	c.mu.Unlock()
	if !c.t.pool.get(r, r.fr.DataLen) {
		return // granted later
	}
	r.setSegs(0, int(r.fr.DataLen))
	if r.fr.Dir == fabric.DirCtrlToHost {
		c.toCore(r, nvme.StatusSuccess)
		return
	}
	c.mu.Lock()
	c.setData(r)
	c.queue(r, sendR2T)
	c.mu.Unlock()
}

// setData moves r to rsData, its R2T about to go out; c.mu is held.
func (c *conn) setData(r *request) {
	r.state = rsData
	c.r2tOut.Add(1)
}

// leave takes r out of its state, counting an R2T no longer out; c.mu is
// held.
func (c *conn) leave(r *request) {
	if r.state == rsData {
		c.r2tOut.Add(-1)
	}
}

// granted moves on a request the pool gave buffers to, off the reader:
// the writer sends its R2T, or hands a read to the core.
func (c *conn) granted(r *request) {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		c.release(r)
		return
	}
	r.setSegs(0, int(r.fr.DataLen))
	if r.fr.Dir == fabric.DirCtrlToHost {
		r.state = rsReady
		c.queue(r, sendRun)
	} else {
		c.setData(r)
		c.queue(r, sendR2T)
	}
	c.mu.Unlock()
}

// h2cData takes an H2CData PDU: data for the R2T of its transfer tag, in
// order and within the transfer (TCP §3.6.2.7).
func (c *conn) h2cData(h nvme.TCPHeader, l layout) error {
	if f := checkH2CData(h, l); f != nil {
		return f
	}
	tag := h.TTAG()
	c.mu.Lock()
	var r *request
	if int(tag) < c.made {
		r = c.reqs[tag]
	}
	ok := r != nil && r.state == rsData
	c.mu.Unlock()
	if !ok {
		return badField(nvme.TCPOffTTAG, "H2CData for transfer tag %d, which has no R2T outstanding", tag)
	}
	if cid := h.CCCID(); cid != r.fr.Cmd.CID() {
		return badField(nvme.TCPOffCCCID, "H2CData of command %#x for transfer tag %d, which is command %#x's", cid, tag, r.fr.Cmd.CID())
	}
	off, n := h.DATAO(), h.DATAL()
	if off != r.got || uint64(off)+uint64(n) > uint64(r.fr.DataLen) {
		return &fatal{fes: nvme.TCPFESDataOutOfRange, why: fmt.Sprintf("H2CData of %d bytes at %d; the transfer has %d of %d", n, off, r.got, r.fr.DataLen)}
	}
	last := off+n == r.fr.DataLen
	if h.Flags()&nvme.TCPFlagLast != 0 != last {
		return badField(nvme.TCPOffFlags, "LAST_PDU %v on H2CData ending at %d of %d", !last, off+n, r.fr.DataLen)
	}
	crc, err := c.readInto(r.segs, int(off), int(n))
	if err != nil {
		return err
	}
	if l.ddgst {
		ok, err := c.dataDigestOK(crc)
		if err != nil {
			return err
		}
		if !ok {
			r.badDigest = true
		}
	}
	r.got += n
	c.progress.Add(1)
	if last {
		st := nvme.StatusSuccess
		if r.badDigest {
			st = nvme.StatusTransientTransportError
		}
		c.toCore(r, st)
	}
	return nil
}

// toCore hands r to the core: Execute, or Fail with st.
func (c *conn) toCore(r *request, st nvme.Status) {
	c.mu.Lock()
	c.leave(r)
	r.state = rsExecuting
	c.mu.Unlock()
	if st.IsSuccess() {
		c.fq.Execute(&r.fr)
	} else {
		c.fq.Fail(&r.fr, st)
	}
}

// QueueResponse implements fabric.Conn: the writer sends r's data and
// response; on a connection being torn down r is just freed.
func (c *conn) QueueResponse(fr *fabric.Request) {
	c.mu.Lock()
	r := c.reqs[fr.Tag]
	if c.closing || c.writerGone {
		c.mu.Unlock()
		c.release(r)
		return
	}
	r.state = rsSend
	c.sending++
	c.queue(r, sendResp)
	c.mu.Unlock()
}

// queue queues r's PDU to send, and wakes the writer when no one else
// will send it soon; c.mu is held.
func (c *conn) queue(r *request, what uint8) {
	r.send = what
	c.wq = append(c.wq, r)
	if len(c.wq) == 1 && !c.readerBusy && !c.flushing {
		c.wake.Signal()
	}
}

// Disconnect implements fabric.Conn: closing the socket ends the reader,
// which tears the connection down.
func (c *conn) Disconnect() {
	c.close("disconnect requested by the target")
}

// close closes the socket, once, for reason.
func (c *conn) close(reason string) {
	c.mu.Lock()
	if c.reason == "" {
		c.reason = reason
	}
	c.freed.Broadcast() // a reader waiting for a request
	c.mu.Unlock()
	c.nc.Close()
}

// release gives back what r holds and frees it. Called without c.mu.
func (c *conn) release(r *request) {
	c.t.pool.put(r)
	c.mu.Lock()
	c.freeLocked(r)
	fin := c.finishable()
	c.mu.Unlock()
	if fin {
		c.finish()
	}
}

// freeLocked puts r back on the free list; c.mu is held.
func (c *conn) freeLocked(r *request) {
	if r.state == rsSend {
		c.sending--
	}
	c.leave(r)
	r.state = rsFree
	r.send = sendNone
	clear(r.segs)
	r.segs = r.segs[:0]
	r.fr.Data = nil
	c.free = append(c.free, r.idx)
	c.active--
	c.freed.Signal()
}

// finishable reports whether the connection is finished now and was not
// before; c.mu is held.
func (c *conn) finishable() bool {
	if !c.tornDown || c.active > 0 || c.finished {
		return false
	}
	c.finished = true
	return true
}

// finish gives the connection's place back to its listener.
func (c *conn) finish() {
	c.t.unclaim(c.addr)
	c.t.stats.Closed.Add(1)
	c.t.stats.Live.Add(-1)
	c.l.gone(c)
}

// teardown ends the connection after its reader stopped with err: a
// C2HTermReq for a fatal error of the host's, then the socket closes, the
// core lets go of the queue, and every request the connection still holds
// is freed; those the core holds are freed as they come back.
func (c *conn) teardown(err error) {
	var f *fatal
	isFatal := errors.As(err, &f)
	c.logEnd(err, f)
	writer := c.fq != nil
	if isFatal {
		c.t.stats.TermReqsSent.Add(1)
		n := c.buildTerm(f)
		if writer {
			c.mu.Lock()
			c.termLen = n
			c.wake.Signal()
			c.mu.Unlock()
			<-c.writerDone
		} else {
			c.setSendDeadline()
			c.nc.Write(c.term[:n])
		}
		c.drain()
	}
	c.mu.Lock()
	c.closing = true
	c.wake.Signal()
	c.freed.Broadcast()
	c.mu.Unlock()
	c.nc.Close()
	if writer {
		<-c.writerDone
		c.fq.Destroy()
	}
	var left []*request
	c.mu.Lock()
	for _, r := range c.reqs[:c.made] {
		switch r.state {
		case rsNew, rsReady, rsData, rsSend:
			left = append(left, r)
		case rsBuffers:
			if c.t.pool.cancel(r) {
				left = append(left, r)
			}
		}
	}
	c.mu.Unlock()
	for _, r := range left {
		c.release(r)
	}
	c.mu.Lock()
	c.tornDown = true
	fin := c.finishable()
	c.mu.Unlock()
	if fin {
		c.finish()
	}
}

// checkDataStall closes the connection when its host has had R2Ts out
// for the send timeout and sent no H2CData for any: it holds their data
// buffers from every other host. Keep-alive does not catch it (the
// host may keep its controller alive on the admin queue). Called by the
// listener's sweep, at most every second.
func (c *conn) checkDataStall(now time.Time) {
	if c.r2tOut.Load() == 0 {
		c.stalledSince = time.Time{}
		return
	}
	if p := c.progress.Load(); p != c.lastProgress || c.stalledSince.IsZero() {
		c.lastProgress, c.stalledSince = p, now
		return
	}
	if now.Sub(c.stalledSince) < c.t.cfg.SendTimeout {
		return
	}
	c.stalledSince = time.Time{}
	c.t.stats.DataTimeouts.Add(1)
	c.log.Warn("host sends no data for its R2Ts: closing the connection", "timeout", c.t.cfg.SendTimeout, "r2ts", c.r2tOut.Load())
	c.close("no H2CData for " + c.t.cfg.SendTimeout.String())
}

// logEnd says why the connection ended: a fatal error of the host's as a
// warning, the ends of ordinary life at debug level.
func (c *conn) logEnd(err error, f *fatal) {
	c.mu.Lock()
	reason := c.reason
	c.mu.Unlock()
	switch {
	case f != nil:
		c.log.Warn("fatal transport error: terminating the connection", "fes", f.fes.String(), "fei", f.fei, "why", f.why)
	case errors.Is(err, errQueueDepth):
		c.log.Warn("host sent more commands than the queue holds: closing the connection", "max", c.depth())
	case reason != "":
		c.log.Debug("connection closed", "reason", reason)
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), errors.Is(err, io.ErrUnexpectedEOF):
		c.log.Debug("connection closed by the host")
	default:
		c.log.Info("connection closed", "err", err)
	}
}

// buildTerm writes the C2HTermReq for f into c.term, quoting the header
// read so far, and returns its length. No digests (TCP §3.6.2.4).
func (c *conn) buildTerm(f *fatal) int {
	quoted := min(c.hdrHave, nvme.TCPTermReqMaxData)
	n := nvme.TCPTermReqHdrSize + quoted
	copy(c.term[nvme.TCPTermReqHdrSize:], c.hdr[:quoted])
	h := nvme.TCPHeader(c.term[:])
	h.SetCommon(nvme.TCPC2HTermReq, 0, nvme.TCPTermReqHdrSize, 0, uint32(n))
	h.SetTermReq(f.fes, f.fei)
	return n
}

// drain closes the sending side and reads what the host still sends, for
// a little while: closing a socket with unread data resets the connection,
// and the host's stack may then drop the termination request unread.
func (c *conn) drain() {
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	c.nc.SetReadDeadline(time.Now().Add(drainTimeout))
	r := io.Reader(c.nc)
	if c.br != nil {
		r = c.br
	}
	var sink [4096]byte
	for {
		if _, err := r.Read(sink[:]); err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, io.EOF) {
				c.log.Debug("draining after a termination request", "err", err)
			}
			return
		}
	}
}
