package bench

import (
	"slices"
	"strings"
	"testing"
)

func TestParsePeers(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []string
		wantErr string
	}{
		{"kernel", []string{TargetKernel}, ""},
		{"kernel spdk", []string{TargetKernel, TargetSPDK}, ""},
		{"  spdk\tkernel ", []string{TargetSPDK, TargetKernel}, ""}, // the order they run in
		{"spdk", []string{TargetSPDK}, ""},
		{"", nil, "no peer"},
		{"   ", nil, "no peer"},
		{"kernel kernel", nil, `"kernel" named twice`},
		{"kernel nvmet", nil, `unknown peer "nvmet"`},
		{"Kernel", nil, `unknown peer "Kernel"`},
		{"nvmeof-tgt", nil, "unknown peer"}, // ours always runs; it is no peer
	} {
		got, err := ParsePeers(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParsePeers(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParsePeers(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
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
