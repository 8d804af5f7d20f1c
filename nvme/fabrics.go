package nvme

import (
	"bytes"
	"encoding/binary"
)

// DiscoveryNQN is the well-known NQN of the discovery service (NVMe-oF §5).
const DiscoveryNQN = "nqn.2014-08.org.nvmexpress.discovery"

// NQN sizes: the fields hold 256 bytes, the name itself at most 223
// (base 1.4 §7.9 NVMe Qualified Names).
const (
	NQNFieldSize = 256
	MaxNQNLength = 223
)

// Connect Attributes bits, Connect command byte 46 (NVMe-oF 1.1 §3.3).
// Bits 1:0 are the Priority Class.
const (
	ConnectCATTRPriorityMask  = 3
	ConnectCATTRDisableSQFlow = 1 << 2
)

// Controller ID values in Connect data (NVMe-oF §3.3).
const (
	CNTLIDStatic  CNTLID = 0xfffe // any controller, static model hosts
	CNTLIDDynamic CNTLID = 0xffff // dynamic controller model
	CNTLIDMax     CNTLID = 0xffef // the largest a controller may have
)

// PortIDMax is the largest NVMe port ID (PORTID); FFF0h and up are
// reserved.
const PortIDMax = 0xffef

// Transport types for TRTYPE (NVMe-oF §5.3).
const (
	TRTypeRDMA = 1
	TRTypeFC   = 2
	TRTypeTCP  = 3
	TRTypeLoop = 254 // intra-host, reserved for host use
)

// Address families for ADRFAM (NVMe-oF §5.3).
const (
	AdrFamPCI  = 0
	AdrFamIPv4 = 1
	AdrFamIPv6 = 2
	AdrFamIB   = 3
	AdrFamFC   = 4
	AdrFamLoop = 254
)

// ConnectDataSize is the size of the Connect command data (NVMe-oF §3.3).
const ConnectDataSize = 1024

const (
	cdHostID  = 0
	cdCNTLID  = 16
	cdSubNQN  = 256
	cdHostNQN = 512
)

// Invalid Parameter Offsets into the Connect data (NVMe-oF 1.1 §3.3.1).
const (
	IPOHostID  = cdHostID
	IPOCNTLID  = cdCNTLID
	IPOSubNQN  = cdSubNQN
	IPOHostNQN = cdHostNQN
)

// connIATTRData is the Connect response DW0 bit that says the Invalid
// Parameter Offset is into the Connect data, not the SQE.
const connIATTRData = 1 << 16

// MakeConnectInvalidResult builds the Connect response DW0 for Connect
// Invalid Parameters (NVMe-oF 1.1 §3.3.1) as the Linux host decodes it: the
// offset in bits 15:0, and bit 16 set when it is into the Connect data.
func MakeConnectInvalidResult(inData bool, off uint16) uint32 {
	v := uint32(off)
	if inData {
		v |= connIATTRData
	}
	return v
}

// ConnectData is a view of the 1024-byte Connect command data. Its length
// must be at least ConnectDataSize.
type ConnectData []byte

// HostID returns the 128-bit Host Identifier.
func (d ConnectData) HostID() [16]byte { return [16]byte(d[cdHostID : cdHostID+HostIDSize]) }

// SetHostID sets the Host Identifier.
func (d ConnectData) SetHostID(id [16]byte) { copy(d[cdHostID:], id[:]) }

// CNTLID returns the Controller ID the host asks for: CNTLIDDynamic on the
// admin queue in the dynamic model, the admin queue's controller on I/O
// queues.
func (d ConnectData) CNTLID() CNTLID { return CNTLID(binary.LittleEndian.Uint16(d[cdCNTLID:])) }

// SetCNTLID sets the Controller ID.
func (d ConnectData) SetCNTLID(v CNTLID) { binary.LittleEndian.PutUint16(d[cdCNTLID:], uint16(v)) }

// SubNQN returns the NVM Subsystem NQN up to its first NUL.
func (d ConnectData) SubNQN() string { return cString(d[cdSubNQN : cdSubNQN+NQNFieldSize]) }

// SetSubNQN sets the NVM Subsystem NQN, NUL padded and truncated to the
// field.
func (d ConnectData) SetSubNQN(s string) { putPadded(d[cdSubNQN:cdSubNQN+NQNFieldSize], s, 0) }

// HostNQN returns the Host NQN up to its first NUL.
func (d ConnectData) HostNQN() string { return cString(d[cdHostNQN : cdHostNQN+NQNFieldSize]) }

// SetHostNQN sets the Host NQN, NUL padded and truncated to the field.
func (d ConnectData) SetHostNQN(s string) { putPadded(d[cdHostNQN:cdHostNQN+NQNFieldSize], s, 0) }

// cString returns b up to its first NUL.
func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// putPadded copies s into b, truncating it, and fills the rest with pad.
func putPadded(b []byte, s string, pad byte) {
	n := copy(b, s)
	for i := n; i < len(b); i++ {
		b[i] = pad
	}
}

// asciiString returns a space or NUL padded ASCII field without its padding
// (base 1.4 §1.5 for space padding; Linux nvmet pads some fields with NULs).
func asciiString(b []byte) string {
	return string(bytes.TrimRight(b, " \x00"))
}
