package rdma

import (
	"testing"
	"time"
)

func TestParseStall(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{in: "", want: 0},
		{in: "5s", want: 5 * time.Second},
		{in: "1500ms", want: 1500 * time.Millisecond},
		{in: "0s", bad: true},
		{in: "-1s", bad: true},
		{in: "5", bad: true},
		{in: "soon", bad: true},
	} {
		got, err := parseStall(tc.in)
		switch {
		case tc.bad && err == nil:
			t.Errorf("%q: no error", tc.in)
		case !tc.bad && (err != nil || got != tc.want):
			t.Errorf("%q: %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}
