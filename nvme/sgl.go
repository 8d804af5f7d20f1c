package nvme

import "encoding/binary"

// SGLDescriptorSize is the size of one SGL descriptor (base 1.4 §4.4).
const SGLDescriptorSize = 16

// SGL descriptor types, SGL Identifier bits 7:4 (base 1.4 §4.4).
const (
	SGLTypeDataBlock          = 0x0
	SGLTypeBitBucket          = 0x1
	SGLTypeSegment            = 0x2
	SGLTypeLastSegment        = 0x3
	SGLTypeKeyedDataBlock     = 0x4
	SGLTypeTransportDataBlock = 0x5
)

// SGL descriptor subtypes, SGL Identifier bits 3:0 (base 1.4 §4.4;
// NVMe-oF §7.3 for Invalidate Key).
const (
	SGLSubtypeAddress       = 0x0 // Address is a host address
	SGLSubtypeOffset        = 0x1 // Address is an offset into in-capsule data
	SGLSubtypeInvalidateKey = 0xf // NVMe/RDMA: remote invalidate the key
	// SGLSubtypeTransportA is NVMe/TCP's Transport SGL Data Block: the
	// data moves in C2HData and H2CData PDUs (NVMe/TCP 1.0 §3.3).
	SGLSubtypeTransportA = 0xa
)

// SGL descriptor offsets (base 1.4 §4.4).
const (
	sglAddress  = 0
	sglLength   = 8
	sglKey      = 11 // keyed data block
	sglID       = 15
	keyedLenMax = 1<<24 - 1
)

// SGLDescriptor is a view of a 16-byte SGL descriptor. Its length must be at
// least SGLDescriptorSize.
type SGLDescriptor []byte

// Address returns bytes 7:0: an address, or an offset for SGLSubtypeOffset.
func (d SGLDescriptor) Address() uint64 { return binary.LittleEndian.Uint64(d[sglAddress:]) }

// Type returns SGL Identifier bits 7:4.
func (d SGLDescriptor) Type() uint8 { return d[sglID] >> 4 }

// Subtype returns SGL Identifier bits 3:0.
func (d SGLDescriptor) Subtype() uint8 { return d[sglID] & 0xf }

// Length returns the length in bytes: 24 bits (bytes 10:8) for a keyed data
// block, 32 bits (bytes 11:8) otherwise.
func (d SGLDescriptor) Length() uint32 {
	if d.Type() == SGLTypeKeyedDataBlock {
		return uint32(d[sglLength]) | uint32(d[sglLength+1])<<8 | uint32(d[sglLength+2])<<16
	}
	return binary.LittleEndian.Uint32(d[sglLength:])
}

// Key returns the remote key of a keyed data block, bytes 14:11.
func (d SGLDescriptor) Key() uint32 { return binary.LittleEndian.Uint32(d[sglKey:]) }

// SetKeyed makes d a keyed data block descriptor. length must fit 24 bits.
// With invalidate the subtype asks the target to send with invalidate
// (NVMe-oF §7.3).
func (d SGLDescriptor) SetKeyed(addr uint64, length uint32, key uint32, invalidate bool) {
	binary.LittleEndian.PutUint64(d[sglAddress:], addr)
	length &= keyedLenMax
	d[sglLength] = byte(length)
	d[sglLength+1] = byte(length >> 8)
	d[sglLength+2] = byte(length >> 16)
	binary.LittleEndian.PutUint32(d[sglKey:], key)
	sub := uint8(SGLSubtypeAddress)
	if invalidate {
		sub = SGLSubtypeInvalidateKey
	}
	d[sglID] = SGLTypeKeyedDataBlock<<4 | sub
}

// SetTransportDataBlock makes d NVMe/TCP's Transport SGL Data Block
// descriptor for length bytes moved by the transport (NVMe/TCP 1.0 §3.3).
func (d SGLDescriptor) SetTransportDataBlock(length uint32) {
	binary.LittleEndian.PutUint64(d[sglAddress:], 0)
	binary.LittleEndian.PutUint32(d[sglLength:], length)
	d[12], d[13], d[14] = 0, 0, 0
	d[sglID] = SGLTypeTransportDataBlock<<4 | SGLSubtypeTransportA
}

// SetDataBlockOffset makes d a data block descriptor for in-capsule data at
// offset (NVMe-oF §2).
func (d SGLDescriptor) SetDataBlockOffset(offset uint64, length uint32) {
	binary.LittleEndian.PutUint64(d[sglAddress:], offset)
	binary.LittleEndian.PutUint32(d[sglLength:], length)
	d[12], d[13], d[14] = 0, 0, 0
	d[sglID] = SGLTypeDataBlock<<4 | SGLSubtypeOffset
}
