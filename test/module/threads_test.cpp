// Threads (CKF_OS_LOCKING_OK) and fork: concurrent signing on one and on
// several tokens, and a child that must call C_Initialize to get fresh state.
#include "harness.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <latch>
#include <mutex>
#include <thread>

using namespace mt;

namespace {

// Catch2 v2 assertions are not thread-safe: the threads collect their
// failures as text and the main thread checks them.
class Failures {
public:
    void add(const std::string& what) {
        std::lock_guard<std::mutex> lock(mutex_);
        list_.push_back(what);
    }
    std::vector<std::string> list() {
        std::lock_guard<std::mutex> lock(mutex_);
        return list_;
    }

private:
    std::mutex mutex_;
    std::vector<std::string> list_;
};

// One thread's work: its own session on `k`'s token, `rounds` signatures
// with alternating mechanisms, each verified by OpenSSL. No Catch2 macros.
void signer(const TestKey& k, CK_SLOT_ID slot, int id, int rounds, std::latch& start, Failures& failures) {
    const std::string me = k.name + " thread " + std::to_string(id) + ": ";
    start.arrive_and_wait();
    CK_SESSION_HANDLE s = CK_INVALID_HANDLE;
    CK_RV rv = p11()->C_OpenSession(slot, CKF_SERIAL_SESSION, nullptr, nullptr, &s);
    if (rv != CKR_OK)
        return failures.add(me + "C_OpenSession " + rv_name(rv));
    CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
    CK_ATTRIBUTE t{CKA_CLASS, &cls, sizeof cls};
    CK_OBJECT_HANDLE priv = CK_INVALID_HANDLE;
    CK_ULONG found = 0;
    if ((rv = p11()->C_FindObjectsInit(s, &t, 1)) != CKR_OK ||
        (rv = p11()->C_FindObjects(s, &priv, 1, &found)) != CKR_OK || (rv = p11()->C_FindObjectsFinal(s)) != CKR_OK ||
        found != 1) {
        p11()->C_CloseSession(s);
        return failures.add(me + "finding the private key: " + rv_name(rv) + ", found " + std::to_string(found));
    }
    for (int i = 0; i < rounds; ++i) {
        Bytes data(100);
        for (std::size_t j = 0; j < data.size(); ++j)
            data[j] = static_cast<std::uint8_t>(id * 31 + i * 7 + static_cast<int>(j));
        const bool pss = k.rsa && i % 2 == 1;
        CK_RSA_PKCS_PSS_PARAMS params{CKM_SHA256, CKG_MGF1_SHA256, 32};
        CK_MECHANISM m{k.rsa ? (pss ? CKM_SHA256_RSA_PKCS_PSS : CKM_SHA256_RSA_PKCS) : CKM_ECDSA_SHA256,
                       pss ? &params : nullptr, pss ? sizeof params : 0};
        Bytes sig(512);
        CK_ULONG n = sig.size();
        if ((rv = p11()->C_SignInit(s, &m, priv)) != CKR_OK) {
            failures.add(me + "C_SignInit " + rv_name(rv));
            break;
        }
        if (i % 3 == 2) {  // multi-part now and then
            rv = p11()->C_SignUpdate(s, data.data(), 40);
            if (rv == CKR_OK)
                rv = p11()->C_SignUpdate(s, data.data() + 40, data.size() - 40);
            if (rv == CKR_OK)
                rv = p11()->C_SignFinal(s, sig.data(), &n);
        } else {
            rv = p11()->C_Sign(s, data.data(), data.size(), sig.data(), &n);
        }
        if (rv != CKR_OK) {
            failures.add(me + "signature " + std::to_string(i) + ": " + rv_name(rv));
            break;
        }
        sig.resize(n);
        const bool ok =
            k.rsa ? verify_rsa_message(k, "SHA256", pss, data, sig) : verify_ecdsa_message(k, "SHA256", data, sig);
        if (!ok)
            failures.add(me + "signature " + std::to_string(i) + " does not verify");
    }
    if ((rv = p11()->C_CloseSession(s)) != CKR_OK)
        failures.add(me + "C_CloseSession " + rv_name(rv));
}

// A thread that only asks questions while the others sign.
void reader(int rounds, std::latch& start, Failures& failures) {
    start.arrive_and_wait();
    for (int i = 0; i < rounds; ++i) {
        CK_SLOT_ID slots[8];
        CK_ULONG n = 8;
        CK_RV rv = p11()->C_GetSlotList(CK_TRUE, slots, &n);
        if (rv != CKR_OK || n != 4)
            return failures.add("reader: C_GetSlotList " + rv_name(rv));
        for (CK_ULONG j = 0; j < n; ++j) {
            CK_TOKEN_INFO ti;
            CK_SESSION_HANDLE s;
            if ((rv = p11()->C_GetTokenInfo(slots[j], &ti)) != CKR_OK ||
                (rv = p11()->C_OpenSession(slots[j], CKF_SERIAL_SESSION, nullptr, nullptr, &s)) != CKR_OK)
                return failures.add("reader: " + rv_name(rv));
            if ((rv = p11()->C_CloseSession(s)) != CKR_OK)
                return failures.add("reader: C_CloseSession " + rv_name(rv));
        }
    }
}

// A deadlocked module must fail the test, not hang it until ctest's
// timeout: after `seconds`, say so and leave (with-swtpm then tears down).
class Watchdog {
public:
    explicit Watchdog(int seconds)
        : thread_([this, seconds] {
              std::unique_lock<std::mutex> lock(mutex_);
              if (!done_cv_.wait_for(lock, std::chrono::seconds(seconds), [this] { return done_; })) {
                  std::fprintf(stderr, "module-tests: the signing threads hang (deadlock in the module?)\n");
                  std::_Exit(3);
              }
          }) {}
    ~Watchdog() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            done_ = true;
        }
        done_cv_.notify_one();
        thread_.join();
    }
    Watchdog(const Watchdog&) = delete;
    Watchdog& operator=(const Watchdog&) = delete;

private:
    std::mutex mutex_;
    std::condition_variable done_cv_;
    bool done_ = false;
    std::thread thread_;
};

}  // namespace

TEST_CASE("8 threads sign at once on the same and on different tokens (CKF_OS_LOCKING_OK)", "[threads]") {
    CK_C_INITIALIZE_ARGS args{};
    args.flags = CKF_OS_LOCKING_OK;
    Initialized init(&args);
    // Three tokens: a PIN-less EC key and two keys with a PIN, one RSA. With
    // the parent that is one object more than a TPM without a resource
    // manager (this swtpm, /dev/tpm0) holds, so the module must also make
    // room in the TPM while other threads wait for it.
    const TestKey& ec = key("ec256");
    const TestKey& rsa = key("rsa3072");
    const TestKey& ec_pin = key("ec384");
    const CK_SLOT_ID ec_slot = slot_of(ec.name);
    const CK_SLOT_ID rsa_slot = slot_of(rsa.name);
    const CK_SLOT_ID ec_pin_slot = slot_of(ec_pin.name);
    Session keep(rsa_slot);  // hold the logins while the threads come and go
    login(keep, rsa);
    Session keep_ec(ec_pin_slot);
    login(keep_ec, ec_pin);

    Failures failures;
    const Watchdog watchdog(60);
    std::latch start(9);
    std::vector<std::thread> threads;
    for (int i = 0; i < 3; ++i)
        threads.emplace_back(signer, std::cref(ec), ec_slot, i, 12, std::ref(start), std::ref(failures));
    for (int i = 3; i < 6; ++i)
        threads.emplace_back(signer, std::cref(rsa), rsa_slot, i, 6, std::ref(start), std::ref(failures));
    for (int i = 6; i < 8; ++i)
        threads.emplace_back(signer, std::cref(ec_pin), ec_pin_slot, i, 10, std::ref(start), std::ref(failures));
    threads.emplace_back(reader, 20, std::ref(start), std::ref(failures));
    for (std::thread& t : threads)
        t.join();
    for (const std::string& f : failures.list())
        FAIL_CHECK(f);
    CHECK(failures.list().empty());

    CK_TOKEN_INFO ti;
    REQUIRE_RV(p11()->C_GetTokenInfo(ec_slot, &ti), CKR_OK);
    CHECK(ti.ulSessionCount == 0);
    REQUIRE_RV(p11()->C_GetTokenInfo(rsa_slot, &ti), CKR_OK);
    CHECK(ti.ulSessionCount == 1);
}

TEST_CASE("all four tokens in use at once", "[threads]") {
    // Every key loaded at the same time: parent + 4 keys is more than the 3
    // object slots of a TPM without a resource manager (this swtpm, or
    // /dev/tpm0; with /dev/tpmrm0 the kernel swaps them out). The module
    // must make room (TPM_RC_OBJECT_MEMORY is not the caller's problem).
    Initialized init;
    std::vector<std::unique_ptr<Session>> sessions;
    for (const TestKey& k : keys()) {
        INFO(k.name);
        sessions.push_back(std::make_unique<Session>(slot_of(k.name)));
        const CK_SESSION_HANDLE s = *sessions.back();
        const CK_OBJECT_HANDLE priv = private_key(s, k);
        const Bytes data = bytes("four at once");
        CK_MECHANISM m{k.rsa ? CKM_SHA256_RSA_PKCS : CKM_ECDSA_SHA256, nullptr, 0};
        REQUIRE_RV(p11()->C_SignInit(s, &m, priv), CKR_OK);
        Bytes sig(512);
        CK_ULONG n = sig.size();
        const CK_RV rv = p11()->C_Sign(s, const_cast<CK_BYTE_PTR>(data.data()), data.size(), sig.data(), &n);
        REQUIRE_RV(rv, CKR_OK);
        sig.resize(n);
        CHECK(
            (k.rsa ? verify_rsa_message(k, "SHA256", false, data, sig) : verify_ecdsa_message(k, "SHA256", data, sig)));
    }
    // And round again: every token still signs after the others took its room.
    for (std::size_t i = 0; i < keys().size(); ++i) {
        const TestKey& k = keys()[i];
        INFO(k.name << " again");
        const Bytes data = bytes("again");
        CK_MECHANISM m{k.rsa ? CKM_SHA256_RSA_PKCS : CKM_ECDSA_SHA256, nullptr, 0};
        const Bytes sig = sign(*sessions[i], find_one(*sessions[i], CKO_PRIVATE_KEY), m, data);
        CHECK(
            (k.rsa ? verify_rsa_message(k, "SHA256", false, data, sig) : verify_ecdsa_message(k, "SHA256", data, sig)));
    }
}

TEST_CASE("fork: the child starts uninitialised and gets fresh state from C_Initialize", "[fork]") {
    Initialized init;
    const TestKey& k = key("ec256");
    const CK_SLOT_ID slot = slot_of(k.name);
    Bytes id;
    {
        Session s(slot);
        id = attribute(s, find_one(s, CKO_PUBLIC_KEY), CKA_ID);
        const Bytes data = bytes("parent");
        CHECK(
            verify_ecdsa_message(k, "SHA256", data, sign(s, private_key(s, k), {CKM_ECDSA_SHA256, nullptr, 0}, data)));
    }  // last session closed: the key leaves the TPM, the parent key stays
    Session kept(slot_of("rsa2048"));

    std::fflush(nullptr);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        // The child: no Catch2 in here; the exit status says which step failed.
        CK_ULONG n = 0;
        CK_SESSION_INFO info;
        if (p11()->C_GetSlotList(CK_TRUE, nullptr, &n) != CKR_CRYPTOKI_NOT_INITIALIZED)
            ::_exit(10);
        if (p11()->C_GetSessionInfo(kept, &info) != CKR_CRYPTOKI_NOT_INITIALIZED)
            ::_exit(11);
        // The child's TPM commands, to see that it makes its own parent:
        // the parent process's saved contexts are not the child's.
        const std::string capture = (key_dir() / "fork-child.pcap").string();
        if (::setenv("TPMKEY_TCTI", ("pcap:" + swtpm_tcti()).c_str(), 1) != 0 ||
            ::setenv("TCTI_PCAP_FILE", capture.c_str(), 1) != 0)
            ::_exit(12);
        if (p11()->C_Initialize(nullptr) != CKR_OK)
            ::_exit(12);
        if (p11()->C_GetSlotList(CK_TRUE, nullptr, &n) != CKR_OK || n != 4)
            ::_exit(13);
        if (p11()->C_GetSessionInfo(kept, &info) != CKR_SESSION_HANDLE_INVALID)
            ::_exit(14);  // the parent's session is not the child's
        CK_SESSION_HANDLE s;
        if (p11()->C_OpenSession(slot, CKF_SERIAL_SESSION, nullptr, nullptr, &s) != CKR_OK)
            ::_exit(15);
        CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
        CK_ATTRIBUTE t{CKA_CLASS, &cls, sizeof cls};
        CK_OBJECT_HANDLE priv;
        if (p11()->C_FindObjectsInit(s, &t, 1) != CKR_OK || p11()->C_FindObjects(s, &priv, 1, &n) != CKR_OK || n != 1 ||
            p11()->C_FindObjectsFinal(s) != CKR_OK)
            ::_exit(16);
        Bytes child_id(64);
        CK_ATTRIBUTE a{CKA_ID, child_id.data(), child_id.size()};
        if (p11()->C_GetAttributeValue(s, priv, &a, 1) != CKR_OK)
            ::_exit(17);
        child_id.resize(a.ulValueLen);
        if (child_id != id)
            ::_exit(18);  // CKA_ID is stable across processes
        Bytes data = bytes("child");
        CK_MECHANISM m{CKM_ECDSA_SHA256, nullptr, 0};
        Bytes sig(64);
        n = sig.size();
        if (p11()->C_SignInit(s, &m, priv) != CKR_OK ||
            p11()->C_Sign(s, data.data(), data.size(), sig.data(), &n) != CKR_OK)
            ::_exit(19);
        sig.resize(n);
        if (!verify_ecdsa_message(k, "SHA256", data, sig))
            ::_exit(20);
        if (p11()->C_Finalize(nullptr) != CKR_OK)  // flushes the child's objects
            ::_exit(21);
        const std::string commands =
            run(shell_quote((fixtures_dir() / "count-tpm-commands").string()) + " -v " + shell_quote(capture));
        if (commands.find("CreatePrimary") == std::string::npos)
            ::_exit(22);
        ::_exit(0);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    INFO("child exit status " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1)
                              << " (10-11: not uninitialised, 12-17: C_Initialize or use failed, 18: other CKA_ID, "
                                 "19-20: signing failed, 21: C_Finalize failed, 22: no parent of its own)");
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);

    // The parent's state is untouched by the child.
    CK_SESSION_INFO info;
    CHECK_RV(p11()->C_GetSessionInfo(kept, &info), CKR_OK);
    Session s(slot);
    const Bytes data = bytes("parent again");
    CHECK(verify_ecdsa_message(k, "SHA256", data, sign(s, private_key(s, k), {CKM_ECDSA_SHA256, nullptr, 0}, data)));
}

TEST_CASE("fork while another thread is inside the module: the child's C_Initialize does not wait", "[fork]") {
    Initialized init;
    const TestKey& k = key("ec256");
    const CK_SLOT_ID slot = slot_of(k.name);
    std::atomic<bool> stop{false};
    std::atomic<int> signatures{0};
    // Signs without pause, so the module's lock is held most of the time.
    std::thread busy([&] {
        CK_SESSION_HANDLE s;
        if (p11()->C_OpenSession(slot, CKF_SERIAL_SESSION, nullptr, nullptr, &s) != CKR_OK)
            return;
        CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
        CK_ATTRIBUTE t{CKA_CLASS, &cls, sizeof cls};
        CK_OBJECT_HANDLE priv;
        CK_ULONG n = 0;
        if (p11()->C_FindObjectsInit(s, &t, 1) != CKR_OK || p11()->C_FindObjects(s, &priv, 1, &n) != CKR_OK ||
            p11()->C_FindObjectsFinal(s) != CKR_OK || n != 1)
            return;
        Bytes data = bytes("busy");
        CK_MECHANISM m{CKM_ECDSA_SHA256, nullptr, 0};
        while (!stop) {
            Bytes sig(64);
            n = sig.size();
            if (p11()->C_SignInit(s, &m, priv) == CKR_OK &&
                p11()->C_Sign(s, data.data(), data.size(), sig.data(), &n) == CKR_OK)
                ++signatures;
        }
        p11()->C_CloseSession(s);
    });
    int hung = 0, failed = 0;
    constexpr int forks = 20;
    for (int i = 0; i < forks; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(7 * i % 23));
        std::fflush(nullptr);
        const pid_t child = ::fork();
        REQUIRE(child >= 0);
        if (child == 0) {
            CK_ULONG n = 0;
            if (p11()->C_Initialize(nullptr) != CKR_OK || p11()->C_GetSlotList(CK_TRUE, nullptr, &n) != CKR_OK ||
                p11()->C_Finalize(nullptr) != CKR_OK)
                ::_exit(1);
            ::_exit(0);
        }
        int status = 0;
        pid_t done = 0;
        for (int wait_ms = 0; wait_ms < 10000 && done == 0; wait_ms += 10) {
            done = ::waitpid(child, &status, WNOHANG);
            if (done == 0)
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        if (done == 0) {
            ++hung;
            ::kill(child, SIGKILL);
            ::waitpid(child, &status, 0);
        } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            ++failed;
        }
    }
    stop = true;
    busy.join();
    INFO(signatures << " signatures by the busy thread during the forks");
    CHECK(signatures > 0);
    CHECK(hung == 0);
    CHECK(failed == 0);
}
