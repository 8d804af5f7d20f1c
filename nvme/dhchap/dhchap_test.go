package dhchap

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"
)

const (
	testHostNQN = "nqn.2026-11.io.example:h1"
	testSubNQN  = "nqn.2026-11.io.example:sub"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func seqBytes(n int, f func(i int) byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = f(i)
	}
	return b
}

// The secrets nvme-cli 2.3 prints for the key 00 01 02 ... (32, 48 or 64
// bytes) and the host NQN testHostNQN: "nvme gen-dhchap-key -s <hex> -m M
// -l L -n NQN". With -m 0 it is the key itself; with a hash nvme-cli stores
// the transformed key, which checks our Transform against another
// implementation.
func TestSecretsFromNVMeCLI(t *testing.T) {
	cases := []struct {
		hash   Hash
		keyLen int
		text   string
	}{
		{0, 32, "DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:"},
		{SHA256, 32, "DHHC-1:01:PIVi36Jcgn4y4GWThDQ/qR3Qj83hvQ6c+XqVwxDfio29jjVo:"},
		{SHA384, 48, "DHHC-1:02:6IX+Swt0Ka9reGUqbAvVtQdhCFhnlBOC55mISl47uPf7S1A1qsUxVHY3rPhl61KlFTIjkg==:"},
		{SHA512, 64, "DHHC-1:03:HFSJFuyuf38idzc5evbUdmdkqknXKfCZMNEOh81Cutct1NLl4Lu+SE3HWC+mJYBsa0VuFmHGWSFKil+D2D6pNEAwmtA=:"},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.hash), func(t *testing.T) {
			s, err := ParseSecret(c.text)
			if err != nil {
				t.Fatal(err)
			}
			if s.Hash != c.hash || len(s.Key) != c.keyLen {
				t.Fatalf("hash %v, %d-byte key; want %v, %d", s.Hash, len(s.Key), c.hash, c.keyLen)
			}
			raw := seqBytes(c.keyLen, func(i int) byte { return byte(i) })
			if c.hash == 0 {
				if !bytes.Equal(s.Key, raw) {
					t.Fatalf("key %x", s.Key)
				}
				n, err := NewSecret(0, raw)
				if err != nil || n.Text() != c.text {
					t.Fatalf("NewSecret = %q, %v; want %q", n.Text(), err, c.text)
				}
				return
			}
			plain := Secret{Hash: c.hash, Key: raw}
			if got := plain.Transform(testHostNQN); !bytes.Equal(got, s.Key) {
				t.Fatalf("Transform = %x, nvme-cli has %x", got, s.Key)
			}
		})
	}
}

func TestParseSecretRefuses(t *testing.T) {
	good, _ := NewSecret(SHA256, make([]byte, 32))
	body := strings.TrimSuffix(strings.TrimPrefix(good.Text(), "DHHC-1:01:"), ":")
	raw, _ := base64.StdEncoding.DecodeString(body)
	raw[0] ^= 1 // CRC no longer matches
	cases := map[string]string{
		"no prefix":     "DHHC-2:01:" + body + ":",
		"hash 04":       "DHHC-1:04:" + body + ":",
		"hash not hex":  "DHHC-1:zz:" + body + ":",
		"hash one char": "DHHC-1:1:" + body + ":",
		"not base64":    "DHHC-1:01:!!!!:",
		"short key":     "DHHC-1:01:" + base64.StdEncoding.EncodeToString(make([]byte, 20)) + ":",
		"40-byte key":   "DHHC-1:01:" + base64.StdEncoding.EncodeToString(make([]byte, 44)) + ":",
		"bad crc":       "DHHC-1:01:" + base64.StdEncoding.EncodeToString(raw) + ":",
		"empty":         "",
	}
	for name, s := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseSecret(s); !errors.Is(err, ErrSecret) {
				t.Fatalf("ParseSecret(%q) = %v, want ErrSecret", s, err)
			}
		})
	}
	if _, err := ParseSecret(good.Text()); err != nil {
		t.Fatal(err)
	}
}

func TestSecretNeverPrinted(t *testing.T) {
	s, _ := NewSecret(SHA256, bytes.Repeat([]byte{0x41}, 32))
	for _, out := range []string{s.String(), fmt.Sprint(s), fmt.Sprintf("%v %+v", s, s), s.LogValue().String()} {
		if strings.Contains(out, "QUFB") || strings.Contains(out, "AAAA") || strings.Contains(out, "DHHC") {
			t.Fatalf("secret printed: %q", out)
		}
	}
}

// Responses and augmented challenges against Python's hmac and hashlib,
// computed from the formulas of base 2.0 §8.13.5 by testdata/vectors.py: key[i] = 7i+hash, C[i] = A0h+i,
// S = 01020304h, TID = 0506h, Ks = 00 01 ... FF.
func TestResponses(t *testing.T) {
	cases := []struct {
		h           Hash
		r1, r2, aug string
	}{
		{SHA256,
			"672e7e8bd61f6c0d01a089720dbac611d69f8c6329a47ed73cb22cf1073da5b1",
			"2cad167dd1893d00a9b955d93b46a4fda9d72e62d0784723030feb2f6e8d8b1e",
			"8b58f032720453836a1c35e94ae6994743a6c706fdc8bd373ba0e4d5ff83778f"},
		{SHA384,
			"0978ae1ea9debe0395cfabe2fdb8038b0c1c3006b0a86d6b62993529b660e42b8cc2df178d0713d14cd18f6ceb5a2f6f",
			"92f57723f2cb477bca698fbbf0eb5618ffc1ceed5a7da73786a678430541b11f7aff253000f85e31151a6cd5a24b5334",
			"228cc8106ae4c5c7279187f82ef6aebadf2478a2241a3bc3ba277d01e8cf1c8cc1c15fca105eb469a07541a73edfeab2"},
		{SHA512,
			"d38ea2c65eb6aef2409fb8fc6fc68aaaf0eb448ff692cdb00eb777b8f2c9a543976fc21ccbe8cb2a2c7b0bc2416fdd9a013f4154331da9c03f579300147f21dd",
			"953ff2863aebf14db7444aca2a145ed7a25dd7e5704032e3aafb87abeb5dd4855394bb90841a006687869d5033feb48d36657cb4d98d31e873b2f23508ba5720",
			"6a04fde09c686c21009d69e93b39261fd170b2f07ac71d0f473de40d9f6306aa5bd7355347166b014c300cae822fc5261072145f403847e1c0605e30bd8d2e99"},
	}
	for _, c := range cases {
		t.Run(c.h.String(), func(t *testing.T) {
			n := c.h.Size()
			key := seqBytes(n, func(i int) byte { return byte(i*7 + int(c.h)) })
			ch := seqBytes(n, func(i int) byte { return byte(0xa0 + i) })
			ks := seqBytes(256, func(i int) byte { return byte(i) })
			if got := HostResponse(c.h, key, ch, 0x01020304, 0x0506, testHostNQN, testSubNQN); !bytes.Equal(got, unhex(t, c.r1)) {
				t.Errorf("R1 = %x\nwant %s", got, c.r1)
			}
			if got := ControllerResponse(c.h, key, ch, 0x01020304, 0x0506, testHostNQN, testSubNQN); !bytes.Equal(got, unhex(t, c.r2)) {
				t.Errorf("R2 = %x\nwant %s", got, c.r2)
			}
			if got := Augment(c.h, ks, ch); !bytes.Equal(got, unhex(t, c.aug)) {
				t.Errorf("Ca = %x\nwant %s", got, c.aug)
			}
			r := HostResponse(c.h, key, ch, 1, 2, testHostNQN, testSubNQN)
			if !Equal(r, HostResponse(c.h, key, ch, 1, 2, testHostNQN, testSubNQN)) ||
				Equal(r, HostResponse(c.h, key, ch, 1, 3, testHostNQN, testSubNQN)) {
				t.Error("Equal")
			}
		})
	}
}

// The RFC 7919 primes end as printed in RFC 7919 Appendix A; the two
// smallest are checked to be safe primes.
func TestPrimes(t *testing.T) {
	tails := map[Group]string{
		FFDHE2048: "886B423861285C97FFFFFFFFFFFFFFFF",
		FFDHE3072: "25E41D2B66C62E37FFFFFFFFFFFFFFFF",
		FFDHE4096: "C68A007E5E655F6AFFFFFFFFFFFFFFFF",
		FFDHE6144: "A40E329CD0E40E65FFFFFFFFFFFFFFFF",
		FFDHE8192: "D68C8BB7C5C6424CFFFFFFFFFFFFFFFF",
	}
	for g, tail := range tails {
		p := groupModulus(g).p
		h := fmt.Sprintf("%X", p)
		if p.BitLen() != g.Size()*8 || !strings.HasPrefix(h, "FFFFFFFFFFFFFFFFADF85458A2BB4A9AAFDC5620273D3CF1") || !strings.HasSuffix(h, tail) {
			t.Errorf("%v: %d bits, %s...%s", g, p.BitLen(), h[:48], h[len(h)-32:])
		}
		if g <= FFDHE3072 {
			q := new(big.Int).Rsh(p, 1)
			if !p.ProbablyPrime(4) || !q.ProbablyPrime(4) {
				t.Errorf("%v: not a safe prime", g)
			}
		}
	}
}

// DH against Python's pow with the same exponents (x1 = 01 02 ... 20h,
// x2 = 21h ... 40h); compared through SHA-256 to keep the table short.
func TestDH(t *testing.T) {
	cases := []struct {
		g       Group
		pub, ks string
	}{
		{FFDHE2048, "53b37a098c5882b9f56495d787706d354ac8ebc273e680a7047c70228ce24ad3", "ea34983e3388791628eeb66cdaaeec59ea660dc0939e0f3be18c3a71d0494eab"},
		{FFDHE4096, "1d46e247a26f3855c1d0e01b4a689d19d0c093dff1bfd06aa3d6d7e74c6dfe98", "d7731e35bc932f1fc1be7f37049b89fd4c351461819388f38377794e79d96e7d"},
		{FFDHE8192, "a5a8eb7db74ad4e55cc3cb27c36b2231479a1a49349e4a474d795b19fa5a3b27", "4542ac9feff80b904fb61ff204cfbe5d42715971ec20cc61f3853a7eaca16455"},
	}
	for _, c := range cases {
		t.Run(c.g.String(), func(t *testing.T) {
			k1, err := c.g.keyFrom(seqBytes(32, func(i int) byte { return byte(i + 1) }))
			if err != nil {
				t.Fatal(err)
			}
			k2, _ := c.g.keyFrom(seqBytes(32, func(i int) byte { return byte(i + 33) }))
			if sum := sha256.Sum256(k1.Public()); hex.EncodeToString(sum[:]) != c.pub || len(k1.Public()) != c.g.Size() {
				t.Errorf("public: sha256 %x, %d bytes", sum, len(k1.Public()))
			}
			ks, err := k2.Shared(k1.Public())
			if err != nil {
				t.Fatal(err)
			}
			if sum := sha256.Sum256(ks); hex.EncodeToString(sum[:]) != c.ks {
				t.Errorf("Ks: sha256 %x", sum)
			}
			back, _ := k1.Shared(k2.Public())
			if !bytes.Equal(back, ks) {
				t.Error("Ks differs between the two sides")
			}
		})
	}
}

func TestDHRandomKeys(t *testing.T) {
	for _, g := range Groups[1:] {
		a, err := g.NewKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := g.NewKey(nil)
		s1, err1 := a.Shared(b.Public())
		s2, err2 := b.Shared(a.Public())
		if err1 != nil || err2 != nil || !bytes.Equal(s1, s2) || len(s1) != g.Size() {
			t.Fatalf("%v: %v %v", g, err1, err2)
		}
		if bytes.Equal(a.Public(), b.Public()) {
			t.Fatalf("%v: two keys alike", g)
		}
	}
}

// A peer value must lie strictly between 1 and p-1 and be the group's size.
func TestDHPeerValueChecked(t *testing.T) {
	g := FFDHE2048
	k, _ := g.NewKey(nil)
	p := groupModulus(g).p
	val := func(v *big.Int) []byte { return v.FillBytes(make([]byte, g.Size())) }
	bad := map[string][]byte{
		"0":       val(big.NewInt(0)),
		"1":       val(big.NewInt(1)),
		"p-1":     val(new(big.Int).Sub(p, big.NewInt(1))),
		"p":       val(p),
		"p+1":     val(new(big.Int).Add(p, big.NewInt(1))),
		"2^b-1":   bytes.Repeat([]byte{0xff}, g.Size()),
		"short":   val(big.NewInt(5))[1:],
		"long":    append([]byte{0}, val(big.NewInt(5))...),
		"nothing": nil,
	}
	for name, v := range bad {
		if _, err := k.Shared(v); !errors.Is(err, ErrPeerValue) {
			t.Errorf("%s: err %v, want ErrPeerValue", name, err)
		}
	}
	if _, err := k.Shared(val(big.NewInt(2))); err != nil {
		t.Errorf("2: %v", err)
	}
	if _, err := k.Shared(val(new(big.Int).Sub(p, big.NewInt(2)))); err != nil {
		t.Errorf("p-2: %v", err)
	}
}

func TestNames(t *testing.T) {
	for _, h := range Hashes {
		if got, err := ParseHash(h.String()); err != nil || got != h {
			t.Errorf("ParseHash(%v) = %v, %v", h, got, err)
		}
	}
	for _, g := range Groups {
		if got, err := ParseGroup(g.String()); err != nil || got != g || !g.Valid() {
			t.Errorf("ParseGroup(%v) = %v, %v", g, got, err)
		}
	}
	if _, err := ParseHash("md5"); err == nil {
		t.Error("md5 accepted")
	}
	if _, err := ParseGroup("ffdhe1024"); err == nil {
		t.Error("ffdhe1024 accepted")
	}
	if Group(6).Valid() || Hash(4).Valid() || Hash(0).Valid() {
		t.Error("undefined IDs valid")
	}
}

func TestPrimeAccessor(t *testing.T) {
	if Null.Prime() != nil {
		t.Fatal("Null has a prime")
	}
	p := FFDHE2048.Prime()
	p.SetInt64(1) // a copy: the group's own is untouched
	if FFDHE2048.Prime().BitLen() != 2048 {
		t.Fatal("Prime returned the group's own value")
	}
}
