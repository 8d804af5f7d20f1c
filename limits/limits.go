// Package limits holds the defaults and bounds that the configuration and
// the parts it configures share: config checks a file's values against
// them, and fabric, rdma and blockdev apply them. It imports nothing of
// the product's, so that each is defined once here and config stays a
// leaf that knows the file format and nothing else.
package limits

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"time"
)

// Controllers (package fabric).
const (
	// MDTS is the default largest data transfer in bytes: 4096 * 2^n.
	MDTS = 1 << 20
	// MaxQueueDepth is the default most entries of an I/O queue.
	MaxQueueDepth = 128
	// MaxIOQueues is the default most I/O queues of one controller.
	MaxIOQueues = 16
	// KATOMax caps the keep-alive timeout a host may ask for.
	KATOMax = 2 * time.Minute
	// MaxConnectionsPerHost is room for a multipath host: on each of two
	// paths, a controller with the most I/O queues (1+MaxIOQueues) and a
	// persistent discovery controller. Below RDMAMaxQueues, so that one
	// host cannot take a default device's every queue.
	MaxConnectionsPerHost = 2 * (1 + MaxIOQueues + 1)
	// Model is Identify Controller MN when a subsystem sets none.
	Model = "nvmeof-tgt"
	// ANATransitionTime is ANATT: how long a group may stay in change.
	ANATransitionTime = 10 * time.Second
	// ANAGroup is a namespace's ANA group when it names none; ANAGroups
	// the most groups (ANAGRPMAX).
	ANAGroup  = 1
	ANAGroups = 128
	// StateDir is where state that outlives the process is kept
	// (reservations that persist through power loss).
	StateDir = "/var/lib/nvmeof-tgt"
	// ResvRegistrants is the most hosts registered on one namespace's
	// reservations. Registrations outlive their hosts' connections, and a
	// host names itself by any host ID it likes: unbounded, one host
	// could grow what the target keeps, writes to its state file and to
	// a gateway group's record on every change, and reports. Past it a
	// Register of a new host fails (fabric/resv.go). SPDK allows 16.
	ResvRegistrants = 1024
)

// Serial derives a subsystem's serial number from its NQN: the first 20 hex
// digits of its SHA-256, which fill the 20-byte SN field of Identify
// Controller and are stable across restarts and distinct between
// subsystems (and the same in two targets that serve one subsystem).
func Serial(nqn string) string {
	sum := sha256.Sum256([]byte(nqn))
	return hex.EncodeToString(sum[:])[:20]
}

// The RDMA transport (package rdma).
const (
	RDMAInCapsuleDataSize = 8 << 10
	// RDMAMaxQueues is the default rdma.max_queues of a device without a
	// shared receive queue, where every queue registers receive buffers of
	// its own (depth × (64 B + in-capsule data): 1 MiB at the defaults);
	// RDMAMaxQueuesSRQ that of a device with one (rdma.srq), where a queue
	// registers only its responses (2 × depth × 16 B: 4 KiB).
	RDMAMaxQueues    = 64
	RDMAMaxQueuesSRQ = 1024
	// RDMASRQDepth is the receive buffers registered for each poller's
	// shared receive queue, all posted at start, and capped by the
	// device's max_srq_wr: twice what one controller may have out
	// (MaxIOQueues × MaxQueueDepth). SPDK's max_srq_depth is 4096 per
	// poll group; nvmet's srq_size 1024 per completion vector.
	RDMASRQDepth = 4096
	// RDMASRQQueueShare is the most buffers of its poller's shared
	// receive queue one queue's commands hold; a capsule that lands past
	// it is copied to the poller's overflow buffers (as many as the SRQ
	// has, not registered) and its SRQ buffer posted again at once. A
	// command holds its buffer until it is answered, so without it a host
	// whose commands run long could hold every one (two controllers at
	// full depth are 4096 commands), and every other host's capsules
	// would meet RNR NAKs until one finished. A host of
	// MaxConnectionsPerHost queues holds at most 36 × 32 = 1152 of the
	// default 4096; a queue that keeps 32 commands out or fewer never
	// has a capsule copied.
	RDMASRQQueueShare  = 32
	RDMAIOUnitSize     = 64 << 10
	RDMABufferPoolSize = 64 << 20
	RDMAPollers        = 1
	RDMAPollIdle       = 200 * time.Microsecond
	RDMAPollNap        = 20 * time.Microsecond
	RDMAMode           = ModeAuto

	// RDMAInCapsuleDataSizeMax bounds the receive buffers; the size must
	// also be a multiple of 16, since Identify Controller reports the
	// capsule size (IOCCSZ) in 16-byte units.
	RDMAInCapsuleDataSizeMax = 16 << 10
	RDMAQueueDepthMin        = 16
	RDMAQueueDepthMax        = 1024
	RDMAIOQueuesMin          = 1
	RDMAIOQueuesMax          = 128
	RDMAQueuesMin            = 2
	RDMAQueuesMax            = 4096
	// RDMAMDTSMin is one memory page: Identify Controller reports MDTS as
	// a power of two in units of the 4KiB minimum page size.
	RDMAMDTSMin       = 4 << 10
	RDMAMDTSMax       = 16 << 20
	RDMAIOUnitSizeMin = 4 << 10
	RDMAPollersMin    = 1
	RDMAPollersMax    = 64
	RDMAPollIdleMax   = time.Second
	RDMAPollNapMax    = time.Millisecond
)

// The TCP transport (package tcp).
const (
	// TCPInCapsuleDataSize is the in-capsule data a command capsule may
	// carry, on every queue: IOCCSZ reports it. At least 8 KiB, since the
	// Linux host sends fabrics commands (Connect, Authentication Send)
	// with up to NVME_TCP_ADMIN_CCSZ (8 KiB) of in-capsule data on any
	// queue, whatever IOCCSZ says.
	TCPInCapsuleDataSize    = 8 << 10
	TCPInCapsuleDataSizeMin = 8 << 10
	TCPInCapsuleDataSizeMax = 64 << 10
	// TCPMaxH2CData is MAXH2CDATA, the most data of one H2CData PDU the
	// target takes (the host splits an R2T's data into PDUs of at most
	// this). At least 4 KiB (NVMe/TCP 1.0 §3.6.2.3), a multiple of 4.
	TCPMaxH2CData    = 128 << 10
	TCPMaxH2CDataMin = 4 << 10
	TCPMaxH2CDataMax = 16 << 20
	// TCPIOUnitSize is the size of one data buffer of the pool; a
	// transfer takes as many as it needs.
	TCPIOUnitSize    = 16 << 10
	TCPIOUnitSizeMin = 4 << 10
	// TCPBufferPoolSize bounds the data buffers of reads and of writes
	// fetched with R2T, all connections together: a command past it waits
	// for buffers. It is allocated as used, not at start. In-capsule data
	// is not held back by it (it is on the wire already), and is bounded
	// by the connections' queue depths instead.
	TCPBufferPoolSize = 64 << 20
	// TCPConnBufferShareDivisor: one connection holds at most
	// 1/TCPConnBufferShareDivisor of the buffer pool (but always one
	// largest transfer, and no more than its queue depth of them), so
	// that a host sent R2Ts that sends no data, or one that reads
	// slowly, leaves the other connections the rest of the pool until
	// the send timeout closes it. Its commands past its share wait in
	// its own line. The RDMA transport's share of a poller's pool is
	// the same half (rdma/pool.go, queueShare).
	TCPConnBufferShareDivisor = 2
	// TCPMaxConnections bounds the connections of every tcp port together,
	// TCPMaxConnectionsPerAddress those from one host address: connections
	// past either are closed at once. Below the total, so that one address
	// cannot take every connection; above MaxConnectionsPerHost, so that
	// a host reaches its cap on one path.
	TCPMaxConnections           = 1024
	TCPMaxConnectionsPerAddress = 128
	TCPMaxConnectionsMin        = 2
	TCPMaxConnectionsMax        = 65536
	// TCPICReqTimeout is how long a new connection may take to send its
	// ICReq before it is closed. Until then it holds no queue.
	TCPICReqTimeout    = 10 * time.Second
	TCPICReqTimeoutMin = 100 * time.Millisecond
	TCPICReqTimeoutMax = 5 * time.Minute
	// TCPSendTimeout is how long the target waits for a host to take the
	// PDUs it sends (a full socket buffer) before it closes the
	// connection: a host that reads no more would hold its buffers.
	TCPSendTimeout = 30 * time.Second
	// Bounds shared with the RDMA transport's keys of the same names.
	TCPQueueDepthMin = RDMAQueueDepthMin
	TCPQueueDepthMax = RDMAQueueDepthMax
	TCPIOQueuesMin   = RDMAIOQueuesMin
	TCPIOQueuesMax   = RDMAIOQueuesMax
	TCPMDTSMin       = RDMAMDTSMin
	TCPMDTSMax       = RDMAMDTSMax
)

// Values of the auto/on/off settings (rdma.send_with_invalidate,
// rdma.io_uring, rdma.srq).
const (
	ModeAuto = "auto"
	ModeOn   = "on"
	ModeOff  = "off"
)

// Backends (package blockdev).
const (
	BackendMemory = "memory"
	BackendFile   = "file"
	BackendBlock  = "block"
	// BackendRBD is a Ceph RBD image, served by the rbd build only
	// (bin/nvmeof-tgt-rbd).
	BackendRBD = "rbd"
	// BlockSize is the logical block size of files and memory when none
	// is given.
	BlockSize = 512
)

// RBD namespaces (package blockdev, the rbd build).
const (
	// RBDCephConf is the Ceph configuration an RBD namespace's client reads
	// when it names none.
	RBDCephConf = "/etc/ceph/ceph.conf"
	// RBDClient is the Ceph client name (client.<name>) when none is given.
	RBDClient = "admin"
	// RBDConnectTimeout bounds connecting to a cluster and each monitor
	// operation (client_mount_timeout, rados_mon_op_timeout): an
	// unreachable cluster is an error, not a hang.
	RBDConnectTimeout = 10 * time.Second
	// RBDOpenTimeout bounds opening (and creating) an image, which needs
	// the OSDs as well as the monitors: past it the change fails and the
	// open goes on in the background, closed when it ends.
	RBDOpenTimeout = 30 * time.Second
	// RBDOSDOpTimeout bounds each OSD operation of an RBD namespace's
	// client (rados_osd_op_timeout, which librados' Objecter applies to
	// every operation librbd sends through it): past it the I/O fails with
	// ETIMEDOUT, which the host gets as a status it retries on another
	// path. Below the Linux host's I/O timeout (nvme_core.io_timeout, 30
	// s), past which the host would abort the command and reset the
	// controller, every I/O of it; above what a healthy cluster takes
	// and what an OSD failure stalls I/O for (osd_heartbeat_grace, 20 s,
	// then peering), so that a failure the cluster heals itself is not
	// turned into errors.
	RBDOSDOpTimeout = 25 * time.Second
)

// Files of secrets (package config).
const (
	// SecretFileMax bounds a DH-HMAC-CHAP key file: its first line is the
	// secret, "DHHC-1:03:" and the base64 of a 64-byte key and its CRC
	// (103 bytes); a larger file is refused unread.
	SecretFileMax = 4 << 10
)

// Gateway groups (package control): gateways that serve the same subsystems
// from one state in RADOS.
const (
	// GroupGateways is the most gateways of a group: each has its own
	// controller-ID range GroupCNTLIDWidth wide (as ceph-nvmeof gives
	// each), and 32 of those fit below FFEFh.
	GroupGateways = 32
	// GroupCNTLIDWidth is how many controller IDs each gateway hands out:
	// gateway N's are (N-1)*GroupCNTLIDWidth+1 .. N*GroupCNTLIDWidth.
	GroupCNTLIDWidth = 2040
	// GroupLease is how long a gateway that stopped heartbeating is
	// still taken for alive; it heartbeats every GroupLease/4. Bounds:
	// GroupLeaseMin..GroupLeaseMax.
	GroupLease    = 10 * time.Second
	GroupLeaseMin = 2 * time.Second
	GroupLeaseMax = 5 * time.Minute
	// GroupPoll is how often a gateway reads the group's state again,
	// the safety net under watch/notify.
	GroupPoll = 5 * time.Second
	// GroupRetries bounds the attempts of one change whose
	// compare-and-swap lost to another gateway's change.
	GroupRetries = 8
	// GroupNotifyTimeout bounds how long a change waits for the other
	// gateways to acknowledge it (a reservation waits for them before it
	// completes).
	GroupNotifyTimeout = 5 * time.Second
	// GroupRetryDegraded is how soon a gateway tries again a subsystem of
	// the group's state it could not apply, while the state does not
	// change it.
	GroupRetryDegraded = 30 * time.Second
	// GroupKeyDir is where a gateway accepts the key files the group's
	// state names (gateway_group.key_dir): anyone able to write the pool
	// writes those paths, and the gateway reads them as root.
	GroupKeyDir = "/etc/nvmeof-tgt/keys"
	// GroupLeaseBytes bounds a lease record, GroupLeaseAddrs the client
	// addresses it may record (a gateway has one client for its group and
	// one per cluster its rbd namespaces use, each with a v1 and a v2
	// address at most).
	GroupLeaseBytes = 4096
	GroupLeaseAddrs = 16
	// GroupStateKeys and GroupStateBytes bound the state object a gateway
	// reads (its omap's keys, and their keys' and values' bytes in all):
	// room for 256 subsystems of 1,024 namespaces each with their
	// reservations and hosts, far below what would exhaust a gateway's
	// memory. GroupStateValueBytes bounds one value: a reservation record
	// of ResvRegistrants registrants, with as many notices and aborted
	// hosts, fits (about 240 KiB).
	GroupStateKeys       = 1 << 20
	GroupStateBytes      = 256 << 20
	GroupStateValueBytes = 512 << 10
)

// ValidBlockSize reports whether files and memory support the logical
// block size bs.
func ValidBlockSize(bs uint32) bool { return bs == 512 || bs == 4096 }

// BackendOf infers the backend of a namespace from its path: memory for an
// empty path, block for a block special file, file for anything else,
// including a path that does not exist yet (a file backend creates it). A
// stat failure other than fs.ErrNotExist is returned along with file.
func BackendOf(path string) (string, error) {
	if path == "" {
		return BackendMemory, nil
	}
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return BackendFile, nil
	case err != nil:
		return BackendFile, err
	case st.Mode()&fs.ModeDevice != 0 && st.Mode()&fs.ModeCharDevice == 0:
		return BackendBlock, nil
	}
	return BackendFile, nil
}

// Namespace masking and QoS (package fabric).
const (
	// NamespaceHosts is the most hosts one namespace's mask names (and
	// the most per-host QoS overrides it has): a gateway group's record
	// holds them, and whoever writes the pool must not grow a gateway's
	// memory without bound.
	NamespaceHosts = 1024
	// QoSBurst is how far ahead of its rate a QoS limit lets commands
	// go: the credit an idle limit banks. It also absorbs a late timer:
	// a retry up to QoSBurst late loses none of the rate. 50 ms of a
	// limit over 30 s is 0.17 % above it.
	QoSBurst = 50 * time.Millisecond
	// QoSTick is the least time between two retries of the commands a
	// namespace holds: at high rates they go in batches of a tick's
	// worth rather than one timer per command.
	QoSTick = time.Millisecond
	// QoSHostEntries is how many hosts' QoS state a namespace keeps
	// before it forgets those idle and not in debt.
	QoSHostEntries = 256
)
