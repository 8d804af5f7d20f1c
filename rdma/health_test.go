package rdma

import (
	"slices"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/rdma/internal/verbs"
)

func TestStalledDecision(t *testing.T) {
	type s = beatSample
	for _, tc := range []struct {
		name      string
		prev, cur beatSample
		want      bool
	}{
		{"busy: rounds completed", s{beat: 10}, s{beat: 5000}, false},
		{"awake without a round", s{beat: 10}, s{beat: 10}, true},
		{"awake without a round, work waiting", s{beat: 10, pending: true}, s{beat: 10, pending: true}, true},
		{"idle: asleep throughout", s{beat: 11, asleep: true}, s{beat: 11, asleep: true}, false},
		{"went to sleep since", s{beat: 10}, s{beat: 11, asleep: true}, false},
		{"woke and slept again", s{beat: 11, asleep: true}, s{beat: 14, asleep: true}, false},
		{"woke and is busy", s{beat: 11, asleep: true}, s{beat: 12}, false},
		{"work arrived just now", s{beat: 11, asleep: true}, s{beat: 11, asleep: true, pending: true}, false},
		{"work handed over, taken", s{beat: 11, asleep: true, pending: true}, s{beat: 13, asleep: true}, false},
		{"lost wake-up: slept through work", s{beat: 11, asleep: true, pending: true}, s{beat: 11, asleep: true, pending: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := stalled(tc.prev, tc.cur); got != tc.want {
				t.Errorf("stalled(%+v, %+v) = %v, want %v", tc.prev, tc.cur, got, tc.want)
			}
		})
	}
}

// TestTransportStalled drives Stalled over pollers with no RDMA behind them:
// the test moves their beats as their loops would.
func TestTransportStalled(t *testing.T) {
	newP := func(d *device, idx int) *poller {
		return &poller{d: d, idx: idx, mbox: make(chan *request, 1), ctl: make(chan func(), 1)}
	}
	d := &device{attr: verbs.DeviceAttr{Name: "rxe0"}}
	busy, idle, stuck, deaf := newP(d, 0), newP(d, 1), newP(d, 2), newP(d, 3)
	d.pollers = []*poller{busy, idle, stuck, deaf}
	tr := &Transport{devices: map[uintptr]*device{1: d}}

	check := func(want ...string) {
		t.Helper()
		if got := tr.Stalled(); !slices.Equal(got, want) {
			t.Errorf("Stalled() = %q, want %q", got, want)
		}
	}
	idle.asleep.Store(true)
	deaf.asleep.Store(true)
	deaf.ctl <- func() {}
	check() // first check: nothing to compare with

	busy.beat.Add(3)
	check("rxe0 poller 2", "rxe0 poller 3")

	busy.beat.Add(5)
	stuck.beat.Add(1) // a round ended at last
	<-deaf.ctl        // and the lost wake-up came
	deaf.beat.Add(2)
	check()
	check("rxe0 poller 0", "rxe0 poller 2") // busy and stuck stopped
}
