# The known answers of dhchap_test.go (TestResponses, TestDH), computed with
# Python's hmac, hashlib and pow from the formulas of NVMe base 2.0 §8.13.5 and
# RFC 7919 Appendix A: an implementation independent of the Go code. python3 vectors.py
import hmac, hashlib, struct
H = {1: hashlib.sha256, 2: hashlib.sha384, 3: hashlib.sha512}
host, sub = b"nqn.2026-11.io.example:h1", b"nqn.2026-11.io.example:sub"
seq, tid = 0x01020304, 0x0506
for h in (1, 2, 3):
    n = H[h]().digest_size
    key = bytes((i * 7 + h) & 0xff for i in range(n))
    c = bytes((0xa0 + i) & 0xff for i in range(n))
    st = struct.pack("<IH", seq, tid) + b"\0"
    r1 = hmac.new(key, c + st + b"HostHost" + host + b"\0" + sub, H[h]).hexdigest()
    r2 = hmac.new(key, c + st + b"Controller" + sub + b"\0" + host, H[h]).hexdigest()
    ks = bytes(range(256))
    aug = hmac.new(H[h](ks).digest(), c, H[h]).hexdigest()
    print(h, "r1", r1); print(h, "r2", r2); print(h, "aug", aug)
# DH: p from RFC 7919 Appendix A, e by its series
def e_scaled(n):
    term = 1 << (n + 64); s = 0; k = 1
    while term:
        s += term; term //= k; k += 1
    return s >> 64
X = {2048: 560316, 3072: 2625351, 4096: 5736041, 6144: 15705020, 8192: 10965728}
for b in (2048, 4096, 8192):
    p = (1 << b) - (1 << (b - 64)) + ((e_scaled(b - 130) + X[b]) << 64) - 1
    x1 = int.from_bytes(bytes(range(1, 33)), "big"); x2 = int.from_bytes(bytes(range(33, 65)), "big")
    y1 = pow(2, x1, p); ks = pow(y1, x2, p)
    print(b, "pub1", hashlib.sha256(y1.to_bytes(b // 8, "big")).hexdigest())
    print(b, "ks", hashlib.sha256(ks.to_bytes(b // 8, "big")).hexdigest())
