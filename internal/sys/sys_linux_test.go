package sys

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestAddr(t *testing.T) {
	p, err := unix.Mmap(-1, 0, 8192, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(p)
	base := Addr(p)
	tests := []struct {
		name string
		p    []byte
		want uintptr
	}{
		{"mmap is page-aligned", p, base &^ 4095},
		{"offset", p[100:], base + 100},
		{"empty keeps its place", p[4096:4096], base + 4096},
		{"nil", nil, 0},
	}
	for _, tc := range tests {
		if got := Addr(tc.p); got != tc.want {
			t.Errorf("%s: Addr = %#x, want %#x", tc.name, got, tc.want)
		}
	}
}
