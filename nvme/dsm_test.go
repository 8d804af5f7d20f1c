package nvme

import (
	"bytes"
	"testing"
)

func TestDSMRange(t *testing.T) {
	raw := []byte{1, 0, 0, 0, 0x00, 0x01, 0, 0, 8, 7, 6, 5, 4, 3, 2, 1}
	r := DSMRange(raw)
	if r.Attributes() != 1 || r.NumBlocks() != 256 || r.SLBA() != 0x0102030405060708 {
		t.Errorf("range: attr %d nlb %d slba %#x", r.Attributes(), r.NumBlocks(), r.SLBA())
	}
	w := DSMRange(make([]byte, DSMRangeSize))
	w.SetAttributes(1)
	w.SetNumBlocks(256)
	w.SetSLBA(0x0102030405060708)
	if !bytes.Equal(w, raw) {
		t.Errorf("setters = %x, want %x", []byte(w), raw)
	}
}
