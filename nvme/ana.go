package nvme

import (
	"encoding/binary"
	"fmt"
)

// Asymmetric Namespace Access (base 2.0 §8.1.3; log page 0Ch §5.16.1.12).

// ANAState is a namespace's access state through a controller.
type ANAState uint8

// ANA states: the values of the ANA log page's ANAS field.
const (
	ANAOptimized      ANAState = 0x01
	ANANonOptimized   ANAState = 0x02
	ANAInaccessible   ANAState = 0x03
	ANAPersistentLoss ANAState = 0x04
	ANAChange         ANAState = 0x0f
)

// anaStateNames are nvmet's configfs names (ports/N/ana_groups/G/ana_state),
// which the configuration uses too.
var anaStateNames = map[ANAState]string{
	ANAOptimized: "optimized", ANANonOptimized: "non-optimized", ANAInaccessible: "inaccessible",
	ANAPersistentLoss: "persistent-loss", ANAChange: "change",
}

// String is the state's configuration name.
func (s ANAState) String() string {
	if n, ok := anaStateNames[s]; ok {
		return n
	}
	return fmt.Sprintf("ANA state %#x", uint8(s))
}

// Valid reports whether s is one of the five states.
func (s ANAState) Valid() bool { _, ok := anaStateNames[s]; return ok }

// ParseANAState reads a state's configuration name.
func ParseANAState(name string) (ANAState, bool) {
	for s, n := range anaStateNames {
		if n == name {
			return s, true
		}
	}
	return 0, false
}

// IOStatus is the status of an I/O command through a path in state s:
// success for the accessible states, else the Path Related status the host
// retries on another path (base 2.0 §8.1.3.5).
func (s ANAState) IOStatus() Status {
	switch s {
	case ANAInaccessible:
		return StatusANAInaccessible
	case ANAPersistentLoss:
		return StatusANAPersistentLoss
	case ANAChange:
		return StatusANATransition
	}
	return StatusSuccess
}

// Path Related Status, SCT 3 (base 2.0 §4.2.3.4).
const (
	StatusInternalPathError Status = SCTPath<<statusSCTShift | 0x00
	StatusANAPersistentLoss Status = SCTPath<<statusSCTShift | 0x01
	StatusANAInaccessible   Status = SCTPath<<statusSCTShift | 0x02
	StatusANATransition     Status = SCTPath<<statusSCTShift | 0x03
)

// ANACAP bits (Identify Controller byte 343).
const (
	ANACAPOptimized      = 1 << 0
	ANACAPNonOptimized   = 1 << 1
	ANACAPInaccessible   = 1 << 2
	ANACAPPersistentLoss = 1 << 3
	ANACAPChange         = 1 << 4
	// ANACAPGroupIDFixed: a namespace's ANAGRPID does not change while it
	// is attached.
	ANACAPGroupIDFixed = 1 << 6
)

// CMICANAReporting is Identify Controller CMIC bit 3: the controller
// reports ANA.
const CMICANAReporting = 1 << 3

// LogANA is the Asymmetric Namespace Access log page.
const LogANA = 0x0c

// LSPANAReturnGroupsOnly (RGO) asks for the ANA log's descriptors without
// their NSIDs.
const LSPANAReturnGroupsOnly = 1 << 0

// ANA log page layout: a 16-byte header, then a 32-byte descriptor per group,
// each followed by its NSIDs.
const (
	anaHdrChangeCount = 0 // le64
	anaHdrGroups      = 8 // le16
	ANALogHeaderSize  = 16

	anaDescGroupID     = 0  // le32
	anaDescNSIDs       = 4  // le32, NNSID
	anaDescChangeCount = 8  // le64
	anaDescState       = 16 // u8, state in bits 3:0
	ANADescriptorSize  = 32
)

// ANAGroupDesc is one group of the ANA log page.
type ANAGroupDesc struct {
	GroupID     uint32
	ChangeCount uint64
	State       ANAState
	NSIDs       []NSID
}

// ANALogSize is the size of an ANA log with these descriptors.
func ANALogSize(groups []ANAGroupDesc, groupsOnly bool) int {
	n := ANALogHeaderSize + len(groups)*ANADescriptorSize
	if !groupsOnly {
		for _, g := range groups {
			n += 4 * len(g.NSIDs)
		}
	}
	return n
}

// ANALogMaxSize is the longest the ANA log page can be for a controller
// reporting NANAGRPID groups and MNAN namespaces: hosts size their buffer
// so and read it in pieces (base 2.0 §5.16.1.12), so the page is this long
// and zero after its descriptors. It reaches 16 GiB (MNAN FFFFFFFDh): a
// target sends windows of it (ANALogWindow), never builds it.
func ANALogMaxSize(nanagrpid, mnan uint32, groupsOnly bool) uint64 {
	n := ANALogHeaderSize + uint64(nanagrpid)*ANADescriptorSize
	if !groupsOnly {
		n += 4 * uint64(mnan)
	}
	return n
}

// PutANALog writes the ANA log page into b, which holds ANALogSize bytes.
// With groupsOnly (RGO), descriptors carry no NSIDs and NNSID is 0.
func PutANALog(b []byte, changeCount uint64, groups []ANAGroupDesc, groupsOnly bool) {
	le := binary.LittleEndian
	clear(b[:ANALogHeaderSize])
	le.PutUint64(b[anaHdrChangeCount:], changeCount)
	le.PutUint16(b[anaHdrGroups:], uint16(len(groups)))
	off := ANALogHeaderSize
	for _, g := range groups {
		d := b[off : off+ANADescriptorSize]
		clear(d)
		le.PutUint32(d[anaDescGroupID:], g.GroupID)
		le.PutUint64(d[anaDescChangeCount:], g.ChangeCount)
		d[anaDescState] = uint8(g.State) & 0x0f
		off += ANADescriptorSize
		if groupsOnly {
			continue
		}
		le.PutUint32(d[anaDescNSIDs:], uint32(len(g.NSIDs)))
		for _, id := range g.NSIDs {
			le.PutUint32(b[off:], uint32(id))
			off += 4
		}
	}
}

// ANALogWindow writes into b the bytes at [off, off+len(b)) of the ANA log
// page PutANALog writes, followed by zeros for ever: the window a Get Log
// Page at offset off asks for. It allocates nothing and costs what the
// descriptors before the window and b cost, whatever off.
func ANALogWindow(b []byte, off, changeCount uint64, groups []ANAGroupDesc, groupsOnly bool) {
	clear(b)
	end := off + uint64(len(b))
	if end < off { // past 2^64: the page is not that long
		end = 1<<64 - 1
	}
	// put copies the part of the page's bytes src at pos inside the window.
	put := func(pos uint64, src []byte) {
		if pos < end && pos+uint64(len(src)) > off {
			lo := max(pos, off)
			copy(b[lo-off:], src[lo-pos:])
		}
	}
	le := binary.LittleEndian
	var hdr [ANALogHeaderSize]byte
	le.PutUint64(hdr[anaHdrChangeCount:], changeCount)
	le.PutUint16(hdr[anaHdrGroups:], uint16(len(groups)))
	put(0, hdr[:])
	pos := uint64(ANALogHeaderSize)
	for _, g := range groups {
		if pos >= end {
			return
		}
		var d [ANADescriptorSize]byte
		le.PutUint32(d[anaDescGroupID:], g.GroupID)
		le.PutUint64(d[anaDescChangeCount:], g.ChangeCount)
		d[anaDescState] = uint8(g.State) & 0x0f
		if !groupsOnly {
			le.PutUint32(d[anaDescNSIDs:], uint32(len(g.NSIDs)))
		}
		put(pos, d[:])
		pos += ANADescriptorSize
		if groupsOnly {
			continue
		}
		ids := g.NSIDs
		if pos < off { // skip the NSIDs before the window
			k := min(uint64(len(ids)), (off-pos)/4)
			ids, pos = ids[k:], pos+4*k
		}
		for _, id := range ids {
			if pos >= end {
				return
			}
			var w [4]byte
			le.PutUint32(w[:], uint32(id))
			put(pos, w[:])
			pos += 4
		}
	}
}

// ParseANALog reads an ANA log page, for tests and tools. It reports false
// when b is shorter than its header or descriptors say.
func ParseANALog(b []byte) (changeCount uint64, groups []ANAGroupDesc, ok bool) {
	if len(b) < ANALogHeaderSize {
		return 0, nil, false
	}
	le := binary.LittleEndian
	changeCount = le.Uint64(b[anaHdrChangeCount:])
	n := int(le.Uint16(b[anaHdrGroups:]))
	off := ANALogHeaderSize
	for range n {
		if len(b)-off < ANADescriptorSize {
			return 0, nil, false
		}
		d := b[off : off+ANADescriptorSize]
		g := ANAGroupDesc{GroupID: le.Uint32(d[anaDescGroupID:]), ChangeCount: le.Uint64(d[anaDescChangeCount:]),
			State: ANAState(d[anaDescState] & 0x0f)}
		nn := int(le.Uint32(d[anaDescNSIDs:]))
		off += ANADescriptorSize
		if nn > (len(b)-off)/4 {
			return 0, nil, false
		}
		for range nn {
			g.NSIDs = append(g.NSIDs, NSID(le.Uint32(b[off:])))
			off += 4
		}
		groups = append(groups, g)
	}
	return changeCount, groups, true
}
