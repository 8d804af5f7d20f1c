package dhchap

import (
	"crypto/subtle"
	"encoding/binary"
)

// The two roles of a response (base 2.0 §8.13.5.4, §8.13.5.5).
const (
	roleHost       = "HostHost"
	roleController = "Controller"
)

// HostResponse is R1 = HMAC(Kh', Ca1 || S1 || TID || 00h || "HostHost" ||
// NQNh || 00h || NQNc), keyed with the transformed host key. challenge is
// C1, or with a DH group the augmented challenge (Augment).
func HostResponse(h Hash, key, challenge []byte, seq uint32, tid uint16, hostNQN, subNQN string) []byte {
	return response(h, key, challenge, seq, tid, roleHost, hostNQN, subNQN)
}

// ControllerResponse is R2 = HMAC(Kc', Ca2 || S2 || TID || 00h ||
// "Controller" || NQNc || 00h || NQNh), keyed with the transformed
// controller key.
func ControllerResponse(h Hash, key, challenge []byte, seq uint32, tid uint16, hostNQN, subNQN string) []byte {
	return response(h, key, challenge, seq, tid, roleController, subNQN, hostNQN)
}

func response(h Hash, key, challenge []byte, seq uint32, tid uint16, role, first, second string) []byte {
	var st [7]byte // S (LE32), TID (LE16), 00h
	binary.LittleEndian.PutUint32(st[0:], seq)
	binary.LittleEndian.PutUint16(st[4:], tid)
	return h.hmac(key, challenge, st[:], []byte(role), []byte(first), []byte{0}, []byte(second))
}

// Augment is the augmented challenge Ca = HMAC(H(Ks), C) of a transaction
// with a DH group; sessionKey is Ks, the shared DH value.
func Augment(h Hash, sessionKey, challenge []byte) []byte {
	return h.hmac(h.sum(sessionKey), challenge)
}

// Equal compares two responses in constant time.
func Equal(a, b []byte) bool { return subtle.ConstantTimeCompare(a, b) == 1 }
