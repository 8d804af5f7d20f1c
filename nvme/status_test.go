package nvme

import "testing"

func TestStatusValues(t *testing.T) {
	// Values from base 1.4 Figures 128-132, NVMe-oF Figure 21 and Linux
	// include/linux/nvme.h (which stores SCT<<8 | SC).
	tests := []struct {
		s       Status
		sct, sc uint8
		linux   uint16
	}{
		{StatusSuccess, 0, 0x00, 0x000},
		{StatusInvalidOpcode, 0, 0x01, 0x001},
		{StatusInvalidField, 0, 0x02, 0x002},
		{StatusCIDConflict, 0, 0x03, 0x003},
		{StatusDataTransferError, 0, 0x04, 0x004},
		{StatusAbortedPowerLoss, 0, 0x05, 0x005},
		{StatusInternalError, 0, 0x06, 0x006},
		{StatusAbortRequested, 0, 0x07, 0x007},
		{StatusAbortSQDeleted, 0, 0x08, 0x008},
		{StatusInvalidNamespace, 0, 0x0b, 0x00b},
		{StatusCommandSequenceError, 0, 0x0c, 0x00c},
		{StatusInvalidSGLSegmentDescriptor, 0, 0x0d, 0x00d},
		{StatusInvalidSGLDescriptorCount, 0, 0x0e, 0x00e},
		{StatusDataSGLLengthInvalid, 0, 0x0f, 0x00f},
		{StatusMetadataSGLLengthInvalid, 0, 0x10, 0x010},
		{StatusSGLDescriptorTypeInvalid, 0, 0x11, 0x011},
		{StatusSGLOffsetInvalid, 0, 0x16, 0x016},
		{StatusHostIDInconsistentFormat, 0, 0x18, 0x018},
		{StatusKeepAliveExpired, 0, 0x19, 0x019},
		{StatusKeepAliveTimeoutInvalid, 0, 0x1a, 0x01a},
		{StatusNamespaceWriteProtected, 0, 0x20, 0x020},
		{StatusLBAOutOfRange, 0, 0x80, 0x080},
		{StatusCapacityExceeded, 0, 0x81, 0x081},
		{StatusNamespaceNotReady, 0, 0x82, 0x082},
		{StatusInvalidQueueSize, 1, 0x02, 0x102},
		{StatusAsyncEventLimitExceeded, 1, 0x05, 0x105},
		{StatusInvalidLogPage, 1, 0x09, 0x109},
		{StatusFeatureNotSaveable, 1, 0x0d, 0x10d},
		{StatusFeatureNotChangeable, 1, 0x0e, 0x10e},
		{StatusConnectIncompatibleFormat, 1, 0x80, 0x180},
		{StatusConnectControllerBusy, 1, 0x81, 0x181},
		{StatusConnectInvalidParameters, 1, 0x82, 0x182},
		{StatusConnectRestartDiscovery, 1, 0x83, 0x183},
		{StatusConnectInvalidHost, 1, 0x84, 0x184},
		{StatusWriteFault, 2, 0x80, 0x280},
		{StatusUnrecoveredReadError, 2, 0x81, 0x281},
		{StatusAccessDenied, 2, 0x86, 0x286},
	}
	for _, tt := range tests {
		if tt.s.SCT() != tt.sct || tt.s.SC() != tt.sc || uint16(tt.s) != tt.linux {
			t.Errorf("%v: sct %d sc %#x raw %#x, want sct %d sc %#x raw %#x", tt.s, tt.s.SCT(), tt.s.SC(), uint16(tt.s), tt.sct, tt.sc, tt.linux)
		}
		if MakeStatus(tt.sct, tt.sc) != tt.s {
			t.Errorf("MakeStatus(%d, %#x) = %#x, want %#x", tt.sct, tt.sc, MakeStatus(tt.sct, tt.sc), tt.s)
		}
		if _, ok := statusNames[tt.s]; !ok {
			t.Errorf("%#x has no name", uint16(tt.s))
		}
	}
}

func TestStatusBits(t *testing.T) {
	s := StatusInvalidField.WithDNR()
	if uint16(s) != 0x4002 || !s.DNR() || s.More() || s.SCT() != 0 || s.SC() != 2 {
		t.Errorf("WithDNR = %#x", uint16(s))
	}
	if StatusInvalidField.DNR() {
		t.Error("DNR set without WithDNR")
	}
	if !StatusSuccess.IsSuccess() || !StatusSuccess.WithDNR().IsSuccess() || StatusInvalidOpcode.IsSuccess() ||
		MakeStatus(1, 0).IsSuccess() {
		t.Error("IsSuccess")
	}
	crd := Status(2<<11 | 1<<13)
	if crd.CRD() != 2 || !crd.More() {
		t.Errorf("CRD %d More %v", crd.CRD(), crd.More())
	}
}

func TestStatusString(t *testing.T) {
	for _, tt := range []struct {
		s    Status
		want string
	}{
		{StatusInvalidField.WithDNR(), "Invalid Field in Command (sct 0x0 sc 0x02) DNR"},
		{StatusSuccess, "Successful Completion (sct 0x0 sc 0x00)"},
		{StatusConnectInvalidHost, "Connect Invalid Host (sct 0x1 sc 0x84)"},
		{StatusWriteFault | statusMore, "Write Fault (sct 0x2 sc 0x80) More"},
		{MakeStatus(7, 0xc0), "Unknown Status (sct 0x7 sc 0xc0)"},
	} {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}
