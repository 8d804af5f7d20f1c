package config

import (
	"bytes"
	"testing"

	"github.com/google/uuid"
)

func TestResolvedUUID(t *testing.T) {
	const nqn = "nqn.2026-11.io.example:disk1"
	n1 := Namespace{NSID: 1}
	tests := []struct {
		name string
		a, b uuid.UUID
		same bool
	}{
		{"same inputs", n1.ResolvedUUID(nqn), Namespace{NSID: 1, Path: "/other", Size: GiB}.ResolvedUUID(nqn), true},
		{"different nsid", n1.ResolvedUUID(nqn), Namespace{NSID: 2}.ResolvedUUID(nqn), false},
		{"different subsystem", n1.ResolvedUUID(nqn), n1.ResolvedUUID(nqn + "x"), false},
		// "…:disk1" + "/11" must not collide with "…:disk1/1" + "/1".
		{"no concatenation clash", Namespace{NSID: 11}.ResolvedUUID(nqn), Namespace{NSID: 1}.ResolvedUUID(nqn + "1"), false},
		{"configured honoured", Namespace{NSID: 1, UUID: "4f0e2c1a-0000-4000-8000-000000000002"}.ResolvedUUID(nqn),
			uuid.MustParse("4f0e2c1a-0000-4000-8000-000000000002"), true},
		{"configured ignores nqn", Namespace{NSID: 1, UUID: "4f0e2c1a-0000-4000-8000-000000000002"}.ResolvedUUID("nqn.2026-11.io.example:other"),
			uuid.MustParse("4f0e2c1a-0000-4000-8000-000000000002"), true},
		{"invalid configured falls back", Namespace{NSID: 1, UUID: "junk"}.ResolvedUUID(nqn), n1.ResolvedUUID(nqn), true},
		// Pinned so that a change to the derivation, which hosts would see
		// as new namespaces, fails loudly.
		{"pinned", n1.ResolvedUUID(nqn), uuid.MustParse(pinnedUUID), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if (tt.a == tt.b) != tt.same {
				t.Errorf("%s vs %s: equal = %v, want %v", tt.a, tt.b, tt.a == tt.b, tt.same)
			}
		})
	}
	u := n1.ResolvedUUID(nqn)
	if u.Version() != 5 || u.Variant() != uuid.RFC4122 {
		t.Errorf("derived UUID %s: version %d variant %v, want a name-based (SHA-1) RFC 4122 UUID", u, u.Version(), u.Variant())
	}
}

const pinnedUUID = "601daeef-71b2-5bfc-88af-c21cfe0de33d"

func TestNGUID(t *testing.T) {
	const nqn = "nqn.2026-11.io.example:disk1"
	n := Namespace{NSID: 1}
	g := n.ResolvedNGUID(nqn)
	if g != n.ResolvedNGUID(nqn) {
		t.Error("NGUID is not stable")
	}
	u := n.ResolvedUUID(nqn)
	if bytes.Equal(g[:], u[:]) {
		t.Error("NGUID is byte-identical to the UUID")
	}
	if g == (Namespace{NSID: 2}).ResolvedNGUID(nqn) {
		t.Error("NGUID does not depend on NSID")
	}
	configured := Namespace{NSID: 1, UUID: "4f0e2c1a-0000-4000-8000-000000000002"}
	if configured.ResolvedNGUID(nqn) != configured.ResolvedNGUID("nqn.2026-11.io.example:moved") {
		t.Error("NGUID of a namespace with a configured UUID depends on the subsystem")
	}
	if g == ([16]byte{}) {
		t.Error("NGUID is zero")
	}
}

func TestParseNGUID(t *testing.T) {
	want := [16]byte{0x6e, 0x3f, 0x1a, 0x2b, 0x4c, 0x5d, 0x4e, 0x6f, 0x8a, 0x9b, 0x0c, 0x1d, 0x2e, 0x3f, 0x4a, 0x5b}
	tests := []struct {
		in string
		ok bool
	}{
		{"6e3f1a2b4c5d4e6f8a9b0c1d2e3f4a5b", true},     // nvme id-ns
		{"6e3f1a2b-4c5d-4e6f-8a9b-0c1d2e3f4a5b", true}, // nvmet's configfs
		{"6E3F1A2B4C5D4E6F8A9B0C1D2E3F4A5B", true},
		{"6e3f1a2b4c5d4e6f8a9b0c1d2e3f4a5", false},
		{"6e3f1a2b4c5d4e6f8a9b0c1d2e3f4a5b00", false},
		{"6e3f1a2b-4c5d4e6f-8a9b-0c1d-2e3f4a5b", false},
		{"6e3f1a2b4c5d4e6f8a9b0c1d2e3f4a5g", false},
		{" 6e3f1a2b4c5d4e6f8a9b0c1d2e3f4a5b", false},
		{"", false},
		{NGUIDNone, false},
	}
	for _, tt := range tests {
		g, err := ParseNGUID(tt.in)
		if tt.ok && (err != nil || g != want) {
			t.Errorf("ParseNGUID(%q) = %x, %v; want %x", tt.in, g, err, want)
		}
		if !tt.ok && err == nil {
			t.Errorf("ParseNGUID(%q) = %x, want an error", tt.in, g)
		}
	}
}

func TestParseEUI64(t *testing.T) {
	want := [8]byte{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77}
	tests := []struct {
		in string
		ok bool
	}{
		{"0011223344556677", true},
		{"00112233445566778", false},
		{"00112233445566", false},
		{"001122334455667788", false},
		{"00-11-22-33-44-55-66-77", false},
		{"001122334455667g", false},
		{"", false},
	}
	for _, tt := range tests {
		e, err := ParseEUI64(tt.in)
		if tt.ok && (err != nil || e != want) {
			t.Errorf("ParseEUI64(%q) = %x, %v; want %x", tt.in, e, err, want)
		}
		if !tt.ok && err == nil {
			t.Errorf("ParseEUI64(%q) = %x, want an error", tt.in, e)
		}
	}
}

func TestResolvedIDs(t *testing.T) {
	const nqn = "nqn.2026-11.io.example:disk1"
	derived := Namespace{NSID: 1}.ResolvedNGUID(nqn)
	tests := []struct {
		name  string
		n     Namespace
		nguid [16]byte
		eui64 [8]byte
	}{
		{"defaults", Namespace{NSID: 1}, derived, [8]byte{}},
		// Pinned: a change to the derivation is a new namespace to hosts.
		{"derived pinned", Namespace{NSID: 1}, [16]byte{0x50, 0x0a, 0xd0, 0x67, 0x51, 0xec, 0x7f, 0x17, 0x90, 0xbe, 0xb9, 0xbc, 0x4a, 0x23, 0xfb, 0xfa}, [8]byte{}},
		{"configured", Namespace{NSID: 1, NGUID: "6e3f1a2b-4c5d-4e6f-8a9b-0c1d2e3f4a5b", EUI64: "0011223344556677"},
			[16]byte{0x6e, 0x3f, 0x1a, 0x2b, 0x4c, 0x5d, 0x4e, 0x6f, 0x8a, 0x9b, 0x0c, 0x1d, 0x2e, 0x3f, 0x4a, 0x5b},
			[8]byte{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77}},
		{"none", Namespace{NSID: 1, NGUID: NGUIDNone}, [16]byte{}, [8]byte{}},
		{"invalid falls back", Namespace{NSID: 1, NGUID: "junk", EUI64: "junk"}, derived, [8]byte{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if g := tt.n.ResolvedNGUID(nqn); g != tt.nguid {
				t.Errorf("ResolvedNGUID = %x, want %x", g, tt.nguid)
			}
			if e := tt.n.ResolvedEUI64(); e != tt.eui64 {
				t.Errorf("ResolvedEUI64 = %x, want %x", e, tt.eui64)
			}
		})
	}
}
