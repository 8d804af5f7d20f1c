package rdmatest

import (
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Command builders for well-formed capsules, from the nvme package's wire
// formats. Each returns a new 64-byte command a test may mutate before
// sending it.

// sglFlags is CDW0 byte 1 of a command with SGLs (PSDT 01b), as hosts send.
const sglFlags = nvme.PSDTSGLContig << 6

// NewCommand is a zeroed command with opcode op, CID cid, PSDT set for
// SGLs, and SGL1 a null keyed data block (no data), as the Linux host sends
// a command without data: the kernel's nvmet refuses an all-zero SGL1.
func NewCommand(op uint8, cid uint16) nvme.Command {
	c := make(nvme.Command, nvme.CommandSize)
	c.SetOpcode(op)
	c.SetFlags(sglFlags)
	c.SetCID(cid)
	c.SGL1().SetKeyed(0, 0, 0, false)
	return c
}

// ConnectParams are a Fabrics Connect's fields.
type ConnectParams struct {
	HostNQN, SubNQN string
	HostID          [16]byte
	CNTLID          nvme.CNTLID // nvme.CNTLIDDynamic for an admin queue
	QID             nvme.QID
	SQSize          uint16 // 0's based
	KATO            uint32 // milliseconds
	CID             uint16
}

// ConnectCommand writes p's Connect data into Data()[off:off+1024] and
// returns the Connect command, its data keyed there.
func (c *Conn) ConnectCommand(p ConnectParams, off int) nvme.Command {
	d := nvme.ConnectData(c.data[off : off+nvme.ConnectDataSize])
	clear(d)
	d.SetHostID(p.HostID)
	d.SetCNTLID(p.CNTLID)
	d.SetSubNQN(p.SubNQN)
	d.SetHostNQN(p.HostNQN)
	cmd := NewCommand(nvme.OpFabrics, p.CID)
	cmd.SetFCType(nvme.FCTypeConnect)
	cmd.SetConnect(nvme.RDMACMRecFmt10, p.QID, p.SQSize, 0, p.KATO)
	c.Keyed(cmd.SGL1(), off, nvme.ConnectDataSize, false)
	return cmd
}

// Connect sends a Connect and returns its response.
func (c *Conn) Connect(p ConnectParams, timeout time.Duration) (nvme.Completion, error) {
	return c.Do(c.ConnectCommand(p, 0), timeout)
}

// PropertySetCommand sets the 4-byte property at ofst to v.
func PropertySetCommand(cid uint16, ofst uint32, v uint64) nvme.Command {
	cmd := NewCommand(nvme.OpFabrics, cid)
	cmd.SetFCType(nvme.FCTypePropertySet)
	cmd.SetProperty(nvme.PropertySize4, ofst, v)
	return cmd
}

// Enable sets CC.EN with 64-byte commands and 16-byte responses (IOSQES 6,
// IOCQES 4), as a host does after Connect, and returns the response.
func (c *Conn) Enable(cid uint16, timeout time.Duration) (nvme.Completion, error) {
	const cc = 1 | nvme.CommandSizeShift<<16 | nvme.CompletionSizeShift<<20
	return c.Do(PropertySetCommand(cid, nvme.PropCC, cc), timeout)
}

// IOCommand is a Read or Write of nlb blocks at slba on nsid, its data
// keyed at Data()[off:off+n].
func (c *Conn) IOCommand(op uint8, cid uint16, nsid nvme.NSID, slba uint64, nlb uint32, off, n int) nvme.Command {
	cmd := NewCommand(op, cid)
	cmd.SetNSID(nsid)
	cmd.SetSLBA(slba)
	cmd.SetNumBlocks(nlb)
	c.Keyed(cmd.SGL1(), off, n, false)
	return cmd
}
