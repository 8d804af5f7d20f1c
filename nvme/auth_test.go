package nvme

import (
	"bytes"
	"testing"
)

func TestAuthCommand(t *testing.T) {
	c := Command(make([]byte, CommandSize))
	c.SetAuth(4096)
	s0, s1 := c.AuthSPSP()
	if c.AuthSECP() != 0xe9 || s0 != 1 || s1 != 1 || c.AuthLen() != 4096 {
		t.Fatalf("secp %x spsp %x %x len %d", c.AuthSECP(), s0, s1, c.AuthLen())
	}
	// The kernel's struct nvmf_auth_send_command: resv3 at 40, spsp0 41,
	// spsp1 42, secp 43, tl 44.
	if c[43] != 0xe9 || c[41] != 1 || c[42] != 1 || c[44] != 0 || c[45] != 0x10 {
		t.Fatalf("layout % x", c[40:48])
	}
}

// The layouts of the kernel's struct nvmf_auth_dhchap_*_data.
func TestAuthMessages(t *testing.T) {
	buf := make([]byte, 1024)
	n := PutAuthNegotiate(buf, 0x1234, []byte{1, 2, 3}, []byte{0, 1, 2, 3, 4, 5})
	neg := AuthNegotiate(buf[:n])
	id, hashes, groups, ok := neg.Protocol(0)
	if n != 72 || !neg.Valid() || neg.NAPD() != 1 || neg.SCC() != 0 || !ok || id != AuthIDDHCHAP ||
		!bytes.Equal(hashes, []byte{1, 2, 3}) || !bytes.Equal(groups, []byte{0, 1, 2, 3, 4, 5}) ||
		AuthMessage(neg).TID() != 0x1234 || buf[4] != 0x34 || buf[8+4+30] != 0 || buf[8+4+31] != 1 {
		t.Fatalf("negotiate % x", buf[:n])
	}

	c1 := bytes.Repeat([]byte{0xc1}, 32)
	dhv := bytes.Repeat([]byte{0xd0}, 256)
	n = PutAuthChallenge(buf, 7, 1, 1, 0xaabbccdd, c1, dhv)
	ch := AuthChallenge(buf[:n])
	if n != 16+32+256 || !ch.Valid() || ch.HashID() != 1 || ch.DHGroup() != 1 || ch.DHVLen() != 256 || ch.Seq() != 0xaabbccdd ||
		!bytes.Equal(ch.C1(), c1) || !bytes.Equal(ch.DHValue(), dhv) || buf[0] != 1 || buf[1] != 1 || buf[6] != 32 || buf[10] != 0 || buf[11] != 1 {
		t.Fatalf("challenge % x", buf[:24])
	}

	r1, c2 := bytes.Repeat([]byte{0x11}, 48), bytes.Repeat([]byte{0x22}, 48)
	n = PutAuthReply(buf, 7, 99, r1, c2, dhv)
	rp := AuthReply(buf[:n])
	if n != 16+96+256 || !rp.Valid() || rp.HL() != 48 || !rp.CValid() || rp.Seq() != 99 || rp.DHVLen() != 256 ||
		!bytes.Equal(rp.Response(), r1) || !bytes.Equal(rp.C2(), c2) || !bytes.Equal(rp.DHValue(), dhv) || buf[8] != 1 {
		t.Fatalf("reply % x", buf[:24])
	}
	if AuthReply(buf[:n-1]).Valid() {
		t.Fatal("short reply valid")
	}
	n = PutAuthReply(buf, 7, 0, r1, nil, nil)
	if rp = AuthReply(buf[:n]); n != 16+96 || rp.CValid() || !rp.Valid() {
		t.Fatal("reply without C2")
	}

	n = PutAuthSuccess1(buf, 7, 32, c1)
	s1 := AuthSuccess1(buf[:n])
	if n != 48 || !s1.RValid() || !bytes.Equal(s1.Response(), c1) || buf[1] != AuthIDSuccess1 {
		t.Fatalf("success1 % x", buf[:n])
	}
	n = PutAuthSuccess1(buf, 7, 32, nil)
	if n != 48 || AuthSuccess1(buf[:n]).RValid() || buf[16] != 0 {
		t.Fatal("success1 without R2")
	}
	n = PutAuthFailure(buf, AuthIDFailure1, 7, AuthFailIncorrectMessage)
	m := AuthMessage(buf[:n])
	if n != 8 || m.Type() != AuthTypeCommon || m.ID() != 0xf1 || m.TID() != 7 || buf[6] != 1 || m.FailureExplanation() != 7 {
		t.Fatalf("failure % x", buf[:n])
	}
}

// FuzzAuthMessage: the views of what a host sends (Negotiate, Reply,
// Success2, Failure2) never read outside the message once Valid.
func FuzzAuthMessage(f *testing.F) {
	buf := make([]byte, 2048)
	n := PutAuthNegotiate(buf, 1, []byte{1, 2, 3}, []byte{0, 1, 2, 3, 4, 5})
	f.Add(append([]byte(nil), buf[:n]...))
	n = PutAuthReply(buf, 1, 5, make([]byte, 32), make([]byte, 32), make([]byte, 256))
	f.Add(append([]byte(nil), buf[:n]...))
	n = PutAuthFailure(buf, AuthIDFailure2, 1, AuthFailFailed)
	f.Add(append([]byte(nil), buf[:n]...))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < AuthFailureSize {
			return
		}
		m := AuthMessage(data)
		_, _, _, _ = m.Type(), m.ID(), m.TID(), m.FailureExplanation()
		if neg := AuthNegotiate(data); neg.Valid() {
			for i := range int(neg.NAPD()) {
				if _, h, g, ok := neg.Protocol(i); ok && (len(h) > 30 || len(g) > 30) {
					t.Fatal("id list longer than a descriptor")
				}
			}
		}
		if r := AuthReply(data); r.Valid() {
			if len(r.Response()) != r.HL() || len(r.C2()) != r.HL() || len(r.DHValue()) != int(r.DHVLen()) {
				t.Fatal("reply fields")
			}
		}
	})
}
