package nvme

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// IdentifyDataSize is the size of every Identify data structure (base 1.4
// §5.15.2).
const IdentifyDataSize = 4096

// Controller or Namespace Structure values, Identify CDW10 bits 7:0
// (base 1.4 §5.15.1; CNS 05h-08h from base 2.0).
const (
	CNSNamespace        = 0x00
	CNSController       = 0x01
	CNSActiveNSList     = 0x02
	CNSNSDescriptorList = 0x03
	CNSCSNamespace      = 0x05 // I/O command set specific namespace
	CNSCSController     = 0x06 // I/O command set specific controller
	CNSActiveNSListCS   = 0x07
	CNSNSIndependent    = 0x08 // I/O command set independent namespace
	CNSAllocatedNSList  = 0x10
	CNSControllerList   = 0x13
)

// Command Set Identifiers (base 2.0).
const (
	CSINVM = 0x00
	CSIKV  = 0x01
	CSIZNS = 0x02
)

// Controller types, CNTRLTYPE at byte 111 (base 1.4 §5.15.2).
const (
	ControllerTypeIO        = 1
	ControllerTypeDiscovery = 2
	ControllerTypeAdmin     = 3
)

// Identify Controller field bits (base 1.4 §5.15.2; SGLS keyed and offset
// bits from NVMe-oF §4.1).
const (
	CMICMultiController = 1 << 1 // the subsystem may have more than one controller

	OAESNSAttrNotices    = 1 << 8  // Namespace Attribute Notices
	OAESFWActivation     = 1 << 9  // Firmware Activation Notices
	OAESANAChange        = 1 << 11 // ANA Change Notices
	OAESDiscoveryChanged = 1 << 31 // Discovery Log Page Change Notices (NVMe-oF §5.3)

	CTRATTHostID128 = 1 << 0 // 128-bit Host Identifier

	FRMWSlot1ReadOnly = 1 << 0 // firmware slot 1 is read only
	FRMWSlotsShift    = 1      // number of firmware slots, bits 3:1

	LPAExtendedData = 1 << 2 // extended data for Get Log Page (NUMDU, offsets)

	ONCSCompare            = 1 << 0
	ONCSWriteUncorrectable = 1 << 1
	ONCSDSM                = 1 << 2
	ONCSWriteZeroes        = 1 << 3
	ONCSSaveSelect         = 1 << 4
	ONCSReservations       = 1 << 5
	ONCSTimestamp          = 1 << 6
	ONCSVerify             = 1 << 7

	VWCPresent = 1 << 0 // a volatile write cache is present

	SGLSSupported    = 1 << 0  // SGLs supported, no alignment (bits 1:0 = 01b)
	SGLSKeyed        = 1 << 2  // Keyed SGL Data Block descriptor
	SGLSOversized    = 1 << 18 // SGLs may describe more than the data
	SGLSOffsetInData = 1 << 20 // SGL Data Block Address may be an offset (in-capsule data)
)

// QueueEntrySizes builds SQES or CQES: the required and the maximum entry
// size as powers of two, in bits 3:0 and 7:4. Fabrics fixes both.
func QueueEntrySizes(log2 uint8) uint8 { return log2<<4 | log2 }

// DefaultMaxPower is the PSD0 Maximum Power written when
// IdentifyController.PSD0MaxPower is 0: 25 W in centiwatts.
const DefaultMaxPower = 2500

// Identify Controller offsets (base 1.4 §5.15.2; bytes 1792-2047 from
// NVMe-oF §4.1).
const (
	idcVID       = 0
	idcSSVID     = 2
	idcSN        = 4 // 20 bytes
	idcMN        = 24
	idcFR        = 64
	idcRAB       = 72
	idcIEEE      = 73
	idcCMIC      = 76
	idcMDTS      = 77
	idcCNTLID    = 78
	idcVER       = 80
	idcRTD3R     = 84
	idcRTD3E     = 88
	idcOAES      = 92
	idcCTRATT    = 96
	idcCNTRLTYPE = 111
	idcOACS      = 256
	idcACL       = 258
	idcAERL      = 259
	idcFRMW      = 260
	idcLPA       = 261
	idcELPE      = 262
	idcNPSS      = 263
	idcAVSCC     = 264
	idcAPSTA     = 265
	idcWCTEMP    = 266
	idcCCTEMP    = 268
	idcKAS       = 320
	idcSQES      = 512
	idcCQES      = 513
	idcMAXCMD    = 514
	idcNN        = 516
	idcONCS      = 520
	idcFUSES     = 522
	idcFNA       = 524
	idcVWC       = 525
	idcAWUN      = 526
	idcAWUPF     = 528
	idcNVSCC     = 530
	idcACWU      = 532
	idcSGLS      = 536
	idcMNAN      = 540
	idcSUBNQN    = 768
	idcIOCCSZ    = 1792
	idcIORCSZ    = 1796
	idcICDOFF    = 1800
	idcFCATT     = 1802
	idcMSDBD     = 1803
	idcOFCS      = 1804
	idcPSD0      = 2048 // 32 power state descriptors of 32 bytes

	snLen = 20
	mnLen = 40
	frLen = 8
)

// IdentifyController is the Identify Controller data structure (base 1.4
// §5.15.2). Strings are ASCII; SerialNumber, ModelNumber and
// FirmwareRevision are space padded, SubNQN is NUL padded.
type IdentifyController struct {
	VID, SSVID       uint16
	SerialNumber     string // 20 bytes
	ModelNumber      string // 40 bytes
	FirmwareRevision string // 8 bytes
	RAB              uint8
	IEEE             [3]byte
	CMIC             uint8
	MDTS             uint8 // 2^n minimum pages; 0 means no limit
	CNTLID           CNTLID
	Version          uint32
	RTD3R, RTD3E     uint32
	OAES             uint32
	CTRATT           uint32
	CNTRLTYPE        uint8 // ControllerType*
	OACS             uint16
	ACL, AERL        uint8 // 0's based
	FRMW, LPA        uint8
	ELPE             uint8 // 0's based
	NPSS             uint8 // 0's based
	AVSCC, APSTA     uint8
	WCTEMP, CCTEMP   uint16
	KAS              uint16 // Keep Alive Support, 100 ms units
	SQES, CQES       uint8
	MAXCMD           uint16
	NN               uint32
	ONCS             uint16
	FUSES            uint16
	FNA, VWC         uint8
	AWUN, AWUPF      uint16
	NVSCC            uint8
	ACWU             uint16
	SGLS             uint32
	MNAN             uint32
	SubNQN           string // 256 bytes
	IOCCSZ, IORCSZ   uint32 // 16-byte units
	ICDOFF           uint16
	FCATT            uint8
	MSDBD            uint8
	OFCS             uint16
	PSD0MaxPower     uint16 // centiwatts; 0 writes DefaultMaxPower
}

// MarshalTo zeroes b[:IdentifyDataSize] and writes id into it.
func (id *IdentifyController) MarshalTo(b []byte) {
	b = b[:IdentifyDataSize]
	clear(b)
	le := binary.LittleEndian
	le.PutUint16(b[idcVID:], id.VID)
	le.PutUint16(b[idcSSVID:], id.SSVID)
	putPadded(b[idcSN:idcSN+snLen], id.SerialNumber, ' ')
	putPadded(b[idcMN:idcMN+mnLen], id.ModelNumber, ' ')
	putPadded(b[idcFR:idcFR+frLen], id.FirmwareRevision, ' ')
	b[idcRAB] = id.RAB
	copy(b[idcIEEE:], id.IEEE[:])
	b[idcCMIC] = id.CMIC
	b[idcMDTS] = id.MDTS
	le.PutUint16(b[idcCNTLID:], uint16(id.CNTLID))
	le.PutUint32(b[idcVER:], id.Version)
	le.PutUint32(b[idcRTD3R:], id.RTD3R)
	le.PutUint32(b[idcRTD3E:], id.RTD3E)
	le.PutUint32(b[idcOAES:], id.OAES)
	le.PutUint32(b[idcCTRATT:], id.CTRATT)
	b[idcCNTRLTYPE] = id.CNTRLTYPE
	le.PutUint16(b[idcOACS:], id.OACS)
	b[idcACL] = id.ACL
	b[idcAERL] = id.AERL
	b[idcFRMW] = id.FRMW
	b[idcLPA] = id.LPA
	b[idcELPE] = id.ELPE
	b[idcNPSS] = id.NPSS
	b[idcAVSCC] = id.AVSCC
	b[idcAPSTA] = id.APSTA
	le.PutUint16(b[idcWCTEMP:], id.WCTEMP)
	le.PutUint16(b[idcCCTEMP:], id.CCTEMP)
	le.PutUint16(b[idcKAS:], id.KAS)
	b[idcSQES] = id.SQES
	b[idcCQES] = id.CQES
	le.PutUint16(b[idcMAXCMD:], id.MAXCMD)
	le.PutUint32(b[idcNN:], id.NN)
	le.PutUint16(b[idcONCS:], id.ONCS)
	le.PutUint16(b[idcFUSES:], id.FUSES)
	b[idcFNA] = id.FNA
	b[idcVWC] = id.VWC
	le.PutUint16(b[idcAWUN:], id.AWUN)
	le.PutUint16(b[idcAWUPF:], id.AWUPF)
	b[idcNVSCC] = id.NVSCC
	le.PutUint16(b[idcACWU:], id.ACWU)
	le.PutUint32(b[idcSGLS:], id.SGLS)
	le.PutUint32(b[idcMNAN:], id.MNAN)
	putPadded(b[idcSUBNQN:idcSUBNQN+NQNFieldSize], id.SubNQN, 0)
	le.PutUint32(b[idcIOCCSZ:], id.IOCCSZ)
	le.PutUint32(b[idcIORCSZ:], id.IORCSZ)
	le.PutUint16(b[idcICDOFF:], id.ICDOFF)
	b[idcFCATT] = id.FCATT
	b[idcMSDBD] = id.MSDBD
	le.PutUint16(b[idcOFCS:], id.OFCS)
	// PSD0 (Power State Descriptor 0): MP in bytes 1:0, MXPS (bit 0 of byte 3)
	// clear for 0.01 W units. The rest of PSD0 stays zero.
	mp := id.PSD0MaxPower
	if mp == 0 {
		mp = DefaultMaxPower
	}
	le.PutUint16(b[idcPSD0:], mp)
}

// UnmarshalIdentifyController decodes b[:IdentifyDataSize].
func UnmarshalIdentifyController(b []byte) IdentifyController {
	b = b[:IdentifyDataSize]
	le := binary.LittleEndian
	return IdentifyController{
		VID:              le.Uint16(b[idcVID:]),
		SSVID:            le.Uint16(b[idcSSVID:]),
		SerialNumber:     asciiString(b[idcSN : idcSN+snLen]),
		ModelNumber:      asciiString(b[idcMN : idcMN+mnLen]),
		FirmwareRevision: asciiString(b[idcFR : idcFR+frLen]),
		RAB:              b[idcRAB],
		IEEE:             [3]byte(b[idcIEEE : idcIEEE+3]),
		CMIC:             b[idcCMIC],
		MDTS:             b[idcMDTS],
		CNTLID:           CNTLID(le.Uint16(b[idcCNTLID:])),
		Version:          le.Uint32(b[idcVER:]),
		RTD3R:            le.Uint32(b[idcRTD3R:]),
		RTD3E:            le.Uint32(b[idcRTD3E:]),
		OAES:             le.Uint32(b[idcOAES:]),
		CTRATT:           le.Uint32(b[idcCTRATT:]),
		CNTRLTYPE:        b[idcCNTRLTYPE],
		OACS:             le.Uint16(b[idcOACS:]),
		ACL:              b[idcACL],
		AERL:             b[idcAERL],
		FRMW:             b[idcFRMW],
		LPA:              b[idcLPA],
		ELPE:             b[idcELPE],
		NPSS:             b[idcNPSS],
		AVSCC:            b[idcAVSCC],
		APSTA:            b[idcAPSTA],
		WCTEMP:           le.Uint16(b[idcWCTEMP:]),
		CCTEMP:           le.Uint16(b[idcCCTEMP:]),
		KAS:              le.Uint16(b[idcKAS:]),
		SQES:             b[idcSQES],
		CQES:             b[idcCQES],
		MAXCMD:           le.Uint16(b[idcMAXCMD:]),
		NN:               le.Uint32(b[idcNN:]),
		ONCS:             le.Uint16(b[idcONCS:]),
		FUSES:            le.Uint16(b[idcFUSES:]),
		FNA:              b[idcFNA],
		VWC:              b[idcVWC],
		AWUN:             le.Uint16(b[idcAWUN:]),
		AWUPF:            le.Uint16(b[idcAWUPF:]),
		NVSCC:            b[idcNVSCC],
		ACWU:             le.Uint16(b[idcACWU:]),
		SGLS:             le.Uint32(b[idcSGLS:]),
		MNAN:             le.Uint32(b[idcMNAN:]),
		SubNQN:           cString(b[idcSUBNQN : idcSUBNQN+NQNFieldSize]),
		IOCCSZ:           le.Uint32(b[idcIOCCSZ:]),
		IORCSZ:           le.Uint32(b[idcIORCSZ:]),
		ICDOFF:           le.Uint16(b[idcICDOFF:]),
		FCATT:            b[idcFCATT],
		MSDBD:            b[idcMSDBD],
		OFCS:             le.Uint16(b[idcOFCS:]),
		PSD0MaxPower:     le.Uint16(b[idcPSD0:]),
	}
}

// Identify Namespace offsets (base 1.4 §5.15.2).
const (
	idnNSZE     = 0
	idnNCAP     = 8
	idnNUSE     = 16
	idnNSFEAT   = 24
	idnNLBAF    = 25
	idnFLBAS    = 26
	idnMC       = 27
	idnDPC      = 28
	idnDPS      = 29
	idnNMIC     = 30
	idnRESCAP   = 31
	idnFPI      = 32
	idnDLFEAT   = 33
	idnNAWUN    = 34
	idnNAWUPF   = 36
	idnNACWU    = 38
	idnNABSN    = 40
	idnNABO     = 42
	idnNABSPF   = 44
	idnNOIOB    = 46
	idnNVMCAP   = 48 // 16 bytes
	idnNPWG     = 64
	idnNPWA     = 66
	idnNPDG     = 68
	idnNPDA     = 70
	idnNOWS     = 72
	idnANAGRPID = 92
	idnNSATTR   = 99
	idnNVMSETID = 100
	idnENDGID   = 102
	idnNGUID    = 104
	idnEUI64    = 120
	idnLBAF0    = 128

	lbafSize = 4
)

// Identify Namespace field bits (base 1.4 §5.15.2).
const (
	NMICShared = 1 << 0 // may be attached to more than one controller

	DLFEATReadZeroes             = 1 << 0 // deallocated blocks read as zeroes (bits 2:0 = 001b)
	DLFEATWriteZeroesDeallocates = 1 << 3 // Write Zeroes with DEAC deallocates
)

// MaxLBAFormats is the number of LBA Format entries: 16 in base 1.4, 64 in
// base 2.0, which uses bytes 192-383 that 1.4 reserved.
const MaxLBAFormats = 64

// LBAFormat is one LBA Format Data Structure (base 1.4 §5.15.2).
type LBAFormat struct {
	MS    uint16 // metadata bytes per block
	LBADS uint8  // block size is 2^LBADS
	RP    uint8  // relative performance, bits 1:0
}

// IdentifyNamespace is the Identify Namespace data structure for the NVM
// command set (base 1.4 §5.15.2).
type IdentifyNamespace struct {
	NSZE, NCAP, NUSE uint64
	NSFEAT           uint8
	NLBAF            uint8 // 0's based; see MarshalTo
	FLBAS            uint8
	MC, DPC, DPS     uint8
	NMIC, RESCAP     uint8
	FPI, DLFEAT      uint8
	NAWUN, NAWUPF    uint16
	NACWU            uint16
	NABSN, NABO      uint16
	NABSPF           uint16
	NOIOB            uint16
	NVMCAP           uint64 // low 64 bits of the 128-bit field
	NPWG, NPWA       uint16
	NPDG, NPDA       uint16
	NOWS             uint16
	ANAGRPID         uint32
	NSATTR           uint8
	NVMSETID, ENDGID uint16
	NGUID            [16]byte
	EUI64            [8]byte
	LBAFormats       []LBAFormat // up to MaxLBAFormats
}

// MarshalTo zeroes b[:IdentifyDataSize] and writes id into it. NLBAF is
// written as given, or as len(LBAFormats)-1 when it is zero.
func (id *IdentifyNamespace) MarshalTo(b []byte) {
	b = b[:IdentifyDataSize]
	clear(b)
	le := binary.LittleEndian
	le.PutUint64(b[idnNSZE:], id.NSZE)
	le.PutUint64(b[idnNCAP:], id.NCAP)
	le.PutUint64(b[idnNUSE:], id.NUSE)
	b[idnNSFEAT] = id.NSFEAT
	nlbaf := id.NLBAF
	if nlbaf == 0 && len(id.LBAFormats) > 1 {
		nlbaf = uint8(min(len(id.LBAFormats), MaxLBAFormats) - 1)
	}
	b[idnNLBAF] = nlbaf
	b[idnFLBAS] = id.FLBAS
	b[idnMC] = id.MC
	b[idnDPC] = id.DPC
	b[idnDPS] = id.DPS
	b[idnNMIC] = id.NMIC
	b[idnRESCAP] = id.RESCAP
	b[idnFPI] = id.FPI
	b[idnDLFEAT] = id.DLFEAT
	le.PutUint16(b[idnNAWUN:], id.NAWUN)
	le.PutUint16(b[idnNAWUPF:], id.NAWUPF)
	le.PutUint16(b[idnNACWU:], id.NACWU)
	le.PutUint16(b[idnNABSN:], id.NABSN)
	le.PutUint16(b[idnNABO:], id.NABO)
	le.PutUint16(b[idnNABSPF:], id.NABSPF)
	le.PutUint16(b[idnNOIOB:], id.NOIOB)
	le.PutUint64(b[idnNVMCAP:], id.NVMCAP)
	le.PutUint16(b[idnNPWG:], id.NPWG)
	le.PutUint16(b[idnNPWA:], id.NPWA)
	le.PutUint16(b[idnNPDG:], id.NPDG)
	le.PutUint16(b[idnNPDA:], id.NPDA)
	le.PutUint16(b[idnNOWS:], id.NOWS)
	le.PutUint32(b[idnANAGRPID:], id.ANAGRPID)
	b[idnNSATTR] = id.NSATTR
	le.PutUint16(b[idnNVMSETID:], id.NVMSETID)
	le.PutUint16(b[idnENDGID:], id.ENDGID)
	copy(b[idnNGUID:], id.NGUID[:])
	copy(b[idnEUI64:], id.EUI64[:])
	for i, f := range id.LBAFormats {
		if i == MaxLBAFormats {
			break
		}
		o := idnLBAF0 + i*lbafSize
		le.PutUint16(b[o:], f.MS)
		b[o+2] = f.LBADS
		b[o+3] = f.RP & 3
	}
}

// UnmarshalIdentifyNamespace decodes b[:IdentifyDataSize], with NLBAF+1 LBA
// formats.
func UnmarshalIdentifyNamespace(b []byte) IdentifyNamespace {
	b = b[:IdentifyDataSize]
	le := binary.LittleEndian
	id := IdentifyNamespace{
		NSZE:     le.Uint64(b[idnNSZE:]),
		NCAP:     le.Uint64(b[idnNCAP:]),
		NUSE:     le.Uint64(b[idnNUSE:]),
		NSFEAT:   b[idnNSFEAT],
		NLBAF:    b[idnNLBAF],
		FLBAS:    b[idnFLBAS],
		MC:       b[idnMC],
		DPC:      b[idnDPC],
		DPS:      b[idnDPS],
		NMIC:     b[idnNMIC],
		RESCAP:   b[idnRESCAP],
		FPI:      b[idnFPI],
		DLFEAT:   b[idnDLFEAT],
		NAWUN:    le.Uint16(b[idnNAWUN:]),
		NAWUPF:   le.Uint16(b[idnNAWUPF:]),
		NACWU:    le.Uint16(b[idnNACWU:]),
		NABSN:    le.Uint16(b[idnNABSN:]),
		NABO:     le.Uint16(b[idnNABO:]),
		NABSPF:   le.Uint16(b[idnNABSPF:]),
		NOIOB:    le.Uint16(b[idnNOIOB:]),
		NVMCAP:   le.Uint64(b[idnNVMCAP:]),
		NPWG:     le.Uint16(b[idnNPWG:]),
		NPWA:     le.Uint16(b[idnNPWA:]),
		NPDG:     le.Uint16(b[idnNPDG:]),
		NPDA:     le.Uint16(b[idnNPDA:]),
		NOWS:     le.Uint16(b[idnNOWS:]),
		ANAGRPID: le.Uint32(b[idnANAGRPID:]),
		NSATTR:   b[idnNSATTR],
		NVMSETID: le.Uint16(b[idnNVMSETID:]),
		ENDGID:   le.Uint16(b[idnENDGID:]),
		NGUID:    [16]byte(b[idnNGUID : idnNGUID+16]),
		EUI64:    [8]byte(b[idnEUI64 : idnEUI64+8]),
	}
	n := min(int(id.NLBAF)+1, MaxLBAFormats)
	id.LBAFormats = make([]LBAFormat, n)
	for i := range id.LBAFormats {
		o := idnLBAF0 + i*lbafSize
		id.LBAFormats[i] = LBAFormat{MS: le.Uint16(b[o:]), LBADS: b[o+2], RP: b[o+3] & 3}
	}
	return id
}

// MaxNSListEntries is the number of NSIDs an Active Namespace ID list holds.
const MaxNSListEntries = IdentifyDataSize / 4

// PutNSList zeroes b[:IdentifyDataSize] and writes up to 1024 NSIDs; unused
// entries stay zero (base 1.4 §5.15.2, CNS 02h). The caller supplies the
// increasing NSIDs greater than the command's NSID.
func PutNSList(b []byte, nsids []NSID) {
	b = b[:IdentifyDataSize]
	clear(b)
	for i, id := range nsids[:min(len(nsids), MaxNSListEntries)] {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(id))
	}
}

// Namespace Identifier Types and their lengths (base 1.4; CSI
// from base 2.0).
const (
	NIDTEUI64 = 0x1
	NIDTNGUID = 0x2
	NIDTUUID  = 0x3
	NIDTCSI   = 0x4

	NIDLEUI64 = 8
	NIDLNGUID = 16
	NIDLUUID  = 16
	NIDLCSI   = 1

	nsDescHeader = 4 // NIDT, NIDL, 2 reserved bytes
)

// NSDescriptors holds the Namespace Identification Descriptors of one
// namespace; nil fields are absent.
type NSDescriptors struct {
	EUI64 *[8]byte
	NGUID *[16]byte
	UUID  *[16]byte
	CSI   *uint8
}

// PutNSDescriptors zeroes b[:IdentifyDataSize] and writes the present
// descriptors in type order (base 1.4 §5.15.2, CNS 03h). The zeroed
// remainder ends the list.
func PutNSDescriptors(b []byte, d NSDescriptors) {
	b = b[:IdentifyDataSize]
	clear(b)
	o := 0
	put := func(nidt uint8, nid []byte) {
		b[o] = nidt
		b[o+1] = uint8(len(nid))
		o += nsDescHeader + copy(b[o+nsDescHeader:], nid)
	}
	if d.EUI64 != nil {
		put(NIDTEUI64, d.EUI64[:])
	}
	if d.NGUID != nil {
		put(NIDTNGUID, d.NGUID[:])
	}
	if d.UUID != nil {
		put(NIDTUUID, d.UUID[:])
	}
	if d.CSI != nil {
		put(NIDTCSI, []byte{*d.CSI})
	}
}

// ErrInvalidNSDescriptor is returned by ParseNSDescriptors for a list that
// breaks base 1.4 §5.15.2 (CNS 03h): a truncated or wrongly sized descriptor, or a
// type given twice.
var ErrInvalidNSDescriptor = errors.New("nvme: invalid namespace identification descriptor")

// ParseNSDescriptors decodes a Namespace Identification Descriptor list. It
// stops at a descriptor with NIDL 0 or at the end of b, and skips types it
// does not know.
func ParseNSDescriptors(b []byte) (NSDescriptors, error) {
	var d NSDescriptors
	for o := 0; o+nsDescHeader <= len(b); {
		nidt, nidl := b[o], int(b[o+1])
		if nidl == 0 {
			if nidt != 0 {
				return d, fmt.Errorf("type %d at offset %d has length 0: %w", nidt, o, ErrInvalidNSDescriptor)
			}
			break
		}
		start := o + nsDescHeader
		if start+nidl > len(b) {
			return d, fmt.Errorf("type %d at offset %d overruns the list: %w", nidt, o, ErrInvalidNSDescriptor)
		}
		nid := b[start : start+nidl]
		if want := nidLength(nidt); want != 0 && nidl != want {
			return d, fmt.Errorf("type %d has length %d, want %d: %w", nidt, nidl, nidLength(nidt), ErrInvalidNSDescriptor)
		}
		dup := false
		switch nidt {
		case NIDTEUI64:
			dup = d.EUI64 != nil
			v := [8]byte(nid)
			d.EUI64 = &v
		case NIDTNGUID:
			dup = d.NGUID != nil
			v := [16]byte(nid)
			d.NGUID = &v
		case NIDTUUID:
			dup = d.UUID != nil
			v := [16]byte(nid)
			d.UUID = &v
		case NIDTCSI:
			dup = d.CSI != nil
			v := nid[0]
			d.CSI = &v
		}
		if dup {
			return d, fmt.Errorf("type %d given twice: %w", nidt, ErrInvalidNSDescriptor)
		}
		o = start + nidl
	}
	return d, nil
}

// nidLength returns the NIDL of a known NIDT, 0 for others.
func nidLength(nidt uint8) int {
	switch nidt {
	case NIDTEUI64:
		return NIDLEUI64
	case NIDTNGUID:
		return NIDLNGUID
	case NIDTUUID:
		return NIDLUUID
	case NIDTCSI:
		return NIDLCSI
	}
	return 0
}
