package nvme

import "encoding/binary"

// Typed field offsets. The type of a field's offset constant gives its
// width, so the one constant defines the field, and its getter and setter
// are one line each that cannot disagree on where it is or how wide.
// Multi-byte fields are little-endian (base 1.4 §1.5).
type (
	u8   int
	le16 int
	le32 int
	le64 int
)

func (o u8) get(b []byte) uint8       { return b[o] }
func (o u8) set(b []byte, v uint8)    { b[o] = v }
func (o le16) get(b []byte) uint16    { return binary.LittleEndian.Uint16(b[o:]) }
func (o le16) set(b []byte, v uint16) { binary.LittleEndian.PutUint16(b[o:], v) }
func (o le32) get(b []byte) uint32    { return binary.LittleEndian.Uint32(b[o:]) }
func (o le32) set(b []byte, v uint32) { binary.LittleEndian.PutUint32(b[o:], v) }
func (o le64) get(b []byte) uint64    { return binary.LittleEndian.Uint64(b[o:]) }
func (o le64) set(b []byte, v uint64) { binary.LittleEndian.PutUint64(b[o:], v) }

// text is a fixed-size ASCII field, truncated and padded on writing. A space
// padded field (base 1.4 §1.5) reads without its trailing spaces or NULs; a
// NUL padded one (an NQN) reads up to its first NUL.
type text struct {
	off, len int
	pad      byte
}

func (f text) get(b []byte) string {
	if f.pad == 0 {
		return cString(b[f.off : f.off+f.len])
	}
	return asciiString(b[f.off : f.off+f.len])
}

func (f text) set(b []byte, s string) { putPadded(b[f.off:f.off+f.len], s, f.pad) }
