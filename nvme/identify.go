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

// IdentifyController is a view of the Identify Controller data structure
// (base 1.4 §5.15.2.1; bytes 1792-2047 from NVMe-oF §4.1). Its length must be
// at least IdentifyDataSize. Each field has a getter named for it and a
// setter, both reading its one offset constant below, which also notes units
// and 0's based values. Setters leave the other bytes as they are: a caller
// fills a zeroed buffer.
type IdentifyController []byte

// Identify Controller fields, one constant each.
const (
	idcVID       le16 = 0
	idcSSVID     le16 = 2
	idcRAB       u8   = 72
	idcIEEE           = 73 // 3 bytes
	idcCMIC      u8   = 76
	idcMDTS      u8   = 77 // 2^n minimum pages; 0: no limit
	idcCNTLID    le16 = 78
	idcVER       le32 = 80
	idcRTD3R     le32 = 84
	idcRTD3E     le32 = 88
	idcOAES      le32 = 92
	idcCTRATT    le32 = 96
	idcCNTRLTYPE u8   = 111 // ControllerType*
	idcOACS      le16 = 256
	idcACL       u8   = 258 // 0's based
	idcAERL      u8   = 259 // 0's based
	idcFRMW      u8   = 260
	idcLPA       u8   = 261
	idcELPE      u8   = 262 // 0's based
	idcNPSS      u8   = 263 // 0's based
	idcAVSCC     u8   = 264
	idcAPSTA     u8   = 265
	idcWCTEMP    le16 = 266
	idcCCTEMP    le16 = 268
	idcKAS       le16 = 320 // 100 ms units
	idcANATT     u8   = 342 // seconds
	idcANACAP    u8   = 343 // ANACAP*
	idcANAGRPMAX le32 = 344
	idcNANAGRPID le32 = 348
	idcSQES      u8   = 512 // see QueueEntrySizes
	idcCQES      u8   = 513 // see QueueEntrySizes
	idcMAXCMD    le16 = 514
	idcNN        le32 = 516
	idcONCS      le16 = 520
	idcFUSES     le16 = 522
	idcFNA       u8   = 524
	idcVWC       u8   = 525
	idcAWUN      le16 = 526
	idcAWUPF     le16 = 528
	idcNVSCC     u8   = 530
	idcACWU      le16 = 532
	idcSGLS      le32 = 536
	idcMNAN      le32 = 540
	idcIOCCSZ    le32 = 1792 // 16-byte units
	idcIORCSZ    le32 = 1796 // 16-byte units
	idcICDOFF    le16 = 1800
	idcFCATT     u8   = 1802
	idcMSDBD     u8   = 1803
	idcOFCS      le16 = 1804
	idcPSD0           = 2048 // MaxPowerStates descriptors of PowerStateSize bytes
)

// Identify Controller strings: ASCII, SN, MN and FR space padded, SUBNQN
// NUL padded.
var (
	idcSN     = text{off: 4, len: 20, pad: ' '}
	idcMN     = text{off: 24, len: 40, pad: ' '}
	idcFR     = text{off: 64, len: 8, pad: ' '}
	idcSUBNQN = text{off: 768, len: NQNFieldSize}
)

func (id IdentifyController) VID() uint16                  { return idcVID.get(id) }
func (id IdentifyController) SetVID(v uint16)              { idcVID.set(id, v) }
func (id IdentifyController) SSVID() uint16                { return idcSSVID.get(id) }
func (id IdentifyController) SetSSVID(v uint16)            { idcSSVID.set(id, v) }
func (id IdentifyController) SerialNumber() string         { return idcSN.get(id) }
func (id IdentifyController) SetSerialNumber(s string)     { idcSN.set(id, s) }
func (id IdentifyController) ModelNumber() string          { return idcMN.get(id) }
func (id IdentifyController) SetModelNumber(s string)      { idcMN.set(id, s) }
func (id IdentifyController) FirmwareRevision() string     { return idcFR.get(id) }
func (id IdentifyController) SetFirmwareRevision(s string) { idcFR.set(id, s) }
func (id IdentifyController) RAB() uint8                   { return idcRAB.get(id) }
func (id IdentifyController) SetRAB(v uint8)               { idcRAB.set(id, v) }
func (id IdentifyController) IEEE() [3]byte                { return [3]byte(id[idcIEEE:]) }
func (id IdentifyController) SetIEEE(v [3]byte)            { copy(id[idcIEEE:], v[:]) }
func (id IdentifyController) CMIC() uint8                  { return idcCMIC.get(id) }
func (id IdentifyController) SetCMIC(v uint8)              { idcCMIC.set(id, v) }
func (id IdentifyController) MDTS() uint8                  { return idcMDTS.get(id) }
func (id IdentifyController) SetMDTS(v uint8)              { idcMDTS.set(id, v) }
func (id IdentifyController) CNTLID() CNTLID               { return CNTLID(idcCNTLID.get(id)) }
func (id IdentifyController) SetCNTLID(v CNTLID)           { idcCNTLID.set(id, uint16(v)) }
func (id IdentifyController) Version() uint32              { return idcVER.get(id) }
func (id IdentifyController) SetVersion(v uint32)          { idcVER.set(id, v) }
func (id IdentifyController) RTD3R() uint32                { return idcRTD3R.get(id) }
func (id IdentifyController) SetRTD3R(v uint32)            { idcRTD3R.set(id, v) }
func (id IdentifyController) RTD3E() uint32                { return idcRTD3E.get(id) }
func (id IdentifyController) SetRTD3E(v uint32)            { idcRTD3E.set(id, v) }
func (id IdentifyController) OAES() uint32                 { return idcOAES.get(id) }
func (id IdentifyController) SetOAES(v uint32)             { idcOAES.set(id, v) }
func (id IdentifyController) CTRATT() uint32               { return idcCTRATT.get(id) }
func (id IdentifyController) SetCTRATT(v uint32)           { idcCTRATT.set(id, v) }
func (id IdentifyController) CNTRLTYPE() uint8             { return idcCNTRLTYPE.get(id) }
func (id IdentifyController) SetCNTRLTYPE(v uint8)         { idcCNTRLTYPE.set(id, v) }
func (id IdentifyController) OACS() uint16                 { return idcOACS.get(id) }
func (id IdentifyController) SetOACS(v uint16)             { idcOACS.set(id, v) }
func (id IdentifyController) ACL() uint8                   { return idcACL.get(id) }
func (id IdentifyController) SetACL(v uint8)               { idcACL.set(id, v) }
func (id IdentifyController) AERL() uint8                  { return idcAERL.get(id) }
func (id IdentifyController) SetAERL(v uint8)              { idcAERL.set(id, v) }
func (id IdentifyController) FRMW() uint8                  { return idcFRMW.get(id) }
func (id IdentifyController) SetFRMW(v uint8)              { idcFRMW.set(id, v) }
func (id IdentifyController) LPA() uint8                   { return idcLPA.get(id) }
func (id IdentifyController) SetLPA(v uint8)               { idcLPA.set(id, v) }
func (id IdentifyController) ELPE() uint8                  { return idcELPE.get(id) }
func (id IdentifyController) SetELPE(v uint8)              { idcELPE.set(id, v) }
func (id IdentifyController) NPSS() uint8                  { return idcNPSS.get(id) }
func (id IdentifyController) SetNPSS(v uint8)              { idcNPSS.set(id, v) }
func (id IdentifyController) AVSCC() uint8                 { return idcAVSCC.get(id) }
func (id IdentifyController) SetAVSCC(v uint8)             { idcAVSCC.set(id, v) }
func (id IdentifyController) APSTA() uint8                 { return idcAPSTA.get(id) }
func (id IdentifyController) SetAPSTA(v uint8)             { idcAPSTA.set(id, v) }
func (id IdentifyController) WCTEMP() uint16               { return idcWCTEMP.get(id) }
func (id IdentifyController) SetWCTEMP(v uint16)           { idcWCTEMP.set(id, v) }
func (id IdentifyController) CCTEMP() uint16               { return idcCCTEMP.get(id) }
func (id IdentifyController) SetCCTEMP(v uint16)           { idcCCTEMP.set(id, v) }
func (id IdentifyController) KAS() uint16                  { return idcKAS.get(id) }
func (id IdentifyController) SetKAS(v uint16)              { idcKAS.set(id, v) }
func (id IdentifyController) ANATT() uint8                 { return idcANATT.get(id) }
func (id IdentifyController) SetANATT(v uint8)             { idcANATT.set(id, v) }
func (id IdentifyController) ANACAP() uint8                { return idcANACAP.get(id) }
func (id IdentifyController) SetANACAP(v uint8)            { idcANACAP.set(id, v) }
func (id IdentifyController) ANAGRPMAX() uint32            { return idcANAGRPMAX.get(id) }
func (id IdentifyController) SetANAGRPMAX(v uint32)        { idcANAGRPMAX.set(id, v) }
func (id IdentifyController) NANAGRPID() uint32            { return idcNANAGRPID.get(id) }
func (id IdentifyController) SetNANAGRPID(v uint32)        { idcNANAGRPID.set(id, v) }
func (id IdentifyController) SQES() uint8                  { return idcSQES.get(id) }
func (id IdentifyController) SetSQES(v uint8)              { idcSQES.set(id, v) }
func (id IdentifyController) CQES() uint8                  { return idcCQES.get(id) }
func (id IdentifyController) SetCQES(v uint8)              { idcCQES.set(id, v) }
func (id IdentifyController) MAXCMD() uint16               { return idcMAXCMD.get(id) }
func (id IdentifyController) SetMAXCMD(v uint16)           { idcMAXCMD.set(id, v) }
func (id IdentifyController) NN() uint32                   { return idcNN.get(id) }
func (id IdentifyController) SetNN(v uint32)               { idcNN.set(id, v) }
func (id IdentifyController) ONCS() uint16                 { return idcONCS.get(id) }
func (id IdentifyController) SetONCS(v uint16)             { idcONCS.set(id, v) }
func (id IdentifyController) FUSES() uint16                { return idcFUSES.get(id) }
func (id IdentifyController) SetFUSES(v uint16)            { idcFUSES.set(id, v) }
func (id IdentifyController) FNA() uint8                   { return idcFNA.get(id) }
func (id IdentifyController) SetFNA(v uint8)               { idcFNA.set(id, v) }
func (id IdentifyController) VWC() uint8                   { return idcVWC.get(id) }
func (id IdentifyController) SetVWC(v uint8)               { idcVWC.set(id, v) }
func (id IdentifyController) AWUN() uint16                 { return idcAWUN.get(id) }
func (id IdentifyController) SetAWUN(v uint16)             { idcAWUN.set(id, v) }
func (id IdentifyController) AWUPF() uint16                { return idcAWUPF.get(id) }
func (id IdentifyController) SetAWUPF(v uint16)            { idcAWUPF.set(id, v) }
func (id IdentifyController) NVSCC() uint8                 { return idcNVSCC.get(id) }
func (id IdentifyController) SetNVSCC(v uint8)             { idcNVSCC.set(id, v) }
func (id IdentifyController) ACWU() uint16                 { return idcACWU.get(id) }
func (id IdentifyController) SetACWU(v uint16)             { idcACWU.set(id, v) }
func (id IdentifyController) SGLS() uint32                 { return idcSGLS.get(id) }
func (id IdentifyController) SetSGLS(v uint32)             { idcSGLS.set(id, v) }
func (id IdentifyController) MNAN() uint32                 { return idcMNAN.get(id) }
func (id IdentifyController) SetMNAN(v uint32)             { idcMNAN.set(id, v) }
func (id IdentifyController) SubNQN() string               { return idcSUBNQN.get(id) }
func (id IdentifyController) SetSubNQN(s string)           { idcSUBNQN.set(id, s) }
func (id IdentifyController) IOCCSZ() uint32               { return idcIOCCSZ.get(id) }
func (id IdentifyController) SetIOCCSZ(v uint32)           { idcIOCCSZ.set(id, v) }
func (id IdentifyController) IORCSZ() uint32               { return idcIORCSZ.get(id) }
func (id IdentifyController) SetIORCSZ(v uint32)           { idcIORCSZ.set(id, v) }
func (id IdentifyController) ICDOFF() uint16               { return idcICDOFF.get(id) }
func (id IdentifyController) SetICDOFF(v uint16)           { idcICDOFF.set(id, v) }
func (id IdentifyController) FCATT() uint8                 { return idcFCATT.get(id) }
func (id IdentifyController) SetFCATT(v uint8)             { idcFCATT.set(id, v) }
func (id IdentifyController) MSDBD() uint8                 { return idcMSDBD.get(id) }
func (id IdentifyController) SetMSDBD(v uint8)             { idcMSDBD.set(id, v) }
func (id IdentifyController) OFCS() uint16                 { return idcOFCS.get(id) }
func (id IdentifyController) SetOFCS(v uint16)             { idcOFCS.set(id, v) }

// PSD returns a view of Power State Descriptor i, i < MaxPowerStates.
func (id IdentifyController) PSD(i int) PowerState {
	o := idcPSD0 + i*PowerStateSize
	return PowerState(id[o : o+PowerStateSize])
}

// Power State Descriptors (base 1.4 §5.15.2.1, Figure 249).
const (
	MaxPowerStates = 32
	PowerStateSize = 32

	psdMP le16 = 0 // Maximum Power, centiwatts
)

// PowerState is a view of one Power State Descriptor. Only MP is defined
// here: MXPS (byte 3 bit 0) clear gives it in units of 0.01 W.
type PowerState []byte

func (p PowerState) MP() uint16     { return psdMP.get(p) }
func (p PowerState) SetMP(v uint16) { psdMP.set(p, v) }

// Identify Namespace field bits (base 1.4 §5.15.2).
const (
	NMICShared = 1 << 0 // may be attached to more than one controller

	DLFEATReadZeroes             = 1 << 0 // deallocated blocks read as zeroes (bits 2:0 = 001b)
	DLFEATWriteZeroesDeallocates = 1 << 3 // Write Zeroes with DEAC deallocates
)

// MaxLBAFormats is the number of LBA Format entries: 16 in base 1.4, 64 in
// base 2.0, which uses bytes 192-383 that 1.4 reserved.
const MaxLBAFormats = 64

// IdentifyNamespace is a view of the Identify Namespace data structure for
// the NVM command set (base 1.4 §5.15.2.2). Its length must be at least
// IdentifyDataSize. Its accessors are as IdentifyController's.
type IdentifyNamespace []byte

// Identify Namespace fields, one constant each.
const (
	idnNSZE     le64 = 0
	idnNCAP     le64 = 8
	idnNUSE     le64 = 16
	idnNSFEAT   u8   = 24
	idnNLBAF    u8   = 25 // 0's based number of LBA formats
	idnFLBAS    u8   = 26
	idnMC       u8   = 27
	idnDPC      u8   = 28
	idnDPS      u8   = 29
	idnNMIC     u8   = 30
	idnRESCAP   u8   = 31
	idnFPI      u8   = 32
	idnDLFEAT   u8   = 33
	idnNAWUN    le16 = 34
	idnNAWUPF   le16 = 36
	idnNACWU    le16 = 38
	idnNABSN    le16 = 40
	idnNABO     le16 = 42
	idnNABSPF   le16 = 44
	idnNOIOB    le16 = 46
	idnNVMCAP   le64 = 48 // low half of 16 bytes
	idnNPWG     le16 = 64
	idnNPWA     le16 = 66
	idnNPDG     le16 = 68
	idnNPDA     le16 = 70
	idnNOWS     le16 = 72
	idnANAGRPID le32 = 92
	idnNSATTR   u8   = 99
	idnNVMSETID le16 = 100
	idnENDGID   le16 = 102
	idnNGUID         = 104 // 16 bytes
	idnEUI64         = 120 // 8 bytes
	idnLBAF0         = 128 // MaxLBAFormats formats of LBAFormatSize bytes
)

func (id IdentifyNamespace) NSZE() uint64         { return idnNSZE.get(id) }
func (id IdentifyNamespace) SetNSZE(v uint64)     { idnNSZE.set(id, v) }
func (id IdentifyNamespace) NCAP() uint64         { return idnNCAP.get(id) }
func (id IdentifyNamespace) SetNCAP(v uint64)     { idnNCAP.set(id, v) }
func (id IdentifyNamespace) NUSE() uint64         { return idnNUSE.get(id) }
func (id IdentifyNamespace) SetNUSE(v uint64)     { idnNUSE.set(id, v) }
func (id IdentifyNamespace) NSFEAT() uint8        { return idnNSFEAT.get(id) }
func (id IdentifyNamespace) SetNSFEAT(v uint8)    { idnNSFEAT.set(id, v) }
func (id IdentifyNamespace) NLBAF() uint8         { return idnNLBAF.get(id) }
func (id IdentifyNamespace) SetNLBAF(v uint8)     { idnNLBAF.set(id, v) }
func (id IdentifyNamespace) FLBAS() uint8         { return idnFLBAS.get(id) }
func (id IdentifyNamespace) SetFLBAS(v uint8)     { idnFLBAS.set(id, v) }
func (id IdentifyNamespace) MC() uint8            { return idnMC.get(id) }
func (id IdentifyNamespace) SetMC(v uint8)        { idnMC.set(id, v) }
func (id IdentifyNamespace) DPC() uint8           { return idnDPC.get(id) }
func (id IdentifyNamespace) SetDPC(v uint8)       { idnDPC.set(id, v) }
func (id IdentifyNamespace) DPS() uint8           { return idnDPS.get(id) }
func (id IdentifyNamespace) SetDPS(v uint8)       { idnDPS.set(id, v) }
func (id IdentifyNamespace) NMIC() uint8          { return idnNMIC.get(id) }
func (id IdentifyNamespace) SetNMIC(v uint8)      { idnNMIC.set(id, v) }
func (id IdentifyNamespace) RESCAP() uint8        { return idnRESCAP.get(id) }
func (id IdentifyNamespace) SetRESCAP(v uint8)    { idnRESCAP.set(id, v) }
func (id IdentifyNamespace) FPI() uint8           { return idnFPI.get(id) }
func (id IdentifyNamespace) SetFPI(v uint8)       { idnFPI.set(id, v) }
func (id IdentifyNamespace) DLFEAT() uint8        { return idnDLFEAT.get(id) }
func (id IdentifyNamespace) SetDLFEAT(v uint8)    { idnDLFEAT.set(id, v) }
func (id IdentifyNamespace) NAWUN() uint16        { return idnNAWUN.get(id) }
func (id IdentifyNamespace) SetNAWUN(v uint16)    { idnNAWUN.set(id, v) }
func (id IdentifyNamespace) NAWUPF() uint16       { return idnNAWUPF.get(id) }
func (id IdentifyNamespace) SetNAWUPF(v uint16)   { idnNAWUPF.set(id, v) }
func (id IdentifyNamespace) NACWU() uint16        { return idnNACWU.get(id) }
func (id IdentifyNamespace) SetNACWU(v uint16)    { idnNACWU.set(id, v) }
func (id IdentifyNamespace) NABSN() uint16        { return idnNABSN.get(id) }
func (id IdentifyNamespace) SetNABSN(v uint16)    { idnNABSN.set(id, v) }
func (id IdentifyNamespace) NABO() uint16         { return idnNABO.get(id) }
func (id IdentifyNamespace) SetNABO(v uint16)     { idnNABO.set(id, v) }
func (id IdentifyNamespace) NABSPF() uint16       { return idnNABSPF.get(id) }
func (id IdentifyNamespace) SetNABSPF(v uint16)   { idnNABSPF.set(id, v) }
func (id IdentifyNamespace) NOIOB() uint16        { return idnNOIOB.get(id) }
func (id IdentifyNamespace) SetNOIOB(v uint16)    { idnNOIOB.set(id, v) }
func (id IdentifyNamespace) NVMCAP() uint64       { return idnNVMCAP.get(id) }
func (id IdentifyNamespace) SetNVMCAP(v uint64)   { idnNVMCAP.set(id, v) }
func (id IdentifyNamespace) NPWG() uint16         { return idnNPWG.get(id) }
func (id IdentifyNamespace) SetNPWG(v uint16)     { idnNPWG.set(id, v) }
func (id IdentifyNamespace) NPWA() uint16         { return idnNPWA.get(id) }
func (id IdentifyNamespace) SetNPWA(v uint16)     { idnNPWA.set(id, v) }
func (id IdentifyNamespace) NPDG() uint16         { return idnNPDG.get(id) }
func (id IdentifyNamespace) SetNPDG(v uint16)     { idnNPDG.set(id, v) }
func (id IdentifyNamespace) NPDA() uint16         { return idnNPDA.get(id) }
func (id IdentifyNamespace) SetNPDA(v uint16)     { idnNPDA.set(id, v) }
func (id IdentifyNamespace) NOWS() uint16         { return idnNOWS.get(id) }
func (id IdentifyNamespace) SetNOWS(v uint16)     { idnNOWS.set(id, v) }
func (id IdentifyNamespace) ANAGRPID() uint32     { return idnANAGRPID.get(id) }
func (id IdentifyNamespace) SetANAGRPID(v uint32) { idnANAGRPID.set(id, v) }
func (id IdentifyNamespace) NSATTR() uint8        { return idnNSATTR.get(id) }
func (id IdentifyNamespace) SetNSATTR(v uint8)    { idnNSATTR.set(id, v) }
func (id IdentifyNamespace) NVMSETID() uint16     { return idnNVMSETID.get(id) }
func (id IdentifyNamespace) SetNVMSETID(v uint16) { idnNVMSETID.set(id, v) }
func (id IdentifyNamespace) ENDGID() uint16       { return idnENDGID.get(id) }
func (id IdentifyNamespace) SetENDGID(v uint16)   { idnENDGID.set(id, v) }
func (id IdentifyNamespace) NGUID() [16]byte      { return [16]byte(id[idnNGUID:]) }
func (id IdentifyNamespace) SetNGUID(v [16]byte)  { copy(id[idnNGUID:], v[:]) }
func (id IdentifyNamespace) EUI64() [8]byte       { return [8]byte(id[idnEUI64:]) }
func (id IdentifyNamespace) SetEUI64(v [8]byte)   { copy(id[idnEUI64:], v[:]) }

// LBAF returns a view of LBA Format i, i < MaxLBAFormats; NLBAF+1 of them
// are valid.
func (id IdentifyNamespace) LBAF(i int) LBAFormat {
	o := idnLBAF0 + i*LBAFormatSize
	return LBAFormat(id[o : o+LBAFormatSize])
}

// LBA Format Data Structure (base 1.4 §5.15.2.2, Figure 246).
const (
	LBAFormatSize = 4

	lbafMS     le16 = 0 // metadata bytes per block
	lbafLBADS  u8   = 2 // block size is 2^LBADS
	lbafRP          = 3 // relative performance, bits 1:0; 7:2 reserved
	lbafRPMask      = 3
)

// LBAFormat is a view of one LBA Format.
type LBAFormat []byte

func (f LBAFormat) MS() uint16       { return lbafMS.get(f) }
func (f LBAFormat) SetMS(v uint16)   { lbafMS.set(f, v) }
func (f LBAFormat) LBADS() uint8     { return lbafLBADS.get(f) }
func (f LBAFormat) SetLBADS(v uint8) { lbafLBADS.set(f, v) }
func (f LBAFormat) RP() uint8        { return f[lbafRP] & lbafRPMask }
func (f LBAFormat) SetRP(v uint8)    { f[lbafRP] = v & lbafRPMask }

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
