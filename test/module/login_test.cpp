// C_Login checks the PIN with the TPM; private objects of a PIN token are
// visible only while logged in; C_Logout, C_CloseSession and C_Finalize
// flush what was loaded (counted in the swtpm with tpm2_getcap).
#include "harness.hpp"

#include <chrono>
#include <cstring>
#include <sstream>
#include <thread>

using namespace mt;

// Tests tagged [counted] compare the TPM's wrong-PIN count exactly: they run
// on a swtpm that forgives none during the test (test/module/CMakeLists.txt).

namespace {

CK_STATE state_of(CK_SESSION_HANDLE s) {
    CK_SESSION_INFO info;
    REQUIRE_RV(p11()->C_GetSessionInfo(s, &info), CKR_OK);
    return info.state;
}

std::size_t private_keys_visible(CK_SESSION_HANDLE s) {
    CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
    return find(s, {{CKA_CLASS, &cls, sizeof cls}}).size();
}

// The TPM's count of authorization failures (TPM2_PT_LOCKOUT_COUNTER).
unsigned long lockout_counter() {
    int status = 0;
    const std::string out = run("tpm2_getcap -T " + shell_quote(swtpm_tcti()) + " properties-variable", &status);
    REQUIRE(status == 0);
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);)
        if (line.rfind("TPM2_PT_LOCKOUT_COUNTER:", 0) == 0)
            return std::stoul(line.substr(line.find(':') + 1), nullptr, 0);
    FAIL("no TPM2_PT_LOCKOUT_COUNTER in tpm2_getcap's output");
    return 0;
}

Bytes sign_ok(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE priv, const TestKey& k, const Bytes& data) {
    CK_MECHANISM m{k.rsa ? CKM_SHA256_RSA_PKCS : CKM_ECDSA_SHA256, nullptr, 0};
    const Bytes sig = sign(s, priv, m, data);
    CHECK((k.rsa ? verify_rsa_message(k, "SHA256", false, data, sig) : verify_ecdsa_message(k, "SHA256", data, sig)));
    return sig;
}

// For each key named, with the module initialized for it alone: INFO its
// name and `body(key, its slot)`.
void for_each_token(std::initializer_list<const char*> names,
                    const std::function<void(const TestKey&, CK_SLOT_ID)>& body) {
    for (const char* name : names) {
        const TestKey& k = key(name);
        INFO(k.name);
        Initialized init;
        body(k, slot_of(k.name));
    }
}

}  // namespace

TEST_CASE("a PIN token: private key hidden until C_Login; wrong PIN refused by the TPM", "[login]") {
    for_each_token({"ec384", "rsa3072"}, [](const TestKey& k, CK_SLOT_ID slot) {
        CHECK((token_flags(slot) & CKF_LOGIN_REQUIRED));
        Session s(slot);
        Session rw(slot, CKF_RW_SESSION);

        CHECK(state_of(s) == CKS_RO_PUBLIC_SESSION);
        CHECK(find(s).size() == 1);  // the public key only
        CHECK(private_keys_visible(s) == 0);

        // The TPM judges the PIN (TPM2_RC_AUTH_FAIL), and counts the failure.
        const unsigned long failures = lockout_counter();
        CHECK_RV(login_with(s, k.pin + "x"), CKR_PIN_INCORRECT);
        CHECK(lockout_counter() >= failures + 1);
        CHECK(state_of(s) == CKS_RO_PUBLIC_SESSION);
        CHECK(private_keys_visible(s) == 0);

        REQUIRE_RV(login_with(s, k.pin), CKR_OK);
        CHECK(state_of(s) == CKS_RO_USER_FUNCTIONS);
        CHECK(state_of(rw) == CKS_RW_USER_FUNCTIONS);  // login is per token
        CHECK(private_keys_visible(s) == 1);
        CHECK(private_keys_visible(rw) == 1);
        CHECK(find(s).size() == 2);
        CHECK_RV(login_with(s, k.pin), CKR_USER_ALREADY_LOGGED_IN);
        CHECK_RV(login_with(rw, k.pin), CKR_USER_ALREADY_LOGGED_IN);
        sign_ok(rw, find_one(rw, CKO_PRIVATE_KEY), k, bytes("logged in"));

        REQUIRE_RV(p11()->C_Logout(s), CKR_OK);
        CHECK(state_of(s) == CKS_RO_PUBLIC_SESSION);
        CHECK(state_of(rw) == CKS_RW_PUBLIC_SESSION);
        CHECK(private_keys_visible(s) == 0);
        CHECK(private_keys_visible(rw) == 0);
        CHECK_RV(p11()->C_Logout(s), CKR_USER_NOT_LOGGED_IN);
    });
}

TEST_CASE("a PIN token: signing needs the login", "[login]") {
    const TestKey& k = key("ec384");
    Initialized init;
    Session s(slot_of(k.name));
    const CK_OBJECT_HANDLE pub = find_one(s, CKO_PUBLIC_KEY);
    CK_MECHANISM m{CKM_ECDSA_SHA384, nullptr, 0};

    // Before any login the private key has no handle the caller can know;
    // the one after the public key's is refused.
    CHECK_RV(p11()->C_SignInit(s, &m, pub + 1), CKR_KEY_HANDLE_INVALID);

    login(s, k);
    const CK_OBJECT_HANDLE priv = find_one(s, CKO_PRIVATE_KEY);
    REQUIRE_RV(p11()->C_Logout(s), CKR_OK);

    // PKCS#11 2.40, 5.6, C_Logout: "any of the application's handles to
    // private objects become invalid (even if a user is later logged back
    // into the token, those handles remain invalid)". So: the handle is
    // invalid now; CKR_USER_NOT_LOGGED_IN (SoftHSM's answer) is as good.
    const CK_RV rv = p11()->C_SignInit(s, &m, priv);
    CHECK((rv == CKR_KEY_HANDLE_INVALID || rv == CKR_USER_NOT_LOGGED_IN));
    CK_ATTRIBUTE a{CKA_LABEL, nullptr, 0};
    const CK_RV get_rv = p11()->C_GetAttributeValue(s, priv, &a, 1);
    CHECK((get_rv == CKR_OBJECT_HANDLE_INVALID || get_rv == CKR_USER_NOT_LOGGED_IN));

    login(s, k);
    const CK_OBJECT_HANDLE again = find_one(s, CKO_PRIVATE_KEY);
    // 2.40, 5.6, C_Logout: handles to private objects stay invalid even
    // after a new login.
    CHECK(again != priv);
    CHECK_RV(p11()->C_GetAttributeValue(s, priv, &a, 1), CKR_OBJECT_HANDLE_INVALID);
    sign_ok(s, again, k, bytes("after a new login"));
}

TEST_CASE("C_Logout with a signing operation active: no signature and no dictionary-attack strike", "[counted]") {
    Initialized init;
    KeySession s(key("ec384"));
    CK_MECHANISM m{CKM_ECDSA, nullptr, 0};
    REQUIRE_RV(p11()->C_SignInit(s, &m, s.priv), CKR_OK);
    REQUIRE_RV(p11()->C_Logout(s), CKR_OK);
    const unsigned long failures = lockout_counter();
    Bytes d = digest("SHA384", bytes("after logout"));
    Bytes sig(96);
    CK_ULONG n = sig.size();
    // 2.40, 5.6, C_Logout: the operation may or may not still be active.
    // Either way, without the PIN there must be no signature, and no wrong
    // authorization sent to the TPM.
    const CK_RV rv = p11()->C_Sign(s, d.data(), d.size(), sig.data(), &n);
    CHECK((rv == CKR_OPERATION_NOT_INITIALIZED || rv == CKR_USER_NOT_LOGGED_IN));
    CHECK(lockout_counter() == failures);
}

TEST_CASE("a failed context-specific login leaves the user logged in with the PIN that worked", "[counted]") {
    const TestKey& k = key("ec384");
    Initialized init;
    Session s(slot_of(k.name));
    login(s, k);
    const CK_OBJECT_HANDLE priv = find_one(s, CKO_PRIVATE_KEY);
    CK_MECHANISM m{CKM_ECDSA_SHA384, nullptr, 0};
    REQUIRE_RV(p11()->C_SignInit(s, &m, priv), CKR_OK);
    const unsigned long failures = lockout_counter();
    CHECK_RV(login_with(s, "wrong", CKU_CONTEXT_SPECIFIC), CKR_PIN_INCORRECT);
    CHECK(lockout_counter() == failures + 1);  // the wrong PIN counts once
    CHECK(state_of(s) == CKS_RO_USER_FUNCTIONS);
    // The operation may have ended (5.12); either way the next signatures
    // use the PIN that worked, and none counts as a wrong PIN.
    (void)p11()->C_SignFinal(s, nullptr, nullptr);
    sign_ok(s, priv, k, bytes("after a failed context-specific login"));
    sign_ok(s, priv, k, bytes("and again"));
    CHECK(lockout_counter() == failures + 1);
}

TEST_CASE("an empty PIN for a key with a PIN: CKR_PIN_LEN_RANGE, no TPM command, nothing counted", "[counted]") {
    for_each_token({"ec384", "rsa3072"}, [](const TestKey& k, CK_SLOT_ID slot) {
        CK_TOKEN_INFO info;
        REQUIRE_RV(p11()->C_GetTokenInfo(slot, &info), CKR_OK);
        CHECK(info.ulMinPinLen == 1);
        Session s(slot);
        const unsigned long failures = lockout_counter();
        CHECK_RV(login_with(s, ""), CKR_PIN_LEN_RANGE);
        CHECK_RV(login_with(s, ""), CKR_PIN_LEN_RANGE);
        CHECK(lockout_counter() == failures);
        CHECK_FALSE((token_flags(slot) & CKF_USER_PIN_COUNT_LOW));
        CHECK(state_of(s) == CKS_RO_PUBLIC_SESSION);
        login(s, k);
    });
}

// ssh-add -s: one PIN, C_Login on every token that needs one, one after
// another (docs/design.md, "PINs, keys and the TPM's lockout").
TEST_CASE("one PIN passed on to every token: it counts once at most", "[counted]") {
    const TestKey& ec = key("ec384");
    const TestKey& rsa = key("rsa3072");
    SECTION("the right PIN of the first key: tried on the second, which has its own PIN: one count") {
        Initialized init;
        Session first(slot_of(ec.name));
        Session second(slot_of(rsa.name));
        const unsigned long failures = lockout_counter();
        REQUIRE_RV(login_with(first, ec.pin), CKR_OK);
        CHECK_RV(login_with(second, ec.pin), CKR_PIN_INCORRECT);
        CHECK(lockout_counter() == failures + 1);
        CHECK(state_of(second) == CKS_RO_PUBLIC_SESSION);
        // Its own PIN works, and the first key still signs.
        login(second, rsa);
        sign_ok(first, find_one(first, CKO_PRIVATE_KEY), ec, bytes("first"));
        sign_ok(second, find_one(second, CKO_PRIVATE_KEY), rsa, bytes("second"));
        CHECK(lockout_counter() == failures + 1);
    }
    SECTION("a wrong PIN passed on: one count however many tokens get it") {
        Initialized init;
        Session first(slot_of(ec.name));
        Session second(slot_of(rsa.name));
        const unsigned long failures = lockout_counter();
        CHECK_RV(login_with(first, "typed wrong"), CKR_PIN_INCORRECT);
        // Not sent to the TPM: not CKR_PIN_INCORRECT, which nobody checked.
        CHECK_RV(login_with(second, "typed wrong"), CKR_FUNCTION_FAILED);
        CHECK_RV(login_with(first, "typed wrong"), CKR_PIN_INCORRECT);  // the same token asks the TPM again
        CHECK(lockout_counter() == failures + 2);
        CHECK_RV(login_with(second, "typed wrong"), CKR_FUNCTION_FAILED);
        CHECK(lockout_counter() == failures + 2);
    }
    SECTION("after the burst, a PIN typed again for another token goes to the TPM") {
        Initialized init;
        Session first(slot_of(ec.name));
        Session second(slot_of(rsa.name));
        REQUIRE_RV(login_with(first, ec.pin), CKR_OK);
        std::this_thread::sleep_for(std::chrono::milliseconds(2100));
        const unsigned long failures = lockout_counter();
        CHECK_RV(login_with(second, ec.pin), CKR_PIN_INCORRECT);
        CHECK(lockout_counter() == failures + 1);
    }
}

TEST_CASE("CKF_USER_PIN_COUNT_LOW: a wrong PIN since the last successful login, on that token only", "[login]") {
    const TestKey& k = key("ec384");
    Initialized init;
    const CK_SLOT_ID slot = slot_of(k.name);
    const auto low = [](CK_SLOT_ID id) { return (token_flags(id) & CKF_USER_PIN_COUNT_LOW) != 0; };
    Session s(slot);
    CHECK_FALSE(low(slot));
    CHECK_RV(login_with(s, "wrong"), CKR_PIN_INCORRECT);
    CHECK(low(slot));
    CHECK_FALSE(low(slot_of("rsa3072")));  // another token's PIN was not tried
    login(s, k);
    CHECK(lockout_counter() >= 1);  // the TPM still counts it ...
    CHECK_FALSE(low(slot));         // ... but the PIN was right since (2.40, 3.2)
}

TEST_CASE("a security officer login: the spec's answers for a token without one", "[login]") {
    const TestKey& k = key("ec384");
    Initialized init;
    const CK_SLOT_ID slot = slot_of(k.name);
    {
        Session rw(slot, CKF_RW_SESSION);
        CHECK_RV(login_with(rw, "so-pin", CKU_SO), CKR_PIN_INCORRECT);  // no SO PIN is right
        Session ro(slot);
        CHECK_RV(login_with(rw, "so-pin", CKU_SO), CKR_SESSION_READ_ONLY_EXISTS);
        login(ro, k);
        CHECK_RV(login_with(rw, "so-pin", CKU_SO), CKR_USER_ANOTHER_ALREADY_LOGGED_IN);
    }
    Session s(slot);
    CHECK_RV(login_with(s, "x", CKU_SO + 7), CKR_USER_TYPE_INVALID);
}

TEST_CASE("a token without a PIN: no CKF_LOGIN_REQUIRED; signs without login", "[counted]") {
    for_each_token({"ec256", "rsa2048"}, [](const TestKey& k, CK_SLOT_ID slot) {
        CHECK_FALSE((token_flags(slot) & CKF_LOGIN_REQUIRED));
        Session s(slot);
        CHECK(private_keys_visible(s) == 1);
        const CK_OBJECT_HANDLE priv = find_one(s, CKO_PRIVATE_KEY);
        CHECK_FALSE(bool_attribute(s, priv, CKA_PRIVATE));
        sign_ok(s, priv, k, bytes("no login"));
        CHECK(state_of(s) == CKS_RO_PUBLIC_SESSION);

        // A login with the empty PIN is harmless and changes nothing visible.
        // PKCS#11 3.0, 5.6: a token that needs no login may still be logged
        // in to, and a second login is CKR_USER_ALREADY_LOGGED_IN.
        CHECK_RV(login_with(s, ""), CKR_OK);
        CHECK(state_of(s) == CKS_RO_USER_FUNCTIONS);
        CHECK_RV(login_with(s, ""), CKR_USER_ALREADY_LOGGED_IN);
        sign_ok(s, priv, k, bytes("logged in without a PIN"));
        CHECK_RV(p11()->C_Logout(s), CKR_OK);
        // Some PIN on a key without one: accepted or refused, but never
        // sent to the TPM as a wrong authorization (a dictionary-attack
        // strike for nothing).
        const unsigned long failures = lockout_counter();
        const CK_RV rv = login_with(s, "1234");
        CHECK((rv == CKR_OK || rv == CKR_PIN_INCORRECT));
        CHECK(lockout_counter() == failures);
        sign_ok(s, priv, k, bytes("still signs"));
    });
}

TEST_CASE("C_Login arguments", "[counted]") {
    const TestKey& k = key("ec384");
    Initialized init;
    Session s(slot_of(k.name));
    // There is no security officer; any SO login fails.
    CHECK(login_with(s, k.pin, CKU_SO) != CKR_OK);
    CHECK_RV(login_with(s, k.pin, 7), CKR_USER_TYPE_INVALID);
    // A context-specific login needs an operation (2.40, 5.6, C_Login).
    CHECK_RV(login_with(s, k.pin, CKU_CONTEXT_SPECIFIC), CKR_OPERATION_NOT_INITIALIZED);
    // Longer than any TPM auth value: refused without asking the TPM.
    const unsigned long failures = lockout_counter();
    const CK_RV rv = login_with(s, std::string(33, 'p'));
    CHECK((rv == CKR_PIN_LEN_RANGE || rv == CKR_PIN_INCORRECT));
    CHECK(lockout_counter() == failures);
    CHECK(state_of(s) == CKS_RO_PUBLIC_SESSION);
    CHECK_RV(p11()->C_Logout(s), CKR_USER_NOT_LOGGED_IN);
}

TEST_CASE("closing the last session logs the token out", "[login]") {
    const TestKey& k = key("rsa3072");
    Initialized init;
    const CK_SLOT_ID slot = slot_of(k.name);
    {
        Session s(slot);
        login(s, k);
        CHECK(private_keys_visible(s) == 1);
        s.close();
    }
    {
        // 2.40, 5.6, C_CloseSession: closing the last session returns the
        // token to public sessions.
        Session s(slot);
        CHECK(state_of(s) == CKS_RO_PUBLIC_SESSION);
        CHECK(private_keys_visible(s) == 0);
        login(s, k);
        Session other(slot);
        CHECK(state_of(other) == CKS_RO_USER_FUNCTIONS);
        s.close();  // not the last one: still logged in
        CHECK(state_of(other) == CKS_RO_USER_FUNCTIONS);
        CHECK(private_keys_visible(other) == 1);
    }
    {
        Session s(slot);
        login(s, k);
        REQUIRE_RV(p11()->C_CloseAllSessions(slot), CKR_OK);
        Session t(slot);
        CHECK(state_of(t) == CKS_RO_PUBLIC_SESSION);
    }
}

TEST_CASE("C_Logout / C_CloseSession / C_Finalize flush what they loaded", "[login][flush]") {
    REQUIRE(tpm_transient_objects() == 0);
    {
        Initialized init;
        for (const TestKey& k : keys()) {
            Session s(slot_of(k.name));
            (void)find(s);
            (void)attribute(s, find_one(s, CKO_PUBLIC_KEY), CKA_ID);
        }
        CHECK(tpm_transient_objects() == 0);  // nothing loaded for listing

        // The swtpm has no resource manager: nothing of ours stays in it
        // after any call (TpmConnection::may_hold_objects), whatever the
        // caller does next (ssh-agent's helper _exit()s without C_Finalize).
        const TestKey& plain = key("ec256");
        Session s(slot_of(plain.name));
        sign_ok(s, private_key(s, plain), plain, bytes("load"));
        CHECK(tpm_transient_objects() == 0);
        CHECK(tpm_loaded_sessions() == 0);
        s.close();

        const TestKey& pin = key("ec384");
        Session p(slot_of(pin.name));
        login(p, pin);
        CHECK(tpm_transient_objects() == 0);
        CHECK(tpm_loaded_sessions() == 0);
        sign_ok(p, find_one(p, CKO_PRIVATE_KEY), pin, bytes("load"));
        CHECK(tpm_transient_objects() == 0);
        CHECK(tpm_loaded_sessions() == 0);
        REQUIRE_RV(p11()->C_Logout(p), CKR_OK);

        // A failed login leaves nothing behind either.
        CHECK_RV(login_with(p, "wrong"), CKR_PIN_INCORRECT);
        CHECK(tpm_transient_objects() == 0);
        CHECK(tpm_loaded_sessions() == 0);

        // Loaded again, then C_Finalize with the session still open.
        login(p, pin);
        sign_ok(p, find_one(p, CKO_PRIVATE_KEY), pin, bytes("load"));
        Session q(slot_of(plain.name));
        sign_ok(q, find_one(q, CKO_PRIVATE_KEY), plain, bytes("load"));
    }
    CHECK(tpm_transient_objects() == 0);
    CHECK(tpm_loaded_sessions() == 0);
}

// docs/design.md, "PINs, keys and the TPM's lockout": a PIN given for a key
// is sent while a wrong one would leave a try; a PIN passed on from another
// key while it would leave 3.
TEST_CASE("a TPM near lockout: CKR_PIN_LOCKED without a TPM try; it never locks; the right PIN works after",
          "[lockout]") {
    const TestKey& ec = key("ec384");
    const TestKey& rsa = key("rsa3072");
    const std::string tcti = " -T " + shell_quote(swtpm_tcti());
    int status = 0;
    SECTION("3 tries: the right PIN of the first key is not tried on the second; a typo, then the right PIN works") {
        run("tpm2_dictionarylockout -c" + tcti + " && tpm2_dictionarylockout -s -n 3 -t 1000 -l 1000" + tcti, &status);
        REQUIRE(status == 0);
        Initialized init;
        Session first(slot_of(ec.name));
        Session second(slot_of(rsa.name));
        REQUIRE_RV(login_with(first, ec.pin), CKR_OK);
        CHECK_RV(login_with(second, ec.pin), CKR_FUNCTION_FAILED);  // not sent: not PIN_INCORRECT
        CHECK(lockout_counter() == 0);
        login(second, rsa);  // its own PIN
        // A typo: the right PIN then works at once (a wrong one would still leave 1 try).
        CHECK_RV(p11()->C_Logout(second), CKR_OK);
        CHECK_RV(login_with(second, "wrong"), CKR_PIN_INCORRECT);
        CHECK(lockout_counter() == 1);
        CHECK_RV(login_with(second, rsa.pin), CKR_OK);
        // A second typo: one more would leave no try, so not even the right PIN is sent.
        CHECK_RV(p11()->C_Logout(second), CKR_OK);
        CHECK_RV(login_with(second, "wrong"), CKR_PIN_INCORRECT);
        CHECK(lockout_counter() == 2);
        CHECK_RV(login_with(second, rsa.pin), CKR_PIN_LOCKED);
        CHECK_RV(login_with(second, "wrong"), CKR_PIN_LOCKED);
        CHECK(lockout_counter() == 2);
        // A key that is logged in still signs.
        sign_ok(first, find_one(first, CKO_PRIVATE_KEY), ec, bytes("still signs"));
    }
    SECTION("4 tries: the right PIN of the first key is tried on the second once; its own PIN then works") {
        run("tpm2_dictionarylockout -c" + tcti + " && tpm2_dictionarylockout -s -n 4 -t 1000 -l 1000" + tcti, &status);
        REQUIRE(status == 0);
        Initialized init;
        Session first(slot_of(ec.name));
        Session second(slot_of(rsa.name));
        REQUIRE_RV(login_with(first, ec.pin), CKR_OK);
        CHECK_RV(login_with(second, ec.pin), CKR_PIN_INCORRECT);
        CHECK(lockout_counter() == 1);
        login(second, rsa);
        CHECK(lockout_counter() == 1);
    }
    SECTION("2 tries: one wrong PIN is sent, then none; the TPM is never locked") {
        run("tpm2_dictionarylockout -c" + tcti + " && tpm2_dictionarylockout -s -n 2 -t 1000 -l 1000" + tcti, &status);
        REQUIRE(status == 0);
        Initialized init;
        Session s(slot_of(ec.name));
        CHECK_RV(login_with(s, "wrong"), CKR_PIN_INCORRECT);
        for (int i = 0; i < 4; ++i)
            CHECK_RV(login_with(s, "wrong"), CKR_PIN_LOCKED);
        CHECK_RV(login_with(s, ec.pin), CKR_PIN_LOCKED);
        CHECK(lockout_counter() == 1);
        CHECK_FALSE((token_flags(slot_of(ec.name)) & CKF_USER_PIN_LOCKED));  // the TPM is not in lockout
    }
    run("tpm2_dictionarylockout -c" + tcti + " && tpm2_dictionarylockout -s -n 32 -t 1 -l 1" + tcti, &status);
    REQUIRE(status == 0);
    Initialized init;
    Session s(slot_of(ec.name));
    login(s, ec);
    sign_ok(s, find_one(s, CKO_PRIVATE_KEY), ec, bytes("unlocked"));
}
