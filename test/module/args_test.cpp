// The argument rules of PKCS#11 2.40 through the built module: module state,
// NULL pointers, invalid handles, operation state, the two-call size query,
// C_GetAttributeValue's per-attribute rules, C_FindObjects, the text fields,
// the token flags, and what a read-only signing token refuses.
#include "calls.hpp"
#include "harness.hpp"
#include "tpmkey_version.hpp"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/sha.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>

using namespace mt;

namespace {

constexpr CK_SESSION_HANDLE bad_session = 0x7ffff123;
constexpr CK_SLOT_ID bad_slot = 4711;
constexpr CK_OBJECT_HANDLE bad_object = 0x7ffff456;
constexpr CK_ATTRIBUTE_TYPE unknown_attribute = CKA_VENDOR_DEFINED | 0x7a7a;

// A text field is blank padded and has no NUL (PKCS#11 2.40, 3.2: "padded
// with the blank character (' '). Should not be null-terminated").
template <std::size_t N>
void check_text_field(const CK_UTF8CHAR (&field)[N], const char* what) {
    INFO(what << ": '" << std::string(reinterpret_cast<const char*>(field), N) << "'");
    CHECK(std::find(field, field + N, 0) == field + N);
    CHECK(field[0] != ' ');  // not empty
}

void check_not_initialized_everywhere() {
    for (const Call& c : all_calls()) {
        INFO(c.name);
        // Also the functions the token does not support (PKCS#11 2.40, 5.4).
        CHECK(Rv{c.call(0, 1)} == Rv{CKR_CRYPTOKI_NOT_INITIALIZED});
    }
    CHECK_RV(p11()->C_Finalize(nullptr), CKR_CRYPTOKI_NOT_INITIALIZED);
}

Bytes ec_point_der(const TestKey& k) {
    std::size_t n = 0;
    REQUIRE(EVP_PKEY_get_octet_string_param(k.pkey.get(), OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, nullptr, 0, &n) == 1);
    Bytes point(n);
    REQUIRE(EVP_PKEY_get_octet_string_param(k.pkey.get(), OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, point.data(), n, &n) == 1);
    REQUIRE(n < 128);
    Bytes der(2 + n);
    der[0] = 0x04;  // OCTET STRING
    der[1] = static_cast<std::uint8_t>(n);
    std::copy(point.begin(), point.begin() + static_cast<long>(n), der.begin() + 2);
    return der;
}

Bytes ec_params_der(const TestKey& k) {
    if (k.bits == 256)
        return {0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07};  // prime256v1
    return {0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x22};                        // secp384r1
}

Bytes rsa_param(const TestKey& k, const char* name) {
    BIGNUM* bn = nullptr;
    REQUIRE(EVP_PKEY_get_bn_param(k.pkey.get(), name, &bn) == 1);
    Bytes out(static_cast<std::size_t>(BN_num_bytes(bn)));
    BN_bn2bin(bn, out.data());
    BN_free(bn);
    return out;
}

// The SHA-1 of the subjectPublicKey BIT STRING's contents (RFC 5280,
// 4.2.1.2, method 1): a function of the public key alone, so the same in
// every process and on every machine.
Bytes subject_key_identifier(const TestKey& k) {
    const unsigned char* p = k.spki_der.data();
    X509_PUBKEY* x = d2i_X509_PUBKEY(nullptr, &p, static_cast<long>(k.spki_der.size()));
    REQUIRE(x != nullptr);
    const unsigned char* bits = nullptr;
    int len = 0;
    REQUIRE(X509_PUBKEY_get0_param(nullptr, &bits, &len, nullptr, x) == 1);
    Bytes id(20);
    SHA1(bits, static_cast<std::size_t>(len), id.data());
    X509_PUBKEY_free(x);
    return id;
}

// Mutex functions that really work, for C_Initialize's locking arguments.
CK_RV create_mutex(CK_VOID_PTR_PTR m) {
    *m = new std::mutex;
    return CKR_OK;
}
CK_RV destroy_mutex(CK_VOID_PTR m) {
    delete static_cast<std::mutex*>(m);
    return CKR_OK;
}
CK_RV lock_mutex(CK_VOID_PTR m) {
    static_cast<std::mutex*>(m)->lock();
    return CKR_OK;
}
CK_RV unlock_mutex(CK_VOID_PTR m) {
    static_cast<std::mutex*>(m)->unlock();
    return CKR_OK;
}

}  // namespace

TEST_CASE("C_GetFunctionList: the 2.40 list; NULL refused", "[args]") {
    CK_FUNCTION_LIST* list = nullptr;
    CHECK_RV(p11()->C_GetFunctionList(&list), CKR_OK);
    CHECK(list == p11());
    CHECK(list->version.major == 2);
    CHECK(list->version.minor == 40);
    CHECK_RV(p11()->C_GetFunctionList(nullptr), CKR_ARGUMENTS_BAD);
    // Every slot of the table is filled: a NULL would crash the caller.
    const auto* first = reinterpret_cast<const void* const*>(&list->C_Initialize);
    const auto* last = reinterpret_cast<const void* const*>(&list->C_WaitForSlotEvent);
    for (const auto* f = first; f <= last; ++f)
        CHECK(*f != nullptr);
}

TEST_CASE("every function: CKR_CRYPTOKI_NOT_INITIALIZED before C_Initialize and after C_Finalize", "[args]") {
    SECTION("before") { check_not_initialized_everywhere(); }
    SECTION("after C_Finalize") {
        {
            Initialized init;
            Session s(slot_of("ec256"));
            CHECK(slot_list().size() == 4);
        }
        check_not_initialized_everywhere();
    }
}

TEST_CASE("C_Initialize and C_Finalize arguments", "[args]") {
    CK_C_INITIALIZE_ARGS args{};

    SECTION("twice: CKR_CRYPTOKI_ALREADY_INITIALIZED, still usable") {
        Initialized init;
        CHECK_RV(p11()->C_Initialize(nullptr), CKR_CRYPTOKI_ALREADY_INITIALIZED);
        CHECK(slot_list().size() == 4);
    }
    SECTION("pReserved != NULL: CKR_ARGUMENTS_BAD, not initialised") {
        int reserved = 0;
        args.pReserved = &reserved;
        CHECK_RV(p11()->C_Initialize(&args), CKR_ARGUMENTS_BAD);
        CHECK_RV(p11()->C_GetSlotList(CK_TRUE, nullptr, &args.flags), CKR_CRYPTOKI_NOT_INITIALIZED);
    }
    SECTION("mutex functions without CKF_OS_LOCKING_OK: CKR_CANT_LOCK") {
        // We lock with the OS and cannot use the application's mutexes
        // (PKCS#11 2.40, 5.4, case 3: "CKR_CANT_LOCK").
        args.CreateMutex = create_mutex;
        args.DestroyMutex = destroy_mutex;
        args.LockMutex = lock_mutex;
        args.UnlockMutex = unlock_mutex;
        CHECK_RV(p11()->C_Initialize(&args), CKR_CANT_LOCK);
        CHECK_RV(p11()->C_Finalize(nullptr), CKR_CRYPTOKI_NOT_INITIALIZED);
        SECTION("with CKF_OS_LOCKING_OK: fine") {
            args.flags = CKF_OS_LOCKING_OK;
            Initialized init(&args);
            CHECK(slot_list().size() == 4);
        }
    }
    SECTION("only some mutex functions: CKR_ARGUMENTS_BAD") {
        args.CreateMutex = create_mutex;
        args.flags = CKF_OS_LOCKING_OK;
        CHECK_RV(p11()->C_Initialize(&args), CKR_ARGUMENTS_BAD);
        CHECK_RV(p11()->C_Finalize(nullptr), CKR_CRYPTOKI_NOT_INITIALIZED);
    }
    SECTION("CKF_OS_LOCKING_OK alone, or no flag at all, or CKF_LIBRARY_CANT_CREATE_OS_THREADS") {
        for (CK_FLAGS flags : {CK_FLAGS(CKF_OS_LOCKING_OK), CK_FLAGS(0), CK_FLAGS(CKF_LIBRARY_CANT_CREATE_OS_THREADS)}) {
            INFO("flags " << flags);
            args.flags = flags;
            Initialized init(&args);
            CHECK(slot_list().size() == 4);
        }
    }
    SECTION("C_Finalize(pReserved != NULL): CKR_ARGUMENTS_BAD, still initialised") {
        Initialized init;
        int reserved = 0;
        CHECK_RV(p11()->C_Finalize(&reserved), CKR_ARGUMENTS_BAD);
        CHECK(slot_list().size() == 4);
    }
}

TEST_CASE("C_GetInfo / C_GetSlotInfo / C_GetTokenInfo: values and blank-padded text", "[args]") {
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

TEST_CASE("invalid slot: CKR_SLOT_ID_INVALID", "[args]") {
    Initialized init;
    for (const Call& c : all_calls()) {
        if (c.takes != Call::slot)
            continue;
        INFO(c.name);
        CHECK_RV(c.call(bad_slot, 0), CKR_SLOT_ID_INVALID);
        CHECK_RV(c.call(slot_list().size(), 0), CKR_SLOT_ID_INVALID);  // one past the last
    }
}

TEST_CASE("invalid and closed sessions: CKR_SESSION_HANDLE_INVALID; handles never reused", "[args]") {
    Initialized init;
    const CK_SLOT_ID slot = slot_of("ec256");
    std::set<CK_SESSION_HANDLE> seen;
    CK_SESSION_HANDLE closed = CK_INVALID_HANDLE;
    for (int i = 0; i < 3; ++i) {
        CK_SESSION_HANDLE h = CK_INVALID_HANDLE;
        REQUIRE_RV(p11()->C_OpenSession(slot, CKF_SERIAL_SESSION, nullptr, nullptr, &h), CKR_OK);
        CHECK(h != CK_INVALID_HANDLE);
        CHECK(seen.insert(h).second);
        REQUIRE_RV(p11()->C_CloseSession(h), CKR_OK);
        closed = h;
    }
    Session open(slot);  // an open session on the same token must not make a closed handle valid
    CHECK(seen.count(open.handle()) == 0);

    for (CK_SESSION_HANDLE h : {bad_session, closed, CK_SESSION_HANDLE(CK_INVALID_HANDLE)}) {
        for (const Call& c : all_calls()) {
            if (c.takes != Call::session)
                continue;
            INFO(c.name << " with session handle " << h);
            const CK_RV rv = c.call(0, h);
            if (c.stub == 0)
                CHECK(Rv{rv} == Rv{CKR_SESSION_HANDLE_INVALID});
            else
                CHECK((rv == CKR_SESSION_HANDLE_INVALID || c.refuses(rv)));
        }
    }
    CHECK_RV(p11()->C_CloseSession(closed), CKR_SESSION_HANDLE_INVALID);

    SECTION("C_CloseAllSessions closes only that slot's sessions") {
        Session other(slot_of("rsa2048"));
        Session second(slot);
        CHECK_RV(p11()->C_CloseAllSessions(slot), CKR_OK);
        CK_SESSION_INFO info;
        CHECK_RV(p11()->C_GetSessionInfo(open, &info), CKR_SESSION_HANDLE_INVALID);
        CHECK_RV(p11()->C_GetSessionInfo(second, &info), CKR_SESSION_HANDLE_INVALID);
        CHECK_RV(p11()->C_GetSessionInfo(other, &info), CKR_OK);
    }
    SECTION("after C_Finalize + C_Initialize, old handles stay invalid and are not handed out again") {
        const CK_SESSION_HANDLE old = open.handle();
        REQUIRE_RV(p11()->C_Finalize(nullptr), CKR_OK);
        REQUIRE_RV(p11()->C_Initialize(nullptr), CKR_OK);
        CK_SESSION_INFO info;
        CHECK_RV(p11()->C_GetSessionInfo(old, &info), CKR_SESSION_HANDLE_INVALID);
        Session fresh(slot);
        CHECK(fresh.handle() != old);
        CHECK(seen.count(fresh.handle()) == 0);
    }
}

TEST_CASE("C_OpenSession and C_GetSessionInfo", "[args]") {
    Initialized init;
    const CK_SLOT_ID slot = slot_of("ec256");
    CK_SESSION_HANDLE h = CK_INVALID_HANDLE;
    // PKCS#11 2.40, 5.6: "For legacy reasons, the CKF_SERIAL_SESSION bit
    // MUST always be set; if a call to C_OpenSession does not have this bit
    // set, the call should return unsuccessfully with the error code
    // CKR_SESSION_PARALLEL_NOT_SUPPORTED."
    CHECK_RV(p11()->C_OpenSession(slot, 0, nullptr, nullptr, &h), CKR_SESSION_PARALLEL_NOT_SUPPORTED);
    CHECK_RV(p11()->C_OpenSession(slot, CKF_RW_SESSION, nullptr, nullptr, &h), CKR_SESSION_PARALLEL_NOT_SUPPORTED);
    CHECK_RV(p11()->C_OpenSession(slot, CKF_SERIAL_SESSION, nullptr, nullptr, nullptr), CKR_ARGUMENTS_BAD);

    Session ro(slot);
    Session rw(slot, CKF_RW_SESSION);
    CK_SESSION_INFO info;
    REQUIRE_RV(p11()->C_GetSessionInfo(ro, &info), CKR_OK);
    CHECK(info.slotID == slot);
    CHECK(info.state == CKS_RO_PUBLIC_SESSION);
    CHECK((info.flags & CKF_SERIAL_SESSION));
    CHECK_FALSE((info.flags & CKF_RW_SESSION));
    REQUIRE_RV(p11()->C_GetSessionInfo(rw, &info), CKR_OK);
    CHECK(info.state == CKS_RW_PUBLIC_SESSION);
    CHECK((info.flags & CKF_RW_SESSION));
    CHECK_RV(p11()->C_GetSessionInfo(ro, nullptr), CKR_ARGUMENTS_BAD);

    CK_TOKEN_INFO ti;
    REQUIRE_RV(p11()->C_GetTokenInfo(slot, &ti), CKR_OK);
    CHECK(ti.ulSessionCount == 2);
    CHECK(ti.ulRwSessionCount == 1);
}

TEST_CASE("NULL output pointers: CKR_ARGUMENTS_BAD", "[args]") {
    Initialized init;
    const TestKey& k = key("ec256");
    const CK_SLOT_ID slot = slot_of(k.name);
    Session s(slot);
    const CK_OBJECT_HANDLE priv = private_key(s, k);
    CK_ULONG n = 0;
    CK_MECHANISM ecdsa{CKM_ECDSA, nullptr, 0};
    CK_BYTE data[32] = {1};
    CK_BYTE sig[256];
    CK_OBJECT_HANDLE objects[4];

    CHECK_RV(p11()->C_GetInfo(nullptr), CKR_ARGUMENTS_BAD);
    CHECK_RV(p11()->C_GetSlotList(CK_TRUE, nullptr, nullptr), CKR_ARGUMENTS_BAD);
    CK_SLOT_ID slots[8];
    CHECK_RV(p11()->C_GetSlotList(CK_FALSE, slots, nullptr), CKR_ARGUMENTS_BAD);
    CHECK_RV(p11()->C_GetSlotInfo(slot, nullptr), CKR_ARGUMENTS_BAD);
    CHECK_RV(p11()->C_GetTokenInfo(slot, nullptr), CKR_ARGUMENTS_BAD);
    CHECK_RV(p11()->C_GetMechanismList(slot, nullptr, nullptr), CKR_ARGUMENTS_BAD);
    CHECK_RV(p11()->C_GetMechanismInfo(slot, CKM_ECDSA, nullptr), CKR_ARGUMENTS_BAD);
    CHECK_RV(p11()->C_GetObjectSize(s, priv, nullptr), CKR_ARGUMENTS_BAD);
    CHECK_RV(p11()->C_GetAttributeValue(s, priv, nullptr, 1), CKR_ARGUMENTS_BAD);
    CHECK_RV(p11()->C_FindObjectsInit(s, nullptr, 1), CKR_ARGUMENTS_BAD);
    CHECK_RV(p11()->C_Login(s, CKU_USER, nullptr, 4), CKR_ARGUMENTS_BAD);
    CHECK_RV(p11()->C_SignInit(s, nullptr, priv), CKR_ARGUMENTS_BAD);

    REQUIRE_RV(p11()->C_FindObjectsInit(s, nullptr, 0), CKR_OK);
    CHECK_RV(p11()->C_FindObjects(s, nullptr, 4, &n), CKR_ARGUMENTS_BAD);
    CHECK_RV(p11()->C_FindObjects(s, objects, 4, nullptr), CKR_ARGUMENTS_BAD);
    CHECK_RV(p11()->C_FindObjectsFinal(s), CKR_OK);

    // C_Sign and C_SignFinal: an error other than CKR_BUFFER_TOO_SMALL ends
    // the operation (PKCS#11 2.40, 5.11, C_Sign: "A call to C_Sign always
    // terminates the active signing operation unless it returns
    // CKR_BUFFER_TOO_SMALL or is a successful call ... to determine the
    // length of the buffer needed").
    REQUIRE_RV(p11()->C_SignInit(s, &ecdsa, priv), CKR_OK);
    n = sizeof sig;
    CHECK_RV(p11()->C_Sign(s, data, sizeof data, sig, nullptr), CKR_ARGUMENTS_BAD);
    CHECK_RV(p11()->C_Sign(s, data, sizeof data, sig, &n), CKR_OPERATION_NOT_INITIALIZED);
    REQUIRE_RV(p11()->C_SignInit(s, &ecdsa, priv), CKR_OK);
    CHECK_RV(p11()->C_Sign(s, nullptr, sizeof data, sig, &n), CKR_ARGUMENTS_BAD);
    CHECK_RV(p11()->C_Sign(s, data, sizeof data, sig, &n), CKR_OPERATION_NOT_INITIALIZED);

    CK_MECHANISM sha256{CKM_ECDSA_SHA256, nullptr, 0};
    REQUIRE_RV(p11()->C_SignInit(s, &sha256, priv), CKR_OK);
    // "A call to C_SignUpdate which results in an error terminates the current signature operation."
    CHECK_RV(p11()->C_SignUpdate(s, nullptr, 5), CKR_ARGUMENTS_BAD);
    CHECK_RV(p11()->C_SignFinal(s, sig, &n), CKR_OPERATION_NOT_INITIALIZED);
    REQUIRE_RV(p11()->C_SignInit(s, &sha256, priv), CKR_OK);
    CHECK_RV(p11()->C_SignUpdate(s, data, sizeof data), CKR_OK);
    CHECK_RV(p11()->C_SignFinal(s, sig, nullptr), CKR_ARGUMENTS_BAD);
    CHECK_RV(p11()->C_SignFinal(s, sig, &n), CKR_OPERATION_NOT_INITIALIZED);
    // A NULL pointer with a zero length is fine (empty data).
    REQUIRE_RV(p11()->C_SignInit(s, &sha256, priv), CKR_OK);
    CHECK_RV(p11()->C_SignUpdate(s, nullptr, 0), CKR_OK);
    n = sizeof sig;
    CHECK_RV(p11()->C_SignFinal(s, sig, &n), CKR_OK);
    CHECK(verify_ecdsa_message(k, "SHA256", {}, Bytes(sig, sig + n)));
}

TEST_CASE("invalid object handles: CKR_OBJECT_HANDLE_INVALID and CKR_KEY_HANDLE_INVALID", "[args]") {
    Initialized init;
    const KeySession ec(key("ec256"));
    const KeySession rsa(key("rsa2048"));
    CK_OBJECT_CLASS cls;
    CK_ATTRIBUTE a{CKA_CLASS, &cls, sizeof cls};
    CK_ULONG size = 0;
    CK_MECHANISM ecdsa{CKM_ECDSA, nullptr, 0};

    for (CK_OBJECT_HANDLE o : {bad_object, CK_OBJECT_HANDLE(CK_INVALID_HANDLE), rsa.priv /* another token's */}) {
        INFO("object " << o);
        CHECK_RV(p11()->C_GetAttributeValue(ec, o, &a, 1), CKR_OBJECT_HANDLE_INVALID);
        CHECK_RV(p11()->C_GetObjectSize(ec, o, &size), CKR_OBJECT_HANDLE_INVALID);
        CHECK_RV(p11()->C_SignInit(ec, &ecdsa, o), CKR_KEY_HANDLE_INVALID);
    }
    CHECK_RV(p11()->C_GetAttributeValue(ec, ec.priv, &a, 1), CKR_OK);
    CHECK(cls == CKO_PRIVATE_KEY);
    CHECK_RV(p11()->C_GetObjectSize(ec, ec.priv, &size), CKR_OK);
    CHECK(size > 0);

    SECTION("a public key or certificate cannot sign: CKR_KEY_FUNCTION_NOT_PERMITTED") {
        // PKCS#11 2.40, 5.1: CKR_KEY_FUNCTION_NOT_PERMITTED: "An attempt
        // has been made to use a key for a cryptographic purpose that the
        // key's attributes are not set to allow it to do."
        CHECK_RV(p11()->C_SignInit(ec, &ecdsa, find_one(ec, CKO_PUBLIC_KEY)), CKR_KEY_FUNCTION_NOT_PERMITTED);
        const CK_RV rv = p11()->C_SignInit(ec, &ecdsa, find_one(ec, CKO_CERTIFICATE));
        CHECK((rv == CKR_KEY_HANDLE_INVALID || rv == CKR_KEY_FUNCTION_NOT_PERMITTED || rv == CKR_KEY_TYPE_INCONSISTENT));
    }
    SECTION("object handles do not survive C_Finalize") {
        REQUIRE_RV(p11()->C_Finalize(nullptr), CKR_OK);
        REQUIRE_RV(p11()->C_Initialize(nullptr), CKR_OK);
        Session again(slot_of("ec256"));
        CHECK_RV(p11()->C_GetAttributeValue(again, ec.priv, &a, 1), CKR_OBJECT_HANDLE_INVALID);
        CHECK(private_key(again, key("ec256")) != ec.priv);
    }
}

TEST_CASE("size queries: C_GetSlotList and C_GetMechanismList", "[args]") {
    Initialized init;
    for (CK_BBOOL present : {CK_BBOOL(CK_TRUE), CK_BBOOL(CK_FALSE)}) {
        CK_ULONG n = 0;
        REQUIRE_RV(p11()->C_GetSlotList(present, nullptr, &n), CKR_OK);
        CHECK(n == 4);
        std::vector<CK_SLOT_ID> slots(8, 0xdead);
        CK_ULONG short_n = 3;
        CHECK_RV(p11()->C_GetSlotList(present, slots.data(), &short_n), CKR_BUFFER_TOO_SMALL);
        CHECK(short_n == 4);
        CK_ULONG zero = 0;
        CHECK_RV(p11()->C_GetSlotList(present, slots.data(), &zero), CKR_BUFFER_TOO_SMALL);
        CHECK(zero == 4);
        CK_ULONG big = 8;
        CHECK_RV(p11()->C_GetSlotList(present, slots.data(), &big), CKR_OK);
        CHECK(big == 4);
        CHECK(std::set<CK_SLOT_ID>(slots.begin(), slots.begin() + 4).size() == 4);
    }
    const CK_SLOT_ID slot = slot_of("rsa2048");
    CK_ULONG n = 0;
    REQUIRE_RV(p11()->C_GetMechanismList(slot, nullptr, &n), CKR_OK);
    REQUIRE(n > 1);
    std::vector<CK_MECHANISM_TYPE> list(n + 2, 0xdead);
    CK_ULONG short_n = n - 1;
    CHECK_RV(p11()->C_GetMechanismList(slot, list.data(), &short_n), CKR_BUFFER_TOO_SMALL);
    CHECK(short_n == n);
    CK_ULONG big = n + 2;
    CHECK_RV(p11()->C_GetMechanismList(slot, list.data(), &big), CKR_OK);
    CHECK(big == n);
}

TEST_CASE("size queries: C_Sign and C_SignFinal keep the operation until a real signature", "[args]") {
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
        CHECK((k.rsa ? verify_rsa_message(k, "SHA256", false, data, sig) : verify_ecdsa_message(k, "SHA256", data, sig)));
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
          "[args]") {
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

TEST_CASE("mechanism checks at C_SignInit", "[args]") {
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
    Bytes d(31, 1);  // CKM_RSA_PKCS_PSS takes the digest: its length must match
    Bytes sig(256);
    CK_ULONG n = sig.size();
    CHECK_RV(p11()->C_Sign(rsa, d.data(), d.size(), sig.data(), &n), CKR_DATA_LEN_RANGE);

    // CKM_ECDSA signs a digest: empty input is no digest.
    m = {CKM_ECDSA, nullptr, 0};
    REQUIRE_RV(p11()->C_SignInit(ec, &m, ec.priv), CKR_OK);
    n = sig.size();
    CHECK(p11()->C_Sign(ec, d.data(), 0, sig.data(), &n) != CKR_OK);
}

TEST_CASE("C_VerifyInit .. C_VerifyFinal: argument checks in the spec's order; operation state", "[args]") {
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
                            CK_ULONG signature_len) { return p11()->C_Verify(s, in, in_len, signature, signature_len); };
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

TEST_CASE("C_GetMechanismList and C_GetMechanismInfo per token", "[args]") {
    Initialized init;
    const std::set<CK_MECHANISM_TYPE> rsa_mechs = {
        CKM_RSA_PKCS,        CKM_SHA1_RSA_PKCS,       CKM_SHA256_RSA_PKCS,     CKM_SHA384_RSA_PKCS,
        CKM_SHA512_RSA_PKCS, CKM_RSA_PKCS_PSS,        CKM_SHA256_RSA_PKCS_PSS, CKM_SHA384_RSA_PKCS_PSS,
        CKM_SHA512_RSA_PKCS_PSS};
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

TEST_CASE("objects: the attributes a client reads equal the .pub; CKA_ID", "[args]") {
    Initialized init;
    std::vector<Bytes> ids;
    for (const TestKey& k : keys()) {
        INFO(k.name);
        Session s(slot_of(k.name));
        const CK_OBJECT_HANDLE pub = find_one(s, CKO_PUBLIC_KEY);
        const CK_OBJECT_HANDLE priv = private_key(s, k);
        const Bytes id = attribute(s, pub, CKA_ID);
        CHECK(id.size() == 20);
        CHECK(attribute(s, priv, CKA_ID) == id);
        CHECK(id == subject_key_identifier(k));
        ids.push_back(id);

        for (CK_OBJECT_HANDLE o : {pub, priv}) {
            CHECK(ulong_attribute(s, o, CKA_KEY_TYPE) == (k.rsa ? CKK_RSA : CKK_EC));
            CHECK(attribute(s, o, CKA_LABEL) == bytes(k.name));
            CHECK(bool_attribute(s, o, CKA_TOKEN));
            CHECK_FALSE(bool_attribute(s, o, CKA_MODIFIABLE));
            CHECK(attribute(s, o, CKA_PUBLIC_KEY_INFO) == k.spki_der);
            if (k.rsa) {
                CHECK(attribute(s, o, CKA_MODULUS) == rsa_param(k, OSSL_PKEY_PARAM_RSA_N));
                CHECK(attribute(s, o, CKA_PUBLIC_EXPONENT) == rsa_param(k, OSSL_PKEY_PARAM_RSA_E));
                CHECK(ulong_attribute(s, o, CKA_MODULUS_BITS) == k.bits);
            } else {
                CHECK(attribute(s, o, CKA_EC_PARAMS) == ec_params_der(k));
            }
        }
        CHECK_FALSE(bool_attribute(s, pub, CKA_PRIVATE));
        CHECK(bool_attribute(s, pub, CKA_VERIFY));
        CHECK_FALSE(bool_attribute(s, pub, CKA_ENCRYPT));
        if (!k.rsa)
            CHECK(attribute(s, pub, CKA_EC_POINT) == ec_point_der(k));
        CHECK(bool_attribute(s, priv, CKA_PRIVATE) == !k.pin.empty());
        CHECK(bool_attribute(s, priv, CKA_SIGN));
        CHECK(bool_attribute(s, priv, CKA_SENSITIVE));
        CHECK_FALSE(bool_attribute(s, priv, CKA_EXTRACTABLE));
        CHECK(bool_attribute(s, priv, CKA_ALWAYS_SENSITIVE));
        CHECK(bool_attribute(s, priv, CKA_NEVER_EXTRACTABLE));
        CHECK(bool_attribute(s, priv, CKA_LOCAL));
        CHECK_FALSE(bool_attribute(s, priv, CKA_DECRYPT));
        CHECK_FALSE(bool_attribute(s, priv, CKA_ALWAYS_AUTHENTICATE));

        CK_OBJECT_CLASS cert_class = CKO_CERTIFICATE;
        CK_ATTRIBUTE t{CKA_CLASS, &cert_class, sizeof cert_class};
        const auto certs = find(s, {t});
        CHECK(certs.size() == (k.has_certificate ? 1u : 0u));
        if (k.has_certificate && certs.size() == 1) {
            CHECK(attribute(s, certs[0], CKA_ID) == id);
            CHECK(attribute(s, certs[0], CKA_VALUE) == k.certificate_der);
            CHECK(ulong_attribute(s, certs[0], CKA_CERTIFICATE_TYPE) == CKC_X_509);
        }
    }
    for (std::size_t i = 0; i < ids.size(); ++i)
        for (std::size_t j = i + 1; j < ids.size(); ++j)
            CHECK(ids[i] != ids[j]);

    SECTION("CKA_ID is the same in the next C_Initialize") {
        REQUIRE_RV(p11()->C_Finalize(nullptr), CKR_OK);
        REQUIRE_RV(p11()->C_Initialize(nullptr), CKR_OK);
        for (std::size_t i = 0; i < keys().size(); ++i) {
            Session s(slot_of(keys()[i].name));
            CHECK(attribute(s, find_one(s, CKO_PUBLIC_KEY), CKA_ID) == ids[i]);
        }
    }
}

TEST_CASE("C_GetAttributeValue: the per-attribute rules", "[args]") {
    Initialized init;
    for_each_private_key({"ec256", "rsa2048"}, [](const TestKey& k, Session& s, CK_OBJECT_HANDLE priv) {
        const CK_ATTRIBUTE_TYPE secret = k.rsa ? CKA_PRIVATE_EXPONENT : CKA_VALUE;

        CK_OBJECT_CLASS cls = 0xdead;
        CK_KEY_TYPE type = 0xdead;
        CK_BYTE secret_buf[1024];
        CK_BYTE unknown_buf[16];
        CK_BYTE label_buf[2];
        CK_ATTRIBUTE t[] = {
            {CKA_CLASS, &cls, sizeof cls},
            {secret, secret_buf, sizeof secret_buf},
            {unknown_attribute, unknown_buf, sizeof unknown_buf},
            {CKA_LABEL, label_buf, sizeof label_buf},
            {CKA_ID, nullptr, 0},
            {CKA_KEY_TYPE, &type, sizeof type},
        };
        // PKCS#11 2.40, 5.7, C_GetAttributeValue: every attribute is
        // processed; any of the three "errors" may be returned.
        const CK_RV rv = p11()->C_GetAttributeValue(s, priv, t, 6);
        CHECK((rv == CKR_ATTRIBUTE_SENSITIVE || rv == CKR_ATTRIBUTE_TYPE_INVALID || rv == CKR_BUFFER_TOO_SMALL));
        CHECK(t[0].ulValueLen == sizeof cls);
        CHECK(cls == CKO_PRIVATE_KEY);
        CHECK(t[1].ulValueLen == CK_UNAVAILABLE_INFORMATION);  // rule 1: sensitive
        CHECK(t[2].ulValueLen == CK_UNAVAILABLE_INFORMATION);  // rule 2: no such attribute
        CHECK(t[3].ulValueLen == CK_UNAVAILABLE_INFORMATION);  // rule 5: too small
        CHECK(t[4].ulValueLen == 20);                          // rule 3: the length
        CHECK(t[5].ulValueLen == sizeof type);                 // rule 4: copied
        CHECK(type == (k.rsa ? CKK_RSA : CKK_EC));

        // Each rule alone gives its own code.
        CK_ATTRIBUTE one{secret, secret_buf, sizeof secret_buf};
        CHECK_RV(p11()->C_GetAttributeValue(s, priv, &one, 1), CKR_ATTRIBUTE_SENSITIVE);
        CHECK(one.ulValueLen == CK_UNAVAILABLE_INFORMATION);
        one = {secret, nullptr, 0};
        CHECK_RV(p11()->C_GetAttributeValue(s, priv, &one, 1), CKR_ATTRIBUTE_SENSITIVE);
        CHECK(one.ulValueLen == CK_UNAVAILABLE_INFORMATION);
        if (k.rsa) {
            for (CK_ATTRIBUTE_TYPE a : {CKA_PRIME_1, CKA_PRIME_2, CKA_EXPONENT_1, CKA_EXPONENT_2, CKA_COEFFICIENT}) {
                one = {a, secret_buf, sizeof secret_buf};
                CHECK_RV(p11()->C_GetAttributeValue(s, priv, &one, 1), CKR_ATTRIBUTE_SENSITIVE);
            }
        }
        one = {unknown_attribute, unknown_buf, sizeof unknown_buf};
        CHECK_RV(p11()->C_GetAttributeValue(s, priv, &one, 1), CKR_ATTRIBUTE_TYPE_INVALID);
        CHECK(one.ulValueLen == CK_UNAVAILABLE_INFORMATION);
        one = {CKA_LABEL, label_buf, sizeof label_buf};
        CHECK_RV(p11()->C_GetAttributeValue(s, priv, &one, 1), CKR_BUFFER_TOO_SMALL);
        CHECK(one.ulValueLen == CK_UNAVAILABLE_INFORMATION);
        // The public key has no private parts at all.
        one = {secret, secret_buf, sizeof secret_buf};
        CHECK_RV(p11()->C_GetAttributeValue(s, find_one(s, CKO_PUBLIC_KEY), &one, 1), CKR_ATTRIBUTE_TYPE_INVALID);
        // An empty template is fine.
        CHECK_RV(p11()->C_GetAttributeValue(s, priv, nullptr, 0), CKR_OK);
    });
}

TEST_CASE("C_FindObjects: templates and operation state", "[args]") {
    Initialized init;
    const TestKey& k = key("ec256");  // public key, private key, certificate
    Session s(slot_of(k.name));
    const auto all = find(s);
    CHECK(all.size() == 3);
    CHECK(std::set<CK_OBJECT_HANDLE>(all.begin(), all.end()).size() == 3);

    CK_OBJECT_CLASS cls = CKO_PUBLIC_KEY;
    CHECK(find(s, {{CKA_CLASS, &cls, sizeof cls}}).size() == 1);
    cls = CKO_PRIVATE_KEY;
    CHECK(find(s, {{CKA_CLASS, &cls, sizeof cls}}).size() == 1);
    cls = CKO_SECRET_KEY;
    CHECK(find(s, {{CKA_CLASS, &cls, sizeof cls}}).empty());

    Bytes id = attribute(s, all[0], CKA_ID);
    CHECK(find(s, {{CKA_ID, id.data(), id.size()}}).size() == 3);
    Bytes label = bytes(k.name);
    CHECK(find(s, {{CKA_LABEL, label.data(), label.size()}}).size() == 3);
    Bytes other_label = bytes("ec25");
    CHECK(find(s, {{CKA_LABEL, other_label.data(), other_label.size()}}).empty());
    id[0] ^= 1;
    CHECK(find(s, {{CKA_ID, id.data(), id.size()}}).empty());
    id[0] ^= 1;

    // What ssh-pkcs11.c asks for: {CLASS, ID, SIGN}.
    cls = CKO_PRIVATE_KEY;
    CK_BBOOL yes = CK_TRUE;
    const auto ssh = find(s, {{CKA_CLASS, &cls, sizeof cls}, {CKA_ID, id.data(), id.size()}, {CKA_SIGN, &yes, 1}});
    CHECK(ssh.size() == 1);
    CK_KEY_TYPE kt = CKK_RSA;
    CHECK(find(s, {{CKA_CLASS, &cls, sizeof cls}, {CKA_KEY_TYPE, &kt, sizeof kt}}).empty());
    // A value of the wrong size matches nothing.
    CHECK(find(s, {{CKA_CLASS, &cls, 1}}).empty());
    // A sensitive attribute never matches.
    CK_BYTE zero[32] = {};
    CHECK(find(s, {{CKA_VALUE, zero, sizeof zero}}).empty());

    // An attribute the token does not know: no match (or, also allowed by
    // 2.40, CKR_ATTRIBUTE_TYPE_INVALID from C_FindObjectsInit).
    CK_ATTRIBUTE unknown{unknown_attribute, zero, 4};
    const CK_RV rv = p11()->C_FindObjectsInit(s, &unknown, 1);
    if (rv == CKR_OK) {
        CK_OBJECT_HANDLE h[4];
        CK_ULONG n = 99;
        CHECK_RV(p11()->C_FindObjects(s, h, 4, &n), CKR_OK);
        CHECK(n == 0);
        CHECK_RV(p11()->C_FindObjectsFinal(s), CKR_OK);
    } else {
        CHECK(Rv{rv} == Rv{CKR_ATTRIBUTE_TYPE_INVALID});
    }

    // NULL pValue with a length.
    CK_ATTRIBUTE null_value{CKA_LABEL, nullptr, 5};
    CHECK_RV(p11()->C_FindObjectsInit(s, &null_value, 1), CKR_ARGUMENTS_BAD);

    // Operation state.
    CK_OBJECT_HANDLE h[4];
    CK_ULONG n = 0;
    CHECK_RV(p11()->C_FindObjects(s, h, 4, &n), CKR_OPERATION_NOT_INITIALIZED);
    CHECK_RV(p11()->C_FindObjectsFinal(s), CKR_OPERATION_NOT_INITIALIZED);
    REQUIRE_RV(p11()->C_FindObjectsInit(s, nullptr, 0), CKR_OK);
    CHECK_RV(p11()->C_FindObjectsInit(s, nullptr, 0), CKR_OPERATION_ACTIVE);
    CHECK_RV(p11()->C_FindObjects(s, h, 0, &n), CKR_OK);  // asking for none
    CHECK(n == 0);
    CHECK_RV(p11()->C_FindObjects(s, h, 1, &n), CKR_OK);
    CHECK(n == 1);
    CHECK_RV(p11()->C_FindObjects(s, h, 4, &n), CKR_OK);
    CHECK(n == 2);
    CHECK_RV(p11()->C_FindObjects(s, h, 4, &n), CKR_OK);
    CHECK(n == 0);
    CHECK_RV(p11()->C_FindObjectsFinal(s), CKR_OK);
    CHECK_RV(p11()->C_FindObjects(s, h, 4, &n), CKR_OPERATION_NOT_INITIALIZED);
    // A find and a sign can run at the same time in one session.
    REQUIRE_RV(p11()->C_FindObjectsInit(s, nullptr, 0), CKR_OK);
    CK_MECHANISM m{CKM_ECDSA, nullptr, 0};
    CHECK_RV(p11()->C_SignInit(s, &m, ssh.at(0)), CKR_OK);
    CHECK_RV(p11()->C_FindObjects(s, h, 4, &n), CKR_OK);
    CHECK(n == 3);
    CHECK_RV(p11()->C_FindObjectsFinal(s), CKR_OK);
}

TEST_CASE("a read-only TPM token: write functions CKR_TOKEN_WRITE_PROTECTED; others not supported", "[args]") {
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

TEST_CASE("key discovery: TPMKEY_KEYS with files; a missing path and a broken key file are skipped", "[args]") {
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

TEST_CASE("no TPM reachable: listing still works; signing fails cleanly", "[args]") {
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
