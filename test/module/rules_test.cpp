// The general rules of PKCS#11 2.40 through the built module: the function
// list, module state (C_Initialize, C_Finalize, CKR_CRYPTOKI_NOT_INITIALIZED
// everywhere), invalid slots, invalid and closed sessions, NULL pointers,
// the two-call size query of the slot and mechanism lists.
#include "calls.hpp"
#include "harness.hpp"

#include <mutex>
#include <set>

using namespace mt;

namespace {

void check_not_initialized_everywhere() {
    for (const Call& c : all_calls()) {
        INFO(c.name);
        // Also the functions the token does not support (PKCS#11 2.40, 5.4).
        CHECK(Rv{c.call(0, 1)} == Rv{CKR_CRYPTOKI_NOT_INITIALIZED});
    }
    CHECK_RV(p11()->C_Finalize(nullptr), CKR_CRYPTOKI_NOT_INITIALIZED);
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

TEST_CASE("C_GetFunctionList: the 2.40 list; NULL refused", "[rules]") {
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

TEST_CASE("every function: CKR_CRYPTOKI_NOT_INITIALIZED before C_Initialize and after C_Finalize", "[rules]") {
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

TEST_CASE("C_Initialize and C_Finalize arguments", "[rules]") {
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
        for (CK_FLAGS flags :
             {CK_FLAGS(CKF_OS_LOCKING_OK), CK_FLAGS(0), CK_FLAGS(CKF_LIBRARY_CANT_CREATE_OS_THREADS)}) {
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

TEST_CASE("invalid slot: CKR_SLOT_ID_INVALID", "[rules]") {
    Initialized init;
    for (const Call& c : all_calls()) {
        if (c.takes != Call::slot)
            continue;
        INFO(c.name);
        CHECK_RV(c.call(bad_slot, 0), CKR_SLOT_ID_INVALID);
        CHECK_RV(c.call(slot_list().size(), 0), CKR_SLOT_ID_INVALID);  // one past the last
    }
}

TEST_CASE("invalid and closed sessions: CKR_SESSION_HANDLE_INVALID; handles never reused", "[rules]") {
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

TEST_CASE("C_OpenSession and C_GetSessionInfo", "[rules]") {
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

TEST_CASE("NULL output pointers: CKR_ARGUMENTS_BAD", "[rules]") {
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

TEST_CASE("size queries: C_GetSlotList and C_GetMechanismList", "[rules]") {
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

TEST_CASE("argument order: the slot or session handle, then NULL pointers, then object handles and values", "[rules]") {
    // provider/module/entry_points.cpp says the order; where two arguments
    // are wrong, the earlier one answers.
    Initialized init;
    const TestKey& k = key("ec256");
    const CK_SLOT_ID slot = slot_of(k.name);
    Session s(slot);
    CK_ULONG n = 0;
    CHECK_RV(p11()->C_GetSlotInfo(bad_slot, nullptr), CKR_SLOT_ID_INVALID);
    CHECK_RV(p11()->C_GetTokenInfo(bad_slot, nullptr), CKR_SLOT_ID_INVALID);
    CHECK_RV(p11()->C_GetMechanismList(bad_slot, nullptr, nullptr), CKR_SLOT_ID_INVALID);
    CHECK_RV(p11()->C_GetMechanismInfo(bad_slot, CKM_SHA256_HMAC, nullptr), CKR_SLOT_ID_INVALID);
    CHECK_RV(p11()->C_GetMechanismInfo(slot, CKM_SHA256_HMAC, nullptr), CKR_ARGUMENTS_BAD);
    CHECK_RV(p11()->C_OpenSession(bad_slot, 0, nullptr, nullptr, nullptr), CKR_SLOT_ID_INVALID);
    CHECK_RV(p11()->C_OpenSession(slot, 0, nullptr, nullptr, nullptr), CKR_ARGUMENTS_BAD);
    CHECK_RV(p11()->C_GetSessionInfo(bad_session, nullptr), CKR_SESSION_HANDLE_INVALID);
    CHECK_RV(p11()->C_Login(bad_session, CKU_USER, nullptr, 4), CKR_SESSION_HANDLE_INVALID);
    CHECK_RV(p11()->C_GetObjectSize(bad_session, bad_object, nullptr), CKR_SESSION_HANDLE_INVALID);
    CHECK_RV(p11()->C_GetObjectSize(s, bad_object, nullptr), CKR_ARGUMENTS_BAD);
    CHECK_RV(p11()->C_GetAttributeValue(s, bad_object, nullptr, 1), CKR_ARGUMENTS_BAD);
    CHECK_RV(p11()->C_SignInit(s, nullptr, bad_object), CKR_ARGUMENTS_BAD);
    CHECK_RV(p11()->C_FindObjects(s, nullptr, 4, &n), CKR_ARGUMENTS_BAD);  // before the operation state
}
