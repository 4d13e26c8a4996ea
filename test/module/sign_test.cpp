// Every mechanism for every key type, single- and multi-part, each
// signature verified by OpenSSL against the key's .pub.
#include "harness.hpp"

#include <cstring>

using namespace mt;

namespace {

struct Hash {
    const char* md;
    CK_MECHANISM_TYPE ck;  // CKM_SHA256, as in CK_RSA_PKCS_PSS_PARAMS.hashAlg
    CK_RSA_PKCS_MGF_TYPE mgf;
    std::size_t size;
    CK_MECHANISM_TYPE rsa_pkcs, rsa_pss, ecdsa;  // the hash-and-sign mechanisms (0: none)
};

const Hash hashes[] = {
    {"SHA1", CKM_SHA_1, CKG_MGF1_SHA1, 20, CKM_SHA1_RSA_PKCS, 0, CKM_ECDSA_SHA1},
    {"SHA256", CKM_SHA256, CKG_MGF1_SHA256, 32, CKM_SHA256_RSA_PKCS, CKM_SHA256_RSA_PKCS_PSS, CKM_ECDSA_SHA256},
    {"SHA384", CKM_SHA384, CKG_MGF1_SHA384, 48, CKM_SHA384_RSA_PKCS, CKM_SHA384_RSA_PKCS_PSS, CKM_ECDSA_SHA384},
    {"SHA512", CKM_SHA512, CKG_MGF1_SHA512, 64, CKM_SHA512_RSA_PKCS, CKM_SHA512_RSA_PKCS_PSS, CKM_ECDSA_SHA512},
};

// A message of a few kB and its split into uneven chunks, one of them empty.
Bytes message() { return random_bytes(3000); }
std::vector<Bytes> chunks_of(const Bytes& m) {
    std::vector<Bytes> out;
    std::size_t at = 0;
    for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(63), std::size_t(1000), std::size_t(0)}) {
        out.emplace_back(m.begin() + static_cast<long>(at), m.begin() + static_cast<long>(at + n));
        at += n;
    }
    out.emplace_back(m.begin() + static_cast<long>(at), m.end());
    return out;
}

// One bit changed near the front (ECDSA ignores the bits of a digest
// beyond the order's length).
Bytes tampered(Bytes b) {
    b[1] ^= 0x10;
    return b;
}

}  // namespace

TEST_CASE("RSA: every mechanism, verified by OpenSSL", "[rsa][sign]") {
    Initialized init;
    for_each_private_key({"rsa2048", "rsa3072"}, [](const TestKey& k, Session& s, CK_OBJECT_HANDLE priv) {
        const std::size_t sig_len = k.bits / 8;
        const Bytes data = message();

        for (const Hash& h : hashes) {
            INFO(h.md);
            const Bytes d = digest(h.md, data);

            // CKM_RSA_PKCS over a DigestInfo we built (what ssh sends).
            const Bytes di = digest_info(h.md, d);
            const Bytes raw = sign(s, priv, {CKM_RSA_PKCS, nullptr, 0}, di);
            CHECK(raw.size() == sig_len);
            CHECK(verify_rsa_digest(k, h.md, false, d, raw));
            CHECK_FALSE(verify_rsa_digest(k, h.md, false, tampered(d), raw));
            // PKCS #1 v1.5 is deterministic.
            CHECK(sign(s, priv, {CKM_RSA_PKCS, nullptr, 0}, di) == raw);

            // CKM_SHAx_RSA_PKCS, single- and multi-part.
            const Bytes one = sign(s, priv, {h.rsa_pkcs, nullptr, 0}, data);
            CHECK(one.size() == sig_len);
            CHECK(verify_rsa_message(k, h.md, false, data, one));
            CHECK(one == raw);
            const Bytes multi = sign_multi(s, priv, {h.rsa_pkcs, nullptr, 0}, chunks_of(data));
            CHECK(verify_rsa_message(k, h.md, false, data, multi));
            CHECK_FALSE(verify_rsa_message(k, h.md, false, tampered(data), multi));

            if (h.rsa_pss == 0)
                continue;
            // CKM_RSA_PKCS_PSS over the digest; the salt is as long as the digest.
            CK_RSA_PKCS_PSS_PARAMS pss{h.ck, h.mgf, h.size};
            const Bytes p = sign(s, priv, {CKM_RSA_PKCS_PSS, &pss, sizeof pss}, d);
            CHECK(p.size() == sig_len);
            CHECK(verify_rsa_digest(k, h.md, true, d, p));
            CHECK_FALSE(verify_rsa_digest(k, h.md, true, tampered(d), p));
            CHECK_FALSE(verify_rsa_digest(k, h.md, false, d, p));  // it is PSS, not v1.5
            // PSS is randomised by the salt.
            CHECK(sign(s, priv, {CKM_RSA_PKCS_PSS, &pss, sizeof pss}, d) != p);

            // CKM_SHAx_RSA_PKCS_PSS, single- and multi-part.
            const Bytes ps = sign(s, priv, {h.rsa_pss, &pss, sizeof pss}, data);
            CHECK(ps.size() == sig_len);
            CHECK(verify_rsa_message(k, h.md, true, data, ps));
            const Bytes pm = sign_multi(s, priv, {h.rsa_pss, &pss, sizeof pss}, chunks_of(data));
            CHECK(verify_rsa_message(k, h.md, true, data, pm));
            CHECK_FALSE(verify_rsa_message(k, h.md, true, tampered(data), pm));
        }
        // The empty message.
        const Bytes empty;
        CK_BYTE dummy = 0;
        CK_MECHANISM m{CKM_SHA256_RSA_PKCS, nullptr, 0};
        REQUIRE_RV(p11()->C_SignInit(s, &m, priv), CKR_OK);
        Bytes sig(sig_len);
        CK_ULONG n = sig.size();
        REQUIRE_RV(p11()->C_Sign(s, &dummy, 0, sig.data(), &n), CKR_OK);
        CHECK(verify_rsa_message(k, "SHA256", false, empty, sig));
    });
}

TEST_CASE("ECDSA: every mechanism, verified by OpenSSL", "[ecdsa][sign]") {
    Initialized init;
    for_each_private_key({"ec256", "ec384"}, [](const TestKey& k, Session& s, CK_OBJECT_HANDLE priv) {
        const std::size_t sig_len = 2 * (k.bits / 8);
        const Bytes data = message();

        for (const Hash& h : hashes) {
            INFO(h.md);
            // CKM_ECDSA over a digest of 20..64 bytes: shorter than the
            // curve, as long, or longer (ECDSA then uses its leftmost bits).
            const Bytes d = digest(h.md, data);
            const Bytes raw = sign(s, priv, {CKM_ECDSA, nullptr, 0}, d);
            CHECK(raw.size() == sig_len);
            CHECK(verify_ecdsa_digest(k, d, raw));
            CHECK_FALSE(verify_ecdsa_digest(k, tampered(d), raw));

            const Bytes one = sign(s, priv, {h.ecdsa, nullptr, 0}, data);
            CHECK(one.size() == sig_len);
            CHECK(verify_ecdsa_message(k, h.md, data, one));
            const Bytes multi = sign_multi(s, priv, {h.ecdsa, nullptr, 0}, chunks_of(data));
            CHECK(multi.size() == sig_len);
            CHECK(verify_ecdsa_message(k, h.md, data, multi));
            CHECK_FALSE(verify_ecdsa_message(k, h.md, tampered(data), multi));
        }
        // A digest with leading zero bytes keeps its value.
        Bytes zeros = digest("SHA256", data);
        zeros[0] = zeros[1] = 0;
        CHECK(verify_ecdsa_digest(k, zeros, sign(s, priv, {CKM_ECDSA, nullptr, 0}, zeros)));
    });
}

TEST_CASE("ECDSA: r and s keep their fixed width (many signatures)", "[ecdsa][sign]") {
    // About 1 in 128 signatures has an r or s with a leading zero byte; a
    // module that drops it returns a short or shifted signature.
    Initialized init;
    const TestKey& k = key("ec256");
    Session s(slot_of(k.name));
    const CK_OBJECT_HANDLE priv = private_key(s, k);
    int short_halves = 0;
    for (int i = 0; i < 300; ++i) {
        const Bytes d = random_bytes(32);
        const Bytes sig = sign(s, priv, {CKM_ECDSA, nullptr, 0}, d);
        REQUIRE(sig.size() == 64);
        if (sig[0] == 0 || sig[32] == 0)
            ++short_halves;
        if (!verify_ecdsa_digest(k, d, sig))
            FAIL("signature " << i << " does not verify: " << hex(sig));
    }
    WARN(short_halves << " of 300 signatures had an r or s below 2^248");
}
