package config

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// Bytes is a size in bytes. In configuration it is written as a plain number
// of bytes or a number with a unit: KiB, MiB, GiB, TiB, PiB, EiB are powers
// of 1024 and KB, MB, GB, TB, PB, EB powers of 1000. Units are matched
// without regard to case. Single-letter units (K, M, G) are refused because
// operators disagree on whether they mean 1000 or 1024.
type Bytes uint64

// Common sizes.
const (
	KiB Bytes = 1 << 10
	MiB Bytes = 1 << 20
	GiB Bytes = 1 << 30
	TiB Bytes = 1 << 40
)

// ErrBadSize is wrapped by every error from ParseBytes.
var ErrBadSize = errors.New("bad size")

var byteUnits = map[string]uint64{
	"":    1,
	"b":   1,
	"kib": 1 << 10,
	"mib": 1 << 20,
	"gib": 1 << 30,
	"tib": 1 << 40,
	"pib": 1 << 50,
	"eib": 1 << 60,
	"kb":  1e3,
	"mb":  1e6,
	"gb":  1e9,
	"tb":  1e12,
	"pb":  1e15,
	"eb":  1e18,
}

// ParseBytes parses a size such as "4096", "8KiB", "1 GiB" or "2GB".
func ParseBytes(s string) (Bytes, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("%q: want an integer with an optional unit (KiB, MiB, GiB, TiB, KB, MB, GB, TB): %w", s, ErrBadSize)
	}
	n, err := strconv.ParseUint(t[:i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: does not fit in 64 bits: %w", s, ErrBadSize)
	}
	unit := strings.ToLower(strings.TrimSpace(t[i:]))
	mult, ok := byteUnits[unit]
	if !ok {
		return 0, fmt.Errorf("%q: unknown unit %q (want KiB, MiB, GiB, TiB, KB, MB, GB, TB or none): %w", s, t[i:], ErrBadSize)
	}
	hi, lo := bits.Mul64(n, mult)
	if hi != 0 {
		return 0, fmt.Errorf("%q: does not fit in 64 bits: %w", s, ErrBadSize)
	}
	return Bytes(lo), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (b *Bytes) UnmarshalText(text []byte) error {
	v, err := ParseBytes(string(text))
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// MarshalText implements encoding.TextMarshaler. The result parses back to
// the same value.
func (b Bytes) MarshalText() ([]byte, error) {
	return []byte(b.String()), nil
}

// String formats b with the largest binary unit that divides it exactly,
// e.g. "1GiB", "8KiB", or as a plain number of bytes.
func (b Bytes) String() string {
	units := [...]string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	if b == 0 {
		return "0"
	}
	v, u := uint64(b), -1
	for u+1 < len(units) && v%1024 == 0 {
		v /= 1024
		u++
	}
	if u < 0 {
		return strconv.FormatUint(v, 10)
	}
	return strconv.FormatUint(v, 10) + units[u]
}

// isPow2 reports whether b is a power of two.
func (b Bytes) isPow2() bool { return b != 0 && b&(b-1) == 0 }
