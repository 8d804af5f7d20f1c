package bench

import (
	"slices"
	"strings"
	"testing"
)

// TestParseNames: make bench's PEERS and BENCH_TRANSPORTS, each word known and named once, in
// the order given.
func TestParseNames(t *testing.T) {
	peers, transports := ParsePeers, ParseTransports
	for _, tc := range []struct {
		parse   func(string) ([]string, error)
		in      string
		want    []string
		wantErr string
	}{
		{peers, "kernel", []string{TargetKernel}, ""},
		{peers, "kernel spdk", []string{TargetKernel, TargetSPDK}, ""},
		{peers, "  spdk\tkernel ", []string{TargetSPDK, TargetKernel}, ""}, // the order they run in
		{peers, "spdk", []string{TargetSPDK}, ""},
		{peers, "", nil, "no peer"},
		{peers, "   ", nil, "no peer"},
		{peers, "kernel kernel", nil, `"kernel" named twice`},
		{peers, "kernel nvmet", nil, `unknown peer "nvmet"`},
		{peers, "Kernel", nil, `unknown peer "Kernel"`},
		{peers, "nvmeof-tgt", nil, "unknown peer"}, // ours always runs; it is no peer
		{transports, "rdma,tcp", []string{TransportRDMA, TransportTCP}, ""},
		{transports, "tcp", []string{TransportTCP}, ""},
		{transports, "tcp rdma", []string{TransportTCP, TransportRDMA}, ""}, // the order they run in
		{transports, " rdma, tcp ", []string{TransportRDMA, TransportTCP}, ""},
		{transports, "", nil, "no transport"},
		{transports, ",", nil, "no transport"},
		{transports, "tcp,tcp", nil, `"tcp" named twice`},
		{transports, "rdma,roce", nil, `unknown transport "roce": want rdma or tcp`},
		{transports, "TCP", nil, `unknown transport "TCP"`},
	} {
		got, err := tc.parse(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parse(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("parse(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// TestNewAllocRun: allocations per I/O are the run's count less the idle
// span's, per I/O, and stay negative when the idle span allocated more:
// that is noise, reported as such, never clamped to a clean 0.
func TestNewAllocRun(t *testing.T) {
	for _, tc := range []struct {
		name              string
		ios, allocs, idle uint64
		want              float64
		noise             bool
	}{
		{"allocations per I/O", 1000, 1510, 10, 1.5, false},
		{"none per I/O", 1000, 10, 10, 0, false},
		{"idle allocated more", 1000, 10, 30, -0.02, true},
		{"no I/O", 0, 10, 5, 0, false},
	} {
		a := NewAllocRun("job", tc.ios, tc.allocs, tc.idle)
		if a.AllocsPerIO != tc.want || a.Noise() != tc.noise || a.IOs != tc.ios || a.Allocs != tc.allocs || a.IdleAllocs != tc.idle {
			t.Errorf("%s: %+v (noise %v), want %v per I/O (noise %v)", tc.name, *a, a.Noise(), tc.want, tc.noise)
		}
	}
}

// TestParseMallocs reads runtime.MemStats.Mallocs from the text of
// /debug/pprof/heap?debug=1.
func TestParseMallocs(t *testing.T) {
	const profile = `heap profile: 3: 2048 [1200: 4096000] @ heap/1048576
1: 1024 [1: 1024] @ 0x4b1a2c 0x4b1a2d
#	0x4b1a2b	main.main+0x2b	/src/main.go:10

# runtime.MemStats
# Alloc = 1863448
# TotalAlloc = 4096000
# Sys = 12958736
# Lookups = 0
# Mallocs = 123456789
# Frees = 123450000
# HeapAlloc = 1863448
`
	n, err := ParseMallocs(profile)
	if err != nil || n != 123456789 {
		t.Errorf("ParseMallocs = %d, %v; want 123456789", n, err)
	}
	for _, bad := range []string{"", "heap profile: 0: 0 [0: 0] @ heap/1\n", "# Mallocs = many\n", "# Mallocs = -1\n"} {
		if n, err := ParseMallocs(bad); err == nil {
			t.Errorf("ParseMallocs(%q) = %d, want an error", bad, n)
		}
	}
}
