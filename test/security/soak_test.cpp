// The soak: many signatures in one process (ECDSA P-256, no PIN, what ssh
// uses): every one verified, resident memory flat, no TPM handle left.
// TPMKEY_SOAK_SIGNATURES sets the count (default 10000).
#include "security.hpp"

#include <chrono>
#include <cstdlib>
#include <iostream>

using namespace mt;
using namespace st;

TEST_CASE("soak: N signatures in one process, RSS flat, no TPM handle leaked", "[soak]") {
    const char* env = std::getenv("TPMKEY_SOAK_SIGNATURES");
    const long count = env ? std::atol(env) : 10000;
    REQUIRE(count > 0);
    const TestKey& k = key("ec256");
    long rss_before = 0, rss_after = 0;
    double seconds = 0;
    long bad = 0;
    {
        Initialized init;
        Session s(slot_of(k.name));
        const CK_OBJECT_HANDLE priv = find_one(s, CKO_PRIVATE_KEY);
        CK_MECHANISM m{CKM_ECDSA, nullptr, 0};
        Bytes d = digest("SHA256", bytes("soak"));
        Bytes sig(64);
        const auto sign_once = [&](long i) {
            d[0] = static_cast<std::uint8_t>(i);
            d[1] = static_cast<std::uint8_t>(i >> 8);
            CK_ULONG n = sig.size();
            if (p11()->C_SignInit(s, &m, priv) != CKR_OK ||
                p11()->C_Sign(s, d.data(), d.size(), sig.data(), &n) != CKR_OK || n != 64 ||
                !verify_ecdsa_digest(k, d, sig))
                ++bad;
        };
        for (long i = 0; i < 200; ++i)  // warm-up: the TPM connection, OpenSSL's tables, the allocator
            sign_once(i);
        const int transient = tpm_transient_objects();
        const int sessions = tpm_loaded_sessions();
        rss_before = rss_kib();
        const auto t0 = std::chrono::steady_clock::now();
        for (long i = 0; i < count; ++i)
            sign_once(i);
        seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        rss_after = rss_kib();
        CHECK(tpm_transient_objects() == transient);  // the same parent and key, nothing more
        CHECK(tpm_loaded_sessions() == sessions);
    }
    std::cout << "soak: " << count << " signatures in " << seconds << " s (" << seconds * 1000 / double(count)
              << " ms each), " << bad << " failed; RSS " << rss_before << " KiB before, " << rss_after
              << " KiB after\n";
    CHECK(bad == 0);
    CHECK(rss_after - rss_before <= 256);  // KiB: flat, not a few bytes per signature
    CHECK(tpm_transient_objects() == 0);
    CHECK(tpm_loaded_sessions() == 0);
}
