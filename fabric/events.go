package fabric

import (
	"fmt"
	"slices"
	"sync"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Asynchronous events the target sends when its configuration changes while
// hosts are connected (after nvmet's nvmet_ns_changed and
// nvmet_port_disc_changed). An event of a kind is sent once and then masked
// until the host reads its log page without Retain Asynchronous Event, as
// the base specification (§5.2) asks: a host is never flooded.

// aenKind is one kind of notice a controller masks after sending it.
type aenKind uint8

const (
	aenNSAttr    aenKind = 1 << iota // Namespace Attribute Changed, log page 04h
	aenDiscovery                     // Discovery Log Page Change, log page 70h
	aenANA                           // ANA Change, log page 0Ch
	aenResv                          // Reservation Log Page Available, log page 80h
)

// asyncEvents is one controller's asynchronous event state under one lock,
// in the shape of nvmet's nvmet_async_event_work: the events not yet
// reported, the Asynchronous Event Request commands held to report them,
// the notices the host enabled and those sent and not yet cleared, and the
// Changed Namespace List those notices point at. With all of it under one
// lock, an event cannot stay pending while a request is held.
type asyncEvents struct {
	mu sync.Mutex
	// aec is the Asynchronous Event Configuration (Set Features 0Bh).
	aec uint32
	// pending are results to report, oldest first; held the requests
	// waiting for one (at most aerLimit).
	pending []uint32
	held    []*Request
	// masked are the notice kinds sent and not yet cleared by reading
	// their log page.
	masked aenKind
	// changedNS is the Changed Namespace List (log page 04h): NSIDs whose
	// attributes changed since the host last read it; [NSIDAll] once more
	// than it holds changed.
	changedNS []nvme.NSID
	// resvLog are the Reservation Notification log entries not yet read,
	// oldest first; resvCount the Log Page Count of the last one queued.
	resvLog   []nvme.ResvNotification
	resvCount uint64
	// closed: the admin queue is gone; nothing more is held or reported.
	closed bool
}

// resvLogMax is how many reservation notifications a controller keeps
// unread (the Number of Available Log Pages field is a byte); past it the
// newest entry's count moves on, so the host sees that some were lost.
const resvLogMax = 255

// reservation queues a Reservation Notification log entry and tells the
// host a log page is available, once until it reads them. It is not
// governed by AEC: the Reservation Notification Mask is (resvNotify).
func (e *asyncEvents) reservation(nsid nvme.NSID, kind uint8) {
	e.mu.Lock()
	e.resvCount++
	if e.resvCount == 0 {
		e.resvCount = 1 // the count wraps to 1, never 0
	}
	n := nvme.ResvNotification{Count: e.resvCount, Type: kind, NSID: nsid}
	if len(e.resvLog) < resvLogMax {
		e.resvLog = append(e.resvLog, n)
	} else {
		e.resvLog[len(e.resvLog)-1] = n
	}
	var r *Request
	result := nvme.MakeAsyncEventResult(nvme.AsyncEventTypeIO, nvme.AsyncInfoReservationLog, nvme.LogReservationNotification)
	if !e.closed && e.masked&aenResv == 0 {
		e.masked |= aenResv
		r = e.reportLocked(result)
	}
	e.mu.Unlock()
	complete(r, result)
}

// takeResvLog returns the oldest Reservation Notification log entry (an
// empty one when there is none) and removes it; unless the host retains the
// event, the notice is unmasked.
func (e *asyncEvents) takeResvLog(retain bool) nvme.ResvNotification {
	e.mu.Lock()
	defer e.mu.Unlock()
	var n nvme.ResvNotification
	if len(e.resvLog) > 0 {
		n = e.resvLog[0]
		e.resvLog = e.resvLog[1:]
		n.Available = uint8(len(e.resvLog))
	}
	if !retain {
		e.masked &^= aenResv
	}
	return n
}

// hold takes an Asynchronous Event Request: it completes at once with the
// oldest pending event, or is held until one is reported.
func (e *asyncEvents) hold(r *Request) nvme.Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.closed:
		return nvme.StatusAbortSQDeleted
	case len(e.pending) > 0:
		r.setResult(e.pending[0])
		logEvent(r, e.pending[0])
		e.pending = e.pending[1:]
		return nvme.StatusSuccess
	case len(e.held) >= aerLimit:
		return nvme.StatusAsyncEventLimitExceeded.WithDNR()
	}
	e.held = append(e.held, r)
	return statusPending
}

// report completes the oldest held request with result, or keeps result
// pending until a request comes.
func (e *asyncEvents) report(result uint32) {
	e.mu.Lock()
	r := e.reportLocked(result)
	e.mu.Unlock()
	complete(r, result)
}

// reportLocked is report with e.mu held: it returns the request to complete
// (after unlocking, since completing calls into the transport), or nil.
func (e *asyncEvents) reportLocked(result uint32) *Request {
	if e.closed {
		return nil
	}
	if len(e.held) == 0 {
		e.pending = append(e.pending, result)
		return nil
	}
	r := e.held[0]
	e.held = e.held[1:]
	return r
}

func complete(r *Request, result uint32) {
	if r != nil {
		r.setResult(result)
		logEvent(r, result)
		r.complete(nvme.StatusSuccess)
	}
}

// logEvent notes at debug level an event sent to the host in r's completion:
// a host's log shows nothing of most events it receives.
func logEvent(r *Request, result uint32) {
	if c := r.q.ctrl.Load(); c != nil {
		c.log.Debug("async event sent", "result", fmt.Sprintf("%#08x", result))
	}
}

// notice reports a notice of kind k, unless the host did not enable it (AEC
// bit aec) or one is outstanding. Before it decides, update runs under the
// lock (to change the log page the notice points at).
func (e *asyncEvents) notice(k aenKind, aec uint32, result uint32, update func()) {
	e.mu.Lock()
	if update != nil {
		update()
	}
	var r *Request
	send := !e.closed && e.aec&aec != 0 && e.masked&k == 0
	if send {
		e.masked |= k
		r = e.reportLocked(result)
	}
	e.mu.Unlock()
	complete(r, result)
}

// logRead clears the mask of kind k when the host read its log page without
// retaining the event.
func (e *asyncEvents) logRead(k aenKind, retain bool) {
	if retain {
		return
	}
	e.mu.Lock()
	e.masked &^= k
	e.mu.Unlock()
}

// close ends event reporting when the admin queue is gone, and returns the
// requests it held, for the caller to complete.
func (e *asyncEvents) close() []*Request {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	held := e.held
	e.held, e.pending = nil, nil
	return held
}

func (e *asyncEvents) setAEC(v uint32) {
	e.mu.Lock()
	e.aec = v
	e.mu.Unlock()
}

func (e *asyncEvents) getAEC() uint32 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.aec
}

// heldCIDs lists the CIDs of the held requests.
func (e *asyncEvents) heldCIDs() []uint16 {
	e.mu.Lock()
	defer e.mu.Unlock()
	cids := make([]uint16, len(e.held))
	for i, r := range e.held {
		cids[i] = r.Cmd.CID()
	}
	return cids
}

// holdAER keeps an Async Event Request until an event is reported.
func (c *Controller) holdAER(r *Request) nvme.Status { return c.events.hold(r) }

// postEvent reports an event to the host.
func (c *Controller) postEvent(result uint32) { c.events.report(result) }

// nsChanged records nsid in the controller's Changed Namespace List, and
// sends a Namespace Attribute Changed notice if the host enabled it
// (Subsystem.nsChangedFor: to the controllers that see the namespace).
func (c *Controller) nsChanged(nsid nvme.NSID) {
	e := &c.events
	e.notice(aenNSAttr, nvme.AECNSAttrNotices,
		nvme.MakeAsyncEventResult(nvme.AsyncEventTypeNotice, nvme.AsyncInfoNSAttrChanged, nvme.LogChangedNSList),
		func() {
			switch {
			case slices.Contains(e.changedNS, nsid):
			case len(e.changedNS) == 1 && e.changedNS[0] == nvme.NSIDAll:
				// Overflowed: the host rescans every namespace anyway.
			case len(e.changedNS) == nvme.MaxChangedNSEntries:
				e.changedNS = append(e.changedNS[:0], nvme.NSIDAll)
			default:
				e.changedNS = append(e.changedNS, nsid)
			}
		})
}

// takeChangedNS returns the Changed Namespace List and clears it; unless the
// host retains the event, the notice is unmasked.
func (c *Controller) takeChangedNS(retain bool) []nvme.NSID {
	e := &c.events
	e.mu.Lock()
	defer e.mu.Unlock()
	list := e.changedNS
	e.changedNS = nil
	if !retain {
		e.masked &^= aenNSAttr
	}
	return list
}

// discoveryChanged moves the discovery log's generation counter on and
// tells the discovery controllers that asked for it (a persistent discovery
// controller: nvme discover --persistent, or one with KATO).
func (t *Target) discoveryChanged() {
	t.mu.Lock()
	t.genctr++
	t.mu.Unlock()
	for _, c := range t.discovery.controllerList() {
		c.events.notice(aenDiscovery, nvme.AECDiscoveryChanged,
			nvme.MakeAsyncEventResult(nvme.AsyncEventTypeNotice, nvme.AsyncInfoDiscoveryChanged, nvme.LogDiscovery), nil)
	}
}

// discoveryLogRead unmasks the discovery change notice once the host read
// the log page without retaining the event.
func (c *Controller) discoveryLogRead(retain bool) { c.events.logRead(aenDiscovery, retain) }

// controllerList snapshots the subsystem's controllers.
func (s *Subsystem) controllerList() []*Controller {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Controller, 0, len(s.controllers))
	for _, c := range s.controllers {
		out = append(out, c)
	}
	return out
}
