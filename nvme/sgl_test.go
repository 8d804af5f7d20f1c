package nvme

import (
	"bytes"
	"testing"
)

func TestSGLDescriptor(t *testing.T) {
	tests := []struct {
		name    string
		raw     []byte
		typ     uint8
		subtype uint8
		addr    uint64
		length  uint32
		key     uint32
	}{
		{
			name: "keyed address",
			raw:  []byte{8, 7, 6, 5, 4, 3, 2, 1, 0x00, 0x10, 0x00, 0xdd, 0xcc, 0xbb, 0xaa, 0x40},
			typ:  SGLTypeKeyedDataBlock, subtype: SGLSubtypeAddress,
			addr: 0x0102030405060708, length: 0x1000, key: 0xaabbccdd,
		},
		{
			name: "keyed invalidate, 24-bit length",
			raw:  []byte{0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 1, 0, 0, 0, 0x4f},
			typ:  SGLTypeKeyedDataBlock, subtype: SGLSubtypeInvalidateKey,
			length: 0xffffff, key: 1,
		},
		{
			name: "in-capsule offset",
			raw:  []byte{0x40, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x20, 0x00, 0x00, 0, 0, 0, 0x01},
			typ:  SGLTypeDataBlock, subtype: SGLSubtypeOffset,
			addr: 0x40, length: 0x2000,
		},
		{
			name: "data block 32-bit length",
			raw:  []byte{0, 0, 0, 0, 0, 0, 0, 0, 0x78, 0x56, 0x34, 0x12, 0, 0, 0, 0x00},
			typ:  SGLTypeDataBlock, subtype: SGLSubtypeAddress,
			length: 0x12345678, key: 0x12,
		},
		{
			name: "last segment",
			raw:  []byte{0, 0x10, 0, 0, 0, 0, 0, 0, 0x30, 0, 0, 0, 0, 0, 0, 0x30},
			typ:  SGLTypeLastSegment, subtype: SGLSubtypeAddress,
			addr: 0x1000, length: 0x30,
		},
	}
	for _, tt := range tests {
		d := SGLDescriptor(tt.raw)
		if d.Type() != tt.typ || d.Subtype() != tt.subtype || d.Address() != tt.addr || d.Length() != tt.length || d.Key() != tt.key {
			t.Errorf("%s: type %d subtype %d addr %#x len %#x key %#x", tt.name, d.Type(), d.Subtype(), d.Address(), d.Length(), d.Key())
		}
	}
}

func TestSGLSetters(t *testing.T) {
	d := make(SGLDescriptor, SGLDescriptorSize)
	d.SetKeyed(0x0102030405060708, 0x123456, 0xaabbccdd, true)
	want := []byte{8, 7, 6, 5, 4, 3, 2, 1, 0x56, 0x34, 0x12, 0xdd, 0xcc, 0xbb, 0xaa, 0x4f}
	if !bytes.Equal(d, want) {
		t.Errorf("SetKeyed = %x, want %x", []byte(d), want)
	}
	d.SetKeyed(1, 2, 3, false)
	if d[15] != 0x40 || d.Length() != 2 || d.Key() != 3 {
		t.Errorf("SetKeyed no invalidate = %x", []byte(d))
	}
	d.SetDataBlockOffset(0x20, 4096)
	want = []byte{0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0x01}
	if !bytes.Equal(d, want) {
		t.Errorf("SetDataBlockOffset = %x, want %x", []byte(d), want)
	}
}

func TestSGL1Aliases(t *testing.T) {
	c := make(Command, CommandSize)
	c.SGL1().SetKeyed(0x1000, 512, 7, false)
	if c[24] != 0 || c[25] != 0x10 || c[32] != 0 || c[33] != 2 || c[35] != 7 || c[39] != 0x40 {
		t.Errorf("SGL1 does not alias the command: %x", []byte(c[24:40]))
	}
}
