package rdma

import (
	"slices"
	"testing"
)

func TestRing(t *testing.T) {
	// ops: positive n pushes n, 0 pops, negative -n removes every n.
	tests := []struct {
		name      string
		cap       int
		ops       []int
		want      []int
		wantFulls int
	}{
		{name: "fifo order", cap: 4, ops: []int{1, 2, 3}, want: []int{1, 2, 3}},
		{name: "full refuses", cap: 2, ops: []int{1, 2, 3}, want: []int{1, 2}, wantFulls: 1},
		{name: "wraps around", cap: 3, ops: []int{1, 2, 3, 0, 0, 4, 5}, want: []int{3, 4, 5}},
		{name: "remove keeps order", cap: 5, ops: []int{1, 2, 1, 3, -1}, want: []int{2, 3}},
		{name: "pop empty", cap: 1, ops: []int{0, 7}, want: []int{7}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRing[int](tc.cap)
			fulls := 0
			for _, op := range tc.ops {
				switch {
				case op > 0:
					if !r.push(op) {
						fulls++
					}
				case op == 0:
					r.pop()
				default:
					r.removeIf(func(v int) bool { return v == -op })
				}
			}
			if fulls != tc.wantFulls {
				t.Errorf("refused pushes = %d, want %d", fulls, tc.wantFulls)
			}
			if h, ok := r.peek(); ok != (len(tc.want) > 0) || (ok && h != tc.want[0]) {
				t.Errorf("peek = %d, %v; want head of %v", h, ok, tc.want)
			}
			var got []int
			for r.len() > 0 {
				v, _ := r.pop()
				got = append(got, v)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("contents = %v, want %v", got, tc.want)
			}
		})
	}
}
