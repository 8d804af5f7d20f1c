//go:build e2e

package e2e

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma/rdmatest"
)

// Hostile connection requests and Connects (TestHostile): bogus RDMA_CM
// private data, pipelined and contradictory Connects, a flood and churn.

// cmPrivateData: connection requests with bogus NVMe/RDMA private data.
// Returns what nvmeof-tgt must answer, for the nvmeof-tgt-only subtest.
func (hs *hostile) cmPrivateData() (mismatch []string) {
	const cat = "cm-private-data"
	pd := func(qid, hrq, hsq, recfmt uint16, n int) []byte {
		b := make([]byte, max(n, nvme.RDMACMRequestSize))
		r := nvme.RDMACMRequest(b)
		r.SetRECFMT(recfmt)
		r.SetQID(qid)
		r.SetHRQSIZE(hrq)
		r.SetHSQSIZE(hsq)
		return b[:n]
	}
	cases := []struct {
		name      string
		qid       uint16
		pd        []byte
		readDepth int
		want      nvme.RDMACMRejectStatus
	}{
		// The IB CM carries 56 bytes of private data whatever the host
		// gives, zero-padded: short data arrives as a request of sizes 0.
		{"none", 0, []byte{}, 0, 0},
		{"1 byte", 0, []byte{0}, 0, 0},
		{"recfmt 1", 0, pd(0, 32, 31, 1, 32), 0, nvme.RDMACMRejectInvalidRECFMT},
		{"recfmt 0xffff", 0, pd(0, 32, 31, 0xffff, 32), 0, nvme.RDMACMRejectInvalidRECFMT},
		{"qid 17", 17, pd(17, 32, 31, 0, 32), 0, nvme.RDMACMRejectInvalidQID},
		{"qid 0xffff", 0xffff, pd(0xffff, 32, 31, 0, 32), 0, nvme.RDMACMRejectInvalidQID},
		{"hsqsize 0", 0, pd(0, 32, 0, 0, 32), 0, nvme.RDMACMRejectInvalidHSQSIZE},
		{"admin hsqsize 32", 0, pd(0, 33, 32, 0, 32), 0, nvme.RDMACMRejectInvalidHSQSIZE},
		{"io hsqsize 0xffff", 1, pd(1, 0xffff, 0xffff, 0, 32), 0, nvme.RDMACMRejectInvalidHSQSIZE},
		{"hrqsize 0", 0, pd(0, 0, 31, 0, 32), 0, nvme.RDMACMRejectInvalidHRQSIZE},
		{"no read resources", 0, pd(0, 32, 31, 0, 32), -1, nvme.RDMACMRejectInvalidORD},
	}
	for i := 0; i < 20; i++ {
		b := make([]byte, 1+hs.rng.IntN(56))
		for j := range b {
			b[j] = byte(hs.rng.Uint32())
		}
		if len(b) >= 2 && b[0] == 0 && b[1] == 0 {
			b[0] = 1 // RECFMT 0 would make it a plausible request
		}
		cases = append(cases, struct {
			name      string
			qid       uint16
			pd        []byte
			readDepth int
			want      nvme.RDMACMRejectStatus
		}{fmt.Sprintf("random %d bytes", len(b)), 0, b, 0, 0})
	}
	for _, tc := range cases {
		hs.n.Sent[cat]++
		c, err := hs.dial(tc.qid, rdmatest.Options{PrivateData: tc.pd, ReadDepth: tc.readDepth, Depth: 32})
		var re *rdmatest.RejectError
		switch {
		case err == nil:
			// The kernel's nvmet checks some of these only at Connect.
			c.Close()
			hs.n.Rejects["accepted"]++
			mismatch = append(mismatch, fmt.Sprintf("%s: private data %x was accepted", tc.name, tc.pd))
		case errors.As(err, &re):
			key := re.Event
			if re.HasStatus {
				key = re.Status.String()
			}
			hs.n.Rejects[key]++
			if tc.want != 0 && (!re.HasStatus || re.Status != tc.want) {
				mismatch = append(mismatch, fmt.Sprintf("%s: %v, want %s", tc.name, re, tc.want))
			}
		default:
			hs.problem("%s %s: %v", cat, tc.name, err)
		}
	}
	return mismatch
}

// connects: pipelined Connects on one queue, Connects that contradict the
// queue, and a flood of connections.
func (hs *hostile) connects() (exactOne []string) {
	const cat = "connect"
	// Three Connects back to back on a new admin queue: one controller.
	for round := 0; round < 5; round++ {
		c, err := hs.dial(0, rdmatest.Options{})
		if err != nil {
			hs.problem("%s: admin queue: %v", cat, err)
			return
		}
		var cids []uint16
		for k := 0; k < 3; k++ {
			cmd := hs.connectCmd(c, 0, nvme.CNTLIDDynamic, 0)
			cids = append(cids, cmd.CID())
			hs.n.Sent[cat+"-pipelined"]++
			if err := c.Send(cmd); err != nil {
				hs.problem("%s: send: %v", cat, err)
			}
		}
		ok := 0
		for _, cid := range cids {
			rsp, err := c.RecvCID(int(cid), hTimeout)
			if err != nil {
				hs.n.Lost[cat+"-pipelined"]++
				break
			}
			hs.n.status(cat+"-pipelined", rsp.Status())
			if rsp.Status().IsSuccess() {
				ok++
			}
		}
		if ok != 1 {
			exactOne = append(exactOne, fmt.Sprintf("round %d: %d of 3 pipelined Connects succeeded", round, ok))
		}
		c.Close()
	}
	// I/O queue Connects that do not match: the dynamic CNTLID, another
	// controller's, a QID other than the connection's, a larger SQ, another
	// subsystem, NQNs without their NUL.
	hs.ensure(cat)
	type ioCase struct {
		name   string
		qid    nvme.QID
		cntlid nvme.CNTLID
		edit   func(cmd nvme.Command, data []byte)
	}
	for _, tc := range []ioCase{
		{"dynamic cntlid", 2, nvme.CNTLIDDynamic, nil},
		{"other cntlid", 2, nvme.CNTLID(hs.cntlid + 1), nil},
		{"qid other than the connection's", 3, 0, nil},
		{"sqsize over the connection's", 2, 0, func(cmd nvme.Command, _ []byte) { binary.LittleEndian.PutUint16(cmd[44:], 1023) }},
		{"other subsystem", 2, 0, func(_ nvme.Command, d []byte) { nvme.ConnectData(d).SetSubNQN(nqn("no-such")) }},
		{"unterminated NQNs", 2, 0, func(_ nvme.Command, d []byte) { fill(d[256:1024], 'a') }},
		{"recfmt 1", 2, 0, func(cmd nvme.Command, _ []byte) { cmd[40] = 1 }},
	} {
		c, err := hs.dial(2, rdmatest.Options{})
		if err != nil {
			hs.problem("%s %s: queue: %v", cat, tc.name, err)
			continue
		}
		cntlid := tc.cntlid
		if cntlid == 0 {
			cntlid = nvme.CNTLID(hs.cntlid)
		}
		cmd := hs.connectCmd(c, tc.qid, cntlid, 0)
		if tc.edit != nil {
			tc.edit(cmd, c.Data()[len(c.Data())-nvme.ConnectDataSize:])
		}
		hs.n.Sent[cat+"-bad"]++
		rsp, err := c.Do(cmd, hTimeout)
		switch {
		case err != nil:
			hs.n.Lost[cat+"-bad"]++
		default:
			hs.n.status(cat+"-bad", rsp.Status())
			if rsp.Status().IsSuccess() {
				hs.problem("%s: %s was accepted", cat, tc.name)
			}
		}
		c.Close()
	}
	// A flood: connections opened as fast as the target takes them, until
	// it refuses (max_queues) or 80 are open, each with a Connect of its own
	// controller in flight; then all closed at once.
	var flood []*rdmatest.Conn
	for len(flood) < 80 {
		hs.n.Sent[cat+"-flood"]++
		c, err := hs.dial(0, rdmatest.Options{DataSize: 8 * kib, Depth: 8})
		var re *rdmatest.RejectError
		if errors.As(err, &re) {
			key := re.Event
			if re.HasStatus {
				key = re.Status.String()
			}
			hs.n.Rejects["flood: "+key]++
			break
		}
		if err != nil {
			hs.problem("%s: flood connection %d: %v", cat, len(flood), err)
			break
		}
		if err := c.Send(hs.connectCmd(c, 0, nvme.CNTLIDDynamic, 0)); err != nil {
			hs.n.Lost[cat+"-flood"]++
		}
		flood = append(flood, c)
	}
	hs.t.Logf("connect flood: %d connections open at once", len(flood))
	for _, c := range flood {
		c.Close()
	}
	// Churn: connect, Connect, gone. The flood's queues drain first: a
	// refusal for resources is tried again for a while.
	for i := 0; i < 20; i++ {
		hs.n.Sent[cat+"-churn"]++
		var c *rdmatest.Conn
		var err error
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			var re *rdmatest.RejectError
			c, err = hs.dial(0, rdmatest.Options{})
			if !errors.As(err, &re) || !re.HasStatus || re.Status != nvme.RDMACMRejectNoResources || time.Now().After(deadline) {
				break
			}
			hs.n.Rejects["churn, while the flood drains: "+re.Status.String()]++
		}
		if err != nil {
			hs.problem("%s: churn %d: %v", cat, i, err)
			continue
		}
		c.Send(hs.connectCmd(c, 0, nvme.CNTLIDDynamic, 0))
		if i%2 == 0 {
			c.RecvCID(-1, hTimeout)
		}
		c.Close()
	}
	return exactOne
}
