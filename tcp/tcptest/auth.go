package tcptest

import (
	"bytes"
	"fmt"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme/dhchap"
)

// Auth is a host's side of in-band authentication (DH-HMAC-CHAP).
type Auth struct {
	HostNQN, SubNQN string
	Key             dhchap.Secret
	// CtrlKey, when set, has the host authenticate the controller too.
	CtrlKey dhchap.Secret
	// Hashes and Groups are offered in the Negotiate; nil: every one.
	Hashes, Groups []byte
	TID            uint16
}

// authCmd is an Authentication Send or Receive of n bytes.
func (c *Conn) authCmd(fctype uint8, n int) nvme.Command {
	cmd := Command(nvme.OpFabrics, c.helperCID())
	cmd.SetFCType(fctype)
	cmd.SetAuth(uint32(n))
	return cmd
}

// authSend sends msg in the capsule, as the Linux host sends fabrics
// commands.
func (c *Conn) authSend(msg []byte) error {
	rsp, err := c.Do(c.authCmd(nvme.FCTypeAuthSend, len(msg)), msg, true, true)
	_, err = check("authentication send", rsp, err)
	return err
}

// authReceive reads the controller's next message, C2HData.
func (c *Conn) authReceive() ([]byte, error) {
	buf := make([]byte, 4096)
	rsp, err := c.Do(c.authCmd(nvme.FCTypeAuthRecv, len(buf)), buf, false, false)
	_, err = check("authentication receive", rsp, err)
	return buf, err
}

// Authenticate runs DH-HMAC-CHAP on the queue as the Linux host does
// (Negotiate, Challenge, Reply, Success1 and, with a controller key,
// Success2). It returns the controller's Failure1 reason explanation, 0 on
// success; an error for a transport failure or a controller response that
// does not verify.
func (c *Conn) Authenticate(a Auth) (uint8, error) {
	hashes, groups := a.Hashes, a.Groups
	if hashes == nil {
		hashes = []byte{1, 2, 3}
	}
	if groups == nil {
		groups = []byte{0, 1, 2, 3, 4, 5}
	}
	buf := make([]byte, 4096)
	if err := c.authSend(buf[:nvme.PutAuthNegotiate(buf, a.TID, hashes, groups)]); err != nil {
		return 0, err
	}
	msg, err := c.authReceive()
	if err != nil {
		return 0, err
	}
	if m := nvme.AuthMessage(msg); m.ID() == nvme.AuthIDFailure1 {
		return m.FailureExplanation(), nil
	}
	ch := nvme.AuthChallenge(msg)
	if !ch.Valid() || msg[1] != nvme.AuthIDChallenge {
		return 0, fmt.Errorf("%w: not a challenge: % x", ErrProtocol, msg[:16])
	}
	h, g := dhchap.Hash(ch.HashID()), dhchap.Group(ch.DHGroup())
	c1 := ch.C1()
	var dhv, ks []byte
	if g != dhchap.Null {
		k, err := g.NewKey(nil)
		if err != nil {
			return 0, err
		}
		if ks, err = k.Shared(ch.DHValue()); err != nil {
			return 0, err
		}
		dhv = k.Public()
		c1 = dhchap.Augment(h, ks, c1)
	}
	r1 := dhchap.HostResponse(h, a.Key.Transform(a.HostNQN), c1, ch.Seq(), a.TID, a.HostNQN, a.SubNQN)
	var c2 []byte
	s2 := uint32(0)
	if !a.CtrlKey.IsZero() {
		c2, s2 = bytes.Repeat([]byte{0xc2}, h.Size()), 1
	}
	if err := c.authSend(buf[:nvme.PutAuthReply(buf, a.TID, s2, r1, c2, dhv)]); err != nil {
		return 0, err
	}
	if msg, err = c.authReceive(); err != nil {
		return 0, err
	}
	m := nvme.AuthMessage(msg)
	if m.ID() == nvme.AuthIDFailure1 {
		return m.FailureExplanation(), nil
	}
	if m.ID() != nvme.AuthIDSuccess1 {
		return 0, fmt.Errorf("%w: not success1: % x", ErrProtocol, msg[:16])
	}
	if c2 == nil {
		return 0, nil
	}
	if ks != nil {
		c2 = dhchap.Augment(h, ks, c2)
	}
	s1 := nvme.AuthSuccess1(msg)
	want := dhchap.ControllerResponse(h, a.CtrlKey.Transform(a.SubNQN), c2, s2, a.TID, a.HostNQN, a.SubNQN)
	if !s1.RValid() || !dhchap.Equal(s1.Response(), want) {
		c.authSend(buf[:nvme.PutAuthFailure(buf, nvme.AuthIDFailure2, a.TID, nvme.AuthFailFailed)])
		return 0, fmt.Errorf("%w: the controller's response does not verify", ErrProtocol)
	}
	return 0, c.authSend(buf[:nvme.PutAuthSuccess2(buf, a.TID)])
}
