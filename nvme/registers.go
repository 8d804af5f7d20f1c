package nvme

// Controller property offsets (base 1.4 §3.1; NVMe-oF §3 lists the subset
// fabrics controllers implement).
const (
	PropCAP  = 0x00
	PropVS   = 0x08
	PropCC   = 0x14
	PropCSTS = 0x1c
	PropNSSR = 0x20
)

// CAP is the Controller Capabilities property (base 1.4 §3.1.1).
type CAP uint64

const (
	capMQESMask    = 0xffff
	capCQR         = 1 << 16
	capTOShift     = 24
	capCSSShift    = 37
	capMPSMINShift = 48
	capMPSMAXShift = 52
)

// CAP.CSS bits.
const (
	CAPCSSNVM = 1 << 0 // NVM command set
)

// MakeCAP builds CAP. mqes is 0's based; to is in 500 ms units; css is the
// CSS field (CAPCSSNVM for the NVM command set); mpsmin and mpsmax are
// exponents of 2^(12+n).
func MakeCAP(mqes uint16, cqr bool, to uint8, css uint8, mpsmin, mpsmax uint8) CAP {
	c := CAP(mqes) | CAP(to)<<capTOShift | CAP(css)<<capCSSShift |
		CAP(mpsmin&0xf)<<capMPSMINShift | CAP(mpsmax&0xf)<<capMPSMAXShift
	if cqr {
		c |= capCQR
	}
	return c
}

// MQES returns Maximum Queue Entries Supported (0's based).
func (c CAP) MQES() uint16 { return uint16(c & capMQESMask) }

// CQR reports Contiguous Queues Required.
func (c CAP) CQR() bool { return c&capCQR != 0 }

// TO returns the Timeout in 500 ms units.
func (c CAP) TO() uint8 { return uint8(c >> capTOShift) }

// CSS returns Command Sets Supported.
func (c CAP) CSS() uint8 { return uint8(c >> capCSSShift) }

// MPSMIN returns Memory Page Size Minimum.
func (c CAP) MPSMIN() uint8 { return uint8(c>>capMPSMINShift) & 0xf }

// MPSMAX returns Memory Page Size Maximum.
func (c CAP) MPSMAX() uint8 { return uint8(c>>capMPSMAXShift) & 0xf }

// MakeVS builds a Version value (base 1.4 §3.1.2).
func MakeVS(major uint16, minor, tertiary uint8) uint32 {
	return uint32(major)<<16 | uint32(minor)<<8 | uint32(tertiary)
}

// Specification versions.
const (
	Version1_2 = 1<<16 | 2<<8
	Version1_3 = 1<<16 | 3<<8
	Version1_4 = 1<<16 | 4<<8
	Version2_0 = 2 << 16
)

// CC is the Controller Configuration property (base 1.4 §3.1.5).
type CC uint32

const (
	ccEN          = 1 << 0
	ccCSSShift    = 4
	ccMPSShift    = 7
	ccAMSShift    = 11
	ccSHNShift    = 14
	ccIOSQESShift = 16
	ccIOCQESShift = 20
)

// Shutdown Notification values, CC bits 15:14.
const (
	SHNNone   = 0
	SHNNormal = 1
	SHNAbrupt = 2
)

// Enabled reports CC.EN.
func (c CC) Enabled() bool { return c&ccEN != 0 }

// CSS returns I/O Command Set Selected, bits 6:4.
func (c CC) CSS() uint8 { return uint8(c>>ccCSSShift) & 7 }

// MPS returns Memory Page Size, bits 10:7 (page size 2^(12+MPS)).
func (c CC) MPS() uint8 { return uint8(c>>ccMPSShift) & 0xf }

// AMS returns Arbitration Mechanism Selected, bits 13:11.
func (c CC) AMS() uint8 { return uint8(c>>ccAMSShift) & 7 }

// SHN returns Shutdown Notification, bits 15:14.
func (c CC) SHN() uint8 { return uint8(c>>ccSHNShift) & 3 }

// IOSQES returns I/O Submission Queue Entry Size, bits 19:16 (2^n bytes).
func (c CC) IOSQES() uint8 { return uint8(c>>ccIOSQESShift) & 0xf }

// IOCQES returns I/O Completion Queue Entry Size, bits 23:20 (2^n bytes).
func (c CC) IOCQES() uint8 { return uint8(c>>ccIOCQESShift) & 0xf }

// CSTS is the Controller Status property (base 1.4 §3.1.6).
type CSTS uint32

// CSTS bits. They are untyped so they combine with a plain uint32 too.
const (
	CSTSReady         = 1 << 0
	CSTSFatal         = 1 << 1
	CSTSShstMask      = 3 << 2
	CSTSShstNormal    = 0 << 2
	CSTSShstOccurring = 1 << 2
	CSTSShstComplete  = 2 << 2
	CSTSNSSRO         = 1 << 4
	CSTSPP            = 1 << 5
)

// Ready reports CSTS.RDY.
func (s CSTS) Ready() bool { return s&CSTSReady != 0 }

// Fatal reports Controller Fatal Status.
func (s CSTS) Fatal() bool { return s&CSTSFatal != 0 }

// SHST returns Shutdown Status, bits 3:2.
func (s CSTS) SHST() uint8 { return uint8(s&CSTSShstMask) >> 2 }
