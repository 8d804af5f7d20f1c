package tcptest

import (
	"fmt"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// The steps every NVMe-oF host takes, for tests that want a queue quickly.
// They use CIDs from MaxCID-64 up, so that a test's own stay free.

// ccEnable is CC with EN, IOSQES 6 and IOCQES 4, as the Linux host writes it.
const ccEnable = 1 | nvme.CommandSizeShift<<16 | nvme.CompletionSizeShift<<20

// Command makes an empty SQE with opcode op and command identifier cid,
// SGLs for its data (PSDT 01b).
func Command(op uint8, cid uint16) nvme.Command {
	c := nvme.Command(make([]byte, nvme.CommandSize))
	c.SetOpcode(op)
	c.SetCID(cid)
	c.SetFlags(nvme.PSDTSGLContig << 6)
	return c
}

// IO makes a Read or Write (or any NVM command with an LBA range) of nlb
// blocks at slba on namespace nsid.
func IO(op uint8, cid uint16, nsid nvme.NSID, slba uint64, nlb uint32) nvme.Command {
	c := Command(op, cid)
	c.SetNSID(nsid)
	c.SetSLBA(slba)
	c.SetNumBlocks(nlb)
	return c
}

// ConnectData is the data of a Connect.
func ConnectData(subnqn, hostnqn string, hostID [16]byte, cntlid nvme.CNTLID) []byte {
	b := make([]byte, nvme.ConnectDataSize)
	d := nvme.ConnectData(b)
	d.SetHostID(hostID)
	d.SetCNTLID(cntlid)
	d.SetSubNQN(subnqn)
	d.SetHostNQN(hostnqn)
	return b
}

// helperCID is a command identifier of the helpers.
func (c *Conn) helperCID() uint16 {
	c.helper = (c.helper + 1) % 64
	return uint16(MaxCID - 64 + c.helper)
}

func check(what string, rsp nvme.Completion, err error) (nvme.Completion, error) {
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if st := rsp.Status(); !st.IsSuccess() {
		return rsp, fmt.Errorf("%s: %v", what, st)
	}
	return rsp, nil
}

// Connect sends a Connect for queue qid of sqsize+1 entries, with its data
// in the capsule as hosts send it, and returns the completion (DW0 holds
// the CNTLID). cattr is the Connect Attributes (for example
// nvme.ConnectCATTRDisableSQFlow).
func (c *Conn) Connect(qid nvme.QID, sqsize uint16, cattr uint8, kato uint32, subnqn, hostnqn string, hostID [16]byte, cntlid nvme.CNTLID) (nvme.Completion, error) {
	cmd := Command(nvme.OpFabrics, c.helperCID())
	cmd.SetFCType(nvme.FCTypeConnect)
	cmd.SetConnect(0, qid, sqsize, cattr, kato)
	rsp, err := c.Do(cmd, ConnectData(subnqn, hostnqn, hostID, cntlid), true, true)
	return check("connect", rsp, err)
}

// PropertySet writes a 4-byte property.
func (c *Conn) PropertySet(off uint32, v uint32) error {
	cmd := Command(nvme.OpFabrics, c.helperCID())
	cmd.SetFCType(nvme.FCTypePropertySet)
	cmd.SetProperty(nvme.PropertySize4, off, uint64(v))
	rsp, err := c.Do(cmd, nil, false, false)
	_, err = check("property set", rsp, err)
	return err
}

// PropertyGet reads a property, 8 bytes wide when eight.
func (c *Conn) PropertyGet(off uint32, eight bool) (uint64, error) {
	cmd := Command(nvme.OpFabrics, c.helperCID())
	cmd.SetFCType(nvme.FCTypePropertyGet)
	size := uint8(nvme.PropertySize4)
	if eight {
		size = nvme.PropertySize8
	}
	cmd.SetProperty(size, off, 0)
	rsp, err := c.Do(cmd, nil, false, false)
	if rsp, err = check("property get", rsp, err); err != nil {
		return 0, err
	}
	return uint64(rsp.DW0()) | uint64(rsp.DW1())<<32, nil
}

// Enable sets CC.EN and waits for CSTS.RDY.
func (c *Conn) Enable() error {
	if err := c.PropertySet(nvme.PropCC, ccEnable); err != nil {
		return err
	}
	csts, err := c.PropertyGet(nvme.PropCSTS, false)
	if err != nil {
		return err
	}
	if !nvme.CSTS(csts).Ready() {
		return fmt.Errorf("CSTS %#x: not ready after CC.EN", csts)
	}
	return nil
}

// Identify reads Identify data (CNS cns of namespace nsid).
func (c *Conn) Identify(cns uint8, nsid nvme.NSID) ([]byte, error) {
	cmd := Command(nvme.OpAdminIdentify, c.helperCID())
	cmd.SetIdentify(cns, 0, 0)
	cmd.SetNSID(nsid)
	buf := make([]byte, nvme.IdentifyDataSize)
	rsp, err := c.Do(cmd, buf, false, false)
	_, err = check("identify", rsp, err)
	return buf, err
}

// GetLogPage reads n bytes of log page lid from offset off.
func (c *Conn) GetLogPage(lid uint8, n int, off uint64) ([]byte, error) {
	cmd := Command(nvme.OpAdminGetLogPage, c.helperCID())
	cmd.SetNSID(nvme.NSIDAll)
	cmd.SetGetLogPage(lid, uint32(n/4), off)
	buf := make([]byte, n)
	rsp, err := c.Do(cmd, buf, false, false)
	_, err = check("get log page", rsp, err)
	return buf, err
}

// KeepAlive sends a Keep Alive.
func (c *Conn) KeepAlive() error {
	rsp, err := c.Do(Command(nvme.OpAdminKeepAlive, c.helperCID()), nil, false, false)
	_, err = check("keep alive", rsp, err)
	return err
}
