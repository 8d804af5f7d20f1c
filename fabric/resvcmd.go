package fabric

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/internal/atomicfile"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// The reservation commands, features and notifications (resv.go has the
// rules), and persistence of a namespace's reservation state through power
// loss (PTPL): written atomically to the target's state directory on every
// change while PTPL is set, restored when the namespace is added.

// nsResv is one namespace's reservations.
type nsResv struct {
	// mu orders the commands that change the state, and their writes of
	// the state file.
	mu    sync.Mutex
	state atomic.Pointer[resvState] // nil: nothing registered yet
	// sharer shares the state with the other targets serving the
	// namespace (resvshare.go); nil: this target's alone. version is the
	// shared state's version the namespace holds. Both under mu.
	sharer  ReservationSharer
	version uint64
	// notify queues notifications on the subsystem's controllers, and
	// wait waits for the preempted hosts' commands on this namespace:
	// what a command through another target left in the shared state.
	// Set when the namespace is made, never changed.
	notify func([]resvNotice)
	wait   func([]HostID)
}

func (r *nsResv) load() *resvState {
	if s := r.state.Load(); s != nil {
		return s
	}
	return &resvState{}
}

// resvAllows reports whether r may run under its namespace's reservation.
// Lock-free: one atomic load when the namespace has no reservation.
func (ns *Namespace) resvAllows(r *Request) bool {
	s := ns.resv.state.Load()
	if s == nil || s.Type == 0 {
		return true
	}
	switch r.Cmd.Opcode() {
	case nvme.OpResvRegister, nvme.OpResvReport, nvme.OpResvAcquire, nvme.OpResvRelease:
		return true
	}
	return s.allows(r.q.ctrl.Load().hostID, r.Cmd.Opcode())
}

// parseResv binds a reservation command.
func (c *Controller) parseResv(r *Request) nvme.Status {
	switch r.Cmd.Opcode() {
	case nvme.OpResvRegister, nvme.OpResvAcquire:
		r.DataLen, r.Dir, r.handle = nvme.ResvKeysSize, DirHostToCtrl, handleResv
	case nvme.OpResvRelease:
		r.DataLen, r.Dir, r.handle = nvme.ResvKeySize, DirHostToCtrl, handleResv
	case nvme.OpResvReport:
		n := uint64(r.Cmd.ResvReportNumDwords()) * 4
		if n > uint64(c.port.MDTS) {
			return r.invalidField(nvme.ErrLocCDW10)
		}
		r.DataLen, r.Dir, r.handle = uint32(n), DirCtrlToHost, handleResvReport
	}
	return nvme.StatusSuccess
}

func handleResvReport(r *Request) nvme.Status {
	if !r.Cmd.ResvReportExtended() {
		// Host identifiers are 128 bits over fabrics; the 8-byte format
		// cannot carry them (base 2.0 §7.8; nvmet answers the same).
		return nvme.StatusHostIDInconsistentFormat.WithDNR()
	}
	st := r.ns.resv.load().status()
	buf := make([]byte, nvme.ResvStatusSize(st, true))
	nvme.PutResvStatus(buf, st, true)
	r.fillData(buf) // truncated to what the host asked for
	return nvme.StatusSuccess
}

// handleResv runs Register, Acquire and Release off the transport's
// goroutine: one may write the state file (fsync), and a Preempt and
// Abort waits for the preempted hosts' commands.
func handleResv(r *Request) nvme.Status {
	go r.ns.resvCommand(r)
	return statusPending
}

// preemptAbortWait bounds how long a Preempt and Abort waits for the
// preempted hosts' commands before it completes anyway.
const preemptAbortWait = 30 * time.Second

func (ns *Namespace) resvCommand(r *Request) {
	c := r.q.ctrl.Load()
	var buf [nvme.ResvKeysSize]byte
	r.copyFromData(buf[:r.DataLen])
	k1, k2 := nvme.ResvKeys(buf[:r.DataLen])
	cmd := r.Cmd
	host := HostID(c.hostID)

	// run is the command on the state cur: a pure function of it, so that
	// a shared state may run it again on a newer cur.
	run := func(cur *resvState) resvResult {
		switch cmd.Opcode() {
		case nvme.OpResvRegister:
			cptpl := cmd.ResvCPTPL()
			switch {
			case cptpl == 1:
				return invalid()
			case cptpl == nvme.CPTPLSet && ns.statePath == "":
				return invalid() // no state directory: nowhere to persist
			}
			res := cur.register(host, cmd.ResvAction(), cmd.ResvIEKEY(), k1, k2)
			if res.next != nil && cptpl != nvme.CPTPLNoChange {
				res.next.PTPL = cptpl == nvme.CPTPLSet
			}
			return res
		case nvme.OpResvAcquire:
			res := cur.acquire(host, cmd.ResvAction(), cmd.ResvIEKEY(), cmd.ResvType(), k1, k2)
			res.abort = cmd.ResvAction() == nvme.ResvPreemptAndAbort
			return res
		default: // nvme.OpResvRelease
			return cur.release(host, cmd.ResvAction(), cmd.ResvIEKEY(), cmd.ResvType(), k1)
		}
	}

	ns.resv.mu.Lock()
	res, published, err := ns.changeResv(host, run)
	if err != nil {
		r.q.log.Error("reservation state not saved: the command fails", "nsid", ns.nsid, "err", err)
		res = resvResult{status: nvme.StatusInternalError}
	}
	ns.resv.mu.Unlock()
	published()

	s := c.s
	s.resvNotify(ns.nsid, res.notify)
	if res.next != nil && res.abort {
		s.waitHosts(ns, res.preempted, preemptAbortWait)
	}
	r.complete(res.status)
}

// waitHosts waits until no command of those hosts' controllers executes on
// ns (their new commands see the new reservation state, which was
// published first: Queue.Execute counts a command, then checks), or until
// the time is up. It is how a Preempt and Abort aborts: the preempted
// hosts' commands in flight on the namespace finish before it completes
// (as nvmet does). Their commands on other namespaces are not its
// business: waiting for them would hold the preemptor's command, and
// fence the host out, for as long as they take.
func (s *Subsystem) waitHosts(ns *Namespace, hosts []HostID, limit time.Duration) {
	if len(hosts) == 0 {
		return
	}
	var qs []*Queue
	for _, c := range s.controllerList() {
		for _, h := range hosts {
			if c.hostID == h {
				c.mu.Lock()
				for _, q := range c.queues {
					qs = append(qs, q)
				}
				c.mu.Unlock()
			}
		}
	}
	deadline := time.Now().Add(limit)
	for _, q := range qs {
		for q.executing(ns) > 0 {
			if time.Now().After(deadline) {
				s.t.log.Warn("preempt and abort: commands of a preempted host still run", "subnqn", s.nqn, "nsid", ns.nsid, "qid", q.qid)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// resvNotify queues the notifications on every controller of each host.
func (s *Subsystem) resvNotify(nsid nvme.NSID, notices []resvNotice) {
	if len(notices) == 0 {
		return
	}
	ns := s.namespace(nsid)
	for _, c := range s.controllerList() {
		if ns != nil && !ns.visibleTo(c.hostNQN) {
			// Its host cannot read of a namespace it does not see.
			continue
		}
		for _, n := range notices {
			if HostID(c.hostID) == n.host && c.resvMask(nsid)&(1<<n.kind) == 0 {
				c.events.reservation(nsid, n.kind)
			}
		}
	}
}

// resvMask is the controller's Reservation Notification Mask of nsid.
func (c *Controller) resvMask(nsid nvme.NSID) uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.resvMasks[nsid]; ok {
		return m
	}
	return c.resvMaskAll
}

// ReservationInfo is a namespace's reservations, for the operator.
type ReservationInfo struct {
	Generation  uint32
	Type        nvme.ResvType // 0: none
	Holders     []HostID      // one, or every registrant for types 5 and 6
	Registrants []ReservationRegistrant
	PTPL        bool
}

// ReservationRegistrant is a registered host and its key.
type ReservationRegistrant struct {
	HostID HostID
	Key    uint64
}

// Reservation describes the namespace's reservations.
func (ns *Namespace) Reservation() ReservationInfo {
	s := ns.resv.load()
	info := ReservationInfo{Generation: s.Gen, Type: s.Type, PTPL: s.PTPL}
	for _, r := range s.Regs {
		info.Registrants = append(info.Registrants, ReservationRegistrant{r.Host, r.Key})
		if s.holds(r.Host) {
			info.Holders = append(info.Holders, r.Host)
		}
	}
	return info
}

// String is the host identifier as a UUID.
func (h HostID) String() string {
	x := hex.EncodeToString(h[:])
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}

// ParseHostID reads a host identifier written as String does.
func ParseHostID(s string) (HostID, error) {
	var h HostID
	b, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("host ID %q: not a UUID", s)
	}
	copy(h[:], b)
	return h, nil
}

// resvFile is the state file of a namespace whose reservations persist
// through power loss.
type resvFile struct {
	SubNQN      string           `json:"subnqn"`
	NSID        uint32           `json:"nsid"`
	UUID        string           `json:"uuid"`
	Generation  uint32           `json:"generation"`
	Type        uint8            `json:"type"`
	Holder      string           `json:"holder,omitempty"`
	Registrants []resvFileRecord `json:"registrants"`
}

type resvFileRecord struct {
	HostID string `json:"host_id"`
	Key    uint64 `json:"key"`
}

// ResvStateDir is where, under the state directory, reservation state
// files go.
const ResvStateDir = "reservations"

// resvStatePath is the namespace's state file: named by a hash of the NQN,
// which may hold any character, so no NQN names a path.
func resvStatePath(dir, subnqn string, nsid nvme.NSID) string {
	if dir == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(subnqn))
	return filepath.Join(dir, ResvStateDir, fmt.Sprintf("%s-%d.json", hex.EncodeToString(sum[:8]), nsid))
}

// persistResv writes next when it persists through power loss, and removes
// the file when PTPL was just cleared. ns.resv.mu is held.
func (ns *Namespace) persistResv(cur, next *resvState) error {
	if ns.statePath == "" || (!next.PTPL && !cur.PTPL) {
		return nil
	}
	if !next.PTPL {
		return atomicfile.Remove(ns.statePath)
	}
	f := resvFile{SubNQN: ns.subnqn, NSID: uint32(ns.nsid), UUID: HostID(ns.uuid).String(), Generation: next.Gen,
		Type: uint8(next.Type), Registrants: []resvFileRecord{}}
	if next.Type != 0 && !next.Type.AllRegistrants() {
		f.Holder = next.Holder.String()
	}
	for _, r := range next.Regs {
		f.Registrants = append(f.Registrants, resvFileRecord{r.Host.String(), r.Key})
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(ns.statePath), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(ns.statePath, append(data, '\n'), 0o600)
}

// restoreResv reads the namespace's state file, if it has one. A file that
// does not parse, or belongs to another namespace, is an error: reservations
// are never silently dropped.
func (ns *Namespace) restoreResv() error {
	if ns.statePath == "" {
		return nil
	}
	data, err := os.ReadFile(ns.statePath)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reservation state: %w", err)
	}
	bad := func(why string, args ...any) error {
		return fmt.Errorf("reservation state %s: %s; fix or remove the file (its reservations are lost then)",
			ns.statePath, fmt.Sprintf(why, args...))
	}
	var f resvFile
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return bad("%v", err)
	}
	if f.SubNQN != ns.subnqn || f.NSID != uint32(ns.nsid) || f.UUID != HostID(ns.uuid).String() {
		return bad("it is namespace %d (uuid %s) of %s, not this one (uuid %s)", f.NSID, f.UUID, f.SubNQN, HostID(ns.uuid))
	}
	s := &resvState{Gen: f.Generation, Type: nvme.ResvType(f.Type), PTPL: true}
	if s.Type != 0 && !s.Type.Valid() {
		return bad("type %d", f.Type)
	}
	for _, r := range f.Registrants {
		h, err := ParseHostID(r.HostID)
		if err != nil {
			return bad("%v", err)
		}
		s.Regs = append(s.Regs, resvReg{h, r.Key})
	}
	if err := checkRegs(s.Regs); err != nil {
		return bad("%v", err)
	}
	s.sealed()
	switch {
	case s.Type == 0 && f.Holder != "":
		return bad("a holder with no reservation")
	case s.Type.AllRegistrants() && len(s.Regs) == 0:
		return bad("a reservation with no registrant")
	case s.Type != 0 && !s.Type.AllRegistrants():
		h, err := ParseHostID(f.Holder)
		if err != nil {
			return bad("%v", err)
		}
		if s.reg(h) == nil {
			return bad("the holder %s is not registered", h)
		}
		s.Holder = h
	}
	ns.resv.state.Store(s)
	return nil
}

// setPTPL sets Persist Through Power Loss (Set Features 83h), writing or
// removing the state file.
func (ns *Namespace) setPTPL(self HostID, on bool) error {
	ns.resv.mu.Lock()
	_, published, err := ns.changeResv(self, func(cur *resvState) resvResult {
		if cur.PTPL == on {
			return resvResult{}
		}
		next := cur.clone()
		next.PTPL = on
		return resvResult{next: next}
	})
	ns.resv.mu.Unlock()
	published()
	return err
}

// setResvMask is Set Features Reservation Notification Mask: for one
// namespace, or every one (NSID FFFFFFFFh).
func (c *Controller) setResvMask(r *Request, v uint32) nvme.Status {
	if v&^nvme.ResvMaskAll != 0 {
		return r.invalidField(nvme.ErrLocCDW11)
	}
	nsid := r.Cmd.NSID()
	if nsid != nvme.NSIDAll && c.namespace(nsid) == nil {
		r.errLoc = nvme.ErrLocNSID
		return nvme.StatusInvalidNamespace.WithDNR()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if nsid == nvme.NSIDAll {
		c.resvMaskAll = v
		c.resvMasks = nil
		return nvme.StatusSuccess
	}
	if c.resvMasks == nil {
		c.resvMasks = map[nvme.NSID]uint32{}
	}
	c.resvMasks[nsid] = v
	return nvme.StatusSuccess
}

// setPTPL is Set Features Reservation Persistence for one namespace; it
// writes the state file, so it runs off the transport's goroutine.
func setPTPL(r *Request, on bool) nvme.Status {
	c := r.q.ctrl.Load()
	ns := c.namespace(r.Cmd.NSID())
	switch {
	case ns == nil:
		r.errLoc = nvme.ErrLocNSID
		return nvme.StatusInvalidNamespace.WithDNR()
	case on && ns.statePath == "":
		return r.invalidField(nvme.ErrLocCDW11)
	}
	go func() {
		st := nvme.StatusSuccess
		if err := ns.setPTPL(HostID(c.hostID), on); err != nil {
			c.log.Error("reservation state not saved", "nsid", ns.nsid, "err", err)
			st = nvme.StatusInternalError
		}
		r.complete(st)
	}()
	return statusPending
}
