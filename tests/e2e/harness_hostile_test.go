//go:build e2e

package e2e

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma/rdmatest"
)

// The hostile host of TestHostile and TestVanishedHost: a raw initiator
// (rdma/rdmatest) with a controller of its own, which sends each attack's
// commands (hostile_*_test.go), checks every response and buffer, and counts
// what it sent and saw.

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
