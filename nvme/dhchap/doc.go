// Package dhchap holds the cryptography of NVMe DH-HMAC-CHAP in-band
// authentication (base 2.0 §8.13.5): the DHHC-1 secret representation and
// its key transformation, the responses both sides compute, the augmented
// challenge, and finite-field Diffie-Hellman over the RFC 7919 groups.
//
// HMAC, SHA-2 and CRC-32 come from the standard library. Modular
// exponentiation with a secret exponent uses filippo.io/bigmod, the
// constant-time arithmetic behind Go's crypto/rsa, not math/big.
package dhchap
