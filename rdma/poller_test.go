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
		{"long sleep resets", 2 * time.Millisecond, base, time.Second, base},
		{"sleep at the cap resets", time.Millisecond, base, pollWindowMax, base},
		{"short sleep doubles", base, base, 100 * time.Microsecond, 2 * base},
		{"gap beyond double is covered", base, base, 600 * time.Microsecond, 900 * time.Microsecond},
		{"growth is capped", 1500 * time.Microsecond, base, time.Millisecond, pollWindowMax},
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
