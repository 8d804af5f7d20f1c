package sockab

import (
	"bufio"
	"fmt"
	"io"
	"net"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// client is a host on one connection: it keeps up to qd commands of one
// kind out, sending those that responses made room for in one write once
// no whole response is left buffered. The same client drives both
// variants; it allocates nothing per command.
type client struct {
	nc     net.Conn
	br     *bufio.Reader
	op     uint8
	qd     int
	cmdLen int
	// cmds is qd capsules: command s goes out of capsule s%qd, with CID
	// s and block s%qd%DiskBlocks (a write carries that block's Pattern).
	cmds   []byte
	rsp    [RespHdrSize]byte
	data   []byte
	nb     net.Buffers
	bufs   [2][]byte
	verify bool // check each read's data against Pattern
}

func dial(addr string, op uint8, qd int) (*client, error) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &client{nc: nc, br: bufio.NewReaderSize(nc, 64<<10), op: op, qd: qd, cmdLen: CmdSize, data: make([]byte, BlockSize)}
	if op == nvme.OpWrite {
		c.cmdLen = WriteCmdSize
	}
	c.cmds = make([]byte, qd*c.cmdLen)
	for t := range qd {
		b := c.cmds[t*c.cmdLen:][:c.cmdLen]
		PutCmd(b, op, uint16(t), t%DiskBlocks)
		if op == nvme.OpWrite {
			for i := range BlockSize {
				b[CmdSize+i] = Pattern(t%DiskBlocks, i)
			}
		}
	}
	return c, nil
}

func (c *client) Close() error { return c.nc.Close() }

// run issues n commands and checks their responses.
func (c *client) run(n int) error {
	issued := min(c.qd, n)
	if err := c.send(0, issued); err != nil {
		return err
	}
	respLen := RespHdrSize
	if c.op == nvme.OpRead {
		respLen = ReadRespSize
	}
	more := 0
	for done := 0; done < n; done++ {
		if _, err := io.ReadFull(c.br, c.rsp[:]); err != nil {
			return fmt.Errorf("response %d: %w", done, err)
		}
		if err := c.check(done); err != nil {
			return err
		}
		if issued+more < n {
			more++
		}
		if more > 0 && c.br.Buffered() < respLen {
			if err := c.send(issued, more); err != nil {
				return err
			}
			issued += more
			more = 0
		}
	}
	return nil
}

// check reads and checks the rest of the response to command s.
func (c *client) check(s int) error {
	h := nvme.TCPHeader(c.rsp[:])
	if c.op == nvme.OpWrite {
		if h.Type() != nvme.TCPCapsuleResp || h.PLEN() != RespHdrSize || h.CQE().CID() != uint16(s) {
			return fmt.Errorf("response %d: type %#x, plen %d, CID %d", s, h.Type(), h.PLEN(), h.CQE().CID())
		}
		return nil
	}
	if h.Type() != nvme.TCPC2HData || h.Flags() != nvme.TCPFlagLast|nvme.TCPFlagSuccess || h.PLEN() != ReadRespSize || h.CCCID() != uint16(s) {
		return fmt.Errorf("response %d: type %#x, flags %#x, plen %d, CCCID %d", s, h.Type(), h.Flags(), h.PLEN(), h.CCCID())
	}
	if _, err := io.ReadFull(c.br, c.data); err != nil {
		return fmt.Errorf("response %d data: %w", s, err)
	}
	if c.verify {
		blk := s % c.qd % DiskBlocks
		for i, v := range c.data {
			if v != Pattern(blk, i) {
				return fmt.Errorf("response %d: byte %d is %#x, want %#x", s, i, v, Pattern(blk, i))
			}
		}
	}
	return nil
}

// send sends commands s to s+k-1, in one write.
func (c *client) send(s, k int) error {
	if k == 0 {
		return nil
	}
	for j := s; j < s+k; j++ {
		SetCID(c.cmds[j%c.qd*c.cmdLen:], uint16(j))
	}
	first := s % c.qd
	if first+k <= c.qd {
		_, err := c.nc.Write(c.cmds[first*c.cmdLen : (first+k)*c.cmdLen])
		return err
	}
	c.bufs[0] = c.cmds[first*c.cmdLen:]
	c.bufs[1] = c.cmds[:(first+k-c.qd)*c.cmdLen]
	c.nb = c.bufs[:]
	_, err := c.nb.WriteTo(c.nc)
	return err
}
