//go:build e2e

package e2e

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma/rdmatest"
)

// A hostile host over a real connection (issue 11, "Trust"): a raw initiator
// (rdma/rdmatest) sends what no well-behaved host does, while the kernel host
// runs a verifying fio on another subsystem of the same target.

const (
	// The hostile host's data buffer: [0, 2 MiB) for single commands up to
	// past MDTS, then 16 slots of 64 KiB for commands in flight together,
	// and the Connect data at the end.
	hData      = 4 * mib
	hBig       = 0
	hSlots     = 2 * mib
	hSlotSize  = 64 * kib
	hMarker    = 0xe7 // every byte of the buffer before a command
	hDepth     = 32
	hTimeout   = 10 * time.Second
	hNSBlocks  = 16 * mib / 512
	hOwnNSID   = 1 // written only with commands the test builds, and read back exactly
	hNoiseNSID = 2 // random and mutated commands' target
)

// fioPattern is what the kernel host's fio writes, every byte of every block
// (verify=pattern): data of that host's subsystem. It must never reach the
// hostile host.
const fioPattern = "0x7a5c3e91d4b6f802"

// hostileCounts is what the hostile host sent and saw, for the issue's
// closing note (hostile-counts.json in the test's results).
type hostileCounts struct {
	// Sent counts inputs by category.
	Sent map[string]int `json:"sent"`
	// Statuses counts responses by category and status.
	Statuses map[string]map[string]int `json:"statuses"`
	// Rejects counts connection requests refused, by reject status.
	Rejects map[string]int `json:"rejects"`
	// Lost counts, by category, connections the target dropped (a bad
	// key, a queue that never posts receives, a Fabrics Disconnect...).
	Lost map[string]int `json:"connections_lost"`
	// DataChecks counts commands whose buffer was checked after their
	// response: nothing outside what the command may write was written,
	// and nothing written holds the kernel host's data. ExactChecks of them
	// were reads of the host's own namespace compared byte for byte.
	DataChecks  int `json:"data_checks"`
	ExactChecks int `json:"exact_checks"`
	// Problems lists what the target did wrong (empty when the test passes).
	Problems []string `json:"problems"`
}

func (c *hostileCounts) status(cat string, st nvme.Status) {
	if c.Statuses[cat] == nil {
		c.Statuses[cat] = map[string]int{}
	}
	c.Statuses[cat][nvme.MakeStatus(st.SCT(), st.SC()).String()]++
}

// hostile is the test initiator of TestHostile: a host identity, its
// controller on sub (an admin and an I/O queue), what it wrote to its own
// namespace, and the counts.
type hostile struct {
	t          *testing.T
	h          host
	sub        string
	admin, io  *rdmatest.Conn
	cntlid     uint16
	cid        uint16
	rng        *rand.Rand
	shadow     []byte // namespace hOwnNSID as written
	known      []bool // per block: shadow is what the namespace holds
	fioMarks   [][]byte
	n          hostileCounts
	controller int // controllers made
	// dropped lists the commands of answerAll categories whose queue was lost: nvmeof-tgt
	// must answer them with a status on a live queue (the kernel's nvmet may drop some).
	dropped []string
}

// kernelRecovery matches the Linux host's log of a controller that lost a queue or timed out.
var kernelRecovery = regexp.MustCompile(`(?i)reconnect|error recovery|timeout|resetting|failed to connect`)

// answerAll are the categories whose every command is well formed enough to be answered with
// a status: losing the queue instead is a failure for nvmeof-tgt. The others (random and
// mutated capsules, CM private data, Connect floods, queues that post no receives,
// disconnects mid-transfer) may end in a teardown by design.
var answerAll = map[string]bool{"bad-sgl": true, "duplicate-cid": true, "get-features": true,
	"get-log-page": true, "own-reads": true, "own-writes": true}

// lost counts a connection lost under x, and notes it when x's category must be answered.
func (hs *hostile) lost(x call, how string) {
	hs.n.Lost[x.cat]++
	if answerAll[x.cat] {
		hs.dropped = append(hs.dropped, fmt.Sprintf("%s: %s after command %x (+%d bytes in capsule)", x.cat, how, []byte(x.cmd), len(x.icd)))
	}
}

func newHostile(t *testing.T, sub string) *hostile {
	pat := []byte{0x7a, 0x5c, 0x3e, 0x91, 0xd4, 0xb6, 0xf8, 0x02}
	rev := bytes.Clone(pat)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	hs := &hostile{
		t: t, h: newHost(t), sub: sub, rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11)),
		shadow: make([]byte, hNSBlocks*512), known: make([]bool, hNSBlocks),
		fioMarks: [][]byte{pat, rev},
		n: hostileCounts{Sent: map[string]int{}, Statuses: map[string]map[string]int{},
			Rejects: map[string]int{}, Lost: map[string]int{}},
	}
	// A memory namespace starts zeroed.
	for i := range hs.known {
		hs.known[i] = true
	}
	return hs
}

func (hs *hostile) problem(format string, args ...any) {
	hs.t.Helper()
	msg := fmt.Sprintf(format, args...)
	hs.n.Problems = append(hs.n.Problems, msg)
	hs.t.Error(msg)
}

func (hs *hostile) nextCID() uint16 {
	hs.cid++
	return hs.cid
}

func (hs *hostile) dial(qid uint16, o rdmatest.Options) (*rdmatest.Conn, error) {
	o.Addr, o.Port, o.QID = labAddr, portRDMA, qid
	if o.Depth == 0 {
		o.Depth = hDepth
	}
	if o.DataSize == 0 {
		o.DataSize = hData
	}
	return rdmatest.Dial(o)
}

// connectCmd is a Connect for this host on c.
func (hs *hostile) connectCmd(c *rdmatest.Conn, qid nvme.QID, cntlid nvme.CNTLID, kato uint32) nvme.Command {
	var id [16]byte
	copy(id[:], uuidBytes(hs.h.ID))
	return c.ConnectCommand(rdmatest.ConnectParams{
		HostNQN: hs.h.NQN, SubNQN: hs.sub, HostID: id, CNTLID: cntlid, QID: qid,
		SQSize: hDepth - 1, KATO: kato, CID: hs.nextCID(),
	}, len(c.Data())-nvme.ConnectDataSize)
}

// uuidBytes parses the 36-character form.
func uuidBytes(s string) []byte {
	b, _ := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	return b
}

// controllerUp makes a controller: admin queue, Connect, CC.EN, one I/O
// queue. The previous one, if any, is closed first.
func (hs *hostile) controllerUp() {
	hs.t.Helper()
	hs.closeController()
	var err error
	if hs.admin, err = hs.dial(0, rdmatest.Options{}); err != nil {
		hs.t.Fatalf("hostile host: admin queue: %v", err)
	}
	rsp, err := hs.admin.Do(hs.connectCmd(hs.admin, 0, nvme.CNTLIDDynamic, 0), hTimeout)
	if err != nil || !rsp.Status().IsSuccess() {
		hs.t.Fatalf("hostile host: admin Connect: %v %v", err, statusOf(rsp))
	}
	hs.cntlid = uint16(rsp.DW0())
	if rsp, err := hs.admin.Enable(hs.nextCID(), hTimeout); err != nil || !rsp.Status().IsSuccess() {
		hs.t.Fatalf("hostile host: CC.EN: %v %v", err, statusOf(rsp))
	}
	if hs.io, err = hs.dial(1, rdmatest.Options{}); err != nil {
		hs.t.Fatalf("hostile host: I/O queue: %v", err)
	}
	rsp, err = hs.io.Do(hs.connectCmd(hs.io, 1, nvme.CNTLID(hs.cntlid), 0), hTimeout)
	if err != nil || !rsp.Status().IsSuccess() {
		hs.t.Fatalf("hostile host: I/O Connect: %v %v", err, statusOf(rsp))
	}
	hs.controller++
}

func (hs *hostile) closeController() {
	for _, c := range []*rdmatest.Conn{hs.io, hs.admin} {
		if c != nil {
			c.Close()
		}
	}
	hs.admin, hs.io = nil, nil
}

// ensure makes a new controller if the target dropped a queue of this one.
func (hs *hostile) ensure(cat string) {
	hs.t.Helper()
	if hs.admin != nil && hs.admin.Alive() == nil && hs.io != nil && hs.io.Alive() == nil {
		return
	}
	if hs.admin != nil || hs.io != nil {
		hs.n.Lost[cat]++ // not when the test closed them itself
	}
	hs.controllerUp()
}

func statusOf(rsp nvme.Completion) string {
	if rsp == nil {
		return "(no response)"
	}
	return rsp.Status().String()
}

// call is one command of the hostile host.
type call struct {
	cat  string
	c    *rdmatest.Conn
	cmd  nvme.Command
	icd  []byte // in-capsule data sent after the command
	off  int    // the buffer region marked before and checked after
	span int
	// exact, for a read of hOwnNSID: what a success must return at off.
	exact []byte
	// mustFail: the target must refuse the command (a success is a bug).
	mustFail bool
	// noWait: do not wait for the response (an AER, held by the target).
	noWait bool
}

// do sends x and checks its response and buffer. It reports the response,
// or nil when the connection was lost on the way (counted).
func (hs *hostile) do(x call) nvme.Completion {
	hs.t.Helper()
	hs.n.Sent[x.cat]++
	data := x.c.Data()
	fill(data[x.off:x.off+x.span], hMarker)
	capsule := append(bytes.Clone(x.cmd[:nvme.CommandSize]), x.icd...)
	if err := x.c.Send(capsule); err != nil {
		hs.lost(x, "send failed: "+err.Error())
		return nil
	}
	if x.noWait {
		return nil
	}
	rsp, err := x.c.RecvCID(int(x.cmd.CID()), hTimeout)
	switch {
	case errors.Is(err, rdmatest.ErrTimeout):
		hs.problem("%s: no response in %v on a live queue to %x (+%d bytes in capsule)", x.cat, hTimeout, []byte(x.cmd), len(x.icd))
		return nil
	case err != nil:
		hs.lost(x, "no response: "+err.Error())
		return nil
	}
	hs.n.status(x.cat, rsp.Status())
	hs.checkData(x, rsp.Status().IsSuccess())
	if x.mustFail && rsp.Status().IsSuccess() {
		hs.problem("%s: command %x succeeded; it must fail", x.cat, []byte(x.cmd))
	}
	return rsp
}

// checkData checks x's buffer region after its response: only the window
// its keyed SGL gives the target (for a success) may have changed, and what
// changed holds nothing of the kernel host's, and exactly x.exact when set.
func (hs *hostile) checkData(x call, ok bool) {
	hs.t.Helper()
	hs.n.DataChecks++
	region := x.c.Data()[x.off : x.off+x.span]
	lo, hi := 0, 0 // the window the target may write, relative to off
	if sgl := x.cmd.SGL1(); ok && sgl.Type() == nvme.SGLTypeKeyedDataBlock && sgl.Key() == x.c.RKey() {
		start := int64(sgl.Address()) - int64(x.c.Addr(x.off))
		lo = int(max(0, min(start, int64(x.span))))
		hi = int(max(int64(lo), min(start+int64(sgl.Length()), int64(x.span))))
	}
	for _, part := range [][2]int{{0, lo}, {hi, len(region)}} {
		if i := notMarker(region[part[0]:part[1]]); i >= 0 {
			i += part[0]
			hs.problem("%s: command %x (success %v) wrote byte %d of the buffer, outside the %d bytes at %d it may write: %x",
				x.cat, []byte(x.cmd), ok, i, hi-lo, lo, region[i:min(i+16, len(region))])
			return
		}
	}
	got := region[lo:hi]
	if i := hs.fioIndex(got); i >= 0 {
		hs.problem("%s: command %x returned the kernel host's data (fio's pattern at byte %d of %d): stale data",
			x.cat, []byte(x.cmd), i, len(got))
		return
	}
	if x.exact != nil && ok {
		hs.n.ExactChecks++
		if n := min(len(x.exact), len(got)); !bytes.Equal(got[:n], x.exact[:n]) {
			i := 0
			for i < n && got[i] == x.exact[i] {
				i++
			}
			hs.problem("%s: read %x returned %x at byte %d, where the host wrote %x", x.cat, []byte(x.cmd),
				got[i:min(i+16, n)], i, x.exact[i:min(i+16, n)])
		}
	}
}

func (hs *hostile) fioIndex(b []byte) int {
	for _, m := range hs.fioMarks {
		if i := bytes.Index(b, m); i >= 0 {
			return i
		}
	}
	return -1
}

func fill(b []byte, v byte) {
	if len(b) == 0 {
		return
	}
	b[0] = v
	for n := 1; n < len(b); n *= 2 {
		copy(b[n:], b[:n])
	}
}

var markerBlock = bytes.Repeat([]byte{hMarker}, 4096)

// notMarker is the index of the first byte of b that is not hMarker, or -1.
func notMarker(b []byte) int {
	for off := 0; off < len(b); off += len(markerBlock) {
		end := min(off+len(markerBlock), len(b))
		if !bytes.Equal(b[off:end], markerBlock[:end-off]) {
			for i := off; i < end; i++ {
				if b[i] != hMarker {
					return i
				}
			}
		}
	}
	return -1
}

// --- the host's own namespace ---

// writeOwnData fills the data region with random bytes, writes them and
// records them as the namespace's.
func (hs *hostile) writeOwnData(cat string, slba uint64, n int) {
	hs.t.Helper()
	buf := hs.io.Data()[hBig : hBig+n*512]
	for i := range buf {
		buf[i] = byte(hs.rng.Uint32())
	}
	// Not through do: the marker would overwrite the data.
	hs.n.Sent[cat]++
	cmd := hs.io.IOCommand(nvme.OpWrite, hs.nextCID(), hOwnNSID, slba, uint32(n), hBig, n*512)
	rsp, err := hs.io.Do(cmd, hTimeout)
	if err != nil || !rsp.Status().IsSuccess() {
		hs.t.Fatalf("%s: write of %d blocks at %d: %v %s", cat, n, slba, err, statusOf(rsp))
	}
	hs.n.status(cat, rsp.Status())
	copy(hs.shadow[slba*512:], buf)
	for b := slba; b < slba+uint64(n); b++ {
		hs.known[b] = true
	}
}

// readOwn reads n blocks at slba of hOwnNSID into the big region and
// checks them against what was written.
func (hs *hostile) readOwn(cat string, slba uint64, n int) {
	hs.t.Helper()
	for b := slba; b < slba+uint64(n); b++ {
		if !hs.known[b] {
			hs.t.Fatalf("%s: block %d is not known", cat, b)
		}
	}
	rsp := hs.do(call{cat: cat, c: hs.io, cmd: hs.io.IOCommand(nvme.OpRead, hs.nextCID(), hOwnNSID, slba, uint32(n), hBig, n*512),
		off: hBig, span: n*512 + 4*kib, exact: hs.shadow[slba*512 : (slba+uint64(n))*512]})
	if rsp == nil || !rsp.Status().IsSuccess() {
		hs.problem("%s: read of %d blocks at %d: %s", cat, n, slba, statusOf(rsp))
	}
}

// verifyOwn reads back the first blocks of the own namespace, written and
// not, in 128 KiB reads.
func (hs *hostile) verifyOwn(cat string, blocks int) {
	hs.t.Helper()
	for b := 0; b < blocks; b += 256 {
		hs.readOwn(cat, uint64(b), 256)
	}
}

// --- the categories ---

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

// badSGLs: SGLs no host may send, on Read and Write of the own namespace.
// Each must fail and leave the queue serving.
func (hs *hostile) badSGLs() {
	const cat = "bad-sgl"
	const mdts = 1 * mib // the target's default; over it on either target
	// io makes sure the queue is up first: a command is built for the
	// connection it names the buffer of.
	// Reads go to the host's own namespace (a wrong success is checked
	// byte for byte), writes to the other one (a wrong success must not
	// spoil the reference).
	io := func(op uint8, nlb uint32) nvme.Command {
		hs.ensure(cat)
		nsid := nvme.NSID(hOwnNSID)
		if op == nvme.OpWrite {
			nsid = hNoiseNSID
		}
		return hs.io.IOCommand(op, hs.nextCID(), nsid, 0, nlb, hBig, int(nlb)*512)
	}
	send := func(cmd nvme.Command, icd []byte) {
		span := 64 * kib
		if cmd.NumBlocks() > 128 {
			span = 2 * mib
		}
		hs.do(call{cat: cat, c: hs.io, cmd: cmd, icd: icd, off: hBig, span: span, mustFail: true})
	}
	// Keyed lengths over MDTS: a transfer past MDTS, and SGLs up to the
	// 24-bit maximum; whatever the target answers, it writes nothing past
	// the data (checkData), but a transfer past MDTS must fail.
	for _, op := range []uint8{nvme.OpRead, nvme.OpWrite} {
		c := io(op, mdts/512+8)
		send(c, nil)
		c = io(op, mdts/512+8)
		hs.io.Keyed(c.SGL1(), hBig, 1<<24-1, false)
		send(c, nil)
		c = io(op, 8)
		hs.io.Keyed(c.SGL1(), hBig, 8*512-1, false) // shorter than the data
		send(c, nil)
		c = io(op, 8)
		hs.io.Keyed(c.SGL1(), hBig, 0, false)
		send(c, nil)
	}
	// A longer keyed SGL than the data is allowed: the target moves the data
	// only (checkData would catch more).
	for _, op := range []uint8{nvme.OpRead} {
		c := io(op, 8)
		hs.io.Keyed(c.SGL1(), hBig, 1<<24-1, false)
		hs.do(call{cat: cat, c: hs.io, cmd: c, off: hBig, span: 2 * mib, exact: hs.shadow[:8*512]})
		// checkData allows the whole SGL; the exact check covers the data,
		// and past it the marker must stay.
		if d := hs.io.Data()[hBig+8*512 : hBig+64*kib]; notMarker(d) >= 0 {
			hs.problem("%s: a 4 KiB read with a 16 MiB SGL wrote past its data", cat)
		}
	}
	// In-capsule offsets past the data, and lengths over what came.
	icd := make([]byte, 4*kib)
	for _, tc := range []struct{ off, n uint64 }{
		{8 << 10, 4 << 10}, // past the in-capsule data size
		{8<<10 + 16, 4 << 10},
		{4 << 10, 4 << 10}, // within the size, past the bytes sent
		{0, 8 << 10},       // longer than sent
		{1 << 63, 4 << 10}, // overflows
		{^uint64(0) - 100, 4 << 10},
	} {
		c := io(nvme.OpWrite, 8)
		nvme.SGLDescriptor(c.SGL1()).SetDataBlockOffset(tc.off, uint32(tc.n))
		send(c, icd)
	}
	// Wrong types and subtypes: every type, and every subtype of the two
	// types the transport takes.
	for typ := 0; typ < 16; typ++ {
		for sub := 0; sub < 16; sub++ {
			valid := (typ == nvme.SGLTypeKeyedDataBlock && (sub == nvme.SGLSubtypeAddress || sub == nvme.SGLSubtypeInvalidateKey)) ||
				(typ == nvme.SGLTypeDataBlock && sub == nvme.SGLSubtypeOffset)
			tried := typ == nvme.SGLTypeKeyedDataBlock || typ == nvme.SGLTypeDataBlock || sub == 0
			if valid || !tried {
				continue
			}
			for _, op := range []uint8{nvme.OpRead, nvme.OpWrite}[(typ+sub)%2:][:1] {
				c := io(op, 8)
				c[39] = byte(typ<<4 | sub)
				var data []byte
				if op == nvme.OpWrite && typ == nvme.SGLTypeDataBlock {
					data = icd
				}
				send(c, data)
			}
		}
	}
	// A data direction that contradicts the opcode: in-capsule data for a
	// read and for admin commands that return data.
	c := io(nvme.OpRead, 8)
	nvme.SGLDescriptor(c.SGL1()).SetDataBlockOffset(0, 4<<10)
	send(c, icd)
	for _, admin := range []nvme.Command{identifyCmd(hs.nextCID()), logPageCmd(hs.nextCID(), nvme.LogSMART, 128, 0)} {
		nvme.SGLDescriptor(admin.SGL1()).SetDataBlockOffset(0, 4<<10)
		hs.ensure(cat)
		hs.do(call{cat: cat, c: hs.admin, cmd: admin, icd: icd, off: hBig, span: 64 * kib, mustFail: true})
	}
	// PRPs (PSDT 00b); then PSDT 10b and the reserved 11b, whose answer is
	// only recorded.
	c = io(nvme.OpRead, 8)
	c.SetFlags(0)
	send(c, nil)
	for _, flags := range []uint8{2 << 6, 3 << 6} {
		c := io(nvme.OpRead, 8)
		c.SetFlags(flags)
		hs.do(call{cat: cat, c: hs.io, cmd: c, off: hBig, span: 64 * kib, exact: hs.shadow[:8*512]})
	}
	// Past the namespace's end.
	for _, slba := range []uint64{hNSBlocks, hNSBlocks - 1, ^uint64(0)} {
		c := io(nvme.OpRead, 8)
		c.SetSLBA(slba)
		send(c, nil)
	}
	// A command without data but a keyed SGL: it succeeds, and moves nothing.
	hs.ensure(cat)
	fl := hs.io.IOCommand(nvme.OpFlush, hs.nextCID(), hOwnNSID, 0, 1, hBig, 64*kib)
	hs.do(call{cat: cat, c: hs.io, cmd: fl, off: hBig, span: 128 * kib})
	if d := hs.io.Data()[hBig : hBig+128*kib]; notMarker(d) >= 0 {
		hs.problem("%s: a Flush with a keyed SGL moved data", cat)
	}
}

func identifyCmd(cid uint16) nvme.Command {
	c := rdmatest.NewCommand(nvme.OpAdminIdentify, cid)
	c.SetIdentify(1, 0, 0)
	return c
}

func logPageCmd(cid uint16, lid uint8, numd uint32, off uint64) nvme.Command {
	c := rdmatest.NewCommand(nvme.OpAdminGetLogPage, cid)
	c.SetNSID(nvme.NSIDAll)
	c.SetGetLogPage(lid, numd, off)
	return c
}

// duplicateCIDs: commands in flight together under one CID. Each gets its
// response, and reads return what was written.
func (hs *hostile) duplicateCIDs() {
	const cat = "duplicate-cid"
	hs.ensure(cat)
	const n = 8
	cid := hs.nextCID()
	// Writes of distinct data under one CID, to distinct blocks.
	for i := 0; i < n; i++ {
		off := hSlots + i*hSlotSize
		buf := hs.io.Data()[off : off+16*512]
		for j := range buf {
			buf[j] = byte(hs.rng.Uint32())
		}
		slba := uint64(4096 + i*16)
		copy(hs.shadow[slba*512:], buf)
		cmd := hs.io.IOCommand(nvme.OpWrite, cid, hOwnNSID, slba, 16, off, 16*512)
		hs.n.Sent[cat]++
		if err := hs.io.Send(cmd); err != nil {
			hs.problem("%s: send: %v", cat, err)
			return
		}
	}
	for i := 0; i < n; i++ {
		rsp, err := hs.io.RecvCID(int(cid), hTimeout)
		if err != nil {
			hs.problem("%s: %d of %d writes under CID %d answered: %v", cat, i, n, cid, err)
			return
		}
		hs.n.status(cat, rsp.Status())
		if !rsp.Status().IsSuccess() {
			// The data may or may not be there now.
			hs.problem("%s: a write under a duplicate CID failed: %s", cat, rsp.Status())
		}
	}
	// Reads under one CID.
	cid = hs.nextCID()
	for i := 0; i < n; i++ {
		off := hSlots + i*hSlotSize
		fill(hs.io.Data()[off:off+hSlotSize], hMarker)
		hs.n.Sent[cat]++
		if err := hs.io.Send(hs.io.IOCommand(nvme.OpRead, cid, hOwnNSID, uint64(4096+i*16), 16, off, 16*512)); err != nil {
			hs.problem("%s: send: %v", cat, err)
			return
		}
	}
	for i := 0; i < n; i++ {
		rsp, err := hs.io.RecvCID(int(cid), hTimeout)
		if err != nil {
			hs.problem("%s: %d of %d reads under CID %d answered: %v", cat, i, n, cid, err)
			return
		}
		hs.n.status(cat, rsp.Status())
		if !rsp.Status().IsSuccess() {
			hs.problem("%s: a read under a duplicate CID failed: %s", cat, rsp.Status())
		}
	}
	for i := 0; i < n; i++ {
		off := hSlots + i*hSlotSize
		slba := 4096 + i*16
		hs.n.DataChecks++
		hs.n.ExactChecks++
		got, want := hs.io.Data()[off:off+16*512], hs.shadow[slba*512:(slba+16)*512]
		if !bytes.Equal(got, want) {
			hs.problem("%s: read %d under a duplicate CID returned other data than was written", cat, i)
		}
		if rest := hs.io.Data()[off+16*512 : off+hSlotSize]; notMarker(rest) >= 0 {
			hs.problem("%s: read %d wrote past its data", cat, i)
		}
	}
	// Admin commands under one CID.
	cid = hs.nextCID()
	for i := 0; i < 4; i++ {
		c := identifyCmd(cid)
		hs.admin.Keyed(c.SGL1(), hSlots+i*hSlotSize, 4096, false)
		hs.n.Sent[cat]++
		if err := hs.admin.Send(c); err != nil {
			hs.problem("%s: send: %v", cat, err)
			return
		}
	}
	for i := 0; i < 4; i++ {
		rsp, err := hs.admin.RecvCID(int(cid), hTimeout)
		if err != nil {
			hs.problem("%s: %d of 4 Identify under CID %d answered: %v", cat, i, cid, err)
			return
		}
		hs.n.status(cat, rsp.Status())
	}
}

// features: Get Features for every FID and SEL.
func (hs *hostile) features() {
	const cat = "get-features"
	// The FIDs base and fabrics define, the edges of the vendor range, and
	// a few others at random.
	var fids []int
	for fid := 0; fid < 256; fid++ {
		if fid <= 0x20 || (fid >= 0x78 && fid <= 0x85) || fid == 0xbf || fid == 0xc0 || fid == 0xff || hs.rng.IntN(16) == 0 {
			fids = append(fids, fid)
		}
	}
	for _, fid := range fids {
		for sel := 0; sel < 4; sel++ {
			hs.ensure(cat)
			c := rdmatest.NewCommand(nvme.OpAdminGetFeatures, hs.nextCID())
			c.SetCDW(10, uint32(fid)|uint32(sel)<<8)
			if fid&1 == 1 {
				c.SetNSID(hOwnNSID)
			}
			hs.admin.Keyed(c.SGL1(), hBig, 4096, false)
			hs.do(call{cat: cat, c: hs.admin, cmd: c, off: hBig, span: 8 * kib})
		}
	}
}

// logPages: Get Log Page for every LID, at offsets and lengths on and past
// every edge, with LSP and RAE set now and then.
func (hs *hostile) logPages() {
	const cat = "get-log-page"
	edges := []struct {
		numd uint32
		off  uint64
	}{
		{1, 0}, {128, 0}, {1024, 0}, {1, 4}, {1, 1}, {2, 510}, {128, 511}, {128, 512}, {1024, 4096},
		{1, 1 << 32}, {1, ^uint64(0) - 3}, {1, ^uint64(0)}, {0x10000, 0}, // NUMDU
	}
	for lid := 0; lid < 256; lid++ {
		// Every edge for the LIDs base and fabrics define and the ends of
		// the ranges; two for the others.
		all := lid <= 0x12 || (lid >= 0x6f && lid <= 0x72) || (lid >= 0x7f && lid <= 0x82) || lid == 0xbf || lid == 0xc0 || lid == 0xff
		for i, e := range edges {
			if !all && i != 1 && i != 10 {
				continue
			}
			hs.ensure(cat)
			c := logPageCmd(hs.nextCID(), uint8(lid), e.numd, e.off)
			if i%4 == 3 {
				c.SetCDW(10, c.CDW(10)|uint32(hs.rng.IntN(16))<<8|1<<15) // LSP, RAE
			}
			n := int(min(uint64(e.numd)*4, 1*mib))
			hs.admin.Keyed(c.SGL1(), hBig, n, false)
			hs.do(call{cat: cat, c: hs.admin, cmd: c, off: hBig, span: n + 4*kib})
		}
	}
	// Past MDTS.
	hs.ensure(cat)
	c := logPageCmd(hs.nextCID(), nvme.LogSMART, (1*mib+4*kib)/4, 0)
	hs.admin.Keyed(c.SGL1(), hBig, 1*mib+4*kib, false)
	hs.do(call{cat: cat, c: hs.admin, cmd: c, off: hBig, span: 2 * mib, mustFail: true})
}

// baseCommands are well-formed commands to mutate, with their queue and the
// in-capsule data they carry.
func (hs *hostile) baseCommands() []call {
	cid := hs.nextCID()
	noise := func(op uint8, nlb uint32) nvme.Command {
		return hs.io.IOCommand(op, cid, hNoiseNSID, uint64(hs.rng.IntN(hNSBlocks-64)), nlb, hBig, int(nlb)*512)
	}
	icdWrite := noise(nvme.OpWrite, 8)
	nvme.SGLDescriptor(icdWrite.SGL1()).SetDataBlockOffset(0, 4096)
	feat := rdmatest.NewCommand(nvme.OpAdminGetFeatures, cid)
	feat.SetCDW(10, 0x07)
	hs.admin.Keyed(feat.SGL1(), hBig, 4096, false)
	id := identifyCmd(cid)
	hs.admin.Keyed(id.SGL1(), hBig, 4096, false)
	lp := logPageCmd(cid, nvme.LogSMART, 128, 0)
	hs.admin.Keyed(lp.SGL1(), hBig, 512, false)
	return []call{
		{c: hs.admin, cmd: id},
		{c: hs.admin, cmd: lp},
		{c: hs.admin, cmd: feat},
		{c: hs.admin, cmd: rdmatest.NewCommand(nvme.OpAdminKeepAlive, cid)},
		{c: hs.io, cmd: noise(nvme.OpRead, 8)},
		{c: hs.io, cmd: noise(nvme.OpWrite, 8)},
		{c: hs.io, cmd: noise(nvme.OpRead, 256)},
		{c: hs.io, cmd: icdWrite, icd: make([]byte, 4096)},
		{c: hs.io, cmd: rdmatest.NewCommand(nvme.OpFlush, cid)},
	}
}

// mutated: well-formed commands with one to three bytes changed. The SGL's
// address and key are left alone most of the time, so that the target's
// RDMA reaches the buffer and the data can be checked.
func (hs *hostile) mutated(n int) {
	const cat = "mutated-capsule"
	for i := 0; i < n; i++ {
		hs.ensure(cat)
		bases := hs.baseCommands()
		x := bases[hs.rng.IntN(len(bases))]
		x.cat, x.off, x.span = cat, hBig, 256*kib
		for k := 1 + hs.rng.IntN(3); k > 0; k-- {
			pos := hs.rng.IntN(nvme.CommandSize)
			// SGL1 is bytes 24-39: address 24-31, length 32-34, key 35-38,
			// type 39. Mostly its length and type, not its address or key.
			if pos >= 24 && pos < 39 && hs.rng.IntN(4) != 0 {
				pos = []int{32, 33, 34, 39}[hs.rng.IntN(4)]
			}
			x.cmd[pos] = byte(hs.rng.Uint32())
		}
		hs.tame(&x)
		hs.do(x)
	}
}

// random: capsules of random bytes, most with a keyed SGL into the buffer
// (so that the data can be checked), some with in-capsule data, some
// entirely random (a random key makes the target's RDMA fail, which must
// cost only the queue).
func (hs *hostile) random(n int) {
	const cat = "random-capsule"
	ops := []uint8{nvme.OpAdminGetLogPage, nvme.OpAdminIdentify, nvme.OpAdminGetFeatures, nvme.OpAdminSetFeatures,
		nvme.OpAdminKeepAlive, nvme.OpFabrics, nvme.OpAdminAbort, nvme.OpFlush, nvme.OpWrite, nvme.OpRead,
		nvme.OpWriteZeroes, nvme.OpDSM, nvme.OpCompare, nvme.OpVerify}
	for i := 0; i < n; i++ {
		hs.ensure(cat)
		x := call{cat: cat, c: hs.admin, cmd: make(nvme.Command, nvme.CommandSize), off: hBig, span: 1 * mib}
		if i%2 == 1 {
			x.c = hs.io
		}
		for j := range x.cmd {
			x.cmd[j] = byte(hs.rng.Uint32())
		}
		if hs.rng.IntN(2) == 0 {
			x.cmd.SetOpcode(ops[hs.rng.IntN(len(ops))])
		}
		if x.c == hs.io && hs.rng.IntN(4) != 0 {
			x.cmd.SetNSID(hNoiseNSID)
		}
		switch r := hs.rng.IntN(10); {
		case r < 7:
			x.c.Keyed(x.cmd.SGL1(), hBig+hs.rng.IntN(512*kib), hs.rng.IntN(256*kib), r == 0)
		case r < 9:
			x.icd = make([]byte, hs.rng.IntN(8*kib+1))
			for j := range x.icd {
				x.icd[j] = byte(hs.rng.Uint32())
			}
		}
		if hs.rng.IntN(4) != 0 {
			x.cmd.SetFlags(nvme.PSDTSGLContig << 6)
		}
		hs.tame(&x)
		hs.do(x)
	}
}

// tame keeps a random or mutated command off the host's own namespace (its
// data is checked exactly) and does not wait for an AER's response, which the
// target holds.
func (hs *hostile) tame(x *call) {
	x.cmd.SetCID(hs.nextCID())
	if x.c == hs.io && x.cmd.NSID() == hOwnNSID {
		x.cmd.SetNSID(hNoiseNSID)
	}
	// The data region must hold the SGL's window for checkData.
	x.noWait = x.c == hs.admin && x.cmd.Opcode() == nvme.OpAdminAsyncEvent
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

// aerFlood: far more Asynchronous Event Requests than the controller holds.
// Returns how many the target held (those without a response).
func (hs *hostile) aerFlood() (held int) {
	const cat = "aer-flood"
	hs.controllerUp()
	const n = 64
	for i := 0; i < n; i++ {
		hs.n.Sent[cat]++
		if err := hs.admin.Send(rdmatest.NewCommand(nvme.OpAdminAsyncEvent, hs.nextCID())); err != nil {
			hs.problem("%s: send: %v", cat, err)
			return
		}
	}
	got := 0
	for {
		rsp, err := hs.admin.Recv(2 * time.Second)
		if err != nil {
			break
		}
		got++
		hs.n.status(cat, rsp.Status())
		if rsp.Status().IsSuccess() {
			hs.problem("%s: an AER completed with success, and no event happened", cat)
		}
	}
	// The controller goes with its AERs held.
	hs.closeController()
	return n - got
}

// noReceives: queues that stop posting receives. The first posts none, so
// even its Connect's response cannot land; the second posts one (its
// Connect's) and then sends reads whose data the target moves before it
// finds no receive for the response. Either queue must be torn down by the
// target, its buffers back.
func (hs *hostile) noReceives() {
	const cat = "no-receives"
	var silent []*rdmatest.Conn
	for i := 0; i < 2; i++ {
		hs.n.Sent[cat]++
		c, err := hs.dial(0, rdmatest.Options{Recvs: -1})
		if err != nil {
			hs.problem("%s: %v", cat, err)
			continue
		}
		c.Send(hs.connectCmd(c, 0, nvme.CNTLIDDynamic, 0))
		silent = append(silent, c)
	}
	hs.controllerUp()
	for qid := uint16(2); qid <= 3; qid++ {
		c, err := hs.dial(qid, rdmatest.Options{Recvs: 1, NoRepost: true})
		if err != nil {
			hs.problem("%s: %v", cat, err)
			continue
		}
		rsp, err := c.Do(hs.connectCmd(c, nvme.QID(qid), nvme.CNTLID(hs.cntlid), 0), hTimeout)
		if err != nil || !rsp.Status().IsSuccess() {
			hs.problem("%s: I/O Connect: %v %s", cat, err, statusOf(rsp))
			c.Close()
			continue
		}
		for k := 0; k < 8; k++ {
			hs.n.Sent[cat]++
			off := hSlots + k*hSlotSize
			c.Send(c.IOCommand(nvme.OpRead, hs.nextCID(), hNoiseNSID, uint64(k*128), 128, off, 64*kib))
		}
		silent = append(silent, c)
	}
	// Well past the target's 10 s (rdma responseTimeout, checked every 5 s).
	_ = waitFor(45*time.Second, func() bool {
		for _, c := range silent {
			if c.Alive() == nil {
				return false
			}
		}
		return true
	})
	for _, c := range silent {
		if c.Alive() == nil {
			hs.problem("%s: the target kept a queue whose host posts no receives for 45 s", cat)
		} else {
			hs.n.Lost[cat]++
		}
		c.Close()
	}
	hs.closeController()
}

// midTransfer: connections closed with large reads and writes in flight.
func (hs *hostile) midTransfer() {
	const cat = "mid-transfer-disconnect"
	for i := 0; i < 9; i++ {
		hs.controllerUp()
		for k := 0; k < 16; k++ {
			op := nvme.OpWrite
			if k%2 == 1 {
				op = nvme.OpRead
			}
			off := hSlots + k*hSlotSize
			nlb := 128
			if i%3 == 2 {
				nlb = 2048 // 1 MiB: several READs or WRITEs per command
				off = hBig
			}
			hs.n.Sent[cat]++
			if err := hs.io.Send(hs.io.IOCommand(uint8(op), hs.nextCID(), hNoiseNSID, uint64(k*2048%(hNSBlocks-2048)), uint32(nlb), off, nlb*512)); err != nil {
				break
			}
		}
		if i%2 == 1 {
			time.Sleep(time.Duration(hs.rng.IntN(3)) * time.Millisecond)
		}
		hs.closeController()
	}
}

func (hs *hostile) save(dir string) {
	b, _ := json.MarshalIndent(hs.n, "", "  ")
	p := filepath.Join(dir, "hostile-counts.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		hs.t.Errorf("write %s: %v", p, err)
	}
	var lines []string
	total := 0
	for cat, n := range hs.n.Sent {
		total += n
		var st []string
		for s, k := range hs.n.Statuses[cat] {
			st = append(st, fmt.Sprintf("%d× %s", k, s))
		}
		sort.Strings(st)
		lines = append(lines, fmt.Sprintf("  %-26s sent %5d, lost %3d; %s", cat, n, hs.n.Lost[cat], strings.Join(st, "; ")))
	}
	sort.Strings(lines)
	hs.t.Logf("hostile host: %d inputs, %d controllers, %d buffer checks (%d exact), rejects %v, problems %d (counts in %s):\n%s",
		total, hs.controller, hs.n.DataChecks, hs.n.ExactChecks, hs.n.Rejects, len(hs.n.Problems), p, strings.Join(lines, "\n"))
}

// TestHostile: a raw initiator sends the target random and mutated capsules,
// bad SGLs, bogus CM private data, duplicate CIDs, Connect floods and
// pipelined Connects, Get Features and Get Log Page at every edge, AER
// floods, queues that never post receives and disconnects mid-transfer,
// while the kernel host runs fio with pattern verification on another
// subsystem. The target must not crash (it stops cleanly at the end, exit
// 0), the kernel host's verify must pass, every byte the hostile host gets
// back for a successful command must be what was written for it (its own
// namespace byte for byte; nothing anywhere holding the kernel host's
// pattern; nothing outside the command's SGL touched), and afterwards the
// metrics and status must show every queue, controller and buffer released.
func TestHostile(t *testing.T) {
	kh := newHost(t)
	kernSub, hostSub := nqn("hostile-victim"), nqn("hostile")
	spec := Spec{Port: rdmaPort(), Subsystems: []Subsystem{
		{NQN: kernSub, AllowAnyHost: true, Namespaces: []Namespace{memNS(1, 64*mib, 512, "")}},
		{NQN: hostSub, AllowAnyHost: true, Namespaces: []Namespace{memNS(hOwnNSID, 16*mib, 512, ""), memNS(hNoiseNSID, 16*mib, 512, "")}},
	}}
	tgt, dir := startTarget(t, spec)
	kc := kh.mustConnect(t, kernSub, 1)
	dmesgBefore := dmesgText(t)
	fio := backgroundFioVerify(t, kc.blockDev(t, 1), dir, 85*time.Second, "--verify=pattern", "--verify_pattern="+fioPattern)
	start := time.Now()

	hs := newHostile(t, hostSub)
	defer hs.save(dir)
	t.Cleanup(hs.closeController)

	// Each phase timed; those that move the most data first, while the
	// kernel host's fio runs.
	phase := func(name string, fn func()) {
		t0 := time.Now()
		fn()
		t.Logf("phase %s: %v", name, time.Since(t0).Round(time.Millisecond))
	}
	var rejects, pipelined []string
	var held int
	phase("cm private data", func() { rejects = hs.cmPrivateData() })
	phase("own writes", func() {
		hs.controllerUp()
		for b := 0; b < 2048; b += 256 {
			hs.writeOwnData("own-writes", uint64(b), 256)
		}
		hs.verifyOwn("own-reads", 4096)
	})
	phase("bad SGLs", hs.badSGLs)
	phase("duplicate CIDs", hs.duplicateCIDs)
	phase("mutated", func() { hs.mutated(250) })
	phase("random", func() { hs.random(250) })
	phase("own reads", func() { hs.ensure("own-reads"); hs.verifyOwn("own-reads", 8192) })
	phase("mid-transfer disconnects", hs.midTransfer)
	phase("no receives", hs.noReceives)
	phase("features", func() { hs.ensure("get-features"); hs.features() })
	phase("log pages", hs.logPages)
	phase("connects", func() { pipelined = hs.connects() })
	phase("AER flood", func() { held = hs.aerFlood() })
	phase("own reads", func() {
		hs.controllerUp()
		hs.verifyOwn("own-reads", 8192)
		hs.closeController()
	})
	t.Logf("hostile phase took %v", time.Since(start).Round(time.Millisecond))

	t.Run("kernel host verify", func(t *testing.T) {
		if err := <-fio; err != nil {
			t.Fatal(err)
		}
		// fio would pass over a reconnect too: the kernel host's queues must not have been
		// torn down under it.
		for _, line := range strings.Split(strings.TrimPrefix(dmesgText(t), dmesgBefore), "\n") {
			if strings.Contains(line, kc.name+":") && kernelRecovery.MatchString(line) {
				t.Errorf("the kernel host's controller went through recovery: %s", line)
			}
		}
	})
	t.Run("nvmeof-tgt answers", func(t *testing.T) {
		requireTgt(t, "its reject statuses, one Connect per queue, AER limit", fmt.Sprint(rejects, pipelined, held))
		for _, m := range rejects {
			t.Errorf("CM private data: %s", m)
		}
		for _, m := range pipelined {
			t.Errorf("pipelined Connects: %s; want exactly one", m)
		}
		if held != 4 {
			t.Errorf("the controller held %d of 64 AERs, want its AERL+1 = 4", held)
		}
		for _, m := range hs.dropped {
			t.Errorf("queue lost where a status was due: %s", m)
		}
	})
	t.Run("released", func(t *testing.T) {
		requireTgt(t, "status and metrics")
		p := tgt.(*tgtProcess)
		if err := waitFor(15*time.Second, func() bool { return !p.status(t).connected(hostSub, hs.h.NQN) }); err != nil {
			t.Errorf("status still lists the hostile host's controller: %+v", p.status(t).Controllers)
		}
		kc.disconnect(t)
		waitTornDown(t)
		checkBuffersReleased(t)
		if st := p.status(t); len(st.Controllers) != 0 {
			t.Errorf("status lists controllers after every host left: %+v", st.Controllers)
		}
		m := scrapeMetrics(t)
		errs, _ := metricSum(m, "nvmeof_tgt_command_errors_total")
		rej, _ := metricSum(m, "nvmeof_tgt_rdma_connections_total", `event="rejected"`)
		t.Logf("target counted %v command errors and %v rejected connections", errs, rej)
		p.Stop(t)
		if b, _ := os.ReadFile(p.logPath); strings.Contains(string(b), "wait line full") || strings.Contains(string(b), "panic") {
			t.Errorf("the target's log reports a wait line full or a panic (see %s)", p.logPath)
		}
	})
}

// TestVanishedHost: a host connects with KATO 2 s, an admin and two I/O
// queues, leaves AERs with the controller, and goes silent without
// disconnecting. The target must tear the controller down once KATO passes,
// not before, and give back every queue pair, slot and buffer.
func TestVanishedHost(t *testing.T) {
	sub := nqn("vanish")
	tgt, _ := startTarget(t, Spec{Port: rdmaPort(), Subsystems: []Subsystem{
		{NQN: sub, AllowAnyHost: true, Namespaces: []Namespace{memNS(1, 16*mib, 512, "")}},
	}})
	hs := newHostile(t, sub)
	t.Cleanup(hs.closeController)
	var expired0 float64
	if targetKind == kindNvmeofTgt {
		expired0, _ = metricSum(scrapeMetrics(t), "nvmeof_tgt_keepalive_expired_total")
	}
	const kato = 2 * time.Second
	admin, err := hs.dial(0, rdmatest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hs.admin = admin
	rsp, err := admin.Do(hs.connectCmd(admin, 0, nvme.CNTLIDDynamic, uint32(kato.Milliseconds())), hTimeout)
	if err != nil || !rsp.Status().IsSuccess() {
		t.Fatalf("Connect: %v %s", err, statusOf(rsp))
	}
	cntlid := nvme.CNTLID(rsp.DW0())
	if rsp, err := admin.Enable(hs.nextCID(), hTimeout); err != nil || !rsp.Status().IsSuccess() {
		t.Fatalf("CC.EN: %v %s", err, statusOf(rsp))
	}
	var ios []*rdmatest.Conn
	for qid := nvme.QID(1); qid <= 2; qid++ {
		c, err := hs.dial(uint16(qid), rdmatest.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		ios = append(ios, c)
		if rsp, err := c.Do(hs.connectCmd(c, qid, cntlid, 0), hTimeout); err != nil || !rsp.Status().IsSuccess() {
			t.Fatalf("I/O Connect %d: %v %s", qid, err, statusOf(rsp))
		}
	}
	for i := 0; i < 4; i++ {
		admin.Send(rdmatest.NewCommand(nvme.OpAdminAsyncEvent, hs.nextCID()))
	}
	// The last command the target hears from this host: the silence is
	// timed from before it is sent.
	silent := time.Now()
	if rsp, err := admin.Do(rdmatest.NewCommand(nvme.OpAdminKeepAlive, hs.nextCID()), hTimeout); err != nil || !rsp.Status().IsSuccess() {
		t.Fatalf("Keep Alive: %v %s", err, statusOf(rsp))
	}
	t.Run("connected", func(t *testing.T) {
		requireTgt(t, "status")
		p := tgt.(*tgtProcess)
		st := p.status(t)
		if len(st.Controllers) != 1 || st.Controllers[0].IOQueues != 2 {
			t.Fatalf("status with the host connected: %+v; want its controller with 2 I/O queues", st.Controllers)
		}
	})

	// Silence: nothing sent, nothing closed. The target must disconnect.
	if err := waitFor(30*time.Second, func() bool { return admin.Disconnected() }); err != nil {
		t.Fatalf("the target has not disconnected the silent host %v after its last command (KATO %v)", time.Since(silent).Round(time.Millisecond), kato)
	}
	gone := time.Since(silent)
	t.Logf("silent host disconnected after %v (KATO %v)", gone.Round(time.Millisecond), kato)
	if gone < kato {
		t.Errorf("the controller was torn down %v after the host's last command, before its KATO %v", gone, kato)
	}
	for i, c := range ios {
		if err := waitFor(10*time.Second, c.Disconnected); err != nil {
			t.Errorf("I/O queue %d not disconnected with its controller", i+1)
		}
	}
	t.Run("released", func(t *testing.T) {
		requireTgt(t, "status and metrics")
		p := tgt.(*tgtProcess)
		waitTornDown(t)
		checkBuffersReleased(t)
		if st := p.status(t); len(st.Controllers) != 0 {
			t.Errorf("status after KATO: %+v; want no controller", st.Controllers)
		}
		if v, _ := metricSum(scrapeMetrics(t), "nvmeof_tgt_keepalive_expired_total"); v != expired0+1 {
			t.Errorf("nvmeof_tgt_keepalive_expired_total went from %v to %v, want one more", expired0, v)
		}
	})
	// Everything came back: the host can connect again.
	hs.closeController()
	for _, c := range ios {
		c.Close()
	}
	hs.controllerUp()
	hs.writeOwnData("after", 0, 8)
	hs.readOwn("after", 0, 8)
	hs.closeController()
}
