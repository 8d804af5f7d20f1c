// Package nvme holds the NVMe and NVMe over Fabrics wire formats: submission
// and completion queue entries, status codes, SGL descriptors, controller
// properties, Identify data, log pages, Connect data, the discovery log and
// the NVMe/RDMA RDMA_CM private data, and the NVMe/TCP PDU headers.
//
// Fixed-layout structures (commands, SGL descriptors, Connect data, RDMA_CM
// requests, NVMe/TCP PDU headers, DSM ranges, Identify data) are byte-slice views with accessor
// methods, after gVisor's pkg/tcpip/header: the view does not copy and does
// not check its length, so the caller checks the length once when it takes
// the view. Each field's offset is one unexported constant that its getter
// and setter share; in Identify data the constant's type (u8, le16, le32,
// le64) also gives its width. Log pages and discovery log entries, which the
// target only produces, are still plain Go structs with a MarshalTo method
// that writes every field at its spec offset.
//
// All multi-byte fields are little-endian (NVMe base 1.4 §1.5).
//
// References: NVM Express Base Specification 1.4 and 2.0 ("base"), NVMe over
// Fabrics 1.1 ("NVMe-oF"), NVMe RDMA Transport Specification 1.0, NVMe TCP
// Transport Specification 1.0 ("TCP").
package nvme
