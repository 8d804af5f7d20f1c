package nvme

import "encoding/binary"

// DSMRangeSize is the size of one Dataset Management range (base 1.4
// §6.7).
const DSMRangeSize = 16

// MaxDSMRanges is the most ranges one command carries (NR is 8 bits, 0's
// based).
const MaxDSMRanges = 256

const (
	dsmAttributes = 0
	dsmNLB        = 4
	dsmSLBA       = 8
)

// DSMRange is a view of one Dataset Management range. Its length must be at
// least DSMRangeSize.
type DSMRange []byte

// Attributes returns the Context Attributes.
func (r DSMRange) Attributes() uint32 { return binary.LittleEndian.Uint32(r[dsmAttributes:]) }

// NumBlocks returns the Length in logical blocks. Unlike the I/O command NLB
// it is a plain count, not 0's based.
func (r DSMRange) NumBlocks() uint32 { return binary.LittleEndian.Uint32(r[dsmNLB:]) }

// SLBA returns the Starting LBA.
func (r DSMRange) SLBA() uint64 { return binary.LittleEndian.Uint64(r[dsmSLBA:]) }

// SetAttributes sets the Context Attributes.
func (r DSMRange) SetAttributes(v uint32) { binary.LittleEndian.PutUint32(r[dsmAttributes:], v) }

// SetNumBlocks sets the Length in logical blocks.
func (r DSMRange) SetNumBlocks(v uint32) { binary.LittleEndian.PutUint32(r[dsmNLB:], v) }

// SetSLBA sets the Starting LBA.
func (r DSMRange) SetSLBA(v uint64) { binary.LittleEndian.PutUint64(r[dsmSLBA:], v) }
