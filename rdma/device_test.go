package rdma

import (
	"errors"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/rdma/internal/verbs"
)

// TestAllocBlockPastOneCQ: a CQ holds the worst case of a few queues (every send and receive
// flushed at once), so a host connecting to hundreds of subsystems needs more CQ room than one
// CQ has. The device still takes queues up to its queue blocks, adding CQs to its pollers, and
// a queue that leaves gives its room back.
func TestAllocBlockPastOneCQ(t *testing.T) {
	const blocks, perCQ, cqes = 12, 1000, 300 // three queues fit in a CQ
	d := &device{}
	made := 0
	d.newCQ = func(p *poller) (*verbs.CQ, error) { made++; return &verbs.CQ{}, nil }
	p := &poller{d: d, cqSize: perCQ}
	p.cqs.Store(&[]*pollerCQ{{cq: &verbs.CQ{}, room: perCQ}})
	d.pollers = []*poller{p}
	for b := blocks - 1; b >= 0; b-- {
		d.freeBlocks = append(d.freeBlocks, b)
	}
	type taken struct {
		b  int
		cq *pollerCQ
	}
	var got []taken
	for i := 0; i < blocks; i++ {
		b, gp, cq, err := d.allocBlock(cqes)
		if err != nil || gp != p {
			t.Fatalf("queue %d: allocBlock = %v, %v; want a block on the poller", i, gp, err)
		}
		got = append(got, taken{b, cq})
	}
	if n := len(*p.cqs.Load()); n != blocks/3 || made != blocks/3-1 {
		t.Fatalf("%d CQs (%d made), want %d", n, made, blocks/3)
	}
	for _, c := range *p.cqs.Load() {
		if c.room != perCQ-3*cqes {
			t.Errorf("a CQ has %d entries left, want %d", c.room, perCQ-3*cqes)
		}
	}
	if _, _, _, err := d.allocBlock(cqes); !errors.Is(err, errNoBlock) {
		t.Fatalf("a queue past the last block: %v, want errNoBlock", err)
	}
	// One leaves: the next takes its block and its room, with no new CQ.
	d.freeBlock(got[4].b, p, got[4].cq, cqes)
	b, _, cq, err := d.allocBlock(cqes)
	if err != nil || b != got[4].b || cq != got[4].cq || made != blocks/3-1 {
		t.Fatalf("after a queue left: block %d on %p (%v), want block %d on %p; %d CQs made", b, cq, err, got[4].b, got[4].cq, made)
	}
}

// TestAllocBlockCQFails: a CQ the device cannot make refuses the queue and takes nothing.
func TestAllocBlockCQFails(t *testing.T) {
	d := &device{freeBlocks: []int{1, 0}}
	d.newCQ = func(p *poller) (*verbs.CQ, error) { return nil, errors.New("no memory") }
	p := &poller{d: d, cqSize: 100}
	p.cqs.Store(&[]*pollerCQ{{cq: &verbs.CQ{}, room: 100}})
	d.pollers = []*poller{p}
	if _, _, _, err := d.allocBlock(60); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := d.allocBlock(60); err == nil {
		t.Fatal("a queue took room the CQs do not have")
	}
	if len(d.freeBlocks) != 1 || p.nqueues != 1 {
		t.Fatalf("after a refusal: %d free blocks, %d queues; want 1 and 1", len(d.freeBlocks), p.nqueues)
	}
	if _, _, _, err := d.allocBlock(101); err == nil {
		t.Fatal("a queue larger than a CQ was taken")
	}
}

// TestAllocBlockSkipsFailedSRQ: a poller whose shared receive queue failed
// (IBV_EVENT_SRQ_ERR) takes no new queue, however few it has: their QPs
// would get no receives. With none left, the queue is refused.
func TestAllocBlockSkipsFailedSRQ(t *testing.T) {
	d := &device{freeBlocks: []int{3, 2, 1, 0}}
	d.newCQ = func(p *poller) (*verbs.CQ, error) { return &verbs.CQ{}, nil }
	var ps []*poller
	for i := range 2 {
		p := &poller{d: d, idx: i, cqSize: 1000}
		p.cqs.Store(&[]*pollerCQ{{cq: &verbs.CQ{}, room: 1000}})
		ps = append(ps, p)
	}
	ps[1].nqueues = 5 // the busier one
	d.pollers = ps
	ps[0].markSRQFailed()
	for range 2 {
		if _, gp, _, err := d.allocBlock(10); err != nil || gp != ps[1] {
			t.Fatalf("allocBlock = poller %d, %v; want poller 1 (poller 0's SRQ failed)", gp.idx, err)
		}
	}
	ps[1].markSRQFailed()
	if _, _, _, err := d.allocBlock(10); !errors.Is(err, errSRQFailed) {
		t.Fatalf("allocBlock with every SRQ failed: %v, want errSRQFailed", err)
	}
	if len(d.freeBlocks) != 2 {
		t.Fatalf("%d free blocks after a refusal, want 2", len(d.freeBlocks))
	}
}
