package config

import (
	"crypto/sha256"
	"strconv"

	"github.com/google/uuid"
)

// uuidSpace is the name space for namespace UUIDs derived from the
// subsystem NQN and NSID. Changing it changes every derived UUID, which
// hosts treat as a different namespace (multipath, udev by-id links).
var uuidSpace = uuid.MustParse("2110ba8b-b7eb-465e-b011-9b16af900e7f")

// ResolvedUUID returns the configured UUID, or one derived from subnqn and
// the NSID so that it is stable across restarts without stored state. An
// unparsable configured UUID (which Validate rejects) also yields the
// derived one.
func (n Namespace) ResolvedUUID(subnqn string) uuid.UUID {
	if n.UUID != "" {
		if u, err := uuid.Parse(n.UUID); err == nil {
			return u
		}
	}
	return uuid.NewSHA1(uuidSpace, []byte(subnqn+"/"+strconv.FormatUint(uint64(n.NSID), 10)))
}

// NGUID returns a namespace globally unique identifier derived from
// ResolvedUUID. It is hashed rather than copied so that the NGUID and UUID
// descriptors of Identify CNS 03h do not carry the same 16 bytes.
func (n Namespace) NGUID(subnqn string) [16]byte {
	u := n.ResolvedUUID(subnqn)
	sum := sha256.Sum256(append([]byte("nguid"), u[:]...))
	var g [16]byte
	copy(g[:], sum[:16])
	return g
}
