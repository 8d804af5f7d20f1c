package blockdev

import (
	"os"
	"path/filepath"
	"testing"
)

func TestKindOf(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "ns.img")
	if err := os.WriteFile(regular, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	type kindCase struct {
		name    string
		path    string
		want    Kind
		wantErr bool
	}
	tests := []kindCase{
		{"empty is memory", "", KindMemory, false},
		{"regular file", regular, KindFile, false},
		{"missing file is created later", filepath.Join(dir, "new.img"), KindFile, false},
		{"character device is not a block device", "/dev/null", KindFile, false},
		{"unstatable", filepath.Join(regular, "below-a-file"), KindFile, true},
	}
	if dev := findBlockDevice(); dev != "" {
		tests = append(tests, kindCase{"block device", dev, KindBlock, false})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := KindOf(tt.path)
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("KindOf(%q) = %q, %v; want %q, error %v", tt.path, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// findBlockDevice returns a block device node, or "" when there is none.
func findBlockDevice() string {
	entries, _ := os.ReadDir("/sys/block")
	for _, e := range entries {
		dev := "/dev/" + e.Name()
		if st, err := os.Stat(dev); err == nil && st.Mode()&os.ModeDevice != 0 && st.Mode()&os.ModeCharDevice == 0 {
			return dev
		}
	}
	return ""
}

func TestValidBlockSize(t *testing.T) {
	for _, tt := range []struct {
		bs   uint32
		want bool
	}{{0, false}, {512, true}, {1024, false}, {4096, true}, {8192, false}} {
		if got := ValidBlockSize(tt.bs); got != tt.want {
			t.Errorf("ValidBlockSize(%d) = %v, want %v", tt.bs, got, tt.want)
		}
	}
}
