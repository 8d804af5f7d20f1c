package rdma

import (
	"github.com/nvmeof-tgt/nvmeof-tgt/fabric"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// connRequest is what a host asked for in its RDMA_CM private data.
type connRequest struct {
	qid   int
	depth int // commands the host may have outstanding: HSQSIZE+1
}

// parseConnRequest validates the NVMe/RDMA CM request private data
// (NVMe-oF 1.1 §7.3.1). On failure it returns the reject status and why.
func parseConnRequest(pd []byte, maxQID, maxIODepth int) (connRequest, nvme.RDMACMRejectStatus, string) {
	if len(pd) < nvme.RDMACMRequestSize {
		return connRequest{}, nvme.RDMACMRejectInvalidLength, "short private data"
	}
	req := nvme.RDMACMRequest(pd)
	if req.RECFMT() != 0 {
		return connRequest{}, nvme.RDMACMRejectInvalidRECFMT, "unknown record format"
	}
	qid := int(req.QID())
	if qid > maxQID {
		return connRequest{}, nvme.RDMACMRejectInvalidQID, "queue ID too large"
	}
	// HSQSIZE is 0's based (the Linux host sends its sqsize); HRQSIZE is not.
	depth := int(req.HSQSIZE()) + 1
	maxDepth := maxIODepth
	if qid == 0 {
		maxDepth = fabric.AdminQueueDepth
	}
	if depth < 2 || depth > maxDepth {
		return connRequest{}, nvme.RDMACMRejectInvalidHSQSIZE, "send queue size out of range"
	}
	if req.HRQSIZE() == 0 {
		return connRequest{}, nvme.RDMACMRejectInvalidHRQSIZE, "zero receive queue size"
	}
	return connRequest{qid: qid, depth: depth}, 0, ""
}

// dataMap says where a command's data is.
type dataMap struct {
	inCapsule bool
	off       uint64 // in-capsule: offset into the capsule's data
	addr      uint64 // keyed: host address, key and invalidation
	key       uint32
	inv       bool
}

// mapSGL checks SGL1 (NVMe-oF 1.1 §7.3.2): a keyed data block for data the
// target moves with RDMA, or an offset data block for in-capsule data
// (host-to-controller only, the whole descriptor within the icdLen bytes
// that arrived).
func mapSGL(sgl nvme.SGLDescriptor, dir fabric.DataDir, need uint32, icd, icdLen int) (dataMap, nvme.Status) {
	if dir != fabric.DirHostToCtrl && dir != fabric.DirCtrlToHost {
		// Data with no direction is the core's mistake. Mapped, the
		// command would get pool buffers that no READ filled, holding
		// what an earlier command left there.
		return dataMap{}, nvme.StatusInternalError.WithDNR()
	}
	switch {
	case sgl.Type() == nvme.SGLTypeDataBlock && sgl.Subtype() == nvme.SGLSubtypeOffset:
		if dir != fabric.DirHostToCtrl {
			return dataMap{}, nvme.StatusInvalidField.WithDNR()
		}
		off, n := sgl.Address(), uint64(sgl.Length())
		if off > uint64(icd) || n > uint64(icd)-off {
			return dataMap{}, nvme.StatusSGLOffsetInvalid.WithDNR()
		}
		// The descriptor must lie within the bytes that arrived, not only
		// the part of it the command uses.
		if n < uint64(need) || off+n > uint64(icdLen) {
			return dataMap{}, nvme.StatusDataSGLLengthInvalid.WithDNR()
		}
		return dataMap{inCapsule: true, off: off}, nvme.StatusSuccess
	case sgl.Type() == nvme.SGLTypeKeyedDataBlock &&
		(sgl.Subtype() == nvme.SGLSubtypeAddress || sgl.Subtype() == nvme.SGLSubtypeInvalidateKey):
		if sgl.Length() < need {
			return dataMap{}, nvme.StatusDataSGLLengthInvalid.WithDNR()
		}
		return dataMap{addr: sgl.Address(), key: sgl.Key(), inv: sgl.Subtype() == nvme.SGLSubtypeInvalidateKey}, nvme.StatusSuccess
	}
	return dataMap{}, nvme.StatusSGLDescriptorTypeInvalid.WithDNR()
}
