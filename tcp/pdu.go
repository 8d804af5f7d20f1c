package tcp

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// castagnoli is CRC32C, the digest of NVMe/TCP (TCP §3.6.2.1): Go's
// hash/crc32 runs it on the CPU's CRC32 instruction where there is one.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// digest is the CRC32C of b.
func digest(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// putDigest writes the CRC32C of b into dst[:4], little-endian as the
// Linux host and target write it.
func putDigest(dst, b []byte) { binary.LittleEndian.PutUint32(dst, digest(b)) }

// fatal is a fatal transport error in what the host sent (TCP §3.6.2.4):
// the C2HTermReq that reports it, then the connection closes.
type fatal struct {
	fes nvme.TCPFES
	fei uint32 // the byte offset of the field, for the statuses that have one
	why string
}

func (f *fatal) Error() string {
	return fmt.Sprintf("fatal transport error: %s (fei %d): %s", f.fes, f.fei, f.why)
}

func badField(off int, format string, args ...any) *fatal {
	return &fatal{fes: nvme.TCPFESInvalidHeaderField, fei: uint32(off), why: fmt.Sprintf(format, args...)}
}

func sequenceError(format string, args ...any) *fatal {
	return &fatal{fes: nvme.TCPFESPDUSequenceError, why: fmt.Sprintf(format, args...)}
}

// framing is what a connection negotiated, which every PDU header is
// checked against.
type framing struct {
	// ready: the ICReq was answered; until then only an ICReq is taken.
	ready        bool
	hdgst, ddgst bool
	icd          uint32 // most in-capsule data
	maxH2C       uint32 // MAXH2CDATA
}

func (f *framing) hdgstLen() int {
	if f.hdgst {
		return nvme.TCPDigestSize
	}
	return 0
}

// layout is where a PDU's parts are, from its common header.
type layout struct {
	// rest is the header bytes after the common header, with the header
	// digest; pad the bytes between them and the data (PDO); data the
	// data's length and ddgst whether a data digest follows it.
	rest, pad, data int
	ddgst           bool
}

// pduHLEN is the header length of each PDU type a host may send, 0 for
// the others.
func pduHLEN(typ uint8) int {
	switch typ {
	case nvme.TCPICReq:
		return nvme.TCPICReqSize
	case nvme.TCPH2CTermReq:
		return nvme.TCPTermReqHdrSize
	case nvme.TCPCapsuleCmd:
		return nvme.TCPCapsuleCmdHdr
	case nvme.TCPH2CData:
		return nvme.TCPDataHdrSize
	}
	return 0
}

// checkCommon checks a common header from the host (TCP §3.6.1) against
// what f negotiated and says where the rest of the PDU is. A PDU is taken
// only where it may come: an ICReq first and once, then capsules, data
// and termination requests.
func checkCommon(h nvme.TCPHeader, f *framing) (layout, *fatal) {
	typ, hlen, pdo, plen := h.Type(), int(h.HLEN()), int(h.PDO()), h.PLEN()
	want := pduHLEN(typ)
	if want == 0 {
		return layout{}, badField(nvme.TCPOffType, "PDU type %#x is not one a host sends", typ)
	}
	if typ == nvme.TCPICReq && f.ready {
		return layout{}, sequenceError("a second ICReq")
	}
	if typ != nvme.TCPICReq && !f.ready {
		return layout{}, sequenceError("PDU type %#x before the ICReq", typ)
	}
	if hlen != want {
		return layout{}, badField(nvme.TCPOffHLEN, "HLEN %d of PDU type %#x, want %d", hlen, typ, want)
	}
	switch typ {
	case nvme.TCPICReq:
		if pdo != 0 {
			return layout{}, badField(nvme.TCPOffPDO, "ICReq PDO %d", pdo)
		}
		if plen != nvme.TCPICReqSize {
			return layout{}, badField(nvme.TCPOffPLEN, "ICReq PLEN %d", plen)
		}
		return layout{rest: hlen - nvme.TCPCommonHeaderSize}, nil
	case nvme.TCPH2CTermReq:
		// No digests (TCP §3.6.2.4); the data is the PDU header the host
		// found in error.
		if plen < nvme.TCPTermReqHdrSize || plen > nvme.TCPTermReqHdrSize+nvme.TCPTermReqMaxData {
			return layout{}, badField(nvme.TCPOffPLEN, "H2CTermReq PLEN %d", plen)
		}
		return layout{rest: hlen - nvme.TCPCommonHeaderSize, data: int(plen) - hlen}, nil
	}
	flags := h.Flags()
	if flags&nvme.TCPFlagHDGST != 0 != f.hdgst {
		return layout{}, badField(nvme.TCPOffFlags, "HDGSTF %v, header digests negotiated %v", flags&nvme.TCPFlagHDGST != 0, f.hdgst)
	}
	hd := f.hdgstLen()
	l := layout{rest: hlen - nvme.TCPCommonHeaderSize + hd}
	if pdo == 0 {
		// No data.
		if flags&nvme.TCPFlagDDGST != 0 {
			return layout{}, badField(nvme.TCPOffFlags, "DDGSTF on a PDU without data")
		}
		if plen != uint32(hlen+hd) {
			return layout{}, badField(nvme.TCPOffPLEN, "PLEN %d of a PDU without data, want %d", plen, hlen+hd)
		}
		if typ == nvme.TCPH2CData {
			return layout{}, badField(nvme.TCPOffPDO, "H2CData without data")
		}
		return l, nil
	}
	// CPDA is 0: data at any dword after the header and its digest.
	if pdo < hlen+hd || pdo%4 != 0 {
		return layout{}, badField(nvme.TCPOffPDO, "PDO %d, want a multiple of 4 from %d", pdo, hlen+hd)
	}
	if flags&nvme.TCPFlagDDGST != 0 != f.ddgst {
		return layout{}, badField(nvme.TCPOffFlags, "DDGSTF %v, data digests negotiated %v", flags&nvme.TCPFlagDDGST != 0, f.ddgst)
	}
	dd := 0
	if f.ddgst {
		dd = nvme.TCPDigestSize
	}
	if plen <= uint32(pdo+dd) {
		return layout{}, badField(nvme.TCPOffPLEN, "PLEN %d leaves no data after PDO %d", plen, pdo)
	}
	data := plen - uint32(pdo+dd)
	limit := f.icd
	if typ == nvme.TCPH2CData {
		limit = f.maxH2C
	}
	if data > limit {
		return layout{}, &fatal{fes: nvme.TCPFESDataLimitExceeded, why: fmt.Sprintf("%d bytes of data in PDU type %#x, at most %d", data, typ, limit)}
	}
	l.pad = pdo - hlen - hd
	l.data = int(data)
	l.ddgst = f.ddgst
	return l, nil
}

// checkHeaderDigest checks the header digest that follows h's HLEN bytes.
func checkHeaderDigest(h nvme.TCPHeader, hlen int) *fatal {
	got := binary.LittleEndian.Uint32(h[hlen:])
	if want := digest(h[:hlen]); got != want {
		return &fatal{fes: nvme.TCPFESHeaderDigestError, why: fmt.Sprintf("header digest %#08x, computed %#08x", got, want)}
	}
	return nil
}

// icReq is what a host asked for in its ICReq.
type icReq struct {
	hpda         uint8
	hdgst, ddgst bool
	maxR2T       uint32 // 0's based
}

// checkICReq checks an ICReq's specific header (TCP §3.6.2.2).
func checkICReq(h nvme.TCPHeader) (icReq, *fatal) {
	if pfv := h.PFV(); pfv != nvme.TCPPFV10 {
		return icReq{}, &fatal{fes: nvme.TCPFESUnsupportedParameter, fei: nvme.TCPOffPFV, why: fmt.Sprintf("PDU format version %d", pfv)}
	}
	if hpda := h.PDA(); hpda > nvme.TCPMaxHPDA {
		return icReq{}, badField(nvme.TCPOffPDA, "HPDA %d", hpda)
	}
	d := h.DGST()
	return icReq{hpda: h.PDA(), hdgst: d&nvme.TCPDigestHeader != 0, ddgst: d&nvme.TCPDigestData != 0, maxR2T: h.MAXR2T()}, nil
}

// checkH2CData checks an H2CData header's data fields against its layout
// (TCP §3.6.2.7); the transfer it belongs to is checked by the connection.
func checkH2CData(h nvme.TCPHeader, l layout) *fatal {
	if n := h.DATAL(); n != uint32(l.data) {
		return badField(nvme.TCPOffDATAL, "DATAL %d, but the PDU holds %d bytes of data", n, l.data)
	}
	return nil
}

// c2hDataPDO is the data offset of the PDUs with data the target sends: the
// header and its digest, padded to the alignment the host asked for
// (HPDA, 0's based dwords).
func c2hDataPDO(hdgst bool, hpda uint8) int {
	n := nvme.TCPDataHdrSize
	if hdgst {
		n += nvme.TCPDigestSize
	}
	align := (int(hpda) + 1) * 4
	return (n + align - 1) / align * align
}
