package rdma

import (
	"testing"
	"time"
)

// probeGaps are the gaps a cycle's two probe epochs see under each policy.
type probeGaps struct {
	spin, nap []time.Duration
}

// repeat is n gaps of d.
func repeat(d time.Duration, n int) []time.Duration {
	g := make([]time.Duration, n)
	for i := range g {
		g[i] = d
	}
	return g
}

// runCycle drives c through one whole cycle from its start, feeding each
// probe epoch the gaps of its policy, and returns the policy of every
// epoch and the time at the end.
func runCycle(t *testing.T, c *chooser, now time.Time, g probeGaps) ([]pollPolicy, time.Time) {
	t.Helper()
	if c.epoch != 0 {
		t.Fatalf("cycle starts at epoch %d", c.epoch)
	}
	var got []pollPolicy
	for e := 0; e < chooserCycle; e++ {
		got = append(got, c.policy)
		if e < 2 {
			gaps := g.nap
			if c.policy == policySpin {
				gaps = g.spin
			}
			for _, d := range gaps {
				c.gap(d)
				// Work within the epoch does not end it.
				if c.tick(now.Add(chooserEpoch/2)) != got[e] {
					t.Fatalf("epoch %d: policy changed within the epoch", e)
				}
			}
		}
		now = now.Add(chooserEpoch)
		c.tick(now)
	}
	return got, now
}

func TestChooserCycleStructure(t *testing.T) {
	var c chooser
	now := time.Unix(1000, 0)
	c.start(now)
	// No gaps: no verdict, so the leader is nap; the probes take turns first.
	for cycle, first := range []pollPolicy{policySpin, policyNap, policySpin} {
		var got []pollPolicy
		got, now = runCycle(t, &c, now, probeGaps{})
		second := policySpin
		if first == policySpin {
			second = policyNap
		}
		if got[0] != first || got[1] != second {
			t.Errorf("cycle %d: probes %v, %v; want %v, %v", cycle, got[0], got[1], first, second)
		}
		for e := 2; e < chooserCycle; e++ {
			if got[e] != policyNap {
				t.Errorf("cycle %d epoch %d: %v, want nap (no verdict)", cycle, e, got[e])
			}
		}
	}
	if c.epochs[policySpin] != 3 || c.epochs[policyNap] != 3*chooserCycle-3 {
		t.Errorf("epochs spin %d nap %d, want 3 and %d", c.epochs[policySpin], c.epochs[policyNap], 3*chooserCycle-3)
	}
}

func TestChooserScore(t *testing.T) {
	const us = time.Microsecond
	spinWins := probeGaps{spin: repeat(100*us, 20), nap: repeat(150*us, 20)}
	napWins := probeGaps{spin: repeat(150*us, 20), nap: repeat(100*us, 20)}
	// The median favours spinning; one long gap (a vCPU delayed by a host
	// time slice) makes its mean the higher.
	tail := probeGaps{
		spin: append(repeat(50*us, 19), 20*time.Millisecond),
		nap:  repeat(200*us, 20),
	}
	for _, tc := range []struct {
		name   string
		cycles []probeGaps
		score  int
		leader pollPolicy
	}{
		{"no verdict naps", []probeGaps{{}}, 0, policyNap},
		{"spin wins a point", []probeGaps{spinWins}, 1, policySpin},
		{"nap wins a point", []probeGaps{napWins}, -1, policyNap},
		{"clamped at +2", []probeGaps{spinWins, spinWins, spinWins, spinWins}, 2, policySpin},
		{"clamped at -2", []probeGaps{napWins, napWins, napWins}, -2, policyNap},
		{"clamp lets two losses turn it", []probeGaps{spinWins, spinWins, spinWins, napWins, napWins}, 0, policyNap},
		{"one loss keeps the lead", []probeGaps{spinWins, spinWins, napWins}, 1, policySpin},
		{"back from -2", []probeGaps{napWins, napWins, spinWins, spinWins, spinWins}, 1, policySpin},
		{"mean, not median", []probeGaps{tail}, -1, policyNap},
		{"tie scores nothing", []probeGaps{{spin: repeat(100*us, 10), nap: repeat(100*us, 30)}}, 0, policyNap},
		{"too few spin gaps", []probeGaps{{spin: repeat(us, chooserMinGaps-1), nap: repeat(100*us, 20)}}, 0, policyNap},
		{"too few nap gaps", []probeGaps{{spin: repeat(100*us, 20), nap: repeat(us, chooserMinGaps-1)}}, 0, policyNap},
		{"just enough gaps", []probeGaps{{spin: repeat(us, chooserMinGaps), nap: repeat(100*us, chooserMinGaps)}}, 1, policySpin},
		{"an idle host's gap is not counted", []probeGaps{{
			spin: append(repeat(100*us, 20), chooserEpoch),
			nap:  repeat(150*us, 20),
		}}, 1, policySpin},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c chooser
			now := time.Unix(1000, 0)
			c.start(now)
			var got []pollPolicy
			for _, g := range tc.cycles {
				got, now = runCycle(t, &c, now, g)
			}
			if c.score != tc.score {
				t.Errorf("score %d, want %d", c.score, tc.score)
			}
			for e := 2; e < chooserCycle; e++ {
				if got[e] != tc.leader {
					t.Fatalf("last cycle's epoch %d ran %v, want the leader %v", e, got[e], tc.leader)
				}
			}
		})
	}
}

// TestChooserLateTick: a poller that slept through several epochs ends
// one epoch when it next works; the schedule goes on from there.
func TestChooserLateTick(t *testing.T) {
	var c chooser
	now := time.Unix(1000, 0)
	c.start(now)
	if got := c.tick(now.Add(chooserEpoch - 1)); got != policySpin || c.epoch != 0 {
		t.Fatalf("before the epoch's end: %v at epoch %d, want spin at 0", got, c.epoch)
	}
	now = now.Add(10 * time.Second)
	if got := c.tick(now); got != policyNap || c.epoch != 1 {
		t.Fatalf("after a long sleep: %v at epoch %d, want nap at 1", got, c.epoch)
	}
	if got := c.tick(now.Add(chooserEpoch - 1)); c.epoch != 1 || got != policyNap {
		t.Fatalf("the new epoch began at the late tick: %v at epoch %d", got, c.epoch)
	}
}

// TestChooserAllocs: the chooser runs on every round that found work.
func TestChooserAllocs(t *testing.T) {
	var c chooser
	now := time.Unix(1000, 0)
	c.start(now)
	allocs := testing.AllocsPerRun(10000, func() {
		now = now.Add(7 * time.Millisecond)
		c.gap(100 * time.Microsecond)
		c.tick(now)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per round, want 0", allocs)
	}
	if c.cycle == 0 {
		t.Fatalf("the run did not complete a cycle")
	}
}
