package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"

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

// NGUIDNone is the nguid value that reports no NGUID: Identify Namespace
// holds zeroes and the descriptor list leaves it out, as nvmet does for a
// namespace whose nguid it was never given.
const NGUIDNone = "none"

// ResolvedNGUID returns the configured NGUID, zero for NGUIDNone, or one
// derived from ResolvedUUID. The derived one is hashed rather than copied
// so that the NGUID and UUID descriptors of Identify CNS 03h do not carry
// the same 16 bytes. An unparsable configured NGUID (which Validate
// rejects) also yields the derived one.
func (n Namespace) ResolvedNGUID(subnqn string) [16]byte {
	switch n.NGUID {
	case NGUIDNone:
		return [16]byte{}
	case "":
	default:
		if g, err := ParseNGUID(string(n.NGUID)); err == nil {
			return g
		}
	}
	u := n.ResolvedUUID(subnqn)
	sum := sha256.Sum256(append([]byte("nguid"), u[:]...))
	var g [16]byte
	copy(g[:], sum[:16])
	return g
}

// ResolvedEUI64 returns the configured EUI64, or zero (none).
func (n Namespace) ResolvedEUI64() [8]byte {
	e, _ := ParseEUI64(string(n.EUI64))
	return e
}

var (
	errNGUIDForm = errors.New("want 32 hex digits, or the 8-4-4-4-12 form")
	errEUI64Form = errors.New("want 16 hex digits")
)

// ParseNGUID reads an NGUID: 32 hex digits, as nvme-cli prints it, or
// with dashes in the 8-4-4-4-12 places, as nvmet's configfs prints it.
// The bytes are in the order written, which is the order of Identify
// Namespace bytes 104-119.
func ParseNGUID(s string) ([16]byte, error) {
	var g [16]byte
	if len(s) == 36 {
		for _, i := range []int{8, 13, 18, 23} {
			if s[i] != '-' {
				return g, errNGUIDForm
			}
		}
		s = strings.ReplaceAll(s, "-", "")
	}
	if len(s) != 2*len(g) {
		return g, errNGUIDForm
	}
	if _, err := hex.Decode(g[:], []byte(s)); err != nil {
		return [16]byte{}, errNGUIDForm
	}
	return g, nil
}

// ParseEUI64 reads an IEEE EUI-64: 16 hex digits, as nvme-cli prints it,
// in the order of Identify Namespace bytes 120-127.
func ParseEUI64(s string) ([8]byte, error) {
	var e [8]byte
	if len(s) != 2*len(e) {
		return e, errEUI64Form
	}
	if _, err := hex.Decode(e[:], []byte(s)); err != nil {
		return [8]byte{}, errEUI64Form
	}
	return e, nil
}
