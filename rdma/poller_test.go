package rdma

import (
	"testing"
	"time"
)

func TestNextWindow(t *testing.T) {
	const base = 200 * time.Microsecond
	for _, tc := range []struct {
		name                string
		window, base, slept time.Duration
		want                time.Duration
	}{
		// Work that came long after the window: the polling before the sleep was waste, and
		// the window halves toward none (an idle target, or QD1 over a slow link).
		{"long sleep halves", 400 * time.Microsecond, base, time.Second, base},
		{"sleep at the cap halves", base, base, pollWindowMax, base / 2},
		{"a gap past the cap halves", pollWindowMax, base, time.Millisecond, pollWindowMax / 2},
		{"halving ends at none", pollWindowMin, base, time.Second, 0},
		{"none stays none", 0, base, time.Second, 0},
		{"short sleep after none covers the gap", 0, base, 100 * time.Microsecond, 150 * time.Microsecond},
		{"short sleep doubles", base, base, 100 * time.Microsecond, 2 * base},
		{"gap beyond double is covered", base / 2, base, 200 * time.Microsecond, 300 * time.Microsecond},
		{"growth is capped", 400 * time.Microsecond, base, 400 * time.Microsecond, pollWindowMax},
		{"base above the cap is kept", 5 * time.Millisecond, 5 * time.Millisecond, time.Millisecond, 5 * time.Millisecond},
		{"zero base never polls", 0, 0, 100 * time.Microsecond, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nextWindow(tc.window, tc.base, tc.slept); got != tc.want {
				t.Errorf("nextWindow(%v, %v, %v) = %v, want %v", tc.window, tc.base, tc.slept, got, tc.want)
			}
		})
	}
}
