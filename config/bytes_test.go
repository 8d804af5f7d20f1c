package config

import (
	"errors"
	"testing"
)

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in      string
		want    Bytes
		wantErr bool
	}{
		{in: "0", want: 0},
		{in: "4096", want: 4096},
		{in: "4096B", want: 4096},
		{in: "1KiB", want: 1024},
		{in: "8KiB", want: 8192},
		{in: "256MiB", want: 256 << 20},
		{in: "1GiB", want: 1 << 30},
		{in: "2TiB", want: 2 << 40},
		{in: "1PiB", want: 1 << 50},
		{in: "15EiB", want: 15 << 60},
		{in: "1KB", want: 1000},
		{in: "1MB", want: 1e6},
		{in: "1GB", want: 1e9},
		{in: "3TB", want: 3e12},
		{in: "1 GiB", want: 1 << 30},
		{in: "  64kib ", want: 64 << 10},
		{in: "1gb", want: 1e9},
		{in: "18446744073709551615", want: 1<<64 - 1},
		{in: "", wantErr: true},
		{in: "GiB", wantErr: true},
		{in: "-1", wantErr: true},
		{in: "1G", wantErr: true}, // ambiguous
		{in: "1K", wantErr: true},
		{in: "1Gi", wantErr: true},
		{in: "1.5GiB", wantErr: true},
		{in: "1GiBs", wantErr: true},
		{in: "0x1000", wantErr: true},
		{in: "1 2", wantErr: true},
		{in: "18446744073709551616", wantErr: true}, // 2^64
		{in: "16EiB", wantErr: true},                // 2^64
		{in: "18446744073709551615KiB", wantErr: true},
		{in: "20EB", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseBytes(tt.in)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ParseBytes(%q) = %d, want error", tt.in, got)
				}
				if !errors.Is(err, ErrBadSize) {
					t.Errorf("ParseBytes(%q) error %v does not wrap ErrBadSize", tt.in, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseBytes(%q) = %d, %v, want %d", tt.in, got, err, tt.want)
			}
			var b Bytes
			if err := b.UnmarshalText([]byte(tt.in)); err != nil || b != tt.want {
				t.Fatalf("UnmarshalText(%q) = %d, %v, want %d", tt.in, b, err, tt.want)
			}
		})
	}
}

func TestBytesString(t *testing.T) {
	tests := []struct {
		in   Bytes
		want string
	}{
		{0, "0"},
		{1, "1"},
		{1000, "1000"},
		{512, "512"},
		{4096, "4KiB"},
		{8 * KiB, "8KiB"},
		{1536, "1536"},
		{1 * MiB, "1MiB"},
		{1536 * KiB, "1536KiB"},
		{1 * GiB, "1GiB"},
		{3 * TiB, "3TiB"},
		{1 << 60, "1EiB"},
		{1<<64 - 1, "18446744073709551615"},
	}
	for _, tt := range tests {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("Bytes(%d).String() = %q, want %q", uint64(tt.in), got, tt.want)
		}
		back, err := ParseBytes(tt.in.String())
		if err != nil || back != tt.in {
			t.Errorf("ParseBytes(%q) = %d, %v, want round trip to %d", tt.in.String(), back, err, uint64(tt.in))
		}
		text, _ := tt.in.MarshalText()
		if string(text) != tt.want {
			t.Errorf("Bytes(%d).MarshalText() = %q, want %q", uint64(tt.in), text, tt.want)
		}
	}
}

// TestBytesDecode checks the decode hook: YAML strings and integers both
// work, and bad values name their key.
func TestBytesDecode(t *testing.T) {
	tests := []struct {
		name    string
		value   string
		want    Bytes
		wantErr string
	}{
		{name: "string", value: "2MiB", want: 2 * MiB},
		{name: "int", value: "2097152", want: 2 * MiB},
		{name: "quoted int", value: `"2097152"`, want: 2 * MiB},
		{name: "float", value: "2097152.0", want: 2 * MiB},
		{name: "negative", value: "-4096", wantErr: "rdma.mdts"},
		{name: "fraction", value: "4096.5", wantErr: "rdma.mdts"},
		{name: "bad unit", value: "1G", wantErr: "rdma.mdts"},
		{name: "list", value: "[1, 2]", wantErr: "rdma.mdts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loadYAML([]byte(minimalYAML + "rdma:\n  mdts: " + tt.value + "\n"))
			if tt.wantErr != "" {
				assertErrContains(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.RDMA.MDTS != tt.want {
				t.Errorf("mdts = %s, want %s", c.RDMA.MDTS, tt.want)
			}
		})
	}
}
