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
