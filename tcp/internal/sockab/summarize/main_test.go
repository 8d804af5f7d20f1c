package main

import (
	"strings"
	"testing"
)

func TestParseLine(t *testing.T) {
	tests := []struct {
		line          string
		cas, variant  string
		ops, srvAlloc float64
		ok            bool
	}{
		{"BenchmarkSockets/read/qd1/conns1/netpoller-inline-2   48475  43723 ns/op  22871 ops/s  0 srv-allocs/op  0 B/op", "read/qd1/conns1", "netpoller-inline", 22871, 0, true},
		{"BenchmarkSockets/write/qd32/conns4/uring-2 1000000 2178 ns/op 459217 ops/s 0.5 srv-allocs/op", "write/qd32/conns4", "uring", 459217, 0.5, true},
		{"BenchmarkSockets/read/qd1/conns1/uring-2 10 x ns/op", "", "", 0, 0, false},
		{"sockab server uring: one ring", "", "", 0, 0, false},
		{"PASS", "", "", 0, 0, false},
	}
	for _, tc := range tests {
		cas, v, s, ok := parseLine(tc.line)
		if ok != tc.ok || cas != tc.cas || v != tc.variant || (ok && (s["ops/s"] != tc.ops || s["srv-allocs/op"] != tc.srvAlloc)) {
			t.Errorf("parseLine(%q) = %q, %q, %v, %v", tc.line, cas, v, s, ok)
		}
	}
}

func TestBetter(t *testing.T) {
	tests := []struct {
		rs   []float64
		up   bool
		want string
	}{
		{[]float64{1.2, 0.9, 1}, true, "1/3"},
		{[]float64{1.2, 0.9, 1}, false, "1/3"},
		{[]float64{0.5, 0.7}, false, "2/2"},
		{nil, true, "0/0"},
	}
	for _, tc := range tests {
		if got := better(tc.rs, tc.up); got != tc.want {
			t.Errorf("better(%v, %v) = %q, want %q", tc.rs, tc.up, got, tc.want)
		}
	}
}

func TestStats(t *testing.T) {
	tests := []struct {
		xs          []float64
		med, lo, hi float64
	}{
		{nil, 0, 0, 0},
		{[]float64{3}, 3, 3, 3},
		{[]float64{5, 1, 3}, 3, 1, 5},
		{[]float64{4, 1, 3, 2}, 2.5, 1, 4},
	}
	for _, tc := range tests {
		med, lo, hi := stats(tc.xs)
		if med != tc.med || lo != tc.lo || hi != tc.hi {
			t.Errorf("stats(%v) = %v, %v, %v; want %v, %v, %v", tc.xs, med, lo, hi, tc.med, tc.lo, tc.hi)
		}
	}
}

// Ratios pair the rounds in order, and the summary says whether the
// samples overlap.
func TestWrite(t *testing.T) {
	in := `# round 1
BenchmarkSockets/read/qd1/conns1/netpoller-2 10 1 ns/op 100 ops/s 2000 srv-cpu-ns/op 0 srv-allocs/op 1000 cli-cpu-ns/op
BenchmarkSockets/read/qd1/conns1/uring-2 10 1 ns/op 150 ops/s 1000 srv-cpu-ns/op 0 srv-allocs/op 1000 cli-cpu-ns/op
# round 2
BenchmarkSockets/read/qd1/conns1/uring-2 10 1 ns/op 120 ops/s 1500 srv-cpu-ns/op 0 srv-allocs/op 1000 cli-cpu-ns/op
BenchmarkSockets/read/qd1/conns1/netpoller-2 10 1 ns/op 110 ops/s 1900 srv-cpu-ns/op 0 srv-allocs/op 1000 cli-cpu-ns/op
`
	all, err := read(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	write(&b, all)
	want := "| read/qd1/conns1 | uring | 2 | 0 (0–0) | 1.25 (1.00–1.50) | 1.00 (1.00–1.00) | 0 | 1.30 (1.09–1.50); 2/2; above | 0.64 (0.50–0.79); 2/2; below |"
	if !strings.Contains(b.String(), want) {
		t.Errorf("summary:\n%s\nwant a row\n%s", b.String(), want)
	}
}
