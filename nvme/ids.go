package nvme

// NSID is a Namespace Identifier (base 1.4 §6.1): 1 to NN for a namespace,
// NSIDAll for every namespace.
type NSID uint32

// CNTLID is a Controller Identifier (base 1.4 §5.15.2.1). Dynamic
// controllers get 1 to CNTLIDMax; Connect uses CNTLIDDynamic and
// CNTLIDStatic (NVMe-oF 1.1 §3.3).
type CNTLID uint16

// QID is a queue identifier: 0 for the admin queue, 1 up for I/O queues.
// A fabrics queue is a submission and completion queue pair with one QID
// (NVMe-oF 1.1 §2.1).
type QID uint16
