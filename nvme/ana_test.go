package nvme

import (
	"bytes"
	"testing"
)

// TestANALogWindow: every window of the ANA log page, at any offset and
// length, is what PutANALog writes there, and zero past it.
func TestANALogWindow(t *testing.T) {
	tests := []struct {
		name   string
		groups []ANAGroupDesc
	}{
		{"none", nil},
		{"one", []ANAGroupDesc{{GroupID: 1, ChangeCount: 9, State: ANAOptimized, NSIDs: []NSID{1}}}},
		{"several", []ANAGroupDesc{
			{GroupID: 1, ChangeCount: 3, State: ANAOptimized, NSIDs: []NSID{1, 4, 7}},
			{GroupID: 2, State: ANAChange},
			{GroupID: 128, ChangeCount: 1 << 40, State: ANAInaccessible, NSIDs: []NSID{2, MaxNSID}},
		}},
	}
	for _, tt := range tests {
		for _, rgo := range []bool{false, true} {
			page := make([]byte, ANALogSize(tt.groups, rgo)+40)
			PutANALog(page, 0x0102030405060708, tt.groups, rgo)
			for off := range len(page) {
				for n := range len(page) - off + 1 {
					got := bytes.Repeat([]byte{0xee}, n)
					ANALogWindow(got, uint64(off), 0x0102030405060708, tt.groups, rgo)
					if want := page[off : off+n]; !bytes.Equal(got, want) {
						t.Fatalf("%s rgo %v: window %d+%d:\n got % x\nwant % x", tt.name, rgo, off, n, got, want)
					}
				}
			}
		}
	}
	// Far past the descriptors, as a host reads the end of a page sized
	// for NSIDs up to FFFFFFFDh: zeros.
	g := tests[2].groups
	got := bytes.Repeat([]byte{0xee}, 64)
	ANALogWindow(got, ANALogMaxSize(128, uint32(MaxNSID), false)-64, 1, g, false)
	if !bytes.Equal(got, make([]byte, 64)) {
		t.Fatalf("end of a 16 GiB page: % x", got)
	}
}
