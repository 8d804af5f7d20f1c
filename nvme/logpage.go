package nvme

import "encoding/binary"

// Log Page Identifiers (base 1.4 §5.14.1; NVMe-oF §5.3 for
// Discovery).
const (
	LogSupportedPages = 0x00 // base 2.0
	LogError          = 0x01
	LogSMART          = 0x02
	LogFirmwareSlot   = 0x03
	LogChangedNSList  = 0x04
	LogCommandEffects = 0x05
	LogDiscovery      = 0x70
)

// Log page sizes.
const (
	ErrorLogEntrySize     = 64
	SMARTLogSize          = 512
	FirmwareSlotLogSize   = 512
	ChangedNSListSize     = 4096
	SupportedLogPagesSize = 1024 // 256 LID Supported and Effects dwords
	CommandEffectsLogSize = 4096
)

// Error Information Log Entry offsets (base 1.4 §5.14.1.1).
const (
	errCount     = 0
	errSQID      = 8
	errCID       = 10
	errStatus    = 12 // Status Field in bits 15:1, Phase Tag in bit 0
	errParamLoc  = 14
	errLBA       = 16
	errNSID      = 24
	errVS        = 28
	errTRTYPE    = 29
	errCmdInfo   = 32
	errTransInfo = 40
)

// ErrorLogEntry is one Error Information Log Entry.
type ErrorLogEntry struct {
	ErrorCount         uint64 // unique, increasing; 0 marks an empty entry
	SQID               QID
	CID                uint16
	Status             Status
	ParamErrorLocation uint16 // byte in bits 7:0, bit in bits 10:8
	LBA                uint64
	NSID               NSID
	VS                 uint8
	TRTYPE             uint8 // 0 unless the error is a transport one
	CommandSpecific    uint64
	TransportSpecific  uint16
}

// MarshalTo zeroes b[:ErrorLogEntrySize] and writes e into it.
func (e *ErrorLogEntry) MarshalTo(b []byte) {
	b = b[:ErrorLogEntrySize]
	clear(b)
	le := binary.LittleEndian
	le.PutUint64(b[errCount:], e.ErrorCount)
	le.PutUint16(b[errSQID:], uint16(e.SQID))
	le.PutUint16(b[errCID:], e.CID)
	le.PutUint16(b[errStatus:], uint16(e.Status&statusMask)<<1)
	le.PutUint16(b[errParamLoc:], e.ParamErrorLocation)
	le.PutUint64(b[errLBA:], e.LBA)
	le.PutUint32(b[errNSID:], uint32(e.NSID))
	b[errVS] = e.VS
	b[errTRTYPE] = e.TRTYPE
	le.PutUint64(b[errCmdInfo:], e.CommandSpecific)
	le.PutUint16(b[errTransInfo:], e.TransportSpecific)
}

// UnmarshalErrorLogEntry decodes b[:ErrorLogEntrySize].
func UnmarshalErrorLogEntry(b []byte) ErrorLogEntry {
	b = b[:ErrorLogEntrySize]
	le := binary.LittleEndian
	return ErrorLogEntry{
		ErrorCount:         le.Uint64(b[errCount:]),
		SQID:               QID(le.Uint16(b[errSQID:])),
		CID:                le.Uint16(b[errCID:]),
		Status:             Status(le.Uint16(b[errStatus:]) >> 1),
		ParamErrorLocation: le.Uint16(b[errParamLoc:]),
		LBA:                le.Uint64(b[errLBA:]),
		NSID:               NSID(le.Uint32(b[errNSID:])),
		VS:                 b[errVS],
		TRTYPE:             b[errTRTYPE],
		CommandSpecific:    le.Uint64(b[errCmdInfo:]),
		TransportSpecific:  le.Uint16(b[errTransInfo:]),
	}
}

// SMART / Health Information offsets (base 1.4 §5.14.1.2). The
// counters are 128-bit fields.
const (
	smartCritical    = 0
	smartTemperature = 1
	smartSpare       = 3
	smartSpareThresh = 4
	smartUsed        = 5
	smartDUR         = 32
	smartDUW         = 48
	smartHRC         = 64
	smartHWC         = 80
	smartBusy        = 96
	smartPowerCycles = 112
	smartPOH         = 128
	smartUnsafe      = 144
	smartMediaErrors = 160
	smartErrEntries  = 176
)

// SMARTLog is the SMART / Health Information log page. The 128-bit
// counters carry their low 64 bits; the high halves are written as zero.
type SMARTLog struct {
	CriticalWarning         uint8
	Temperature             uint16 // Kelvin
	AvailableSpare          uint8  // percent
	AvailableSpareThreshold uint8
	PercentageUsed          uint8
	DataUnitsRead           uint64 // thousands of 512-byte units
	DataUnitsWritten        uint64
	HostReadCommands        uint64
	HostWriteCommands       uint64
	ControllerBusyTime      uint64 // minutes
	PowerCycles             uint64
	PowerOnHours            uint64
	UnsafeShutdowns         uint64
	MediaErrors             uint64
	NumErrLogEntries        uint64
}

// MarshalTo zeroes b[:SMARTLogSize] and writes l into it.
func (l *SMARTLog) MarshalTo(b []byte) {
	b = b[:SMARTLogSize]
	clear(b)
	le := binary.LittleEndian
	b[smartCritical] = l.CriticalWarning
	le.PutUint16(b[smartTemperature:], l.Temperature)
	b[smartSpare] = l.AvailableSpare
	b[smartSpareThresh] = l.AvailableSpareThreshold
	b[smartUsed] = l.PercentageUsed
	le.PutUint64(b[smartDUR:], l.DataUnitsRead)
	le.PutUint64(b[smartDUW:], l.DataUnitsWritten)
	le.PutUint64(b[smartHRC:], l.HostReadCommands)
	le.PutUint64(b[smartHWC:], l.HostWriteCommands)
	le.PutUint64(b[smartBusy:], l.ControllerBusyTime)
	le.PutUint64(b[smartPowerCycles:], l.PowerCycles)
	le.PutUint64(b[smartPOH:], l.PowerOnHours)
	le.PutUint64(b[smartUnsafe:], l.UnsafeShutdowns)
	le.PutUint64(b[smartMediaErrors:], l.MediaErrors)
	le.PutUint64(b[smartErrEntries:], l.NumErrLogEntries)
}

// UnmarshalSMARTLog decodes b[:SMARTLogSize], keeping the low 64 bits of
// each counter.
func UnmarshalSMARTLog(b []byte) SMARTLog {
	b = b[:SMARTLogSize]
	le := binary.LittleEndian
	return SMARTLog{
		CriticalWarning:         b[smartCritical],
		Temperature:             le.Uint16(b[smartTemperature:]),
		AvailableSpare:          b[smartSpare],
		AvailableSpareThreshold: b[smartSpareThresh],
		PercentageUsed:          b[smartUsed],
		DataUnitsRead:           le.Uint64(b[smartDUR:]),
		DataUnitsWritten:        le.Uint64(b[smartDUW:]),
		HostReadCommands:        le.Uint64(b[smartHRC:]),
		HostWriteCommands:       le.Uint64(b[smartHWC:]),
		ControllerBusyTime:      le.Uint64(b[smartBusy:]),
		PowerCycles:             le.Uint64(b[smartPowerCycles:]),
		PowerOnHours:            le.Uint64(b[smartPOH:]),
		UnsafeShutdowns:         le.Uint64(b[smartUnsafe:]),
		MediaErrors:             le.Uint64(b[smartMediaErrors:]),
		NumErrLogEntries:        le.Uint64(b[smartErrEntries:]),
	}
}

// Firmware Slot Information offsets (base 1.4 §5.14.1.3).
const (
	fwAFI  = 0
	fwFRS1 = 8
	frsLen = 8
)

// FirmwareSlotLog is the Firmware Slot Information log page. FRS[i] is the
// revision in slot i+1; an empty string leaves the slot's field zero.
type FirmwareSlotLog struct {
	AFI uint8 // active slot in bits 2:0, next-reset slot in bits 6:4
	FRS [7]string
}

// MarshalTo zeroes b[:FirmwareSlotLogSize] and writes l into it; revisions
// are space padded ASCII like Identify Controller FR.
func (l *FirmwareSlotLog) MarshalTo(b []byte) {
	b = b[:FirmwareSlotLogSize]
	clear(b)
	b[fwAFI] = l.AFI
	for i, r := range l.FRS {
		if r != "" {
			o := fwFRS1 + i*frsLen
			putPadded(b[o:o+frsLen], r, ' ')
		}
	}
}

// UnmarshalFirmwareSlotLog decodes b[:FirmwareSlotLogSize].
func UnmarshalFirmwareSlotLog(b []byte) FirmwareSlotLog {
	l := FirmwareSlotLog{AFI: b[fwAFI]}
	for i := range l.FRS {
		o := fwFRS1 + i*frsLen
		l.FRS[i] = asciiString(b[o : o+frsLen])
	}
	return l
}

// MaxChangedNSEntries is the number of NSIDs the Changed Namespace List holds.
const MaxChangedNSEntries = ChangedNSListSize / 4

// PutChangedNSList zeroes b[:ChangedNSListSize] and writes nsids. With more
// than 1024 the list is the single entry FFFFFFFFh (base 1.4 §5.14.1.4).
func PutChangedNSList(b []byte, nsids []NSID) {
	b = b[:ChangedNSListSize]
	clear(b)
	if len(nsids) > MaxChangedNSEntries {
		binary.LittleEndian.PutUint32(b, uint32(NSIDAll))
		return
	}
	for i, id := range nsids {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(id))
	}
}

// LID Supported and Effects bits (base 2.0 Supported Log Pages).
const (
	LIDSupported = 1 << 0 // LSUPP
	LIDIOS       = 1 << 1 // Index Offset Supported
)

// PutSupportedLogPages zeroes b[:SupportedLogPagesSize] and marks each LID
// supported in its dword.
func PutSupportedLogPages(b []byte, lids []uint8) {
	b = b[:SupportedLogPagesSize]
	clear(b)
	for _, lid := range lids {
		binary.LittleEndian.PutUint32(b[4*int(lid):], LIDSupported)
	}
}

// Commands Supported and Effects log page (base 1.4 §5.14.1.5): 256 admin
// dwords then 256 I/O dwords.
const (
	EffectsCSUPP = 1 << 0 // command supported
	EffectsLBCC  = 1 << 1 // logical block content change
	EffectsNCC   = 1 << 2 // namespace capability change
	EffectsNIC   = 1 << 3 // namespace inventory change
	EffectsCCC   = 1 << 4 // controller capability change

	effectsIOBase = 1024
)

// PutCommandEffects zeroes b[:CommandEffectsLogSize] and writes the effects
// of the given admin and I/O opcodes.
func PutCommandEffects(b []byte, admin, io map[uint8]uint32) {
	b = b[:CommandEffectsLogSize]
	clear(b)
	for op, e := range admin {
		binary.LittleEndian.PutUint32(b[4*int(op):], e)
	}
	for op, e := range io {
		binary.LittleEndian.PutUint32(b[effectsIOBase+4*int(op):], e)
	}
}

// Asynchronous Event types, completion DW0 bits 2:0 (base 1.4 §5.2).
const (
	AsyncEventTypeError  = 0
	AsyncEventTypeSMART  = 1
	AsyncEventTypeNotice = 2
	AsyncEventTypeIO     = 6 // I/O command specific status
	AsyncEventTypeVendor = 7
)

// Notice event information, DW0 bits 15:8 (base 1.4; NVMe-oF
// §5.3 for the discovery log change).
const (
	AsyncInfoNSAttrChanged        = 0x00
	AsyncInfoFWActivationStarting = 0x01
	AsyncInfoANAChange            = 0x03
	AsyncInfoDiscoveryChanged     = 0xf0
)

// Asynchronous Event Configuration bits, Set Features FID 0Bh (base 1.4
// §5.21.1.11; discovery change from NVMe-oF §5.3).
const (
	AECNSAttrNotices    = 1 << 8
	AECFWActivation     = 1 << 9
	AECANAChange        = 1 << 11
	AECDiscoveryChanged = 1 << 31
)

// MakeAsyncEventResult builds the Asynchronous Event Request completion DW0:
// type in bits 2:0, information in 15:8 and the log page to read in 23:16.
func MakeAsyncEventResult(typ, info, lid uint8) uint32 {
	return uint32(typ&7) | uint32(info)<<8 | uint32(lid)<<16
}
