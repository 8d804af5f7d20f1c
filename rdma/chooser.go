package rdma

import "time"

// pollPolicy is what a poller does while its CQs are empty and work came
// within its window.
type pollPolicy uint8

const (
	// policyNap is the adaptive poller: nap rdma.poll_nap between empty
	// polls within the adaptive window, then sleep.
	policyNap pollPolicy = iota
	// policySpin polls without pausing for up to pollWindowMax, then sleeps.
	policySpin
)

func (p pollPolicy) String() string {
	if p == policySpin {
		return "spin"
	}
	return "nap"
}

// The measured poller's schedule: epochs of chooserEpoch, in cycles of
// chooserCycle epochs. A cycle's first two epochs probe both policies (in
// turns first, so neither always follows the other); the rest run the
// leader.
const (
	chooserEpoch = 50 * time.Millisecond
	chooserCycle = 16
	// chooserScoreMax clamps the score, so the leader changes after at
	// most this many probes that favour the other policy.
	chooserScoreMax = 2
	// chooserMinGaps is how many gaps a probe epoch needs to count: an
	// idle host, or one that never lets the poller idle, judges nothing.
	chooserMinGaps = 8
)

// chooser picks the measured poller's policy. Its metric is the gap: the
// time from a round that found work to the next round that found work,
// counted only when at least one round between them found nothing (the
// poller waited, so its policy was at work). At queue depth 1 it is the
// host's round trip as the target sees it, wake-up included, and its mean
// is the inverse of the IOPS: unlike the median, it sees the rare long gaps
// a spinning vCPU causes by delaying the others by a host time slice. A gap
// of a whole epoch or more is an idle host, not a policy's outcome, and is
// not counted. The probe with the lower mean gap scores a point. The
// chooser owns no clock: the poller passes it the times it takes anyway.
// Its zero value is not ready; use start. Poller goroutine only.
type chooser struct {
	epochAt time.Time // when the current epoch began
	epoch   int       // index in the cycle, 0..chooserCycle-1
	cycle   uint64
	policy  pollPolicy // the current epoch's
	score   int        // > 0: spin leads; < 0: nap leads; 0: nap (no verdict)

	// The current epoch's gaps, and the first probe's of this cycle.
	sum, probeSum time.Duration
	n, probeN     int

	// epochs counts the epochs run under each policy.
	epochs [2]uint64
}

// start begins the first cycle at now.
func (c *chooser) start(now time.Time) {
	*c = chooser{epochAt: now}
	c.policy = c.probe(0)
}

// probe is the policy of probe epoch i (0 or 1) of the current cycle.
func (c *chooser) probe(i int) pollPolicy {
	if (c.cycle+uint64(i))%2 == 0 {
		return policySpin
	}
	return policyNap
}

// leader is the policy the score favours.
func (c *chooser) leader() pollPolicy {
	if c.score > 0 {
		return policySpin
	}
	return policyNap
}

// gap records a gap of the current epoch; only probe epochs keep them.
func (c *chooser) gap(d time.Duration) {
	if c.epoch < 2 && d < chooserEpoch {
		c.sum += d
		c.n++
	}
}

// tick ends the epoch if it has run its length by now and returns the
// policy to run.
func (c *chooser) tick(now time.Time) pollPolicy {
	if now.Sub(c.epochAt) >= chooserEpoch {
		c.next(now)
	}
	return c.policy
}

// next ends the current epoch at now and starts the next.
func (c *chooser) next(now time.Time) {
	c.epochs[c.policy]++
	switch c.epoch {
	case 0:
		c.probeSum, c.probeN = c.sum, c.n
	case 1:
		c.judge(c.probe(0), c.probeSum, c.probeN, c.sum, c.n)
	}
	c.sum, c.n = 0, 0
	c.epochAt = now
	c.epoch++
	if c.epoch == chooserCycle {
		c.epoch = 0
		c.cycle++
	}
	if c.epoch < 2 {
		c.policy = c.probe(c.epoch)
	} else {
		c.policy = c.leader()
	}
}

// judge scores the cycle's probes: first ran policy p with n1 gaps summing
// to s1, the other policy had n2 summing to s2. Means are compared by
// cross-multiplying, with no division.
func (c *chooser) judge(p pollPolicy, s1 time.Duration, n1 int, s2 time.Duration, n2 int) {
	if n1 < chooserMinGaps || n2 < chooserMinGaps {
		return
	}
	a, b := int64(s1)*int64(n2), int64(s2)*int64(n1) // mean1 vs mean2, scaled by n1*n2
	if a == b {
		return
	}
	firstWins := a < b
	if firstWins == (p == policySpin) {
		c.score = min(c.score+1, chooserScoreMax)
	} else {
		c.score = max(c.score-1, -chooserScoreMax)
	}
}
