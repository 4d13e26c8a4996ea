// Signing and verifying through the built module, argument by argument:
// the two-call size query of C_Sign and C_SignFinal, operation state (what
// ends an operation and what keeps it), the mechanism and its parameters at
// C_SignInit, and the argument order and operation state of C_VerifyInit ..
// C_VerifyFinal. Signatures of every mechanism: sign_test.cpp, verify_test.cpp.
#include "calls.hpp"
#include "harness.hpp"

using namespace mt;

TEST_CASE("size queries: C_Sign and C_SignFinal keep the operation until a real signature", "[sign-args]") {
    Initialized init;
    for_each_private_key({"ec256", "rsa2048"}, [](const TestKey& k, Session& s, CK_OBJECT_HANDLE priv) {
        const CK_ULONG expected = k.rsa ? k.bits / 8 : 2 * ((k.bits + 7) / 8);
        const Bytes data = bytes("size query");
        CK_MECHANISM m{k.rsa ? CKM_SHA256_RSA_PKCS : CKM_ECDSA_SHA256, nullptr, 0};

        // C_Sign
        REQUIRE_RV(p11()->C_SignInit(s, &m, priv), CKR_OK);
        CK_ULONG n = 0;
        CHECK_RV(p11()->C_Sign(s, const_cast<CK_BYTE_PTR>(data.data()), data.size(), nullptr, &n), CKR_OK);
        CHECK(n == expected);
        CHECK_RV(p11()->C_SignInit(s, &m, priv), CKR_OPERATION_ACTIVE);  // still active
        Bytes sig(expected + 16);
        n = expected - 1;
        CHECK_RV(p11()->C_Sign(s, const_cast<CK_BYTE_PTR>(data.data()), data.size(), sig.data(), &n),
                 CKR_BUFFER_TOO_SMALL);
        CHECK(n == expected);
        n = 0;
        CHECK_RV(p11()->C_Sign(s, const_cast<CK_BYTE_PTR>(data.data()), data.size(), sig.data(), &n),
                 CKR_BUFFER_TOO_SMALL);
        CHECK(n == expected);
        n = sig.size();  // larger than needed: fine
        REQUIRE_RV(p11()->C_Sign(s, const_cast<CK_BYTE_PTR>(data.data()), data.size(), sig.data(), &n), CKR_OK);
        CHECK(n == expected);
        sig.resize(n);
        CHECK(
            (k.rsa ? verify_rsa_message(k, "SHA256", false, data, sig) : verify_ecdsa_message(k, "SHA256", data, sig)));
        n = expected;
        CHECK_RV(p11()->C_Sign(s, const_cast<CK_BYTE_PTR>(data.data()), data.size(), sig.data(), &n),
                 CKR_OPERATION_NOT_INITIALIZED);  // a signature ends it

        // C_SignFinal
        REQUIRE_RV(p11()->C_SignInit(s, &m, priv), CKR_OK);
        REQUIRE_RV(p11()->C_SignUpdate(s, const_cast<CK_BYTE_PTR>(data.data()), 4), CKR_OK);
        REQUIRE_RV(p11()->C_SignUpdate(s, const_cast<CK_BYTE_PTR>(data.data()) + 4, data.size() - 4), CKR_OK);
        n = 0;
        CHECK_RV(p11()->C_SignFinal(s, nullptr, &n), CKR_OK);
        CHECK(n == expected);
        Bytes sig2(expected);
        n = expected / 2;
        CHECK_RV(p11()->C_SignFinal(s, sig2.data(), &n), CKR_BUFFER_TOO_SMALL);
        CHECK(n == expected);
        REQUIRE_RV(p11()->C_SignFinal(s, sig2.data(), &n), CKR_OK);
        CHECK(n == expected);
        CHECK((k.rsa ? verify_rsa_message(k, "SHA256", false, data, sig2)
                     : verify_ecdsa_message(k, "SHA256", data, sig2)));
        CHECK_RV(p11()->C_SignFinal(s, sig2.data(), &n), CKR_OPERATION_NOT_INITIALIZED);
    });
}

TEST_CASE("operation state: C_SignInit twice; C_Sign without C_SignInit; a failing C_Sign ends the operation",
          "[sign-args]") {
    Initialized init;
    const TestKey& k = key("rsa2048");
    Session s(slot_of(k.name));
    const CK_OBJECT_HANDLE priv = private_key(s, k);
    CK_MECHANISM raw{CKM_RSA_PKCS, nullptr, 0};
    Bytes sig(256);
    CK_ULONG n = sig.size();
    Bytes data = bytes("not a DigestInfo");

    CHECK_RV(p11()->C_Sign(s, data.data(), data.size(), sig.data(), &n), CKR_OPERATION_NOT_INITIALIZED);
    CHECK_RV(p11()->C_SignUpdate(s, data.data(), data.size()), CKR_OPERATION_NOT_INITIALIZED);
    CHECK_RV(p11()->C_SignFinal(s, sig.data(), &n), CKR_OPERATION_NOT_INITIALIZED);

    REQUIRE_RV(p11()->C_SignInit(s, &raw, priv), CKR_OK);
    CHECK_RV(p11()->C_SignInit(s, &raw, priv), CKR_OPERATION_ACTIVE);
    // The TPM signs PKCS#1 v1.5 only over a DigestInfo it knows.
    CHECK_RV(p11()->C_Sign(s, data.data(), data.size(), sig.data(), &n), CKR_DATA_INVALID);
    n = sig.size();
    const Bytes di = digest_info("SHA256", digest("SHA256", data));
    CHECK_RV(p11()->C_Sign(s, const_cast<CK_BYTE_PTR>(di.data()), di.size(), sig.data(), &n),
             CKR_OPERATION_NOT_INITIALIZED);

    SECTION("a DigestInfo with a wrong digest length is not signed either") {
        Bytes bad = digest_info("SHA256", Bytes(31, 7));
        bad[1] = static_cast<std::uint8_t>(bad.size() - 2);
        bad[bad.size() - 32] = 31;  // OCTET STRING length
        REQUIRE_RV(p11()->C_SignInit(s, &raw, priv), CKR_OK);
        n = sig.size();
        CHECK_RV(p11()->C_Sign(s, bad.data(), bad.size(), sig.data(), &n), CKR_DATA_INVALID);
    }
    SECTION("C_Sign after C_SignUpdate is refused and ends the operation") {
        CK_MECHANISM m{CKM_SHA256_RSA_PKCS, nullptr, 0};
        REQUIRE_RV(p11()->C_SignInit(s, &m, priv), CKR_OK);
        REQUIRE_RV(p11()->C_SignUpdate(s, data.data(), data.size()), CKR_OK);
        n = sig.size();
        CHECK(p11()->C_Sign(s, data.data(), data.size(), sig.data(), &n) != CKR_OK);
        CHECK_RV(p11()->C_SignFinal(s, sig.data(), &n), CKR_OPERATION_NOT_INITIALIZED);
    }
    SECTION("C_SignUpdate on a single-part mechanism fails and ends the operation") {
        REQUIRE_RV(p11()->C_SignInit(s, &raw, priv), CKR_OK);
        CHECK(p11()->C_SignUpdate(s, const_cast<CK_BYTE_PTR>(di.data()), di.size()) != CKR_OK);
        n = sig.size();
        CHECK_RV(p11()->C_Sign(s, const_cast<CK_BYTE_PTR>(di.data()), di.size(), sig.data(), &n),
                 CKR_OPERATION_NOT_INITIALIZED);
    }
    SECTION("the session still signs afterwards") {
        REQUIRE_RV(p11()->C_SignInit(s, &raw, priv), CKR_OK);
        n = sig.size();
        REQUIRE_RV(p11()->C_Sign(s, const_cast<CK_BYTE_PTR>(di.data()), di.size(), sig.data(), &n), CKR_OK);
        sig.resize(n);
        CHECK(verify_rsa_message(k, "SHA256", false, data, sig));
    }
    SECTION("C_CloseSession with an operation active is fine") {
        Session other(slot_of(k.name));
        REQUIRE_RV(p11()->C_SignInit(other, &raw, priv), CKR_OK);
        other.close();
    }
}

TEST_CASE("mechanism checks at C_SignInit", "[sign-args]") {
    Initialized init;
    const KeySession ec(key("ec256"));
    const KeySession rsa(key("rsa2048"));

    CK_MECHANISM m{CKM_RSA_PKCS, nullptr, 0};
    CHECK_RV(p11()->C_SignInit(ec, &m, ec.priv), CKR_KEY_TYPE_INCONSISTENT);
    m.mechanism = CKM_SHA256_RSA_PKCS_PSS;
    CHECK_RV(p11()->C_SignInit(ec, &m, ec.priv), CKR_KEY_TYPE_INCONSISTENT);
    m.mechanism = CKM_ECDSA_SHA256;
    CHECK_RV(p11()->C_SignInit(rsa, &m, rsa.priv), CKR_KEY_TYPE_INCONSISTENT);
    for (CK_MECHANISM_TYPE unknown : {CK_MECHANISM_TYPE(CKM_SHA256_HMAC), CK_MECHANISM_TYPE(CKM_RSA_X_509),
                                      CK_MECHANISM_TYPE(CKM_MD5_RSA_PKCS), CK_MECHANISM_TYPE(CKM_VENDOR_DEFINED | 9)}) {
        INFO("mechanism 0x" << std::hex << unknown);
        m.mechanism = unknown;
        CHECK_RV(p11()->C_SignInit(rsa, &m, rsa.priv), CKR_MECHANISM_INVALID);
    }
    // A parameter where the mechanism takes none.
    CK_ULONG junk = 1;
    m = {CKM_ECDSA, &junk, sizeof junk};
    CHECK_RV(p11()->C_SignInit(ec, &m, ec.priv), CKR_MECHANISM_PARAM_INVALID);

    // PSS: the TPM always uses a salt as long as the digest.
    CK_RSA_PKCS_PSS_PARAMS pss{CKM_SHA256, CKG_MGF1_SHA256, 32};
    m = {CKM_RSA_PKCS_PSS, &pss, sizeof pss};
    for (CK_ULONG salt : {CK_ULONG(0), CK_ULONG(20), CK_ULONG(31), CK_ULONG(33), CK_ULONG(64)}) {
        INFO("sLen " << salt);
        pss.sLen = salt;
        CHECK_RV(p11()->C_SignInit(rsa, &m, rsa.priv), CKR_MECHANISM_PARAM_INVALID);
    }
    pss = {CKM_SHA256, CKG_MGF1_SHA384, 32};  // MGF1 hash other than the hash
    CHECK_RV(p11()->C_SignInit(rsa, &m, rsa.priv), CKR_MECHANISM_PARAM_INVALID);
    pss = {CKM_SHA384, CKG_MGF1_SHA384, 48};
    m.mechanism = CKM_SHA256_RSA_PKCS_PSS;  // hashAlg must match the mechanism's hash
    CHECK_RV(p11()->C_SignInit(rsa, &m, rsa.priv), CKR_MECHANISM_PARAM_INVALID);
    m = {CKM_RSA_PKCS_PSS, nullptr, 0};
    CHECK_RV(p11()->C_SignInit(rsa, &m, rsa.priv), CKR_MECHANISM_PARAM_INVALID);
    m = {CKM_RSA_PKCS_PSS, &pss, sizeof pss - 1};
    CHECK_RV(p11()->C_SignInit(rsa, &m, rsa.priv), CKR_MECHANISM_PARAM_INVALID);
    pss = {CKM_SHA256, CKG_MGF1_SHA256, 32};
    m = {CKM_RSA_PKCS_PSS, &pss, sizeof pss};
    CHECK_RV(p11()->C_SignInit(rsa, &m, rsa.priv), CKR_OK);  // the right one works
    Bytes d(31, 1);                                          // CKM_RSA_PKCS_PSS takes the digest: its length must match
    Bytes sig(256);
    CK_ULONG n = sig.size();
    CHECK_RV(p11()->C_Sign(rsa, d.data(), d.size(), sig.data(), &n), CKR_DATA_LEN_RANGE);

    // CKM_ECDSA signs a digest: empty input is no digest.
    m = {CKM_ECDSA, nullptr, 0};
    REQUIRE_RV(p11()->C_SignInit(ec, &m, ec.priv), CKR_OK);
    n = sig.size();
    CHECK(p11()->C_Sign(ec, d.data(), 0, sig.data(), &n) != CKR_OK);
}

TEST_CASE("C_VerifyInit .. C_VerifyFinal: argument checks in the spec's order; operation state", "[sign-args]") {
    Initialized init;
    const KeySession ec(key("ec256"));
    const KeySession rsa(key("rsa2048"));
    const CK_OBJECT_HANDLE pub = find_one(ec, CKO_PUBLIC_KEY);
    CK_MECHANISM raw{CKM_ECDSA, nullptr, 0};
    CK_MECHANISM sha256{CKM_ECDSA_SHA256, nullptr, 0};
    const Bytes data = bytes("verify me");
    const Bytes sig = sign(ec, ec.priv, sha256, data);
    Bytes d = digest("SHA256", data);
    Bytes any(64, 1);
    // The input buffers of C_Verify and C_VerifyFinal.
    const auto verify = [&](CK_SESSION_HANDLE s, CK_BYTE_PTR in, CK_ULONG in_len, CK_BYTE_PTR signature,
                            CK_ULONG signature_len) {
        return p11()->C_Verify(s, in, in_len, signature, signature_len);
    };
    const auto verify_final = [&](CK_SESSION_HANDLE s, CK_BYTE_PTR signature, CK_ULONG signature_len) {
        return p11()->C_VerifyFinal(s, signature, signature_len);
    };

    // No operation yet.
    CHECK_RV(verify(ec, d.data(), d.size(), any.data(), any.size()), CKR_OPERATION_NOT_INITIALIZED);
    CHECK_RV(p11()->C_VerifyUpdate(ec, d.data(), d.size()), CKR_OPERATION_NOT_INITIALIZED);
    CHECK_RV(verify_final(ec, any.data(), any.size()), CKR_OPERATION_NOT_INITIALIZED);

    // C_VerifyInit: session, NULL mechanism, operation state, key handle,
    // the key's purpose, then the mechanism (as C_SignInit).
    CK_MECHANISM unknown{CKM_SHA256_HMAC, nullptr, 0};
    CHECK_RV(p11()->C_VerifyInit(bad_session, nullptr, bad_object), CKR_SESSION_HANDLE_INVALID);
    CHECK_RV(p11()->C_VerifyInit(ec, nullptr, bad_object), CKR_ARGUMENTS_BAD);
    CHECK_RV(p11()->C_VerifyInit(ec, &unknown, bad_object), CKR_KEY_HANDLE_INVALID);
    CHECK_RV(p11()->C_VerifyInit(ec, &raw, find_one(rsa, CKO_PUBLIC_KEY)), CKR_KEY_HANDLE_INVALID);  // another token's
    // PKCS#11 2.40, 5.1: CKR_KEY_FUNCTION_NOT_PERMITTED: the key's
    // attributes do not allow it (only the public key has CKA_VERIFY).
    CHECK_RV(p11()->C_VerifyInit(ec, &unknown, ec.priv), CKR_KEY_FUNCTION_NOT_PERMITTED);
    CHECK_RV(p11()->C_VerifyInit(ec, &raw, find_one(ec, CKO_CERTIFICATE)), CKR_KEY_FUNCTION_NOT_PERMITTED);
    CHECK_RV(p11()->C_VerifyInit(ec, &unknown, pub), CKR_MECHANISM_INVALID);
    CK_MECHANISM rsa_mechanism{CKM_SHA256_RSA_PKCS, nullptr, 0};
    CHECK_RV(p11()->C_VerifyInit(ec, &rsa_mechanism, pub), CKR_KEY_TYPE_INCONSISTENT);
    CK_ULONG junk = 1;
    CK_MECHANISM with_junk{CKM_ECDSA, &junk, sizeof junk};
    CHECK_RV(p11()->C_VerifyInit(ec, &with_junk, pub), CKR_MECHANISM_PARAM_INVALID);
    CK_RSA_PKCS_PSS_PARAMS pss{CKM_SHA256, CKG_MGF1_SHA256, 20};  // not the TPM's salt length
    CK_MECHANISM rsa_pss{CKM_SHA256_RSA_PKCS_PSS, &pss, sizeof pss};
    CHECK_RV(p11()->C_VerifyInit(rsa, &rsa_pss, find_one(rsa, CKO_PUBLIC_KEY)), CKR_MECHANISM_PARAM_INVALID);

    REQUIRE_RV(p11()->C_VerifyInit(ec, &raw, pub), CKR_OK);
    CHECK_RV(p11()->C_VerifyInit(ec, nullptr, pub), CKR_ARGUMENTS_BAD);
    CHECK_RV(p11()->C_VerifyInit(ec, &raw, pub), CKR_OPERATION_ACTIVE);
    CHECK_RV(p11()->C_VerifyInit(ec, &raw, bad_object), CKR_OPERATION_ACTIVE);
    // Signing and verifying are separate operations of a session.
    CHECK_RV(p11()->C_SignInit(ec, &raw, ec.priv), CKR_OK);
    CK_ULONG n = any.size();
    CHECK_RV(p11()->C_Sign(ec, d.data(), d.size(), any.data(), &n), CKR_OK);
    any.resize(n);
    CHECK_RV(verify(ec, d.data(), d.size(), any.data(), any.size()), CKR_OK);

    // C_Verify: operation state before the arguments; any answer ends the
    // operation (PKCS#11 2.40, 5.13: "A call to C_Verify always terminates
    // the active verification operation").
    REQUIRE_RV(p11()->C_VerifyInit(ec, &raw, pub), CKR_OK);
    CHECK_RV(verify(ec, d.data(), d.size(), nullptr, any.size()), CKR_ARGUMENTS_BAD);
    CHECK_RV(verify(ec, d.data(), d.size(), any.data(), any.size()), CKR_OPERATION_NOT_INITIALIZED);
    REQUIRE_RV(p11()->C_VerifyInit(ec, &raw, pub), CKR_OK);
    CHECK_RV(verify(ec, nullptr, d.size(), any.data(), any.size()), CKR_ARGUMENTS_BAD);
    CHECK_RV(verify(ec, d.data(), d.size(), any.data(), any.size()), CKR_OPERATION_NOT_INITIALIZED);
    REQUIRE_RV(p11()->C_VerifyInit(ec, &raw, pub), CKR_OK);
    CHECK_RV(verify(ec, d.data(), d.size(), nullptr, 0), CKR_SIGNATURE_LEN_RANGE);
    CHECK_RV(verify(ec, d.data(), d.size(), any.data(), any.size()), CKR_OPERATION_NOT_INITIALIZED);
    REQUIRE_RV(p11()->C_VerifyInit(ec, &raw, pub), CKR_OK);
    CHECK_RV(verify(ec, d.data(), 0, any.data(), any.size()), CKR_DATA_LEN_RANGE);  // no digest
    CHECK_RV(verify(ec, d.data(), d.size(), any.data(), any.size()), CKR_OPERATION_NOT_INITIALIZED);

    // The raw mechanisms are single-part: an update or a final ends them.
    REQUIRE_RV(p11()->C_VerifyInit(ec, &raw, pub), CKR_OK);
    CHECK_RV(p11()->C_VerifyUpdate(ec, d.data(), d.size()), CKR_FUNCTION_NOT_SUPPORTED);
    CHECK_RV(verify(ec, d.data(), d.size(), any.data(), any.size()), CKR_OPERATION_NOT_INITIALIZED);
    REQUIRE_RV(p11()->C_VerifyInit(ec, &raw, pub), CKR_OK);
    CHECK_RV(verify_final(ec, any.data(), any.size()), CKR_FUNCTION_NOT_SUPPORTED);
    CHECK_RV(verify(ec, d.data(), d.size(), any.data(), any.size()), CKR_OPERATION_NOT_INITIALIZED);

    // Multi-part: C_Verify cannot finish it; NULL with a length ends it;
    // NULL with length 0 is empty data.
    Bytes message = data;
    Bytes signature = sig;
    REQUIRE_RV(p11()->C_VerifyInit(ec, &sha256, pub), CKR_OK);
    CHECK_RV(p11()->C_VerifyUpdate(ec, message.data(), message.size()), CKR_OK);
    CHECK_RV(verify(ec, message.data(), message.size(), signature.data(), signature.size()), CKR_OPERATION_ACTIVE);
    CHECK_RV(verify_final(ec, signature.data(), signature.size()), CKR_OPERATION_NOT_INITIALIZED);
    REQUIRE_RV(p11()->C_VerifyInit(ec, &sha256, pub), CKR_OK);
    CHECK_RV(p11()->C_VerifyUpdate(ec, nullptr, 5), CKR_ARGUMENTS_BAD);
    CHECK_RV(verify_final(ec, signature.data(), signature.size()), CKR_OPERATION_NOT_INITIALIZED);
    REQUIRE_RV(p11()->C_VerifyInit(ec, &sha256, pub), CKR_OK);
    CHECK_RV(p11()->C_VerifyUpdate(ec, message.data(), message.size()), CKR_OK);
    CHECK_RV(verify_final(ec, nullptr, signature.size()), CKR_ARGUMENTS_BAD);
    CHECK_RV(verify_final(ec, signature.data(), signature.size()), CKR_OPERATION_NOT_INITIALIZED);
    REQUIRE_RV(p11()->C_VerifyInit(ec, &sha256, pub), CKR_OK);
    CHECK_RV(p11()->C_VerifyUpdate(ec, nullptr, 0), CKR_OK);
    CHECK_RV(p11()->C_VerifyUpdate(ec, message.data(), message.size()), CKR_OK);
    CHECK_RV(verify_final(ec, signature.data(), signature.size()), CKR_OK);
    CHECK_RV(verify_final(ec, signature.data(), signature.size()), CKR_OPERATION_NOT_INITIALIZED);

    SECTION("a key with a PIN verifies without C_Login, and C_Logout leaves a verification") {
        const TestKey& k = key("ec384");
        Bytes pin_sig;
        {
            const KeySession signer(k);  // logs in
            pin_sig = sign(signer, signer.priv, sha256, data);
        }  // its last session closed: logged out
        Session s(slot_of(k.name));
        const CK_OBJECT_HANDLE pin_pub = find_one(s, CKO_PUBLIC_KEY);
        REQUIRE_RV(p11()->C_VerifyInit(s, &sha256, pin_pub), CKR_OK);
        login(s, k);
        REQUIRE_RV(p11()->C_Logout(s), CKR_OK);
        CHECK_RV(verify(s, message.data(), message.size(), pin_sig.data(), pin_sig.size()), CKR_OK);
        CHECK_RV(p11_verify(s, pin_pub, sha256, data, sig), CKR_SIGNATURE_LEN_RANGE);  // a P-256 signature
        Bytes wrong = pin_sig;
        wrong[5] ^= 1;
        CHECK_RV(p11_verify(s, pin_pub, sha256, data, wrong), CKR_SIGNATURE_INVALID);
        CHECK_RV(p11_verify(s, pin_pub, sha256, data, pin_sig), CKR_OK);
    }
    SECTION("C_CloseSession with a verification active is fine") {
        Session other(slot_of("ec256"));
        REQUIRE_RV(p11()->C_VerifyInit(other, &raw, pub), CKR_OK);
        other.close();
    }
}
