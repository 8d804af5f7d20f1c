package nvme

import (
	"encoding/binary"
	"strconv"
)

// RDMA_CM private data of the NVMe/RDMA transport binding (NVMe-oF 1.1
// §7.3, now the NVMe RDMA Transport Specification).
const (
	RDMACMRequestSize = 32
	RDMACMAcceptSize  = 32
	RDMACMRejectSize  = 4
)

// RDMACMRecFmt10 is the only defined record format.
const RDMACMRecFmt10 = 0

const (
	rdmaReqRECFMT  = 0
	rdmaReqQID     = 2
	rdmaReqHRQSIZE = 4
	rdmaReqHSQSIZE = 6
	rdmaReqCNTLID  = 8 // added by the RDMA transport spec 1.0; 0 when unused

	rdmaRepRECFMT  = 0
	rdmaRepCRQSIZE = 2

	rdmaRejRECFMT = 0
	rdmaRejSTS    = 2
)

// RDMACMRequest is a view of the RDMA_CM_REQUEST private data. Its length
// must be at least RDMACMRequestSize.
type RDMACMRequest []byte

// RECFMT returns the Record Format.
func (r RDMACMRequest) RECFMT() uint16 { return binary.LittleEndian.Uint16(r[rdmaReqRECFMT:]) }

// QID returns the Queue ID the host will connect (0 for the admin queue).
func (r RDMACMRequest) QID() uint16 { return binary.LittleEndian.Uint16(r[rdmaReqQID:]) }

// HRQSIZE returns the host receive queue size, a count of entries (Linux
// sends its queue size).
func (r RDMACMRequest) HRQSIZE() uint16 { return binary.LittleEndian.Uint16(r[rdmaReqHRQSIZE:]) }

// HSQSIZE returns the host send queue size, 0's based like the Connect
// SQSIZE.
func (r RDMACMRequest) HSQSIZE() uint16 { return binary.LittleEndian.Uint16(r[rdmaReqHSQSIZE:]) }

// CNTLID returns the controller the host expects on an I/O queue; 0 if the
// host does not send it (older hosts).
func (r RDMACMRequest) CNTLID() uint16 { return binary.LittleEndian.Uint16(r[rdmaReqCNTLID:]) }

// SetRECFMT sets the Record Format.
func (r RDMACMRequest) SetRECFMT(v uint16) { binary.LittleEndian.PutUint16(r[rdmaReqRECFMT:], v) }

// SetQID sets the Queue ID.
func (r RDMACMRequest) SetQID(v uint16) { binary.LittleEndian.PutUint16(r[rdmaReqQID:], v) }

// SetHRQSIZE sets the host receive queue size.
func (r RDMACMRequest) SetHRQSIZE(v uint16) { binary.LittleEndian.PutUint16(r[rdmaReqHRQSIZE:], v) }

// SetHSQSIZE sets the host send queue size (0's based).
func (r RDMACMRequest) SetHSQSIZE(v uint16) { binary.LittleEndian.PutUint16(r[rdmaReqHSQSIZE:], v) }

// SetCNTLID sets the controller ID.
func (r RDMACMRequest) SetCNTLID(v uint16) { binary.LittleEndian.PutUint16(r[rdmaReqCNTLID:], v) }

// RDMACMAccept is a view of the RDMA_CM_ACCEPT private data.
type RDMACMAccept []byte

// RECFMT returns the Record Format.
func (a RDMACMAccept) RECFMT() uint16 { return binary.LittleEndian.Uint16(a[rdmaRepRECFMT:]) }

// CRQSIZE returns the controller receive queue size, a count of entries.
func (a RDMACMAccept) CRQSIZE() uint16 { return binary.LittleEndian.Uint16(a[rdmaRepCRQSIZE:]) }

// PutRDMACMAccept writes RDMA_CM_ACCEPT private data into b[:32]: record
// format 0, crqsize, reserved bytes zeroed.
func PutRDMACMAccept(b []byte, crqsize uint16) {
	clear(b[:RDMACMAcceptSize])
	binary.LittleEndian.PutUint16(b[rdmaRepRECFMT:], RDMACMRecFmt10)
	binary.LittleEndian.PutUint16(b[rdmaRepCRQSIZE:], crqsize)
}

// RDMACMReject is a view of the RDMA_CM_REJECT private data.
type RDMACMReject []byte

// RECFMT returns the Record Format.
func (r RDMACMReject) RECFMT() uint16 { return binary.LittleEndian.Uint16(r[rdmaRejRECFMT:]) }

// STS returns the reject status.
func (r RDMACMReject) STS() RDMACMRejectStatus {
	return RDMACMRejectStatus(binary.LittleEndian.Uint16(r[rdmaRejSTS:]))
}

// PutRDMACMReject writes RDMA_CM_REJECT private data into b[:4].
func PutRDMACMReject(b []byte, sts RDMACMRejectStatus) {
	binary.LittleEndian.PutUint16(b[rdmaRejRECFMT:], RDMACMRecFmt10)
	binary.LittleEndian.PutUint16(b[rdmaRejSTS:], uint16(sts))
}

// RDMACMRejectStatus is the STS of an RDMA_CM_REJECT (NVMe-oF 1.1
// §7.3; Invalid CNTLID from the RDMA transport spec 1.0).
type RDMACMRejectStatus uint16

// Reject statuses.
const (
	RDMACMRejectInvalidLength  RDMACMRejectStatus = 0x01
	RDMACMRejectInvalidRECFMT  RDMACMRejectStatus = 0x02
	RDMACMRejectInvalidQID     RDMACMRejectStatus = 0x03
	RDMACMRejectInvalidHSQSIZE RDMACMRejectStatus = 0x04
	RDMACMRejectInvalidHRQSIZE RDMACMRejectStatus = 0x05
	RDMACMRejectNoResources    RDMACMRejectStatus = 0x06
	RDMACMRejectInvalidIRD     RDMACMRejectStatus = 0x07
	RDMACMRejectInvalidORD     RDMACMRejectStatus = 0x08
	RDMACMRejectInvalidCNTLID  RDMACMRejectStatus = 0x09
)

var rdmaRejectNames = [...]string{
	RDMACMRejectInvalidLength:  "invalid private data length",
	RDMACMRejectInvalidRECFMT:  "invalid record format",
	RDMACMRejectInvalidQID:     "invalid queue ID",
	RDMACMRejectInvalidHSQSIZE: "invalid host SQ size",
	RDMACMRejectInvalidHRQSIZE: "invalid host RQ size",
	RDMACMRejectNoResources:    "no resources",
	RDMACMRejectInvalidIRD:     "invalid IRD",
	RDMACMRejectInvalidORD:     "invalid ORD",
	RDMACMRejectInvalidCNTLID:  "invalid controller ID",
}

func (s RDMACMRejectStatus) String() string {
	if int(s) < len(rdmaRejectNames) && rdmaRejectNames[s] != "" {
		return rdmaRejectNames[s]
	}
	return "unknown reject status " + strconv.Itoa(int(s))
}
