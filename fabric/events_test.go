package fabric

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// TestAERRace: an event that arrives while the host submits an Asynchronous
// Event Request must complete that request, whichever comes first: never
// stay pending while a request is held (its notice kind would then stay
// masked for ever, since the host never learns it has a log page to read).
// Many rounds of the two at once, from two goroutines, with the race
// detector on in make test.
func TestAERRace(t *testing.T) {
	r := newRig(t)
	h, cntlid := r.adminConnect(testNQN, testHostNQN, 0)
	r.sub.mu.Lock()
	c := r.sub.controllers[cntlid]
	r.sub.mu.Unlock()
	for i := range 3000 {
		ev := nvme.MakeAsyncEventResult(nvme.AsyncEventTypeNotice, uint8(i%3), nvme.LogChangedNSList)
		rsp := nvme.Completion(make([]byte, nvme.CompletionSize))
		submitted := make(chan error, 1)
		var start sync.WaitGroup
		start.Add(2)
		go func() {
			start.Done()
			start.Wait()
			submitted <- h.lq.Submit(newCmd(nvme.OpAdminAsyncEvent, uint16(1000+i%1000)), nil, rsp)
		}()
		go func() {
			start.Done()
			start.Wait()
			c.postEvent(ev)
		}()
		select {
		case err := <-submitted:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("round %d: the Asynchronous Event Request is held while the event it should report is pending", i)
		}
		if !rsp.Status().IsSuccess() || rsp.DW0() != ev {
			t.Fatalf("round %d: AER completed with %v %#x, want the event %#x", i, rsp.Status(), rsp.DW0(), ev)
		}
	}
}

// TestAsyncEventOrders: every order of requests, events and notices, step
// by step on one controller's events, ends with each event reported once,
// in order, to a held request, and nothing pending while a request is held.
func TestAsyncEventOrders(t *testing.T) {
	const (
		aer    = "aer"    // an Asynchronous Event Request
		event  = "event"  // an event reported (postEvent)
		notice = "notice" // a Namespace Attribute Changed notice (enabled)
		read   = "read"   // the host reads the Changed Namespace List
		gone   = "gone"   // the admin queue goes
	)
	cases := []struct {
		steps []string
		// reported are the results the held requests completed with, in
		// order; pending how many events are left without one.
		reported []uint32
		pending  int
		held     int
	}{
		{[]string{aer, event}, []uint32{1}, 0, 0},
		{[]string{event, aer}, []uint32{1}, 0, 0},
		{[]string{event, event, aer, aer}, []uint32{1, 2}, 0, 0},
		{[]string{aer, aer, event}, []uint32{1}, 0, 1},
		{[]string{event, aer, aer, event}, []uint32{1, 2}, 0, 0},
		{[]string{aer, aer, aer, aer, aer}, nil, 0, aerLimit}, // the fifth is refused
		// A notice is sent once, then masked until its log page is read.
		{[]string{aer, notice, aer, notice}, []uint32{ncResult}, 0, 1},
		{[]string{aer, notice, read, aer, notice}, []uint32{ncResult, ncResult}, 0, 0},
		{[]string{notice, notice, aer, aer}, []uint32{ncResult}, 0, 1},
		{[]string{aer, gone, event, aer}, nil, 0, 0},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.steps, "-"), func(t *testing.T) {
			e := &asyncEvents{aec: nvme.AECNSAttrNotices}
			var reported []uint32
			next := uint32(1)
			for _, s := range c.steps {
				switch s {
				case aer:
					r := newEventReq(&reported)
					if st := e.hold(r); st != statusPending && st.IsSuccess() {
						reported = append(reported, r.Rsp.DW0())
					}
				case event:
					e.report(next)
					next++
				case notice:
					e.notice(aenNSAttr, nvme.AECNSAttrNotices, ncResult, nil)
				case read:
					e.logRead(aenNSAttr, false)
				case gone:
					e.close()
				}
			}
			if !slices.Equal(reported, c.reported) {
				t.Errorf("reported %v, want %v", reported, c.reported)
			}
			if len(e.pending) != c.pending || len(e.held) != c.held {
				t.Errorf("%d pending and %d held, want %d and %d", len(e.pending), len(e.held), c.pending, c.held)
			}
			if len(e.pending) > 0 && len(e.held) > 0 {
				t.Error("an event pending while a request is held")
			}
		})
	}
}

var ncResult = nvme.MakeAsyncEventResult(nvme.AsyncEventTypeNotice, nvme.AsyncInfoNSAttrChanged, nvme.LogChangedNSList)

// newEventReq is a request whose completion appends its result to out.
func newEventReq(out *[]uint32) *Request {
	conn := &recordConn{done: func(r *Request) { *out = append(*out, r.Rsp.DW0()) }}
	q := &Queue{t: NewTarget(Options{}), conn: conn}
	q.log = q.t.log
	r := &Request{Cmd: newCmd(nvme.OpAdminAsyncEvent, 1), Rsp: make(nvme.Completion, nvme.CompletionSize), q: q, state: reqExecuting}
	return r
}

// recordConn is a Conn that hands each response to done.
type recordConn struct{ done func(*Request) }

func (c *recordConn) QueueResponse(r *Request) { c.done(r) }
func (c *recordConn) Disconnect()              {}
