package nvme

import (
	"encoding/binary"
	"fmt"
)

// Reservations (base 2.0 §8.19; the commands in the NVM Command Set
// §7.6-7.9).

// ResvType is a reservation type, RTYPE.
type ResvType uint8

// Reservation types.
const (
	ResvNone                   ResvType = 0
	ResvWriteExclusive         ResvType = 1
	ResvExclusiveAccess        ResvType = 2
	ResvWriteExclusiveRegOnly  ResvType = 3
	ResvExclusiveAccessRegOnly ResvType = 4
	ResvWriteExclusiveAllRegs  ResvType = 5
	ResvExclusiveAccessAllRegs ResvType = 6
)

// Valid reports whether t is one of the six types.
func (t ResvType) Valid() bool { return t >= ResvWriteExclusive && t <= ResvExclusiveAccessAllRegs }

// AllRegistrants reports a type under which every registrant holds the
// reservation.
func (t ResvType) AllRegistrants() bool {
	return t == ResvWriteExclusiveAllRegs || t == ResvExclusiveAccessAllRegs
}

// RegistrantsOnly reports a type that lets registrants in (all but 1 and 2).
func (t ResvType) RegistrantsOnly() bool { return t.Valid() && t > ResvExclusiveAccess }

// ExclusiveAccess reports a type that keeps non-registrants from reading
// too (2, 4, 6).
func (t ResvType) ExclusiveAccess() bool { return t.Valid() && t%2 == 0 }

var resvTypeNames = [...]string{"none", "write-exclusive", "exclusive-access", "write-exclusive-registrants-only",
	"exclusive-access-registrants-only", "write-exclusive-all-registrants", "exclusive-access-all-registrants"}

func (t ResvType) String() string {
	if int(t) < len(resvTypeNames) {
		return resvTypeNames[t]
	}
	return fmt.Sprintf("reservation type %d", uint8(t))
}

// Reservation command CDW10 fields.
const (
	resvActionMask = 0x7    // RREGA, RACQA, RRELA: bits 2:0
	resvIEKEY      = 1 << 3 // Ignore Existing Key
	resvTypeShift  = 8      // RTYPE: bits 15:8 (Acquire, Release)
	resvCPTPLShift = 30     // CPTPL: bits 31:30 (Register)
)

// Register actions (RREGA).
const (
	ResvRegister   = 0
	ResvUnregister = 1
	ResvReplace    = 2
)

// Acquire actions (RACQA).
const (
	ResvAcquire         = 0
	ResvPreempt         = 1
	ResvPreemptAndAbort = 2
)

// Release actions (RRELA).
const (
	ResvRelease = 0
	ResvClear   = 1
)

// Change Persist Through Power Loss State (CPTPL) values.
const (
	CPTPLNoChange = 0
	CPTPLClear    = 2
	CPTPLSet      = 3
)

// ResvAction is the command's action: RREGA, RACQA or RRELA.
func (c Command) ResvAction() uint8 { return uint8(c.CDW(10) & resvActionMask) }

// ResvIEKEY reports Ignore Existing Key.
func (c Command) ResvIEKEY() bool { return c.CDW(10)&resvIEKEY != 0 }

// ResvType is RTYPE of Acquire and Release.
func (c Command) ResvType() ResvType { return ResvType(c.CDW(10) >> resvTypeShift) }

// ResvCPTPL is Register's CPTPL.
func (c Command) ResvCPTPL() uint8 { return uint8(c.CDW(10) >> resvCPTPLShift) }

// SetResv sets a reservation command's CDW10: action, IEKEY, RTYPE and CPTPL.
func (c Command) SetResv(action uint8, iekey bool, t ResvType, cptpl uint8) {
	v := uint32(action&resvActionMask) | uint32(t)<<resvTypeShift | uint32(cptpl)<<resvCPTPLShift
	if iekey {
		v |= resvIEKEY
	}
	c.SetCDW(10, v)
}

// ResvReportExtended reports Report's EDS (CDW11 bit 0): 128-bit host IDs.
func (c Command) ResvReportExtended() bool { return c.CDW(11)&1 != 0 }

// ResvReportNumDwords is Report's transfer size in dwords (NUMD+1).
func (c Command) ResvReportNumDwords() uint32 { return c.CDW(10) + 1 }

// Data sizes of the reservation commands: two keys (Register: CRKEY, NRKEY;
// Acquire: CRKEY, PRKEY), or one (Release: CRKEY).
const (
	ResvKeysSize = 16
	ResvKeySize  = 8
)

// ResvKeys reads the keys of a Register, Acquire or Release data buffer.
func ResvKeys(b []byte) (k1, k2 uint64) {
	k1 = binary.LittleEndian.Uint64(b)
	if len(b) >= ResvKeysSize {
		k2 = binary.LittleEndian.Uint64(b[8:])
	}
	return k1, k2
}

// Reservation Status data structure (Report): a header, then a
// registered controller structure per registrant. The extended one (EDS)
// has a 64-byte header and 64-byte entries with 128-bit host IDs.
const (
	resvGen    = 0 // le32
	resvRType  = 4
	resvRegCtl = 5 // le16
	resvPTPLS  = 9

	ResvStatusHeaderSize    = 24
	ResvStatusHeaderSizeExt = 64
	ResvRegCtlSize          = 24
	ResvRegCtlSizeExt       = 64

	regCNTLID    = 0 // le16
	regRCSTS     = 2
	regHostID    = 8  // regular: 8 bytes
	regRKey      = 16 // regular
	regRKeyExt   = 8
	regHostIDExt = 16 // extended: 16 bytes
)

// ResvRegistrant is one registered controller (or host) of a report.
type ResvRegistrant struct {
	CNTLID CNTLID
	Holder bool // RCSTS bit 0
	HostID [16]byte
	Key    uint64
}

// ResvStatus is a Reservation Report's data.
type ResvStatus struct {
	Gen         uint32
	Type        ResvType
	PTPL        bool
	Registrants []ResvRegistrant
}

// ResvStatusSize is the size of the report of s.
func ResvStatusSize(s *ResvStatus, extended bool) int {
	if extended {
		return ResvStatusHeaderSizeExt + len(s.Registrants)*ResvRegCtlSizeExt
	}
	return ResvStatusHeaderSize + len(s.Registrants)*ResvRegCtlSize
}

// PutResvStatus writes s into b, which holds ResvStatusSize bytes. The
// regular format carries the low 8 bytes of each host ID.
func PutResvStatus(b []byte, s *ResvStatus, extended bool) {
	le := binary.LittleEndian
	hdr, entry := ResvStatusHeaderSize, ResvRegCtlSize
	if extended {
		hdr, entry = ResvStatusHeaderSizeExt, ResvRegCtlSizeExt
	}
	clear(b[:ResvStatusSize(s, extended)])
	le.PutUint32(b[resvGen:], s.Gen)
	b[resvRType] = uint8(s.Type)
	le.PutUint16(b[resvRegCtl:], uint16(len(s.Registrants)))
	if s.PTPL {
		b[resvPTPLS] = 1
	}
	for i, r := range s.Registrants {
		e := b[hdr+i*entry : hdr+(i+1)*entry]
		le.PutUint16(e[regCNTLID:], uint16(r.CNTLID))
		if r.Holder {
			e[regRCSTS] = 1
		}
		if extended {
			le.PutUint64(e[regRKeyExt:], r.Key)
			copy(e[regHostIDExt:regHostIDExt+16], r.HostID[:])
		} else {
			copy(e[regHostID:regHostID+8], r.HostID[:8])
			le.PutUint64(e[regRKey:], r.Key)
		}
	}
}

// ParseResvStatus reads a report of the given format; false when b is
// shorter than the header or than the entries it counts.
func ParseResvStatus(b []byte, extended bool) (*ResvStatus, bool) {
	le := binary.LittleEndian
	hdr, entry := ResvStatusHeaderSize, ResvRegCtlSize
	if extended {
		hdr, entry = ResvStatusHeaderSizeExt, ResvRegCtlSizeExt
	}
	if len(b) < hdr {
		return nil, false
	}
	s := &ResvStatus{Gen: le.Uint32(b[resvGen:]), Type: ResvType(b[resvRType]), PTPL: b[resvPTPLS]&1 != 0}
	n := int(le.Uint16(b[resvRegCtl:]))
	if n > (len(b)-hdr)/entry {
		return nil, false
	}
	for i := range n {
		e := b[hdr+i*entry : hdr+(i+1)*entry]
		r := ResvRegistrant{CNTLID: CNTLID(le.Uint16(e[regCNTLID:])), Holder: e[regRCSTS]&1 != 0}
		if extended {
			r.Key = le.Uint64(e[regRKeyExt:])
			copy(r.HostID[:], e[regHostIDExt:regHostIDExt+16])
		} else {
			copy(r.HostID[:8], e[regHostID:regHostID+8])
			r.Key = le.Uint64(e[regRKey:])
		}
		s.Registrants = append(s.Registrants, r)
	}
	return s, true
}

// Reservation Notification log page (LID 80h): one 64-byte entry.
const (
	LogReservationNotification = 0x80
	ResvNotificationSize       = 64

	rnCount     = 0 // le64
	rnType      = 8
	rnAvailable = 9
	rnNSID      = 12 // le32
)

// Reservation notification types, the log entry's type and the bit of the
// Reservation Notification Mask feature (82h) that masks it.
const (
	ResvNotifyEmpty               = 0
	ResvNotifyRegistrationPreempt = 1
	ResvNotifyReleased            = 2
	ResvNotifyPreempted           = 3
)

// ResvNotification is one Reservation Notification log entry.
type ResvNotification struct {
	Count     uint64 // Log Page Count: increments per entry, 0 never (it wraps to 1)
	Type      uint8
	Available uint8 // entries still queued after this one
	NSID      NSID
}

// PutResvNotification writes n into b[:ResvNotificationSize].
func PutResvNotification(b []byte, n ResvNotification) {
	b = b[:ResvNotificationSize]
	clear(b)
	binary.LittleEndian.PutUint64(b[rnCount:], n.Count)
	b[rnType] = n.Type
	b[rnAvailable] = n.Available
	binary.LittleEndian.PutUint32(b[rnNSID:], uint32(n.NSID))
}

// ParseResvNotification reads b[:ResvNotificationSize].
func ParseResvNotification(b []byte) ResvNotification {
	return ResvNotification{Count: binary.LittleEndian.Uint64(b[rnCount:]), Type: b[rnType], Available: b[rnAvailable],
		NSID: NSID(binary.LittleEndian.Uint32(b[rnNSID:]))}
}

// AsyncInfoReservationLog is the information of the I/O command set
// specific event (type 6) that a reservation notification is available.
const AsyncInfoReservationLog = 0x00

// Reservation Notification Mask feature (82h) bits: a set bit masks the
// notification type.
const (
	ResvMaskRegistrationPreempted = 1 << ResvNotifyRegistrationPreempt
	ResvMaskReleased              = 1 << ResvNotifyReleased
	ResvMaskPreempted             = 1 << ResvNotifyPreempted
	ResvMaskAll                   = ResvMaskRegistrationPreempted | ResvMaskReleased | ResvMaskPreempted
)

// RESCAP bits (Identify Namespace byte 31).
const (
	RESCAPPTPL  = 1 << 0
	RESCAPTypes = 0x7e   // every type, bits 1-6
	RESCAPIEKEY = 1 << 7 // IEKEY as base 1.3 defines it
)

// StatusAbortPreempt completes a command aborted by a Preempt and Abort.
const StatusAbortPreempt Status = 0x1b
