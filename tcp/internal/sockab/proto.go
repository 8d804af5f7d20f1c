package sockab

import (
	"errors"
	"fmt"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Sizes of the exchange.
const (
	// BlockSize is the data of one read or write.
	BlockSize = 4096
	// CmdSize is a command capsule without data.
	CmdSize = nvme.TCPCapsuleCmdHdr
	// WriteCmdSize is a write's capsule: the command and its data.
	WriteCmdSize = CmdSize + BlockSize
	// RespHdrSize is a C2HData header, and a whole response capsule.
	RespHdrSize = nvme.TCPDataHdrSize
	// ReadRespSize is a read's answer: the C2HData header and the data.
	ReadRespSize = RespHdrSize + BlockSize
	// MaxDepth is the most commands a host may have out on a connection.
	MaxDepth = 32
	// DiskBlocks is the blocks of each connection's memory "disk".
	DiskBlocks = 16
)

// slots is the requests a server keeps per connection: a response lingers
// until the send that carries it completes, while the host, which already
// has it, may send MaxDepth new commands.
const slots = 2 * MaxDepth

// Variants are the servers, in the order the benchmark names them:
// tcp/'s shape, the diagnostic without its hand-off, and io_uring.
var Variants = []string{"netpoller", "netpoller-inline", "uring"}

// errProtocol ends a connection whose host sent something this exchange
// does not have.
var errProtocol = errors.New("sockab: unexpected PDU")

// Pattern is the byte at offset i of block b of every connection's disk
// before any write (and after the benchmark's writes, which write it
// again): the test client checks the data of reads against it.
func Pattern(b, i int) byte { return byte(b*7 + i) }

// newDisk is a connection's disk, filled with Pattern.
func newDisk() []byte {
	d := make([]byte, DiskBlocks*BlockSize)
	for b := range DiskBlocks {
		for i := range BlockSize {
			d[b*BlockSize+i] = Pattern(b, i)
		}
	}
	return d
}

// checkCmd validates a command capsule's common header and returns the
// PDU's length: CmdSize for a read, WriteCmdSize for a write.
func checkCmd(h nvme.TCPHeader) (int, error) {
	if h.Type() != nvme.TCPCapsuleCmd || h.HLEN() != CmdSize {
		return 0, fmt.Errorf("%w: type %#x, hlen %d", errProtocol, h.Type(), h.HLEN())
	}
	switch plen := int(h.PLEN()); plen {
	case CmdSize, WriteCmdSize:
		return plen, nil
	default:
		return 0, fmt.Errorf("%w: plen %d", errProtocol, plen)
	}
}

// execute runs the command in h (a whole capsule header, CmdSize bytes)
// against disk, as the memory backend would: a read copies its block into
// buf, a write copies buf (its data, already there) to its block. It writes
// the answer's header into rsp and reports whether buf follows it.
func execute(disk []byte, h nvme.TCPHeader, buf []byte, rsp nvme.TCPHeader) (withData bool, err error) {
	sqe := h.SQE()
	blk := disk[int(sqe.CDW(10)%DiskBlocks)*BlockSize:][:BlockSize]
	switch sqe.Opcode() {
	case nvme.OpRead:
		if h.PLEN() != CmdSize {
			return false, fmt.Errorf("%w: read with data", errProtocol)
		}
		copy(buf, blk)
		rsp.SetCommon(nvme.TCPC2HData, nvme.TCPFlagLast|nvme.TCPFlagSuccess, RespHdrSize, RespHdrSize, ReadRespSize)
		rsp.SetData(sqe.CID(), 0, 0, BlockSize)
		return true, nil
	case nvme.OpWrite:
		if h.PLEN() != WriteCmdSize {
			return false, fmt.Errorf("%w: write without data", errProtocol)
		}
		copy(blk, buf)
		rsp.SetCommon(nvme.TCPCapsuleResp, 0, RespHdrSize, 0, RespHdrSize)
		cqe := rsp.CQE()
		cqe.Reset()
		cqe.SetCID(sqe.CID())
		return false, nil
	default:
		return false, fmt.Errorf("%w: opcode %#x", errProtocol, sqe.Opcode())
	}
}

// PutCmd writes a command capsule for op (nvme.OpRead or nvme.OpWrite) of
// block blk into b (CmdSize bytes; a write's data follows, the caller's).
func PutCmd(b []byte, op uint8, cid uint16, blk int) {
	h := nvme.TCPHeader(b[:CmdSize])
	clear(h)
	plen, pdo := uint32(CmdSize), uint8(0)
	if op == nvme.OpWrite {
		plen, pdo = WriteCmdSize, CmdSize
	}
	h.SetCommon(nvme.TCPCapsuleCmd, 0, CmdSize, pdo, plen)
	sqe := h.SQE()
	sqe.SetOpcode(op)
	sqe.SetCID(cid)
	sqe.SetNSID(1)
	sqe.SetCDW(10, uint32(blk))
}

// SetCID rewrites the CID of the command capsule in b.
func SetCID(b []byte, cid uint16) { nvme.TCPHeader(b).SQE().SetCID(cid) }

// Server is one of the variants, listening on 127.0.0.1.
type Server interface {
	Addr() string
	// Describe says how the server is set up, for the results.
	Describe() string
	// Close stops accepting, closes every connection and waits for the
	// server's goroutines.
	Close() error
}

// Start starts the server of variant v on an ephemeral port of 127.0.0.1.
func Start(v string) (Server, error) { return start(v, 0) }

// start is Start with each connection's send buffer set to sndbuf bytes
// (SO_SNDBUF), 0 for the kernel's: a small one makes short sends.
func start(v string, sndbuf int) (Server, error) {
	switch v {
	case "netpoller":
		return startNetpoller(false, sndbuf)
	case "netpoller-inline":
		return startNetpoller(true, sndbuf)
	case "uring":
		return startUring(sndbuf)
	}
	return nil, fmt.Errorf("sockab: no variant %q", v)
}

// ErrNotSupported reports a system without the io_uring the uring variant
// needs: another OS, io_uring missing or forbidden, or a kernel without the
// single mmap and no-drop features.
var ErrNotSupported = errors.New("sockab: io_uring not supported")
