package nvme

import (
	"encoding/binary"
	"math"
)

// Queue entry sizes (base §4.2, §4.6). Fabrics fixes both (NVMe-oF §2).
const (
	CommandSize    = 64
	CompletionSize = 16

	// The same sizes as powers of two, as SQES, CQES and CC.IOSQES and
	// CC.IOCQES give them.
	CommandSizeShift    = 6
	CompletionSizeShift = 4
)

// Admin command opcodes (base §5).
const (
	OpAdminDeleteSQ     = 0x00
	OpAdminCreateSQ     = 0x01
	OpAdminGetLogPage   = 0x02
	OpAdminDeleteCQ     = 0x04
	OpAdminCreateCQ     = 0x05
	OpAdminIdentify     = 0x06
	OpAdminAbort        = 0x08
	OpAdminSetFeatures  = 0x09
	OpAdminGetFeatures  = 0x0a
	OpAdminAsyncEvent   = 0x0c
	OpAdminKeepAlive    = 0x18
	OpFabrics           = 0x7f // NVMe-oF §3.3, on any queue
	OpAdminFormatNVM    = 0x80
	OpAdminSecuritySend = 0x81
	OpAdminSecurityRecv = 0x82
)

// NVM command set I/O opcodes (base 1.4 §6).
const (
	OpFlush              = 0x00
	OpWrite              = 0x01
	OpRead               = 0x02
	OpWriteUncorrectable = 0x04
	OpCompare            = 0x05
	OpWriteZeroes        = 0x08
	OpDSM                = 0x09
	OpVerify             = 0x0c
	OpResvRegister       = 0x0d
	OpResvReport         = 0x0e
	OpResvAcquire        = 0x11
	OpResvRelease        = 0x15
)

// Fabrics command types, byte 4 of a fabrics command (NVMe-oF §3;
// Disconnect from base 2.0).
const (
	FCTypePropertySet = 0x00
	FCTypeConnect     = 0x01
	FCTypePropertyGet = 0x04
	FCTypeAuthSend    = 0x05
	FCTypeAuthRecv    = 0x06
	FCTypeDisconnect  = 0x08
)

// PRP or SGL for Data Transfer, CDW0 bits 15:14 (base §4.2).
// Fabrics requires SGLs (NVMe-oF §2).
const (
	PSDTPRP        = 0 // PRPs
	PSDTSGLContig  = 1 // SGLs; MPTR is the address of a contiguous buffer
	PSDTSGLSegment = 2 // SGLs; MPTR is the address of an SGL segment
)

// Data transfer directions encoded in opcode bits 1:0 (base §5).
const (
	DataDirNone          = 0
	DataDirHostToCtrl    = 1
	DataDirCtrlToHost    = 2
	DataDirBidirectional = 3
	opcodeDirMask        = 3
)

// OpcodeDataDirection returns the data transfer direction of a standard
// opcode: 00b none, 01b host to controller, 10b controller to host, 11b
// bidirectional (base §5). Fabrics commands encode the
// direction in FCTYPE bits 1:0 the same way (NVMe-oF §3.3).
func OpcodeDataDirection(op uint8) uint8 { return op & opcodeDirMask }

// Submission queue entry offsets (base §4.2).
const (
	cmdOpcode = 0
	cmdFlags  = 1
	cmdCID    = 2
	cmdNSID   = 4
	cmdMPTR   = 16
	cmdDPTR   = 24 // SGL1 for fabrics commands
	cmdCDW10  = 40
	cmdCDW11  = 44
	cmdCDW12  = 48
	cmdCDW13  = 52

	cmdFCType = 4 // fabrics commands (NVMe-oF §3.3)

	// Connect (NVMe-oF §3.3).
	connRECFMT = 40
	connQID    = 42
	connSQSize = 44
	connCATTR  = 46
	connKATO   = 48

	// Property Get / Property Set (NVMe-oF §3.4, §3.5).
	propAttrib = 40
	propOffset = 44
	propValue  = 48
)

// Parameter Error Location values (base 1.4 §5.14.1.1): the byte of the SQE
// holding the field in error, or ErrLocNone.
const (
	ErrLocNone           = 0xffff // not specific to a field
	ErrLocOpcode         = cmdOpcode
	ErrLocFlags          = cmdFlags // FUSE, PSDT
	ErrLocNSID           = cmdNSID
	ErrLocFCType         = cmdFCType
	ErrLocCDW10          = cmdCDW10
	ErrLocCDW11          = cmdCDW11
	ErrLocCDW12          = cmdCDW12
	ErrLocPropertySize   = propAttrib
	ErrLocPropertyOffset = propOffset
	ErrLocConnectQID     = connQID
	ErrLocConnectSQSize  = connSQSize
)

// Command is a view of a 64-byte submission queue entry (base §4.2). Its
// length must be at least CommandSize.
type Command []byte

// Opcode returns CDW0 bits 7:0.
func (c Command) Opcode() uint8 { return c[cmdOpcode] }

// SetOpcode sets CDW0 bits 7:0.
func (c Command) SetOpcode(op uint8) { c[cmdOpcode] = op }

// Flags returns CDW0 bits 15:8: PSDT in 7:6 and FUSE in 1:0.
func (c Command) Flags() uint8 { return c[cmdFlags] }

// SetFlags sets CDW0 bits 15:8.
func (c Command) SetFlags(f uint8) { c[cmdFlags] = f }

// PSDT returns the PRP or SGL for Data Transfer field.
func (c Command) PSDT() uint8 { return c[cmdFlags] >> 6 }

// FUSE returns the Fused Operation field (0 normal, 1 first, 2 second).
func (c Command) FUSE() uint8 { return c[cmdFlags] & 3 }

// CID returns the Command Identifier, CDW0 bits 31:16.
func (c Command) CID() uint16 { return binary.LittleEndian.Uint16(c[cmdCID:]) }

// SetCID sets the Command Identifier.
func (c Command) SetCID(v uint16) { binary.LittleEndian.PutUint16(c[cmdCID:], v) }

// NSIDAll is the broadcast NSID, every namespace (base 1.4 §6.1.6).
// FFFFFFFEh below it is not a valid NSID either.
const NSIDAll NSID = 0xffffffff

// MaxNSID is the largest NSID a namespace can have.
const MaxNSID NSID = NSIDAll - 2

// Valid reports whether n can be a namespace's NSID.
func (n NSID) Valid() bool { return n != 0 && n <= MaxNSID }

// NSID returns the Namespace Identifier, CDW1.
func (c Command) NSID() NSID { return NSID(binary.LittleEndian.Uint32(c[cmdNSID:])) }

// SetNSID sets the Namespace Identifier.
func (c Command) SetNSID(v NSID) { binary.LittleEndian.PutUint32(c[cmdNSID:], uint32(v)) }

// CDW returns command dword n (0..15), at byte 4n.
func (c Command) CDW(n int) uint32 { return binary.LittleEndian.Uint32(c[4*n:]) }

// SetCDW sets command dword n (0..15).
func (c Command) SetCDW(n int, v uint32) { binary.LittleEndian.PutUint32(c[4*n:], v) }

// MPTR returns the Metadata Pointer, CDW4-5.
func (c Command) MPTR() uint64 { return binary.LittleEndian.Uint64(c[cmdMPTR:]) }

// SGL1 returns the first SGL descriptor, CDW6-9 (base §4.2).
// The view aliases c.
func (c Command) SGL1() SGLDescriptor { return SGLDescriptor(c[cmdDPTR : cmdDPTR+SGLDescriptorSize]) }

// FCType returns the fabrics command type, byte 4 of a fabrics command.
func (c Command) FCType() uint8 { return c[cmdFCType] }

// SetFCType sets the fabrics command type.
func (c Command) SetFCType(t uint8) { c[cmdFCType] = t }

// ConnectRECFMT returns the Connect Record Format (NVMe-oF §3.3).
func (c Command) ConnectRECFMT() uint16 { return binary.LittleEndian.Uint16(c[connRECFMT:]) }

// ConnectQID returns the Connect Queue ID (0 for the admin queue).
func (c Command) ConnectQID() QID { return QID(binary.LittleEndian.Uint16(c[connQID:])) }

// ConnectSQSize returns the Connect Submission Queue Size (0's based).
func (c Command) ConnectSQSize() uint16 { return binary.LittleEndian.Uint16(c[connSQSize:]) }

// ConnectCATTR returns the Connect Attributes.
func (c Command) ConnectCATTR() uint8 { return c[connCATTR] }

// ConnectKATO returns the Keep Alive Timeout in milliseconds.
func (c Command) ConnectKATO() uint32 { return binary.LittleEndian.Uint32(c[connKATO:]) }

// SetConnect sets the Connect command fields. sqsize is 0's based.
func (c Command) SetConnect(recfmt uint16, qid QID, sqsize uint16, cattr uint8, kato uint32) {
	binary.LittleEndian.PutUint16(c[connRECFMT:], recfmt)
	binary.LittleEndian.PutUint16(c[connQID:], uint16(qid))
	binary.LittleEndian.PutUint16(c[connSQSize:], sqsize)
	c[connCATTR] = cattr
	c[connCATTR+1] = 0
	binary.LittleEndian.PutUint32(c[connKATO:], kato)
}

// Property sizes in ATTRIB bits 2:0 (NVMe-oF §3.4).
const (
	PropertySize4 = 0
	PropertySize8 = 1

	propSizeMask = 7
)

// PropertyAttrib returns the Property Get/Set ATTRIB byte; bits 2:0 give the
// size (0: 4 bytes, 1: 8 bytes).
func (c Command) PropertyAttrib() uint8 { return c[propAttrib] }

// PropertySize returns ATTRIB bits 2:0: PropertySize4 or PropertySize8.
func (c Command) PropertySize() uint8 { return c[propAttrib] & propSizeMask }

// PropertyOffset returns the property offset (OFST).
func (c Command) PropertyOffset() uint32 { return binary.LittleEndian.Uint32(c[propOffset:]) }

// PropertyValue returns the Property Set value.
func (c Command) PropertyValue() uint64 { return binary.LittleEndian.Uint64(c[propValue:]) }

// SetProperty sets the Property Get/Set fields.
func (c Command) SetProperty(attrib uint8, ofst uint32, value uint64) {
	c[propAttrib] = attrib
	binary.LittleEndian.PutUint32(c[propOffset:], ofst)
	binary.LittleEndian.PutUint64(c[propValue:], value)
}

// I/O command fields: Read, Write, Write Zeroes (base 1.4 §6).
const (
	ioNLBMask = 0xffff
	ioFUA     = 1 << 30 // CDW12 bit 30
	ioDEAC    = 1 << 25 // CDW12 bit 25, Write Zeroes
)

// SLBA returns the Starting LBA, CDW10-11.
func (c Command) SLBA() uint64 { return binary.LittleEndian.Uint64(c[cmdCDW10:]) }

// SetSLBA sets the Starting LBA.
func (c Command) SetSLBA(v uint64) { binary.LittleEndian.PutUint64(c[cmdCDW10:], v) }

// NumBlocks returns the number of logical blocks: the 0's based NLB field
// (CDW12 bits 15:0) plus one.
func (c Command) NumBlocks() uint32 { return c.CDW(12)&ioNLBMask + 1 }

// SetNumBlocks stores n-1 in NLB, keeping the other CDW12 bits. n must be in
// 1..65536.
func (c Command) SetNumBlocks(n uint32) {
	c.SetCDW(12, c.CDW(12)&^ioNLBMask|(n-1)&ioNLBMask)
}

// FUA reports Force Unit Access, CDW12 bit 30.
func (c Command) FUA() bool { return c.CDW(12)&ioFUA != 0 }

// DEAC reports the Write Zeroes Deallocate bit, CDW12 bit 25.
func (c Command) DEAC() bool { return c.CDW(12)&ioDEAC != 0 }

// CNS returns the Identify Controller or Namespace Structure, CDW10 bits 7:0
// (base 1.4 §5.15).
func (c Command) CNS() uint8 { return c[cmdCDW10] }

// CNTID returns the Identify Controller Identifier, CDW10 bits 31:16.
func (c Command) CNTID() CNTLID { return CNTLID(binary.LittleEndian.Uint16(c[cmdCDW10+2:])) }

// CSI returns the Identify Command Set Identifier, CDW11 bits 31:24
// (base 2.0 Identify command).
func (c Command) CSI() uint8 { return c[cmdCDW11+3] }

// SetIdentify sets CDW10 and CDW11 of an Identify command.
func (c Command) SetIdentify(cns uint8, cntid CNTLID, csi uint8) {
	c.SetCDW(10, uint32(cns)|uint32(cntid)<<16)
	c.SetCDW(11, uint32(csi)<<24)
}

// Get Log Page fields (base 1.4 §5.14).
const (
	logLSPShift = 8
	logLSPMask  = 0x7f // 2.0 widened LSP from bits 11:8 to 14:8
	logRAE      = 1 << 15
)

// LogPageID returns the Log Page Identifier, CDW10 bits 7:0.
func (c Command) LogPageID() uint8 { return c[cmdCDW10] }

// LogPageLSP returns the Log Specific Field, CDW10 bits 14:8. Base 1.4
// defines only bits 11:8 and reserves the rest, which hosts clear.
func (c Command) LogPageLSP() uint8 { return uint8(c.CDW(10)>>logLSPShift) & logLSPMask }

// LogPageRAE reports Retain Asynchronous Event, CDW10 bit 15.
func (c Command) LogPageRAE() bool { return c.CDW(10)&logRAE != 0 }

// LogPageNumDwords returns the number of dwords to transfer: the 0's based
// NUMD (NUMDU in CDW11 bits 15:0, NUMDL in CDW10 bits 31:16) plus one. The
// largest NUMD, 2^32 dwords, saturates at 2^32-1; no log page is that long.
func (c Command) LogPageNumDwords() uint32 {
	numd := uint32(binary.LittleEndian.Uint16(c[cmdCDW11:]))<<16 |
		uint32(binary.LittleEndian.Uint16(c[cmdCDW10+2:]))
	if numd == math.MaxUint32 {
		return numd
	}
	return numd + 1
}

// LogPageOffset returns the Log Page Offset in bytes, CDW12 (LPOL) and CDW13
// (LPOU).
func (c Command) LogPageOffset() uint64 { return binary.LittleEndian.Uint64(c[cmdCDW12:]) }

// SetGetLogPage sets LID, NUMD (from the 1's based numDwords) and the offset,
// clearing LSP and RAE.
func (c Command) SetGetLogPage(lid uint8, numDwords uint32, offset uint64) {
	numd := numDwords - 1
	c.SetCDW(10, uint32(lid)|(numd&0xffff)<<16)
	c.SetCDW(11, c.CDW(11)&^0xffff|numd>>16)
	binary.LittleEndian.PutUint64(c[cmdCDW12:], offset)
}

// Get/Set Features fields (base 1.4 §5.15 Get Features, §5.21 Set Features).
const (
	featSelShift = 8
	featSelMask  = 7
	featSave     = 1 << 31
)

// Get Features Select values.
const (
	FeatSelectCurrent   = 0
	FeatSelectDefault   = 1
	FeatSelectSaved     = 2
	FeatSelectSupported = 3
)

// FeatureID returns the Feature Identifier, CDW10 bits 7:0.
func (c Command) FeatureID() uint8 { return c[cmdCDW10] }

// FeatureSelect returns the Get Features Select field, CDW10 bits 10:8.
func (c Command) FeatureSelect() uint8 { return uint8(c.CDW(10)>>featSelShift) & featSelMask }

// FeatureSave reports the Set Features Save bit, CDW10 bit 31.
func (c Command) FeatureSave() bool { return c.CDW(10)&featSave != 0 }

// NumQueuesInvalid is the one NSQR or NCQR value a host may not ask for:
// 0's based FFFFh, 65536 queues (base 1.4 §5.21.1.7).
const NumQueuesInvalid = 0xffff

// NumQueues returns Set Features Number of Queues CDW11: the 0's based
// NSQR in bits 15:0 and NCQR in bits 31:16 (base 1.4 §5.21.1.7).
func (c Command) NumQueues() (nsqr, ncqr uint16) {
	v := c.CDW(11)
	return uint16(v), uint16(v >> 16)
}

// MakeNumQueuesResult builds the Number of Queues completion DW0 from 0's
// based NSQA and NCQA.
func MakeNumQueuesResult(nsqa, ncqa uint16) uint32 { return uint32(ncqa)<<16 | uint32(nsqa) }

// HostIDExtended reports Get Features Host Identifier EXHID, CDW11 bit 0:
// the 128-bit host identifier, the only one fabrics allows (NVMe-oF §4.1).
func (c Command) HostIDExtended() bool { return c.CDW(11)&1 != 0 }

// Dataset Management fields (base 1.4 §6.7).
const (
	dsmNRMask = 0xff
	dsmAD     = 1 << 2 // CDW11 Attribute - Deallocate
)

// DSMNumRanges returns the number of ranges: the 0's based NR (CDW10 bits
// 7:0) plus one.
func (c Command) DSMNumRanges() int { return int(c.CDW(10)&dsmNRMask) + 1 }

// DSMDeallocate reports the Attribute - Deallocate bit, CDW11 bit 2.
func (c Command) DSMDeallocate() bool { return c.CDW(11)&dsmAD != 0 }

// SetDSM sets the number of ranges (1..256) and the Deallocate attribute.
func (c Command) SetDSM(ranges int, deallocate bool) {
	c.SetCDW(10, uint32(ranges-1)&dsmNRMask)
	var a uint32
	if deallocate {
		a = dsmAD
	}
	c.SetCDW(11, a)
}

// Completion queue entry offsets (base §4.6).
const (
	cqeDW0    = 0
	cqeDW1    = 4
	cqeSQHD   = 8
	cqeSQID   = 10
	cqeCID    = 12
	cqeStatus = 14
)

// Completion is a view of a 16-byte completion queue entry (base §4.6). Its
// length must be at least CompletionSize.
type Completion []byte

// DW0 returns the command specific dword 0.
func (c Completion) DW0() uint32 { return binary.LittleEndian.Uint32(c[cqeDW0:]) }

// SetDW0 sets dword 0.
func (c Completion) SetDW0(v uint32) { binary.LittleEndian.PutUint32(c[cqeDW0:], v) }

// DW1 returns the command specific dword 1.
func (c Completion) DW1() uint32 { return binary.LittleEndian.Uint32(c[cqeDW1:]) }

// SetDW1 sets dword 1.
func (c Completion) SetDW1(v uint32) { binary.LittleEndian.PutUint32(c[cqeDW1:], v) }

// SetResult64 sets dwords 0 and 1 as one 64-bit value, as Property Get
// returns an 8-byte property (NVMe-oF §3.4).
func (c Completion) SetResult64(v uint64) { binary.LittleEndian.PutUint64(c[cqeDW0:], v) }

// SQHD returns the SQ Head Pointer.
func (c Completion) SQHD() uint16 { return binary.LittleEndian.Uint16(c[cqeSQHD:]) }

// SetSQHD sets the SQ Head Pointer.
func (c Completion) SetSQHD(v uint16) { binary.LittleEndian.PutUint16(c[cqeSQHD:], v) }

// SQID returns the SQ Identifier.
func (c Completion) SQID() QID { return QID(binary.LittleEndian.Uint16(c[cqeSQID:])) }

// SetSQID sets the SQ Identifier.
func (c Completion) SetSQID(v QID) { binary.LittleEndian.PutUint16(c[cqeSQID:], uint16(v)) }

// CID returns the Command Identifier.
func (c Completion) CID() uint16 { return binary.LittleEndian.Uint16(c[cqeCID:]) }

// SetCID sets the Command Identifier.
func (c Completion) SetCID(v uint16) { binary.LittleEndian.PutUint16(c[cqeCID:], v) }

// Status returns the Status Field, bits 15:1 of the last word.
func (c Completion) Status() Status {
	return Status(binary.LittleEndian.Uint16(c[cqeStatus:]) >> 1)
}

// SetStatus sets the Status Field and clears the Phase Tag, which fabrics
// does not use (NVMe-oF §2).
func (c Completion) SetStatus(s Status) {
	binary.LittleEndian.PutUint16(c[cqeStatus:], uint16(s&statusMask)<<1)
}

// Reset zeroes the entry.
func (c Completion) Reset() { clear(c[:CompletionSize]) }
