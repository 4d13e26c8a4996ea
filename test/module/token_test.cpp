// What a token says about itself through the built module: the info
// structures and their blank-padded text, the mechanism list, what a
// read-only signing token refuses, which key files become tokens, and a
// token whose TPM cannot be reached.
#include "calls.hpp"
#include "harness.hpp"
#include "tpmkey_version.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>

using namespace mt;

namespace {

// A text field is blank padded and has no NUL (PKCS#11 2.40, 3.2: "padded
// with the blank character (' '). Should not be null-terminated").
template <std::size_t N>
void check_text_field(const CK_UTF8CHAR (&field)[N], const char* what) {
    INFO(what << ": '" << std::string(reinterpret_cast<const char*>(field), N) << "'");
    CHECK(std::find(field, field + N, 0) == field + N);
    CHECK(field[0] != ' ');  // not empty
}

}  // namespace

TEST_CASE("C_GetInfo / C_GetSlotInfo / C_GetTokenInfo: values and blank-padded text", "[token]") {
    Initialized init;
    CK_INFO info;
    std::memset(&info, 0, sizeof info);
    REQUIRE_RV(p11()->C_GetInfo(&info), CKR_OK);
    CHECK(info.cryptokiVersion.major == 2);
    CHECK(info.cryptokiVersion.minor == 40);
    // The version of CMakeLists.txt's project(), as the CLIs' --version says it.
    CHECK(int{info.libraryVersion.major} == int{tpmkey::version_major});
    CHECK(int{info.libraryVersion.minor} == int{tpmkey::version_minor});
    CHECK(info.flags == 0);
    check_text_field(info.manufacturerID, "CK_INFO.manufacturerID");
    check_text_field(info.libraryDescription, "CK_INFO.libraryDescription");

    for (const TestKey& k : keys()) {
        INFO(k.name);
        const CK_SLOT_ID slot = slot_of(k.name);
        CK_SLOT_INFO si;
        std::memset(&si, 0, sizeof si);
        REQUIRE_RV(p11()->C_GetSlotInfo(slot, &si), CKR_OK);
        check_text_field(si.slotDescription, "CK_SLOT_INFO.slotDescription");
        check_text_field(si.manufacturerID, "CK_SLOT_INFO.manufacturerID");
        CHECK((si.flags & CKF_TOKEN_PRESENT));
        CHECK_FALSE((si.flags & CKF_REMOVABLE_DEVICE));

        CK_TOKEN_INFO ti;
        std::memset(&ti, 0, sizeof ti);
        REQUIRE_RV(p11()->C_GetTokenInfo(slot, &ti), CKR_OK);
        check_text_field(ti.label, "CK_TOKEN_INFO.label");
        check_text_field(ti.manufacturerID, "CK_TOKEN_INFO.manufacturerID");
        check_text_field(ti.model, "CK_TOKEN_INFO.model");
        check_text_field(ti.serialNumber, "CK_TOKEN_INFO.serialNumber");
        CHECK(std::find(ti.utcTime, ti.utcTime + 16, 0) == ti.utcTime + 16);  // no clock: blank
        CHECK(trimmed(ti.label, sizeof ti.label) == k.name);
        CHECK((ti.flags & CKF_TOKEN_INITIALIZED));
        CHECK((ti.flags & CKF_WRITE_PROTECTED));
        CHECK((ti.flags & CKF_USER_PIN_INITIALIZED));
        CHECK_FALSE((ti.flags & CKF_CLOCK_ON_TOKEN));
        CHECK_FALSE((ti.flags & CKF_RNG));
        // Only a key with an auth value needs C_Login (docs/design.md, "Slots and tokens").
        CHECK(((ti.flags & CKF_LOGIN_REQUIRED) != 0) == !k.pin.empty());
        CHECK(ti.ulMinPinLen <= ti.ulMaxPinLen);
        CHECK(ti.ulMaxPinLen >= k.pin.size());
        CHECK(ti.ulSessionCount == 0);
    }
}

TEST_CASE("C_GetMechanismList and C_GetMechanismInfo per token", "[token]") {
    Initialized init;
    const std::set<CK_MECHANISM_TYPE> rsa_mechs = {
        CKM_RSA_PKCS,     CKM_SHA1_RSA_PKCS,       CKM_SHA256_RSA_PKCS,     CKM_SHA384_RSA_PKCS,    CKM_SHA512_RSA_PKCS,
        CKM_RSA_PKCS_PSS, CKM_SHA256_RSA_PKCS_PSS, CKM_SHA384_RSA_PKCS_PSS, CKM_SHA512_RSA_PKCS_PSS};
    const std::set<CK_MECHANISM_TYPE> ec_mechs = {CKM_ECDSA, CKM_ECDSA_SHA1, CKM_ECDSA_SHA256, CKM_ECDSA_SHA384,
                                                  CKM_ECDSA_SHA512};
    for (const TestKey& k : keys()) {
        INFO(k.name);
        const CK_SLOT_ID slot = slot_of(k.name);
        CK_ULONG n = 0;
        REQUIRE_RV(p11()->C_GetMechanismList(slot, nullptr, &n), CKR_OK);
        std::vector<CK_MECHANISM_TYPE> list(n);
        REQUIRE_RV(p11()->C_GetMechanismList(slot, list.data(), &n), CKR_OK);
        const std::set<CK_MECHANISM_TYPE> got(list.begin(), list.end());
        CHECK(got.size() == list.size());  // no duplicates
        CHECK(got == (k.rsa ? rsa_mechs : ec_mechs));
        for (CK_MECHANISM_TYPE m : list) {
            INFO("mechanism 0x" << std::hex << m);
            CK_MECHANISM_INFO info;
            REQUIRE_RV(p11()->C_GetMechanismInfo(slot, m, &info), CKR_OK);
            CHECK(info.ulMinKeySize == k.bits);
            CHECK(info.ulMaxKeySize == k.bits);
            CHECK((info.flags & CKF_SIGN));
            CHECK((info.flags & CKF_VERIFY));  // in software (verify_test.cpp)
            CHECK_FALSE((info.flags & (CKF_ENCRYPT | CKF_DECRYPT | CKF_GENERATE_KEY_PAIR)));
        }
        CK_MECHANISM_INFO info;
        for (CK_MECHANISM_TYPE other : (k.rsa ? ec_mechs : rsa_mechs))
            CHECK_RV(p11()->C_GetMechanismInfo(slot, other, &info), CKR_MECHANISM_INVALID);
        CHECK_RV(p11()->C_GetMechanismInfo(slot, CKM_SHA256_HMAC, &info), CKR_MECHANISM_INVALID);
    }
}

TEST_CASE("a read-only TPM token: write functions CKR_TOKEN_WRITE_PROTECTED; others not supported", "[token]") {
    Initialized init;
    const CK_SLOT_ID slot = slot_of("ec256");
    Session s(slot, CKF_RW_SESSION);
    const CK_OBJECT_HANDLE priv = private_key(s, key("ec256"));
    CK_OBJECT_CLASS cls = CKO_DATA;
    CK_BBOOL yes = CK_TRUE;
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &cls, sizeof cls}, {CKA_TOKEN, &yes, 1}};
    CK_OBJECT_HANDLE out = CK_INVALID_HANDLE;
    CK_UTF8CHAR pin[] = {'1', '2', '3', '4'};
    CK_UTF8CHAR label[32];
    std::memset(label, ' ', sizeof label);
    CK_UTF8CHAR new_label[] = {'x'};
    CK_ATTRIBUTE set{CKA_LABEL, new_label, 1};

    CHECK_RV(p11()->C_CreateObject(s, t, 2, &out), CKR_TOKEN_WRITE_PROTECTED);
    CHECK_RV(p11()->C_CopyObject(s, priv, &set, 1, &out), CKR_TOKEN_WRITE_PROTECTED);
    CHECK_RV(p11()->C_DestroyObject(s, priv), CKR_TOKEN_WRITE_PROTECTED);
    CHECK_RV(p11()->C_SetAttributeValue(s, priv, &set, 1), CKR_TOKEN_WRITE_PROTECTED);
    CHECK_RV(p11()->C_InitToken(slot, pin, sizeof pin, label), CKR_TOKEN_WRITE_PROTECTED);
    CHECK_RV(p11()->C_SetPIN(s, pin, sizeof pin, pin, sizeof pin), CKR_TOKEN_WRITE_PROTECTED);
    CHECK_RV(p11()->C_InitPIN(s, pin, sizeof pin), CKR_TOKEN_WRITE_PROTECTED);
    CHECK(attribute(s, priv, CKA_LABEL) == bytes("ec256"));  // unchanged
    CHECK(find(s).size() == 3);

    for (const Call& c : all_calls()) {
        if (c.stub == 0)
            continue;
        INFO(c.name);
        const CK_RV rv = c.call(slot, s);
        CHECK((c.refuses(rv) ? Rv{c.stub} : Rv{rv}) == Rv{c.stub});
    }
    CK_BYTE state[64];
    CK_ULONG n = sizeof state;
    CHECK_RV(p11()->C_GetOperationState(s, state, &n), CKR_FUNCTION_NOT_SUPPORTED);
    CHECK_RV(p11()->C_SetOperationState(s, state, n, 0, 0), CKR_FUNCTION_NOT_SUPPORTED);
}

TEST_CASE("key discovery: TPMKEY_KEYS with files; a missing path and a broken key file are skipped", "[token]") {
    const std::filesystem::path broken = key_dir() / "extra" / "broken.tpm";
    std::filesystem::create_directories(broken.parent_path());
    std::ofstream(broken) << "-----BEGIN TSS2 PRIVATE KEY-----\nnot base64 at all\n-----END TSS2 PRIVATE KEY-----\n";
    // One bad file must not hide the user's other keys (docs/design.md).
    ScopedEnv env("TPMKEY_KEYS", key("rsa3072").tpm.string() + ":" + (key_dir() / "nonexistent.tpm").string() + ":" +
                                     broken.parent_path().string() + ":" + key("ec256").tpm.string());
    ScopedEnv quiet("TPMKEY_LOG_FILE", (key_dir() / "extra" / "log").string());
    Initialized init;
    const auto slots = slot_list();
    REQUIRE(slots.size() == 2);
    std::vector<std::string> labels;
    for (CK_SLOT_ID slot : slots) {
        CK_TOKEN_INFO ti;
        REQUIRE_RV(p11()->C_GetTokenInfo(slot, &ti), CKR_OK);
        labels.push_back(trimmed(ti.label, sizeof ti.label));
    }
    CHECK(labels == std::vector<std::string>{"rsa3072", "ec256"});
    std::ifstream log(key_dir() / "extra" / "log");
    const std::string logged((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    CHECK_THAT(logged, Catch::Contains("broken.tpm"));
}

TEST_CASE("no TPM reachable: listing still works; signing fails cleanly", "[token]") {
    // Port 1 on localhost: nothing listens there.
    ScopedEnv tcti("TPMKEY_TCTI", "swtpm:host=127.0.0.1,port=1");
    ScopedEnv quiet("TPMKEY_LOG_FILE", (key_dir() / "no-tpm.log").string());
    Initialized init;
    REQUIRE(slot_list().size() == 4);
    const TestKey& k = key("ec256");
    Session s(slot_of(k.name));
    const CK_OBJECT_HANDLE priv = find_one(s, CKO_PRIVATE_KEY);
    CHECK(attribute(s, priv, CKA_ID).size() == 20);
    CK_MECHANISM m{CKM_ECDSA, nullptr, 0};
    REQUIRE_RV(p11()->C_SignInit(s, &m, priv), CKR_OK);
    Bytes d(32, 1);
    Bytes sig(64);
    CK_ULONG n = sig.size();
    const CK_RV rv = p11()->C_Sign(s, d.data(), d.size(), sig.data(), &n);
    CHECK((rv == CKR_DEVICE_ERROR || rv == CKR_DEVICE_REMOVED || rv == CKR_TOKEN_NOT_PRESENT ||
           rv == CKR_FUNCTION_FAILED));
    n = sig.size();
    CHECK_RV(p11()->C_Sign(s, d.data(), d.size(), sig.data(), &n), CKR_OPERATION_NOT_INITIALIZED);
    Session p(slot_of("ec384"));
    const CK_RV login_rv = login_with(p, key("ec384").pin);
    CHECK(login_rv != CKR_OK);
    CHECK(login_rv != CKR_PIN_INCORRECT);  // the PIN was not judged
    // The mechanism list asks the TPM which hashes it has (one
    // TPM2_GetCapability); without a TPM it says so.
    CK_ULONG count = 0;
    const CK_RV mech_rv = p11()->C_GetMechanismList(slot_of(k.name), nullptr, &count);
    WARN("C_GetMechanismList without a TPM: " << rv_name(mech_rv) << ", C_Sign: " << rv_name(rv)
                                              << ", C_Login: " << rv_name(login_rv));
}
