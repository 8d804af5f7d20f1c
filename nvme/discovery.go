package nvme

import "encoding/binary"

// Discovery log page sizes (NVMe-oF 1.1 §5.3).
const (
	DiscoveryLogHeaderSize = 1024
	DiscoveryLogEntrySize  = 1024
)

// Discovery log header offsets.
const (
	dlhGenCtr = 0
	dlhNumRec = 8
	dlhRecFmt = 16
)

// PutDiscoveryLogHeader zeroes b[:DiscoveryLogHeaderSize] and writes the
// generation counter, the record count and record format 0.
func PutDiscoveryLogHeader(b []byte, genctr, numrec uint64) {
	b = b[:DiscoveryLogHeaderSize]
	clear(b)
	binary.LittleEndian.PutUint64(b[dlhGenCtr:], genctr)
	binary.LittleEndian.PutUint64(b[dlhNumRec:], numrec)
}

// ParseDiscoveryLogHeader decodes b[:DiscoveryLogHeaderSize].
func ParseDiscoveryLogHeader(b []byte) (genctr, numrec uint64, recfmt uint16) {
	return binary.LittleEndian.Uint64(b[dlhGenCtr:]),
		binary.LittleEndian.Uint64(b[dlhNumRec:]),
		binary.LittleEndian.Uint16(b[dlhRecFmt:])
}

// Subsystem types, SUBTYPE (current discovery from base 2.0).
const (
	SubtypeReferral         = 1 // a referral to another discovery service
	SubtypeNVMe             = 2
	SubtypeCurrentDiscovery = 3
)

// Transport Requirements, TREQ.
const (
	TREQSecureChannelMask = 3
	TREQNotSpecified      = 0
	TREQRequired          = 1
	TREQNotRequired       = 2
	TREQDisableSQFlow     = 1 << 2 // controller may disable SQ flow control
)

// Entry flags, EFLAGS (base 2.0).
const (
	EFlagsDupRetInfo = 1 << 0
	EFlagsEPCSD      = 1 << 1
)

// RDMA Transport Specific Address Subtype values (NVMe-oF §7.3).
const (
	RDMAQPTypeConnected = 1
	RDMAQPTypeDatagram  = 2

	RDMAPRTypeNotSpecified = 1
	RDMAPRTypeIB           = 2
	RDMAPRTypeRoCE         = 3
	RDMAPRTypeRoCEv2       = 4
	RDMAPRTypeIWARP        = 5

	RDMACMSRDMACM = 1
)

// RDMA TSAS offsets.
const (
	tsasQPType = 0
	tsasPRType = 1
	tsasCMS    = 2
	tsasPKey   = 8
	tsasSize   = 256
)

// RDMATSAS builds the RDMA TSAS field.
func RDMATSAS(qptype, prtype, cms uint8, pkey uint16) [256]byte {
	var t [tsasSize]byte
	t[tsasQPType] = qptype
	t[tsasPRType] = prtype
	t[tsasCMS] = cms
	binary.LittleEndian.PutUint16(t[tsasPKey:], pkey)
	return t
}

// Discovery log entry offsets.
const (
	dleTRTYPE  = 0
	dleADRFAM  = 1
	dleSUBTYPE = 2
	dleTREQ    = 3
	dlePORTID  = 4
	dleCNTLID  = 6
	dleASQSZ   = 8
	dleEFLAGS  = 10
	dleTRSVCID = 32
	dleSUBNQN  = 256
	dleTRADDR  = 512
	dleTSAS    = 768

	trsvcidLen = 32
	traddrLen  = 256
)

// DiscoveryLogEntry is one Discovery Log Page Entry.
type DiscoveryLogEntry struct {
	TRTYPE, ADRFAM, SUBTYPE, TREQ uint8
	PORTID                        uint16
	CNTLID                        CNTLID // CNTLIDDynamic for the dynamic model
	ASQSZ                         uint16 // maximum admin SQ size
	EFLAGS                        uint16
	TRSVCID                       string // 32 bytes, space padded
	SubNQN                        string // 256 bytes, NUL padded
	TRADDR                        string // 256 bytes, space padded
	TSAS                          [256]byte
}

// MarshalTo zeroes b[:DiscoveryLogEntrySize] and writes e into it. Strings
// are truncated to their fields.
func (e *DiscoveryLogEntry) MarshalTo(b []byte) {
	b = b[:DiscoveryLogEntrySize]
	clear(b)
	le := binary.LittleEndian
	b[dleTRTYPE] = e.TRTYPE
	b[dleADRFAM] = e.ADRFAM
	b[dleSUBTYPE] = e.SUBTYPE
	b[dleTREQ] = e.TREQ
	le.PutUint16(b[dlePORTID:], e.PORTID)
	le.PutUint16(b[dleCNTLID:], uint16(e.CNTLID))
	le.PutUint16(b[dleASQSZ:], e.ASQSZ)
	le.PutUint16(b[dleEFLAGS:], e.EFLAGS)
	// TRSVCID and TRADDR are ASCII strings, space padded as SPDK does;
	// nvme-cli and Linux hosts strip trailing spaces and NULs alike.
	putPadded(b[dleTRSVCID:dleTRSVCID+trsvcidLen], e.TRSVCID, ' ')
	putPadded(b[dleSUBNQN:dleSUBNQN+NQNFieldSize], e.SubNQN, 0)
	putPadded(b[dleTRADDR:dleTRADDR+traddrLen], e.TRADDR, ' ')
	copy(b[dleTSAS:], e.TSAS[:])
}

// UnmarshalDiscoveryLogEntry decodes b[:DiscoveryLogEntrySize].
func UnmarshalDiscoveryLogEntry(b []byte) DiscoveryLogEntry {
	b = b[:DiscoveryLogEntrySize]
	le := binary.LittleEndian
	return DiscoveryLogEntry{
		TRTYPE:  b[dleTRTYPE],
		ADRFAM:  b[dleADRFAM],
		SUBTYPE: b[dleSUBTYPE],
		TREQ:    b[dleTREQ],
		PORTID:  le.Uint16(b[dlePORTID:]),
		CNTLID:  CNTLID(le.Uint16(b[dleCNTLID:])),
		ASQSZ:   le.Uint16(b[dleASQSZ:]),
		EFLAGS:  le.Uint16(b[dleEFLAGS:]),
		TRSVCID: asciiString(b[dleTRSVCID : dleTRSVCID+trsvcidLen]),
		SubNQN:  cString(b[dleSUBNQN : dleSUBNQN+NQNFieldSize]),
		TRADDR:  asciiString(b[dleTRADDR : dleTRADDR+traddrLen]),
		TSAS:    [256]byte(b[dleTSAS : dleTSAS+tsasSize]),
	}
}
