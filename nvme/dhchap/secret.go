package dhchap

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"strconv"
	"strings"
)

// Secret is a DH-HMAC-CHAP secret: a key and the hash its transformation
// uses (0: the key is used as is). It never prints its key.
type Secret struct {
	// Hash transforms the key (base 2.0 §8.13.5.7); 0 means none.
	Hash Hash
	Key  []byte
	// text is the DHHC-1 form the secret was parsed from.
	text string
}

// ErrSecret wraps every reason a secret is refused.
var ErrSecret = errors.New("invalid DH-HMAC-CHAP secret")

const secretPrefix = "DHHC-1:"

// Valid key lengths: 32, 48 or 64 bytes, followed by a CRC-32.
var keyLens = []int{32, 48, 64}

// ParseSecret reads the representation "DHHC-1:hh:base64(key || crc32):"
// that nvme gen-dhchap-key prints: hh is 00 (no transformation) or the
// hash ID (01 SHA-256, 02 SHA-384, 03 SHA-512), the key is 32, 48 or 64
// bytes, and the CRC-32 of the key follows it, little-endian.
func ParseSecret(s string) (Secret, error) {
	rest, ok := strings.CutPrefix(s, secretPrefix)
	if !ok {
		return Secret{}, fmt.Errorf("%w: does not start with %q", ErrSecret, secretPrefix)
	}
	hh, b64, ok := strings.Cut(rest, ":")
	if !ok || len(hh) != 2 {
		return Secret{}, fmt.Errorf("%w: want the form DHHC-1:hh:base64 of key and CRC, ending in a colon", ErrSecret)
	}
	id, err := strconv.ParseUint(hh, 16, 8)
	if err != nil || (id != 0 && !Hash(id).Valid()) {
		return Secret{}, fmt.Errorf("%w: hash %q is not 00, 01, 02 or 03", ErrSecret, hh)
	}
	b64 = strings.TrimSuffix(b64, ":")
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return Secret{}, fmt.Errorf("%w: base64: %v", ErrSecret, err)
	}
	n := len(raw) - crc32.Size
	if !validKeyLen(n) {
		return Secret{}, fmt.Errorf("%w: key of %d bytes, want 32, 48 or 64", ErrSecret, max(n, 0))
	}
	if crc32.ChecksumIEEE(raw[:n]) != binary.LittleEndian.Uint32(raw[n:]) {
		return Secret{}, fmt.Errorf("%w: CRC-32 does not match the key", ErrSecret)
	}
	return Secret{Hash: Hash(id), Key: raw[:n:n], text: s}, nil
}

func validKeyLen(n int) bool {
	for _, l := range keyLens {
		if n == l {
			return true
		}
	}
	return false
}

// NewSecret returns the secret for key (32, 48 or 64 bytes) and its
// transformation hash h (0: none), with its DHHC-1 representation.
func NewSecret(h Hash, key []byte) (Secret, error) {
	if !validKeyLen(len(key)) {
		return Secret{}, fmt.Errorf("%w: key of %d bytes, want 32, 48 or 64", ErrSecret, len(key))
	}
	if h != 0 && !h.Valid() {
		return Secret{}, fmt.Errorf("%w: hash %d", ErrSecret, h)
	}
	raw := binary.LittleEndian.AppendUint32(append([]byte(nil), key...), crc32.ChecksumIEEE(key))
	text := fmt.Sprintf("%s%02x:%s:", secretPrefix, uint8(h), base64.StdEncoding.EncodeToString(raw))
	return Secret{Hash: h, Key: raw[:len(key):len(key)], text: text}, nil
}

// Text is the DHHC-1 representation, for writing a configuration back.
func (s Secret) Text() string { return s.text }

// IsZero reports whether s holds no key.
func (s Secret) IsZero() bool { return len(s.Key) == 0 }

// Equal reports whether two secrets are the same (for configuration diffs,
// not for authentication).
func (s Secret) Equal(o Secret) bool { return s.text == o.text }

// String never shows the key.
func (s Secret) String() string {
	if s.IsZero() {
		return "<none>"
	}
	return "<redacted>"
}

// LogValue keeps the key out of structured logs.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// Transform is the key transformation of base 2.0 §8.13.5.7: with a hash,
// HMAC(key, NQN || "NVMe-over-Fabrics") using the secret's own hash;
// without, the key itself. nqn is the host's NQN for the host key and the
// subsystem's for the controller key.
func (s Secret) Transform(nqn string) []byte {
	if s.Hash == 0 {
		return append([]byte(nil), s.Key...)
	}
	return s.Hash.hmac(s.Key, []byte(nqn), []byte("NVMe-over-Fabrics"))
}
