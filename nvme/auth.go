package nvme

import "encoding/binary"

// In-band authentication: the Authentication Send and Authentication
// Receive fabrics commands (NVMe-oF 1.1a §3.x, base 2.0 §8.13) and the
// DH-HMAC-CHAP messages they carry (base 2.0 §8.13.5).

// Security protocol fields of Authentication Send/Receive.
const (
	// SECPDHCHAP is the security protocol of NVMe in-band authentication.
	SECPDHCHAP = 0xe9
	// AuthSPSP is the value both SPSP0 and SPSP1 take for DH-HMAC-CHAP.
	AuthSPSP = 0x01
)

// Authentication Send/Receive command offsets.
const (
	authSPSP0 = 41
	authSPSP1 = 42
	authSECP  = 43
	authLen   = 44 // TL (Send) or AL (Receive)
)

// Parameter error locations in Authentication Send/Receive.
const (
	ErrLocAuthSPSP0 = authSPSP0
	ErrLocAuthSPSP1 = authSPSP1
	ErrLocAuthSECP  = authSECP
	ErrLocAuthLen   = authLen
)

// AuthSECP is the Security Protocol of an Authentication Send/Receive.
func (c Command) AuthSECP() uint8 { return c[authSECP] }

// AuthSPSP returns SPSP0 and SPSP1.
func (c Command) AuthSPSP() (uint8, uint8) { return c[authSPSP0], c[authSPSP1] }

// AuthLen is the Transfer Length of an Authentication Send, or the
// Allocation Length of an Authentication Receive.
func (c Command) AuthLen() uint32 { return binary.LittleEndian.Uint32(c[authLen:]) }

// SetAuth fills the security protocol fields for DH-HMAC-CHAP with length n.
func (c Command) SetAuth(n uint32) {
	c[authSECP] = SECPDHCHAP
	c[authSPSP0], c[authSPSP1] = AuthSPSP, AuthSPSP
	binary.LittleEndian.PutUint32(c[authLen:], n)
}

// Connect response DW0 bits 31:16 are AUTHREQ (NVMe-oF 1.1a §3.3).
const (
	// ConnectAuthATR: the host must authenticate this queue in band.
	ConnectAuthATR = 1 << 17
	// ConnectAuthASCR: secure channel concatenation is required.
	ConnectAuthASCR = 1 << 18
)

// StatusAuthRequired is the status of any command other than Connect and
// Authentication Send/Receive on a queue that must authenticate and has
// not (base 2.0 Figure 103, SCT 1 SC 91h).
const StatusAuthRequired Status = SCTCommandSpecific<<statusSCTShift | 0x91

// AuthType, byte 0 of every message.
const (
	AuthTypeCommon = 0x00 // Negotiate, Failure1, Failure2
	AuthTypeDHCHAP = 0x01 // Challenge, Reply, Success1, Success2
)

// AuthID, byte 1 of every message.
const (
	AuthIDNegotiate = 0x00
	AuthIDChallenge = 0x01
	AuthIDReply     = 0x02
	AuthIDSuccess1  = 0x03
	AuthIDSuccess2  = 0x04
	AuthIDFailure2  = 0xf0
	AuthIDFailure1  = 0xf1
)

// AuthReasonFailed is the only Reason Code of a failure message.
const AuthReasonFailed = 0x01

// Reason Code Explanations of a failure message (base 2.0 Figure 450).
const (
	AuthFailFailed           = 0x01 // authentication failed
	AuthFailNotUsable        = 0x02 // authentication protocol not usable
	AuthFailConcatMismatch   = 0x03 // secure channel concatenation mismatch
	AuthFailHashUnusable     = 0x04 // hash function not usable
	AuthFailDHGroupUnusable  = 0x05 // DH group not usable
	AuthFailIncorrectPayload = 0x06 // incorrect payload
	AuthFailIncorrectMessage = 0x07 // incorrect protocol message
)

// AuthIDDHCHAP is the AUTHID of a DH-HMAC-CHAP protocol descriptor.
const AuthIDDHCHAP = 0x01

// DH-HMAC-CHAP hash function identifiers.
const (
	AuthHashSHA256 = 0x01
	AuthHashSHA384 = 0x02
	AuthHashSHA512 = 0x03
)

// DH-HMAC-CHAP Diffie-Hellman group identifiers (RFC 7919 groups).
const (
	AuthDHNull      = 0x00
	AuthDHFFDHE2048 = 0x01
	AuthDHFFDHE3072 = 0x02
	AuthDHFFDHE4096 = 0x03
	AuthDHFFDHE6144 = 0x04
	AuthDHFFDHE8192 = 0x05
)

// Message layout.
const (
	authMsgType = 0
	authMsgID   = 1
	authMsgTID  = 4

	// Negotiate: SC_C, NAPD, then NAPD protocol descriptors of 64 bytes.
	negSCC       = 6
	negNAPD      = 7
	negDescs     = 8
	negDescSize  = 64
	descAuthID   = 0
	descHALen    = 2
	descDHLen    = 3
	descIDList   = 4
	descDHOffset = 30 // DH group IDs start 30 bytes into the ID list
	descMaxIDs   = 30

	// Challenge, Reply and Success1 share HL at 6; the values start at 16.
	msgHL     = 6
	msgValues = 16

	chalHashID = 8
	chalDHGID  = 9
	chalDHVLen = 10
	chalSeq    = 12

	replyCValid = 8
	replyDHVLen = 10
	replySeq    = 12

	succ1RValid = 8

	failReason = 6
	failExpl   = 7
)

// Message sizes.
const (
	AuthHeaderSize   = msgValues // Challenge, Reply, Success1, Success2
	AuthFailureSize  = 8
	AuthNegotiateMin = negDescs + negDescSize
)

// AuthMessage is a view of any DH-HMAC-CHAP message: the header every
// message shares. Its length must be at least 8 (AuthFailureSize).
type AuthMessage []byte

// Type is AUTH_TYPE.
func (m AuthMessage) Type() uint8 { return m[authMsgType] }

// ID is AUTH_ID.
func (m AuthMessage) ID() uint8 { return m[authMsgID] }

// TID is the transaction identifier.
func (m AuthMessage) TID() uint16 { return binary.LittleEndian.Uint16(m[authMsgTID:]) }

// FailureExplanation is the Reason Code Explanation of a failure message.
func (m AuthMessage) FailureExplanation() uint8 { return m[failExpl] }

// AuthNegotiate is a view of an AUTH_Negotiate message. Check Valid first.
type AuthNegotiate []byte

// Valid reports whether the message holds its header and NAPD descriptors.
func (m AuthNegotiate) Valid() bool {
	return len(m) >= AuthNegotiateMin && len(m) >= negDescs+int(m[negNAPD])*negDescSize
}

// SCC is the secure channel concatenation field (0: none).
func (m AuthNegotiate) SCC() uint8 { return m[negSCC] }

// NAPD is the number of protocol descriptors.
func (m AuthNegotiate) NAPD() uint8 { return m[negNAPD] }

// Protocol returns descriptor i's AUTHID, hash IDs and DH group IDs.
// ok is false when a list is longer than the descriptor holds.
func (m AuthNegotiate) Protocol(i int) (authID uint8, hashes, groups []byte, ok bool) {
	d := m[negDescs+i*negDescSize : negDescs+(i+1)*negDescSize]
	ha, dh := int(d[descHALen]), int(d[descDHLen])
	if ha > descMaxIDs || dh > descMaxIDs {
		return d[descAuthID], nil, nil, false
	}
	ids := d[descIDList:]
	return d[descAuthID], ids[:ha], ids[descDHOffset : descDHOffset+dh], true
}

// PutAuthNegotiate writes a Negotiate with one DH-HMAC-CHAP descriptor and
// returns its length. buf must hold AuthNegotiateMin bytes.
func PutAuthNegotiate(buf []byte, tid uint16, hashes, groups []byte) int {
	clear(buf[:AuthNegotiateMin])
	buf[authMsgType], buf[authMsgID] = AuthTypeCommon, AuthIDNegotiate
	binary.LittleEndian.PutUint16(buf[authMsgTID:], tid)
	buf[negNAPD] = 1
	d := buf[negDescs:]
	d[descAuthID], d[descHALen], d[descDHLen] = AuthIDDHCHAP, byte(len(hashes)), byte(len(groups))
	copy(d[descIDList:], hashes)
	copy(d[descIDList+descDHOffset:], groups)
	return AuthNegotiateMin
}

// AuthChallengeSize is the length of a Challenge with hash length hl and a
// DH value of dhvlen bytes.
func AuthChallengeSize(hl, dhvlen int) int { return msgValues + hl + dhvlen }

// PutAuthChallenge writes a DH-HMAC-CHAP_Challenge and returns its length.
// buf must hold AuthChallengeSize(len(c1), len(dhv)) bytes.
func PutAuthChallenge(buf []byte, tid uint16, hashID, dhgid uint8, seq uint32, c1, dhv []byte) int {
	n := AuthChallengeSize(len(c1), len(dhv))
	clear(buf[:msgValues])
	buf[authMsgType], buf[authMsgID] = AuthTypeDHCHAP, AuthIDChallenge
	binary.LittleEndian.PutUint16(buf[authMsgTID:], tid)
	buf[msgHL] = byte(len(c1))
	buf[chalHashID], buf[chalDHGID] = hashID, dhgid
	binary.LittleEndian.PutUint16(buf[chalDHVLen:], uint16(len(dhv)))
	binary.LittleEndian.PutUint32(buf[chalSeq:], seq)
	copy(buf[msgValues:], c1)
	copy(buf[msgValues+len(c1):], dhv)
	return n
}

// AuthChallenge is a view of a DH-HMAC-CHAP_Challenge (the host side of
// the exchange, for tests). Check Valid first.
type AuthChallenge []byte

// Valid reports whether the values fit the message.
func (m AuthChallenge) Valid() bool {
	return len(m) >= msgValues && len(m) >= AuthChallengeSize(int(m[msgHL]), int(m.DHVLen()))
}

// HashID is the hash function the controller chose.
func (m AuthChallenge) HashID() uint8 { return m[chalHashID] }

// DHGroup is the DH group the controller chose.
func (m AuthChallenge) DHGroup() uint8 { return m[chalDHGID] }

// DHVLen is the length of the controller's DH value.
func (m AuthChallenge) DHVLen() uint16 { return binary.LittleEndian.Uint16(m[chalDHVLen:]) }

// Seq is the sequence number S1.
func (m AuthChallenge) Seq() uint32 { return binary.LittleEndian.Uint32(m[chalSeq:]) }

// C1 is the challenge value.
func (m AuthChallenge) C1() []byte { return m[msgValues : msgValues+int(m[msgHL])] }

// DHValue is the controller's DH public value.
func (m AuthChallenge) DHValue() []byte {
	o := msgValues + int(m[msgHL])
	return m[o : o+int(m.DHVLen())]
}

// AuthReply is a view of a DH-HMAC-CHAP_Reply. Check Valid first.
type AuthReply []byte

// Valid reports whether the response, the challenge slot and the DH value
// fit the message: the challenge slot is always HL bytes, valid or not.
func (m AuthReply) Valid() bool {
	return len(m) >= msgValues && len(m) >= msgValues+2*int(m[msgHL])+int(m.DHVLen())
}

// HL is the hash length.
func (m AuthReply) HL() int { return int(m[msgHL]) }

// CValid reports whether the host sent a challenge C2 (bidirectional).
func (m AuthReply) CValid() bool { return m[replyCValid]&1 != 0 }

// DHVLen is the length of the host's DH value.
func (m AuthReply) DHVLen() uint16 { return binary.LittleEndian.Uint16(m[replyDHVLen:]) }

// Seq is the sequence number S2 (0: no controller authentication).
func (m AuthReply) Seq() uint32 { return binary.LittleEndian.Uint32(m[replySeq:]) }

// Response is the host's response R1.
func (m AuthReply) Response() []byte { return m[msgValues : msgValues+m.HL()] }

// C2 is the host's challenge to the controller.
func (m AuthReply) C2() []byte { return m[msgValues+m.HL() : msgValues+2*m.HL()] }

// DHValue is the host's DH public value.
func (m AuthReply) DHValue() []byte {
	o := msgValues + 2*m.HL()
	return m[o : o+int(m.DHVLen())]
}

// PutAuthReply writes a Reply (the host side, for tests) and returns its
// length. c2 nil means no controller authentication.
func PutAuthReply(buf []byte, tid uint16, seq uint32, r1, c2, dhv []byte) int {
	hl := len(r1)
	n := msgValues + 2*hl + len(dhv)
	clear(buf[:n])
	buf[authMsgType], buf[authMsgID] = AuthTypeDHCHAP, AuthIDReply
	binary.LittleEndian.PutUint16(buf[authMsgTID:], tid)
	buf[msgHL] = byte(hl)
	if c2 != nil {
		buf[replyCValid] = 1
	}
	binary.LittleEndian.PutUint16(buf[replyDHVLen:], uint16(len(dhv)))
	binary.LittleEndian.PutUint32(buf[replySeq:], seq)
	copy(buf[msgValues:], r1)
	copy(buf[msgValues+hl:], c2)
	copy(buf[msgValues+2*hl:], dhv)
	return n
}

// AuthSuccess1Size is the length of a Success1 with hash length hl.
func AuthSuccess1Size(hl int) int { return msgValues + hl }

// PutAuthSuccess1 writes a DH-HMAC-CHAP_Success1 with hash length hl and
// the controller's response r2 (nil: none) and returns its length.
func PutAuthSuccess1(buf []byte, tid uint16, hl int, r2 []byte) int {
	n := AuthSuccess1Size(hl)
	clear(buf[:n])
	buf[authMsgType], buf[authMsgID] = AuthTypeDHCHAP, AuthIDSuccess1
	binary.LittleEndian.PutUint16(buf[authMsgTID:], tid)
	buf[msgHL] = byte(hl)
	if r2 != nil {
		buf[succ1RValid] = 1
		copy(buf[msgValues:], r2)
	}
	return n
}

// AuthSuccess1 is a view of a Success1 (the host side, for tests).
type AuthSuccess1 []byte

// RValid reports whether the controller's response is present.
func (m AuthSuccess1) RValid() bool { return m[succ1RValid]&1 != 0 }

// Response is the controller's response R2.
func (m AuthSuccess1) Response() []byte { return m[msgValues : msgValues+int(m[msgHL])] }

// PutAuthSuccess2 writes a Success2 (the host side, for tests).
func PutAuthSuccess2(buf []byte, tid uint16) int {
	clear(buf[:AuthHeaderSize])
	buf[authMsgType], buf[authMsgID] = AuthTypeDHCHAP, AuthIDSuccess2
	binary.LittleEndian.PutUint16(buf[authMsgTID:], tid)
	return AuthHeaderSize
}

// PutAuthFailure writes a Failure1 (id AuthIDFailure1, from the
// controller) or Failure2 (from the host) and returns its length.
func PutAuthFailure(buf []byte, id uint8, tid uint16, explanation uint8) int {
	clear(buf[:AuthFailureSize])
	buf[authMsgType], buf[authMsgID] = AuthTypeCommon, id
	binary.LittleEndian.PutUint16(buf[authMsgTID:], tid)
	buf[failReason], buf[failExpl] = AuthReasonFailed, explanation
	return AuthFailureSize
}
