package dhchap

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Hash is a DH-HMAC-CHAP hash function identifier (nvme.AuthHashSHA256...).
type Hash uint8

// The hash functions, strongest last.
const (
	SHA256 Hash = nvme.AuthHashSHA256
	SHA384 Hash = nvme.AuthHashSHA384
	SHA512 Hash = nvme.AuthHashSHA512
)

// Hashes lists every hash function, in identifier order.
var Hashes = []Hash{SHA256, SHA384, SHA512}

// PreferredHashes are the hashes in the order a controller prefers them
// when nothing else is configured.
var PreferredHashes = []Hash{SHA256, SHA384, SHA512}

// Valid reports whether h is a defined hash function.
func (h Hash) Valid() bool { return h >= SHA256 && h <= SHA512 }

// Size is the digest length, which is also the challenge and response
// length (HL) of a transaction using h.
func (h Hash) Size() int {
	switch h {
	case SHA256:
		return sha256.Size
	case SHA384:
		return sha512.Size384
	case SHA512:
		return sha512.Size
	}
	return 0
}

func (h Hash) new() func() hash.Hash {
	switch h {
	case SHA256:
		return sha256.New
	case SHA384:
		return sha512.New384
	case SHA512:
		return sha512.New
	}
	panic(fmt.Sprintf("dhchap: invalid hash %d", h))
}

// String is the configuration name: "sha256", "sha384", "sha512".
func (h Hash) String() string {
	switch h {
	case SHA256:
		return "sha256"
	case SHA384:
		return "sha384"
	case SHA512:
		return "sha512"
	}
	return fmt.Sprintf("hash(%d)", uint8(h))
}

// ParseHash reads a configuration name ("sha256", also "hmac(sha256)").
func ParseHash(s string) (Hash, error) {
	for _, h := range Hashes {
		if s == h.String() || s == "hmac("+h.String()+")" {
			return h, nil
		}
	}
	return 0, fmt.Errorf("unknown DH-HMAC-CHAP hash %q (want sha256, sha384 or sha512)", s)
}

func (h Hash) hmac(key []byte, parts ...[]byte) []byte {
	m := hmac.New(h.new(), key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

func (h Hash) sum(b []byte) []byte {
	d := h.new()()
	d.Write(b)
	return d.Sum(nil)
}
