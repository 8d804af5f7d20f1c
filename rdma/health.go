package rdma

import (
	"fmt"
	"slices"
)

// Poller health, for a service watchdog (systemd's WatchdogSec).
//
// A poller makes progress when it completes loop rounds, or when it sleeps
// in the kernel with nothing to do: an idle target sleeps for hours and is
// healthy. It is stalled when, between two checks, its beat did not move
// and either it was awake the whole time (a round that does not end: a
// handler, a post or a control function that blocks) or it slept through
// work handed over to it (a lost wake-up).

// beatSample is what a check reads of one poller.
type beatSample struct {
	beat    uint64
	asleep  bool
	pending bool // requests or control functions wait in its mailboxes
}

// sample reads p's progress from any goroutine.
func (p *poller) sample() beatSample {
	// asleep first: the poller moves beat before it clears asleep, so a
	// sample that sees it awake also sees the beat of its wake-up.
	asleep := p.asleep.Load()
	return beatSample{
		asleep:  asleep,
		beat:    p.beat.Load(),
		pending: len(p.mbox) > 0 || len(p.ctl) > 0,
	}
}

// stalled decides from two samples of a poller taken one check apart.
func stalled(prev, cur beatSample) bool {
	if cur.beat != prev.beat {
		return false
	}
	if !cur.asleep {
		return true
	}
	// The same sleep (going to sleep moves beat) with work waiting at both
	// checks: the work that arrived before the first should have woken it.
	return prev.pending && cur.pending
}

// Stalled names the pollers (e.g. "rxe0 poller 0") that made no progress
// since the previous call. Call it from one goroutine at a steady interval
// that is long against a round, as the systemd watchdog does at half of
// WatchdogSec; a poller's first check finds nothing.
func (t *Transport) Stalled() []string {
	t.mu.Lock()
	var ps []*poller
	for _, d := range t.devices {
		// A device's pollers are set before it is published in t.devices
		// and cleared only after it is removed.
		ps = append(ps, d.pollers...)
	}
	t.mu.Unlock()

	t.healthMu.Lock()
	defer t.healthMu.Unlock()
	next := make(map[*poller]beatSample, len(ps))
	var out []string
	for _, p := range ps {
		cur := p.sample()
		if prev, ok := t.lastBeats[p]; ok && stalled(prev, cur) {
			out = append(out, fmt.Sprintf("%s poller %d", p.d.attr.Name, p.idx))
		}
		next[p] = cur
	}
	t.lastBeats = next
	slices.Sort(out)
	return out
}
