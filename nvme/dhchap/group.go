package dhchap

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math/big"
	"sync"

	"filippo.io/bigmod"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Group is a DH-HMAC-CHAP Diffie-Hellman group identifier: Null (no DH)
// or one of the RFC 7919 finite-field groups.
type Group uint8

// The groups.
const (
	Null      Group = nvme.AuthDHNull
	FFDHE2048 Group = nvme.AuthDHFFDHE2048
	FFDHE3072 Group = nvme.AuthDHFFDHE3072
	FFDHE4096 Group = nvme.AuthDHFFDHE4096
	FFDHE6144 Group = nvme.AuthDHFFDHE6144
	FFDHE8192 Group = nvme.AuthDHFFDHE8192
)

// Groups lists every group, in identifier order.
var Groups = []Group{Null, FFDHE2048, FFDHE3072, FFDHE4096, FFDHE6144, FFDHE8192}

// PreferredGroups are the groups in the order a controller prefers them
// when nothing else is configured: ffdhe2048 first, the cheapest with a DH
// exchange (so that a recorded transaction gives away no value to attack
// the secret offline), null last.
var PreferredGroups = []Group{FFDHE2048, FFDHE3072, FFDHE4096, FFDHE6144, FFDHE8192, Null}

// ffdhe holds, per group, its size in bits, the X of RFC 7919's formula
// (Appendix A) and the private exponent length RFC 7919 §5.2 recommends
// (twice the group's estimated security strength).
var ffdhe = map[Group]struct{ bits, x, exponentBits int }{
	FFDHE2048: {2048, 560316, 225},
	FFDHE3072: {3072, 2625351, 275},
	FFDHE4096: {4096, 5736041, 325},
	FFDHE6144: {6144, 15705020, 375},
	FFDHE8192: {8192, 10965728, 400},
}

// Valid reports whether g is a defined group.
func (g Group) Valid() bool { return g == Null || ffdhe[g].bits != 0 }

func (g Group) String() string {
	if g == Null {
		return "null"
	}
	if p, ok := ffdhe[g]; ok {
		return fmt.Sprintf("ffdhe%d", p.bits)
	}
	return fmt.Sprintf("dhgroup(%d)", uint8(g))
}

// ParseGroup reads a configuration name: "null", "ffdhe2048"...
func ParseGroup(s string) (Group, error) {
	for _, g := range Groups {
		if s == g.String() {
			return g, nil
		}
	}
	return 0, fmt.Errorf("unknown DH-HMAC-CHAP DH group %q (want null or ffdhe2048 to ffdhe8192)", s)
}

// Prime is the group's modulus p (nil for Null).
func (g Group) Prime() *big.Int {
	if _, ok := ffdhe[g]; !ok {
		return nil
	}
	return new(big.Int).Set(groupModulus(g).p)
}

// Size is the length of the group's public values and shared secret in
// bytes (DHVLEN), 0 for Null.
func (g Group) Size() int { return ffdhe[g].bits / 8 }

type modulus struct {
	m     *bigmod.Modulus
	p     *big.Int
	pLess []byte // p-1, big-endian, Size bytes
}

var (
	moduliOnce sync.Once
	moduli     map[Group]modulus
)

// prime is the group's p = 2^b - 2^(b-64) + (floor(2^(b-130) e) + X) 2^64 - 1
// (RFC 7919 Appendix A), computed from the formula rather than copied.
func prime(bits, x int) *big.Int {
	b := uint(bits)
	p := new(big.Int).Lsh(big.NewInt(1), b)
	p.Sub(p, new(big.Int).Lsh(big.NewInt(1), b-64))
	t := eScaled(b - 130)
	t.Add(t, big.NewInt(int64(x)))
	p.Add(p, t.Lsh(t, 64))
	return p.Sub(p, big.NewInt(1))
}

// eScaled is floor(e 2^n), from the series e = sum 1/k!, with 64 guard bits.
func eScaled(n uint) *big.Int {
	term := new(big.Int).Lsh(big.NewInt(1), n+64)
	sum := new(big.Int)
	for k := int64(1); term.Sign() > 0; k++ {
		sum.Add(sum, term)
		term.Quo(term, big.NewInt(k))
	}
	return sum.Rsh(sum, 64)
}

func groupModulus(g Group) modulus {
	moduliOnce.Do(func() {
		moduli = map[Group]modulus{}
		for id, c := range ffdhe {
			p := prime(c.bits, c.x)
			m, err := bigmod.NewModulus(p.Bytes())
			if err != nil {
				panic(err) // p is odd and large: cannot happen
			}
			less := new(big.Int).Sub(p, big.NewInt(1)).FillBytes(make([]byte, c.bits/8))
			moduli[id] = modulus{m: m, p: p, pLess: less}
		}
	})
	return moduli[g]
}

// Key is one side's ephemeral DH key pair.
type Key struct {
	g      Group
	x      []byte // the private exponent, big-endian
	public []byte
}

// ErrPeerValue is returned for a peer's public value outside (1, p-1).
var ErrPeerValue = errors.New("DH public value out of range")

// NewKey makes an ephemeral key pair of group g (not Null) from rand
// (crypto/rand when nil).
func (g Group) NewKey(r io.Reader) (*Key, error) {
	c, ok := ffdhe[g]
	if !ok {
		return nil, fmt.Errorf("no DH key for group %v", g)
	}
	if r == nil {
		r = rand.Reader
	}
	x := make([]byte, (c.exponentBits+7)/8)
	if _, err := io.ReadFull(r, x); err != nil {
		return nil, fmt.Errorf("DH private key: %w", err)
	}
	x[0] |= 0x80 >> ((8 - c.exponentBits%8) % 8) // exactly exponentBits long
	x[0] &= 0xff >> ((8 - c.exponentBits%8) % 8)
	return g.keyFrom(x)
}

// keyFrom makes the key pair with private exponent x (big-endian).
func (g Group) keyFrom(x []byte) (*Key, error) {
	m := groupModulus(g)
	gen, err := bigmod.NewNat().SetBytes([]byte{2}, m.m)
	if err != nil {
		return nil, err
	}
	pub := bigmod.NewNat().Exp(gen, x, m.m).Bytes(m.m)
	return &Key{g: g, x: x, public: pub}, nil
}

// Public is g^x mod p, Size bytes, big-endian.
func (k *Key) Public() []byte { return k.public }

// Shared is the session key Ks = peer^x mod p, Size bytes. peer must be
// Size bytes and lie strictly between 1 and p-1: 0, 1 and p-1 would force
// a known Ks.
func (k *Key) Shared(peer []byte) ([]byte, error) {
	m := groupModulus(k.g)
	if len(peer) != k.g.Size() {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrPeerValue, len(peer), k.g.Size())
	}
	y, err := bigmod.NewNat().SetBytes(peer, m.m) // fails unless y < p
	if err != nil {
		return nil, ErrPeerValue
	}
	pLess, _ := bigmod.NewNat().SetBytes(m.pLess, m.m)
	if y.IsZero() == 1 || y.IsOne() == 1 || y.Equal(pLess) == 1 {
		return nil, ErrPeerValue
	}
	return bigmod.NewNat().Exp(y, k.x, m.m).Bytes(m.m), nil
}
