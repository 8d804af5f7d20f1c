// Package tcptest is an NVMe/TCP initiator for tests only, as
// net/http/httptest is for HTTP servers, and the sibling of rdma/rdmatest.
// It speaks the protocol as a host does (ICReq, command capsules with or
// without in-capsule data, H2CData answering R2Ts, C2HData, digests) and
// lets a test send any bytes instead: a bad ICReq, a PDU one byte at a
// time, H2CData outside its R2T. It checks what the target sends (framing,
// digests), and hands back the target's termination request as an error.
//
// A Conn is used by one goroutine. Once it has warmed up, a command does
// not allocate, so that a benchmark running the target in the same
// process counts the target's allocations alone.
package tcptest

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Sentinel errors.
var (
	// ErrTimeout: nothing arrived in time.
	ErrTimeout = errors.New("tcptest: timed out")
	// ErrProtocol: the target sent something the protocol does not allow.
	ErrProtocol = errors.New("tcptest: protocol error")
)

// TermError is a C2HTermReq the target sent.
type TermError struct {
	FES nvme.TCPFES
	FEI uint32
	// PDU is the header of ours the target quoted.
	PDU []byte
}

func (e *TermError) Error() string {
	return fmt.Sprintf("tcptest: target terminated the connection: %s (fei %d)", e.FES, e.FEI)
}

// Defaults of Options.
const (
	DefaultTimeout = 10 * time.Second
	// MaxCID bounds the command identifiers a Conn tracks.
	MaxCID = 4096
)

// Options say how to connect.
type Options struct {
	// HeaderDigest and DataDigest ask for the digests in the ICReq.
	HeaderDigest, DataDigest bool
	// HPDA is the data alignment asked of the target's PDUs (0's based
	// dwords); MaxR2T the R2Ts per command it may have out (0's based).
	HPDA   uint8
	MaxR2T uint32
	// H2CDataSize is the most data of each H2CData sent; 0: the
	// target's MAXH2CDATA.
	H2CDataSize int
	// Timeout bounds the connection, its ICReq and every wait (Default
	// Timeout when 0).
	Timeout time.Duration
	// Trickle sends everything one byte per write (TCP_NODELAY: a segment
	// each), as a hostile or very slow host might.
	Trickle bool
	// LocalAddr is the address to connect from ("127.0.0.2"); empty: any.
	LocalAddr string
	// DataPause sends each H2CData's data in writes of DataPiece bytes
	// with this pause between, as a slow link delivers it.
	DataPause time.Duration
	DataPiece int
}

// ICResp is what the target answered.
type ICResp struct {
	PFV        uint16
	CPDA, DGST uint8
	MaxH2CData uint32
}

// cmd is one command in flight.
type cmd struct {
	active  bool
	read    bool
	data    []byte
	got     int // bytes of C2HData
	done    bool
	rsp     [nvme.CompletionSize]byte
	success bool // completed by C2HData's SUCCESS flag
}

// Conn is one NVMe/TCP connection.
type Conn struct {
	o    Options
	nc   net.Conn
	br   *bufio.Reader
	resp ICResp

	cmds []cmd
	// Scratch for what is read and written.
	in   [nvme.TCPMaxHdrSize + nvme.TCPDigestSize]byte
	out  [nvme.TCPCapsuleCmdHdr + nvme.TCPDigestSize]byte
	h2c  [nvme.TCPDataHdrSize + nvme.TCPDigestSize]byte
	dg   [nvme.TCPDigestSize]byte
	ddg  [nvme.TCPDigestSize]byte
	pad  [256]byte
	bufs [][]byte
	nb   net.Buffers

	// helper is the last CID the helpers (host.go) used.
	helper int

	// Counters of what arrived.
	R2Ts, C2HDatas, Responses, Successes int
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Dial connects to addr ("127.0.0.1:4420") and initializes the connection.
func Dial(addr string, o Options) (*Conn, error) {
	c, err := DialRaw(addr, o)
	if err != nil {
		return nil, err
	}
	var dgst uint8
	if o.HeaderDigest {
		dgst |= nvme.TCPDigestHeader
	}
	if o.DataDigest {
		dgst |= nvme.TCPDigestData
	}
	if err := c.Write(ICReqPDU(nvme.TCPPFV10, o.HPDA, dgst, o.MaxR2T)); err != nil {
		c.Close()
		return nil, err
	}
	h, _, err := c.ReadPDU()
	if err != nil {
		c.Close()
		return nil, err
	}
	if h.Type() != nvme.TCPICResp || h.HLEN() != nvme.TCPICReqSize || h.PLEN() != nvme.TCPICReqSize {
		c.Close()
		return nil, fmt.Errorf("%w: PDU type %#x hlen %d plen %d instead of an ICResp", ErrProtocol, h.Type(), h.HLEN(), h.PLEN())
	}
	c.resp = ICResp{PFV: h.PFV(), CPDA: h.PDA(), DGST: h.DGST(), MaxH2CData: h.MAXH2CDATA()}
	if c.resp.DGST != dgst || c.resp.MaxH2CData < nvme.TCPMinMaxH2CData || c.resp.PFV != nvme.TCPPFV10 {
		c.Close()
		return nil, fmt.Errorf("%w: ICResp %+v for digests %#x", ErrProtocol, c.resp, dgst)
	}
	return c, nil
}

// DialRaw connects and sends nothing: the test writes the ICReq, or not.
// Its PDUs are read without digests until Dial's ICReq sets them.
func DialRaw(addr string, o Options) (*Conn, error) {
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	d := net.Dialer{Timeout: o.Timeout}
	if o.LocalAddr != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(o.LocalAddr)}
	}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &Conn{o: o, nc: nc, br: bufio.NewReaderSize(nc, 64<<10), cmds: make([]cmd, MaxCID)}, nil
}

// ICResp is the target's answer to the ICReq.
func (c *Conn) ICResp() ICResp { return c.resp }

// NetConn is the socket.
func (c *Conn) NetConn() net.Conn { return c.nc }

// Close closes the socket.
func (c *Conn) Close() error { return c.nc.Close() }

// Write sends b as it is.
func (c *Conn) Write(b []byte) error {
	c.nc.SetWriteDeadline(time.Now().Add(c.o.Timeout))
	if c.o.Trickle {
		return c.trickle(b)
	}
	_, err := c.nc.Write(b)
	return err
}

func (c *Conn) trickle(b []byte) error {
	for i := range b {
		if _, err := c.nc.Write(b[i : i+1]); err != nil {
			return err
		}
	}
	return nil
}

func (c *Conn) writev(bufs [][]byte) error {
	c.nc.SetWriteDeadline(time.Now().Add(c.o.Timeout))
	if c.o.Trickle {
		for _, b := range bufs {
			if err := c.trickle(b); err != nil {
				return err
			}
		}
		clear(bufs)
		return nil
	}
	c.nb = bufs
	_, err := c.nb.WriteTo(c.nc)
	clear(bufs)
	return err
}

func (c *Conn) hdgst() bool { return c.resp.DGST&nvme.TCPDigestHeader != 0 }
func (c *Conn) ddgst() bool { return c.resp.DGST&nvme.TCPDigestData != 0 }

// Submit sends cmd, whose CID must be below MaxCID and not in flight, with
// data: a write's data (in the capsule when inCapsule, else sent when the
// target asks with R2T), or a read's buffer. SGL1 is set to match: an
// offset data block or a Transport SGL Data Block of len(data).
func (c *Conn) Submit(command nvme.Command, data []byte, write, inCapsule bool) error {
	cid := int(command.CID())
	if cid >= MaxCID || c.cmds[cid].active {
		return fmt.Errorf("tcptest: CID %d in flight or too large", cid)
	}
	if len(data) > 0 {
		if inCapsule {
			command.SGL1().SetDataBlockOffset(0, uint32(len(data)))
		} else {
			command.SGL1().SetTransportDataBlock(uint32(len(data)))
		}
	}
	c.cmds[cid] = cmd{active: true, read: !write, data: data}
	var icd []byte
	if inCapsule {
		icd = data
	}
	return c.sendCapsule(command, icd)
}

// sendCapsule sends a CapsuleCmd with icd as its in-capsule data.
func (c *Conn) sendCapsule(command nvme.Command, icd []byte) error {
	h := nvme.TCPHeader(c.out[:])
	hd, dd := c.digestLens(len(icd) > 0)
	pdo := 0
	if len(icd) > 0 {
		pdo = nvme.TCPCapsuleCmdHdr + hd
	}
	h.SetCommon(nvme.TCPCapsuleCmd, c.flags(len(icd) > 0), nvme.TCPCapsuleCmdHdr, uint8(pdo), uint32(nvme.TCPCapsuleCmdHdr+hd+len(icd)+dd))
	copy(c.out[nvme.TCPCommonHeaderSize:nvme.TCPCapsuleCmdHdr], command)
	bufs := append(c.bufs[:0], c.header(c.out[:], nvme.TCPCapsuleCmdHdr))
	if len(icd) > 0 {
		bufs = append(bufs, icd)
		if dd > 0 {
			binary.LittleEndian.PutUint32(c.ddg[:], crc(icd))
			bufs = append(bufs, c.ddg[:])
		}
	}
	c.bufs = bufs[:0]
	return c.writev(bufs)
}

func (c *Conn) digestLens(data bool) (hd, dd int) {
	if c.hdgst() {
		hd = nvme.TCPDigestSize
	}
	if data && c.ddgst() {
		dd = nvme.TCPDigestSize
	}
	return hd, dd
}

func (c *Conn) flags(data bool) uint8 {
	var fl uint8
	if c.hdgst() {
		fl |= nvme.TCPFlagHDGST
	}
	if data && c.ddgst() {
		fl |= nvme.TCPFlagDDGST
	}
	return fl
}

// header returns b's header of hlen bytes with its digest when there is one.
func (c *Conn) header(b []byte, hlen int) []byte {
	if !c.hdgst() {
		return b[:hlen]
	}
	binary.LittleEndian.PutUint32(b[hlen:], crc(b[:hlen]))
	return b[:hlen+nvme.TCPDigestSize]
}

// Wait handles what arrives (R2Ts, data, responses) until command cid
// completes, and returns its completion: the target's, or, for a read
// completed by C2HData's SUCCESS flag, a success with nothing else set. It
// is valid until cid is submitted again.
func (c *Conn) Wait(cid uint16) (nvme.Completion, error) {
	if int(cid) >= MaxCID || !c.cmds[cid].active {
		return nil, fmt.Errorf("tcptest: CID %d not in flight", cid)
	}
	deadline := time.Now().Add(c.o.Timeout)
	for !c.cmds[cid].done {
		if err := c.step(deadline); err != nil {
			return nil, err
		}
	}
	m := &c.cmds[cid]
	m.active = false
	m.done = false
	return nvme.Completion(m.rsp[:]), nil
}

// Do submits a command and waits for it.
func (c *Conn) Do(command nvme.Command, data []byte, write, inCapsule bool) (nvme.Completion, error) {
	if err := c.Submit(command, data, write, inCapsule); err != nil {
		return nil, err
	}
	return c.Wait(command.CID())
}

// Success reports whether cid's last completion came as C2HData's SUCCESS
// flag, with no response capsule.
func (c *Conn) Success(cid uint16) bool { return c.cmds[cid].success }

// step reads and handles one PDU.
func (c *Conn) step(deadline time.Time) error {
	c.nc.SetReadDeadline(deadline)
	h := nvme.TCPHeader(c.in[:])
	if _, err := io.ReadFull(c.br, c.in[:nvme.TCPCommonHeaderSize]); err != nil {
		return c.readErr(err)
	}
	hlen := int(h.HLEN())
	switch h.Type() {
	case nvme.TCPC2HTermReq:
		return c.term(h)
	case nvme.TCPCapsuleResp, nvme.TCPR2T, nvme.TCPC2HData:
	default:
		return fmt.Errorf("%w: PDU type %#x", ErrProtocol, h.Type())
	}
	if hlen != nvme.TCPDataHdrSize { // CapsuleResp's too
		return fmt.Errorf("%w: PDU type %#x with HLEN %d", ErrProtocol, h.Type(), hlen)
	}
	hd, _ := c.digestLens(false)
	if _, err := io.ReadFull(c.br, c.in[nvme.TCPCommonHeaderSize:hlen+hd]); err != nil {
		return c.readErr(err)
	}
	if (h.Flags()&nvme.TCPFlagHDGST != 0) != c.hdgst() {
		return fmt.Errorf("%w: HDGSTF %#x", ErrProtocol, h.Flags())
	}
	if hd > 0 && binary.LittleEndian.Uint32(c.in[hlen:]) != crc(c.in[:hlen]) {
		return fmt.Errorf("%w: header digest error", ErrProtocol)
	}
	switch h.Type() {
	case nvme.TCPCapsuleResp:
		if h.PLEN() != uint32(hlen+hd) || h.PDO() != 0 {
			return fmt.Errorf("%w: CapsuleResp plen %d pdo %d", ErrProtocol, h.PLEN(), h.PDO())
		}
		cqe := h.CQE()
		m, err := c.inFlight(cqe.CID())
		if err != nil {
			return err
		}
		copy(m.rsp[:], cqe)
		m.done = true
		m.success = false
		if m.read && cqe.Status().IsSuccess() && m.got != len(m.data) {
			return fmt.Errorf("%w: read %#x completed with %d of %d bytes", ErrProtocol, cqe.CID(), m.got, len(m.data))
		}
		c.Responses++
	case nvme.TCPR2T:
		c.R2Ts++
		return c.r2t(h, hd)
	case nvme.TCPC2HData:
		c.C2HDatas++
		return c.c2hData(h, hlen, hd)
	}
	return nil
}

func (c *Conn) inFlight(cid uint16) (*cmd, error) {
	if int(cid) >= MaxCID || !c.cmds[cid].active || c.cmds[cid].done {
		return nil, fmt.Errorf("%w: PDU for command %#x, which is not in flight", ErrProtocol, cid)
	}
	return &c.cmds[cid], nil
}

func (c *Conn) readErr(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ErrTimeout
	}
	return err
}

// term reads the rest of a C2HTermReq and returns it as a *TermError.
func (c *Conn) term(h nvme.TCPHeader) error {
	plen := h.PLEN()
	if h.HLEN() != nvme.TCPTermReqHdrSize || plen < nvme.TCPTermReqHdrSize || plen > nvme.TCPTermReqHdrSize+nvme.TCPTermReqMaxData {
		return fmt.Errorf("%w: C2HTermReq hlen %d plen %d", ErrProtocol, h.HLEN(), plen)
	}
	buf := make([]byte, plen)
	copy(buf, c.in[:nvme.TCPCommonHeaderSize])
	if _, err := io.ReadFull(c.br, buf[nvme.TCPCommonHeaderSize:]); err != nil {
		return c.readErr(err)
	}
	th := nvme.TCPHeader(buf)
	return &TermError{FES: th.FES(), FEI: th.FEI(), PDU: buf[nvme.TCPTermReqHdrSize:]}
}

// r2t answers an R2T with H2CData PDUs of at most H2CDataSize bytes.
func (c *Conn) r2t(h nvme.TCPHeader, hd int) error {
	if h.PLEN() != uint32(nvme.TCPDataHdrSize+hd) || h.PDO() != 0 {
		return fmt.Errorf("%w: R2T plen %d pdo %d", ErrProtocol, h.PLEN(), h.PDO())
	}
	cid, tag, off, n := h.CCCID(), h.TTAG(), int(h.DATAO()), int(h.DATAL())
	m, err := c.inFlight(cid)
	if err != nil {
		return err
	}
	if m.read || n == 0 || off+n > len(m.data) {
		return fmt.Errorf("%w: R2T for %#x: %d bytes at %d of %d", ErrProtocol, cid, n, off, len(m.data))
	}
	per := c.o.H2CDataSize
	if per <= 0 || per > int(c.resp.MaxH2CData) {
		per = int(c.resp.MaxH2CData)
	}
	for sent := 0; sent < n; {
		k := min(per, n-sent)
		if err := c.SendH2CData(cid, tag, uint32(off+sent), m.data[off+sent:off+sent+k], sent+k == n); err != nil {
			return err
		}
		sent += k
	}
	return nil
}

// SendH2CData sends one H2CData PDU with the connection's digests.
func (c *Conn) SendH2CData(cid, ttag uint16, off uint32, data []byte, last bool) error {
	hd, dd := c.digestLens(true)
	fl := c.flags(true)
	if last {
		fl |= nvme.TCPFlagLast
	}
	h := nvme.TCPHeader(c.h2c[:])
	pdo := nvme.TCPDataHdrSize + hd
	h.SetCommon(nvme.TCPH2CData, fl, nvme.TCPDataHdrSize, uint8(pdo), uint32(pdo+len(data)+dd))
	h.SetData(cid, ttag, off, uint32(len(data)))
	bufs := append(c.bufs[:0], c.header(c.h2c[:], nvme.TCPDataHdrSize), data)
	if dd > 0 {
		binary.LittleEndian.PutUint32(c.ddg[:], crc(data))
		bufs = append(bufs, c.ddg[:])
	}
	c.bufs = bufs[:0]
	if c.o.DataPause > 0 && c.o.DataPiece > 0 {
		return c.writeSlowly(bufs)
	}
	return c.writev(bufs)
}

// writeSlowly writes bufs in pieces of DataPiece bytes, DataPause apart.
func (c *Conn) writeSlowly(bufs [][]byte) error {
	var all []byte
	for _, b := range bufs {
		all = append(all, b...)
	}
	clear(bufs)
	for len(all) > 0 {
		k := min(len(all), c.o.DataPiece)
		if err := c.Write(all[:k]); err != nil {
			return err
		}
		all = all[k:]
		if len(all) > 0 {
			time.Sleep(c.o.DataPause)
		}
	}
	return nil
}

// c2hData reads a C2HData into its command's buffer.
func (c *Conn) c2hData(h nvme.TCPHeader, hlen, hd int) error {
	_, dd := c.digestLens(true)
	cid, off, n, pdo := h.CCCID(), int(h.DATAO()), int(h.DATAL()), int(h.PDO())
	align := (int(c.o.HPDA) + 1) * 4
	if pdo < hlen+hd || pdo%align != 0 || h.PLEN() != uint32(pdo+n+dd) || n == 0 {
		return fmt.Errorf("%w: C2HData pdo %d plen %d datal %d", ErrProtocol, pdo, h.PLEN(), n)
	}
	if (h.Flags()&nvme.TCPFlagDDGST != 0) != c.ddgst() {
		return fmt.Errorf("%w: C2HData DDGSTF %#x", ErrProtocol, h.Flags())
	}
	m, err := c.inFlight(cid)
	if err != nil {
		return err
	}
	if !m.read || off != m.got || off+n > len(m.data) {
		return fmt.Errorf("%w: C2HData for %#x: %d bytes at %d, %d of %d had", ErrProtocol, cid, n, off, m.got, len(m.data))
	}
	if pad := pdo - hlen - hd; pad > 0 {
		if _, err := io.ReadFull(c.br, c.pad[:pad]); err != nil {
			return c.readErr(err)
		}
	}
	dst := m.data[off : off+n]
	if _, err := io.ReadFull(c.br, dst); err != nil {
		return c.readErr(err)
	}
	if dd > 0 {
		if _, err := io.ReadFull(c.br, c.dg[:]); err != nil {
			return c.readErr(err)
		}
		if binary.LittleEndian.Uint32(c.dg[:]) != crc(dst) {
			return fmt.Errorf("%w: C2HData data digest error", ErrProtocol)
		}
	}
	m.got += n
	fl := h.Flags()
	if fl&nvme.TCPFlagSuccess != 0 {
		if fl&nvme.TCPFlagLast == 0 || m.got != len(m.data) {
			return fmt.Errorf("%w: SUCCESS on a C2HData that does not end the transfer", ErrProtocol)
		}
		clear(m.rsp[:])
		nvme.Completion(m.rsp[:]).SetCID(cid)
		m.done = true
		m.success = true
		c.Successes++
	}
	return nil
}

// ReadPDU reads the next PDU whole, without checking it: its header (and
// header digest, when negotiated) and the rest. The slices are valid until
// the next read.
func (c *Conn) ReadPDU() (nvme.TCPHeader, []byte, error) {
	c.nc.SetReadDeadline(time.Now().Add(c.o.Timeout))
	if _, err := io.ReadFull(c.br, c.in[:nvme.TCPCommonHeaderSize]); err != nil {
		return nil, nil, c.readErr(err)
	}
	h := nvme.TCPHeader(c.in[:])
	plen := int(h.PLEN())
	if plen < nvme.TCPCommonHeaderSize || plen > 64<<20 {
		return nil, nil, fmt.Errorf("%w: PLEN %d", ErrProtocol, plen)
	}
	buf := make([]byte, plen)
	copy(buf, c.in[:nvme.TCPCommonHeaderSize])
	if _, err := io.ReadFull(c.br, buf[nvme.TCPCommonHeaderSize:]); err != nil {
		return nil, nil, c.readErr(err)
	}
	hlen := min(int(h.HLEN()), plen)
	return nvme.TCPHeader(buf), buf[hlen:], nil
}

// ReadTerm reads PDUs until a C2HTermReq, which it returns, or until the
// target closes the connection (io.EOF).
func (c *Conn) ReadTerm() (*TermError, error) {
	for {
		h, rest, err := c.ReadPDU()
		if err != nil {
			return nil, err
		}
		if h.Type() == nvme.TCPC2HTermReq {
			return &TermError{FES: h.FES(), FEI: h.FEI(), PDU: rest}, nil
		}
	}
}

// ICReqPDU is an ICReq with the given fields.
func ICReqPDU(pfv uint16, hpda, dgst uint8, maxr2t uint32) []byte {
	b := make([]byte, nvme.TCPICReqSize)
	h := nvme.TCPHeader(b)
	h.SetCommon(nvme.TCPICReq, 0, nvme.TCPICReqSize, 0, nvme.TCPICReqSize)
	h.SetICReq(pfv, hpda, dgst, maxr2t)
	return b
}

// CapsulePDU is a CapsuleCmd of cmd with icd as its in-capsule data,
// with the digests asked for.
func CapsulePDU(command nvme.Command, icd []byte, hdgst, ddgst bool) []byte {
	hd, dd := 0, 0
	var fl uint8
	if hdgst {
		hd = nvme.TCPDigestSize
		fl |= nvme.TCPFlagHDGST
	}
	if ddgst && len(icd) > 0 {
		dd = nvme.TCPDigestSize
		fl |= nvme.TCPFlagDDGST
	}
	pdo := 0
	if len(icd) > 0 {
		pdo = nvme.TCPCapsuleCmdHdr + hd
	}
	b := make([]byte, nvme.TCPCapsuleCmdHdr+hd+len(icd)+dd)
	h := nvme.TCPHeader(b)
	h.SetCommon(nvme.TCPCapsuleCmd, fl, nvme.TCPCapsuleCmdHdr, uint8(pdo), uint32(len(b)))
	copy(b[nvme.TCPCommonHeaderSize:], command)
	if hd > 0 {
		binary.LittleEndian.PutUint32(b[nvme.TCPCapsuleCmdHdr:], crc(b[:nvme.TCPCapsuleCmdHdr]))
	}
	copy(b[nvme.TCPCapsuleCmdHdr+hd:], icd)
	if dd > 0 {
		binary.LittleEndian.PutUint32(b[len(b)-dd:], crc(icd))
	}
	return b
}

// H2CDataPDU is an H2CData PDU, with the digests asked for.
func H2CDataPDU(cid, ttag uint16, off uint32, data []byte, last, hdgst, ddgst bool) []byte {
	hd, dd := 0, 0
	var fl uint8
	if hdgst {
		hd = nvme.TCPDigestSize
		fl |= nvme.TCPFlagHDGST
	}
	if ddgst {
		dd = nvme.TCPDigestSize
		fl |= nvme.TCPFlagDDGST
	}
	if last {
		fl |= nvme.TCPFlagLast
	}
	pdo := nvme.TCPDataHdrSize + hd
	b := make([]byte, pdo+len(data)+dd)
	h := nvme.TCPHeader(b)
	h.SetCommon(nvme.TCPH2CData, fl, nvme.TCPDataHdrSize, uint8(pdo), uint32(len(b)))
	h.SetData(cid, ttag, off, uint32(len(data)))
	if hd > 0 {
		binary.LittleEndian.PutUint32(b[nvme.TCPDataHdrSize:], crc(b[:nvme.TCPDataHdrSize]))
	}
	copy(b[pdo:], data)
	if dd > 0 {
		binary.LittleEndian.PutUint32(b[len(b)-dd:], crc(data))
	}
	return b
}
