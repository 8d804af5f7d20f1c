//go:build linux && cgo

package verbs

import (
	"testing"
	"unsafe"
)

// TestFieldOffsets: every field of the Go mirrors sits where the C side
// reads or writes it (sizes alone miss two fields swapped).
func TestFieldOffsets(t *testing.T) {
	var s SendWR
	var r RecvWR
	var w WC
	var g postGroup
	var sp srqPost
	goOffsets := []struct {
		name string
		off  uintptr
	}{
		{"SendWR.WRID", unsafe.Offsetof(s.WRID)}, {"SendWR.RemoteAddr", unsafe.Offsetof(s.RemoteAddr)},
		{"SendWR.Opcode", unsafe.Offsetof(s.Opcode)}, {"SendWR.Flags", unsafe.Offsetof(s.Flags)},
		{"SendWR.RKey", unsafe.Offsetof(s.RKey)}, {"SendWR.InvRKey", unsafe.Offsetof(s.InvRKey)},
		{"SendWR.NumSGE", unsafe.Offsetof(s.NumSGE)}, {"SendWR.SGE", unsafe.Offsetof(s.SGE)},
		{"RecvWR.WRID", unsafe.Offsetof(r.WRID)}, {"RecvWR.NumSGE", unsafe.Offsetof(r.NumSGE)},
		{"RecvWR.SGE", unsafe.Offsetof(r.SGE)},
		{"WC.WRID", unsafe.Offsetof(w.WRID)}, {"WC.Status", unsafe.Offsetof(w.Status)},
		{"WC.Opcode", unsafe.Offsetof(w.Opcode)}, {"WC.ByteLen", unsafe.Offsetof(w.ByteLen)},
		{"WC.Flags", unsafe.Offsetof(w.Flags)}, {"WC.InvRKey", unsafe.Offsetof(w.InvRKey)},
		{"WC.QPNum", unsafe.Offsetof(w.QPNum)}, {"WC.VendorErr", unsafe.Offsetof(w.VendorErr)},
		{"postGroup.qp", unsafe.Offsetof(g.qp)}, {"postGroup.sendOff", unsafe.Offsetof(g.sendOff)},
		{"postGroup.sends", unsafe.Offsetof(g.sends)}, {"postGroup.recvOff", unsafe.Offsetof(g.recvOff)},
		{"postGroup.recvs", unsafe.Offsetof(g.recvs)}, {"postGroup.sendRC", unsafe.Offsetof(g.sendRC)},
		{"postGroup.sendsPosted", unsafe.Offsetof(g.sendsPosted)}, {"postGroup.recvRC", unsafe.Offsetof(g.recvRC)},
		{"postGroup.recvsPosted", unsafe.Offsetof(g.recvsPosted)},
		{"srqPost.srq", unsafe.Offsetof(sp.srq)}, {"srqPost.n", unsafe.Offsetof(sp.n)},
		{"srqPost.rc", unsafe.Offsetof(sp.rc)}, {"srqPost.posted", unsafe.Offsetof(sp.posted)},
	}
	c := cFieldOffsets()
	if len(c) != len(goOffsets) {
		t.Fatalf("C lists %d offsets, Go %d", len(c), len(goOffsets))
	}
	for i, f := range goOffsets {
		if f.off != c[i] {
			t.Errorf("%s at offset %d in Go, %d in C", f.name, f.off, c[i])
		}
	}
}
