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
	g := n.NGUID(nqn)
	if g != n.NGUID(nqn) {
		t.Error("NGUID is not stable")
	}
	u := n.ResolvedUUID(nqn)
	if bytes.Equal(g[:], u[:]) {
		t.Error("NGUID is byte-identical to the UUID")
	}
	if g == (Namespace{NSID: 2}).NGUID(nqn) {
		t.Error("NGUID does not depend on NSID")
	}
	configured := Namespace{NSID: 1, UUID: "4f0e2c1a-0000-4000-8000-000000000002"}
	if configured.NGUID(nqn) != configured.NGUID("nqn.2026-11.io.example:moved") {
		t.Error("NGUID of a namespace with a configured UUID depends on the subsystem")
	}
	if g == ([16]byte{}) {
		t.Error("NGUID is zero")
	}
}
