package rados

import (
	"slices"
	"testing"
)

func TestParseAddrs(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"10.0.2.15:0/3226389463", []string{"10.0.2.15:0/3226389463"}},
		{"[v2:10.0.2.15:0/123,v1:10.0.2.15:0/123]", []string{"10.0.2.15:0/123"}},
		{"[any:10.0.2.15:0/7]", []string{"10.0.2.15:0/7"}},
		{"[v2:[::1]:0/5]", []string{"[::1]:0/5"}},
	}
	for _, tt := range tests {
		if got := ParseAddrs(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("ParseAddrs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
