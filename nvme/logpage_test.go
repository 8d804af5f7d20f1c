package nvme

import (
	"bytes"
	"encoding/binary"
	"testing"
)

func TestErrorLogEntry(t *testing.T) {
	e := ErrorLogEntry{
		ErrorCount: 0x0102030405060708, SQID: 1, CID: 0xabcd, Status: StatusInvalidField.WithDNR(),
		ParamErrorLocation: 0x128, LBA: 0x1122, NSID: 7, VS: 0, TRTYPE: TRTypeRDMA,
		CommandSpecific: 0x99, TransportSpecific: 0x55,
	}
	b := bytes.Repeat([]byte{0xee}, ErrorLogEntrySize+1)
	e.MarshalTo(b)
	le := binary.LittleEndian
	// Offsets from base 1.4 Figure 194.
	if le.Uint64(b[0:]) != e.ErrorCount || le.Uint16(b[8:]) != 1 || le.Uint16(b[10:]) != 0xabcd ||
		le.Uint16(b[12:]) != 0x8004 || le.Uint16(b[14:]) != 0x128 || le.Uint64(b[16:]) != 0x1122 ||
		le.Uint32(b[24:]) != 7 || b[28] != 0 || b[29] != 1 || b[30] != 0 || le.Uint64(b[32:]) != 0x99 ||
		le.Uint16(b[40:]) != 0x55 || !bytes.Equal(b[42:64], make([]byte, 22)) || b[64] != 0xee {
		t.Errorf("error log entry = %x", b[:64])
	}
	if got := UnmarshalErrorLogEntry(b); got != e {
		t.Errorf("round trip = %+v", got)
	}
}

func TestSMARTLog(t *testing.T) {
	l := SMARTLog{
		CriticalWarning: 1, Temperature: 300, AvailableSpare: 100, AvailableSpareThreshold: 10, PercentageUsed: 3,
		DataUnitsRead: 1, DataUnitsWritten: 2, HostReadCommands: 3, HostWriteCommands: 4, ControllerBusyTime: 5,
		PowerCycles: 6, PowerOnHours: 7, UnsafeShutdowns: 8, MediaErrors: 9, NumErrLogEntries: 10,
	}
	b := bytes.Repeat([]byte{0xee}, SMARTLogSize)
	l.MarshalTo(b)
	le := binary.LittleEndian
	if b[0] != 1 || le.Uint16(b[1:]) != 300 || b[3] != 100 || b[4] != 10 || b[5] != 3 || b[6] != 0 {
		t.Errorf("header = %x", b[:8])
	}
	// 128-bit counters from byte 32, 16 bytes apart (base 1.4 Figure 196).
	for i, off := range []int{32, 48, 64, 80, 96, 112, 128, 144, 160, 176} {
		if le.Uint64(b[off:]) != uint64(i+1) || le.Uint64(b[off+8:]) != 0 {
			t.Errorf("counter at %d = %x", off, b[off:off+16])
		}
	}
	if !bytes.Equal(b[192:], make([]byte, SMARTLogSize-192)) {
		t.Error("tail not zero")
	}
	if got := UnmarshalSMARTLog(b); got != l {
		t.Errorf("round trip = %+v", got)
	}
}

func TestFirmwareSlotLog(t *testing.T) {
	l := FirmwareSlotLog{AFI: 1}
	l.FRS[0] = "1.0"
	l.FRS[6] = "longer-than-8"
	b := bytes.Repeat([]byte{0xee}, FirmwareSlotLogSize)
	l.MarshalTo(b)
	if b[0] != 1 || !bytes.Equal(b[1:8], make([]byte, 7)) || string(b[8:16]) != "1.0     " ||
		!bytes.Equal(b[16:56], make([]byte, 40)) || string(b[56:64]) != "longer-t" {
		t.Errorf("firmware slot log = %q", b[:64])
	}
	got := UnmarshalFirmwareSlotLog(b)
	if got.AFI != 1 || got.FRS[0] != "1.0" || got.FRS[1] != "" || got.FRS[6] != "longer-t" {
		t.Errorf("round trip = %+v", got)
	}
}

func TestPutChangedNSList(t *testing.T) {
	b := bytes.Repeat([]byte{0xee}, ChangedNSListSize)
	PutChangedNSList(b, []NSID{3, 5})
	if binary.LittleEndian.Uint32(b) != 3 || binary.LittleEndian.Uint32(b[4:]) != 5 || !bytes.Equal(b[8:], make([]byte, ChangedNSListSize-8)) {
		t.Errorf("list = %x", b[:12])
	}
	PutChangedNSList(b, make([]NSID, 1024))
	if binary.LittleEndian.Uint32(b) != 0 {
		t.Error("1024 entries overflowed")
	}
	PutChangedNSList(b, make([]NSID, 1025))
	if binary.LittleEndian.Uint32(b) != 0xffffffff || !bytes.Equal(b[4:], make([]byte, ChangedNSListSize-4)) {
		t.Errorf("overflow list = %x", b[:8])
	}
}

func TestPutSupportedLogPages(t *testing.T) {
	b := bytes.Repeat([]byte{0xee}, SupportedLogPagesSize)
	PutSupportedLogPages(b, []uint8{LogSupportedPages, LogSMART, LogDiscovery, 0xff})
	le := binary.LittleEndian
	for lid := 0; lid < 256; lid++ {
		want := uint32(0)
		if lid == 0 || lid == 2 || lid == 0x70 || lid == 0xff {
			want = 1
		}
		if got := le.Uint32(b[4*lid:]); got != want {
			t.Errorf("LID %#x = %#x, want %#x", lid, got, want)
		}
	}
}

func TestPutCommandEffects(t *testing.T) {
	b := make([]byte, CommandEffectsLogSize)
	PutCommandEffects(b, map[uint8]uint32{OpAdminIdentify: EffectsCSUPP}, map[uint8]uint32{OpWrite: EffectsCSUPP | EffectsLBCC})
	if binary.LittleEndian.Uint32(b[4*6:]) != 1 || binary.LittleEndian.Uint32(b[1024+4:]) != 3 {
		t.Error("command effects offsets")
	}
}

func TestAsyncEventResult(t *testing.T) {
	if got := MakeAsyncEventResult(AsyncEventTypeNotice, AsyncInfoNSAttrChanged, LogChangedNSList); got != 0x00040002 {
		t.Errorf("NS attr changed = %#x", got)
	}
	if got := MakeAsyncEventResult(AsyncEventTypeNotice, AsyncInfoDiscoveryChanged, LogDiscovery); got != 0x0070f002 {
		t.Errorf("discovery changed = %#x", got)
	}
	if AECNSAttrNotices != 0x100 || AECDiscoveryChanged != 0x80000000 {
		t.Error("AEC bits")
	}
}
