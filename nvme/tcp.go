package nvme

import "strconv"

// NVMe/TCP PDUs (NVMe/TCP Transport Specification 1.0, "TCP" below; it
// was NVMe-oF 1.1 §7.4). Every PDU starts with the 8-byte common header;
// the PDU-specific header follows, then an optional header digest, padding
// up to PDO, the data, and an optional data digest. HLEN counts the common
// and the specific header, PLEN the whole PDU.

// PDU types, the common header's PDU-Type (TCP §3.6.1).
const (
	TCPICReq       = 0x00
	TCPICResp      = 0x01
	TCPH2CTermReq  = 0x02
	TCPC2HTermReq  = 0x03
	TCPCapsuleCmd  = 0x04
	TCPCapsuleResp = 0x05
	TCPH2CData     = 0x06
	TCPC2HData     = 0x07
	TCPR2T         = 0x09
)

// Common header flags (TCP §3.6.1): HDGSTF and DDGSTF say a digest is
// present; LAST_PDU ends a data transfer (H2CData, C2HData); SUCCESS, on
// a C2HData's last PDU only, stands for a successful response capsule.
const (
	TCPFlagHDGST   = 1 << 0
	TCPFlagDDGST   = 1 << 1
	TCPFlagLast    = 1 << 2
	TCPFlagSuccess = 1 << 3
)

// Header lengths (HLEN) of each PDU type, and the digest length.
const (
	TCPCommonHeaderSize = 8
	TCPICReqSize        = 128 // ICReq and ICResp: HLEN = PLEN
	TCPTermReqHdrSize   = 24
	TCPCapsuleCmdHdr    = TCPCommonHeaderSize + CommandSize    // 72
	TCPCapsuleRespHdr   = TCPCommonHeaderSize + CompletionSize // 24
	TCPDataHdrSize      = 24                                   // H2CData, C2HData, R2T
	TCPDigestSize       = 4
	// TCPTermReqMaxData is the most of the offending PDU's header a
	// termination request carries (C2HTermReq PLEN is at most 152).
	TCPTermReqMaxData = 128
	// TCPMaxHdrSize is the longest header of any PDU type.
	TCPMaxHdrSize = TCPICReqSize
	// TCPMaxHPDA is the largest HPDA or CPDA: 0's based dwords, so PDO
	// is a multiple of up to 128 bytes.
	TCPMaxHPDA = 31
	// TCPMinMaxH2CData is the smallest MAXH2CDATA a controller may offer.
	TCPMinMaxH2CData = 4096
)

// ICReq and ICResp DGST bits.
const (
	TCPDigestHeader = 1 << 0
	TCPDigestData   = 1 << 1
)

// TCPPFV10 is the only PDU format version.
const TCPPFV10 = 0

// TCPFES is the Fatal Error Status of a termination request (TCP §3.6.2.4).
type TCPFES uint16

// Fatal error statuses. R2T Limit Exceeded (a host's H2CTermReq) and Data
// Transfer Limit Exceeded (a controller's C2HTermReq) share 05h.
const (
	TCPFESInvalidHeaderField   TCPFES = 0x01 // FEI: the byte offset of the field
	TCPFESPDUSequenceError     TCPFES = 0x02
	TCPFESHeaderDigestError    TCPFES = 0x03
	TCPFESDataOutOfRange       TCPFES = 0x04
	TCPFESDataLimitExceeded    TCPFES = 0x05
	TCPFESR2TLimitExceeded     TCPFES = 0x05
	TCPFESUnsupportedParameter TCPFES = 0x06 // FEI: the byte offset of the parameter
)

var tcpFESNames = [...]string{
	TCPFESInvalidHeaderField:   "invalid PDU header field",
	TCPFESPDUSequenceError:     "PDU sequence error",
	TCPFESHeaderDigestError:    "header digest error",
	TCPFESDataOutOfRange:       "data transfer out of range",
	TCPFESDataLimitExceeded:    "data transfer limit exceeded",
	TCPFESUnsupportedParameter: "unsupported parameter",
}

func (f TCPFES) String() string {
	if int(f) < len(tcpFESNames) && tcpFESNames[f] != "" {
		return tcpFESNames[f]
	}
	return "unknown fatal error status " + strconv.Itoa(int(f))
}

// TCP security types, TSAS byte 0 of a TCP port's discovery log entry.
const (
	TCPSecTypeNone  = 0
	TCPSecTypeTLS12 = 1
	TCPSecTypeTLS13 = 2
)

// TCPTSAS builds the TSAS field of a TCP port: its security type, the rest
// reserved.
func TCPTSAS(sectype uint8) [256]byte {
	var t [tsasSize]byte
	t[0] = sectype
	return t
}

// Byte offsets of the header fields a termination request may name (its
// FEI for an Invalid PDU Header Field or an Unsupported Parameter).
const (
	TCPOffType   = 0
	TCPOffFlags  = 1
	TCPOffHLEN   = 2
	TCPOffPDO    = 3
	TCPOffPLEN   = 4
	TCPOffPFV    = 8  // ICReq, ICResp
	TCPOffPDA    = 10 // ICReq's HPDA, ICResp's CPDA
	TCPOffMAXR2T = 12 // ICReq
	TCPOffCCCID  = 8  // H2CData, C2HData, R2T
	TCPOffTTAG   = 10 // H2CData, R2T
	TCPOffDATAO  = 12
	TCPOffDATAL  = 16
	TCPOffSQE    = 8 // CapsuleCmd; the CQE of a CapsuleResp
)

// Field offsets. Those past the common header are the PDU-specific
// header's, by PDU type.
const (
	tcpType  u8   = TCPOffType
	tcpFlags u8   = TCPOffFlags
	tcpHLEN  u8   = TCPOffHLEN
	tcpPDO   u8   = TCPOffPDO
	tcpPLEN  le32 = TCPOffPLEN

	icPFV    le16 = TCPOffPFV
	icPDA    u8   = TCPOffPDA
	icDGST   u8   = 11
	icMAXR2T le32 = TCPOffMAXR2T // ICReq: 0's based
	icMAXH2C le32 = 12           // ICResp: MAXH2CDATA

	termFES le16 = 8
	termFEI le32 = 10

	dataCCCID le16 = TCPOffCCCID
	dataTTAG  le16 = TCPOffTTAG  // H2CData and R2T
	dataDATAO le32 = TCPOffDATAO // R2TO in an R2T
	dataDATAL le32 = TCPOffDATAL // R2TL in an R2T

	capsuleSQE = TCPOffSQE
)

// TCPHeader is a view of a PDU's header: the common header and whatever of
// the specific header the type has. Its length must be at least
// TCPCommonHeaderSize, and for a type's accessors that type's HLEN.
type TCPHeader []byte

// Type returns the PDU-Type.
func (h TCPHeader) Type() uint8 { return tcpType.get(h) }

// Flags returns FLAGS.
func (h TCPHeader) Flags() uint8 { return tcpFlags.get(h) }

// HLEN returns the header length: the common and the PDU-specific header.
func (h TCPHeader) HLEN() uint8 { return tcpHLEN.get(h) }

// PDO returns the PDU data offset, 0 when the PDU carries no data.
func (h TCPHeader) PDO() uint8 { return tcpPDO.get(h) }

// PLEN returns the length of the whole PDU.
func (h TCPHeader) PLEN() uint32 { return tcpPLEN.get(h) }

// SetCommon writes the common header.
func (h TCPHeader) SetCommon(typ, flags, hlen, pdo uint8, plen uint32) {
	tcpType.set(h, typ)
	tcpFlags.set(h, flags)
	tcpHLEN.set(h, hlen)
	tcpPDO.set(h, pdo)
	tcpPLEN.set(h, plen)
}

// SetFlags sets FLAGS.
func (h TCPHeader) SetFlags(v uint8) { tcpFlags.set(h, v) }

// SetPLEN sets PLEN.
func (h TCPHeader) SetPLEN(v uint32) { tcpPLEN.set(h, v) }

// PFV returns an ICReq's or ICResp's PDU format version.
func (h TCPHeader) PFV() uint16 { return icPFV.get(h) }

// PDA returns an ICReq's HPDA or an ICResp's CPDA: the data alignment the
// sender wants of the other's PDUs, in 0's based dwords.
func (h TCPHeader) PDA() uint8 { return icPDA.get(h) }

// DGST returns an ICReq's or ICResp's digest bits (TCPDigestHeader,
// TCPDigestData).
func (h TCPHeader) DGST() uint8 { return icDGST.get(h) }

// MAXR2T returns an ICReq's most R2Ts outstanding per command, 0's based.
func (h TCPHeader) MAXR2T() uint32 { return icMAXR2T.get(h) }

// MAXH2CDATA returns an ICResp's largest H2CData PDU data, in bytes.
func (h TCPHeader) MAXH2CDATA() uint32 { return icMAXH2C.get(h) }

// SetICReq writes an ICReq's specific header.
func (h TCPHeader) SetICReq(pfv uint16, hpda, dgst uint8, maxr2t uint32) {
	icPFV.set(h, pfv)
	icPDA.set(h, hpda)
	icDGST.set(h, dgst)
	icMAXR2T.set(h, maxr2t)
}

// SetICResp writes an ICResp's specific header.
func (h TCPHeader) SetICResp(pfv uint16, cpda, dgst uint8, maxh2cdata uint32) {
	icPFV.set(h, pfv)
	icPDA.set(h, cpda)
	icDGST.set(h, dgst)
	icMAXH2C.set(h, maxh2cdata)
}

// FES returns a termination request's fatal error status.
func (h TCPHeader) FES() TCPFES { return TCPFES(termFES.get(h)) }

// FEI returns a termination request's fatal error information.
func (h TCPHeader) FEI() uint32 { return termFEI.get(h) }

// SetTermReq writes a termination request's specific header.
func (h TCPHeader) SetTermReq(fes TCPFES, fei uint32) {
	termFES.set(h, uint16(fes))
	termFEI.set(h, fei)
	clear(h[14:TCPTermReqHdrSize])
}

// SQE returns a CapsuleCmd's submission queue entry.
func (h TCPHeader) SQE() Command { return Command(h[capsuleSQE:TCPCapsuleCmdHdr]) }

// CQE returns a CapsuleResp's completion queue entry.
func (h TCPHeader) CQE() Completion { return Completion(h[capsuleSQE:TCPCapsuleRespHdr]) }

// CCCID returns the command identifier an H2CData, C2HData or R2T is for.
func (h TCPHeader) CCCID() uint16 { return dataCCCID.get(h) }

// TTAG returns the transfer tag of an R2T or of the H2CData that answers it.
func (h TCPHeader) TTAG() uint16 { return dataTTAG.get(h) }

// DATAO returns the data offset of an H2CData or C2HData; an R2T's R2TO.
func (h TCPHeader) DATAO() uint32 { return dataDATAO.get(h) }

// DATAL returns the data length of an H2CData or C2HData; an R2T's R2TL.
func (h TCPHeader) DATAL() uint32 { return dataDATAL.get(h) }

// SetData writes the specific header of an H2CData (ttag), a C2HData (ttag
// 0: reserved) or an R2T (offset and length are R2TO and R2TL).
func (h TCPHeader) SetData(cccid, ttag uint16, offset, length uint32) {
	dataCCCID.set(h, cccid)
	dataTTAG.set(h, ttag)
	dataDATAO.set(h, offset)
	dataDATAL.set(h, length)
	clear(h[20:TCPDataHdrSize])
}
