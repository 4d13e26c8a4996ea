// The PIN leaves no copy in the process after C_Logout / C_Finalize: the
// test scans every writable mapping of its own memory for the PIN. The test
// itself never holds the PIN in the clear except in one stack buffer that
// it wipes: it keeps it XOR-masked and compares masked.
#include "security.hpp"

#include <fcntl.h>
#include <openssl/rand.h>
#include <string.h>
#include <unistd.h>

#include <array>
#include <fstream>
#include <iomanip>
#include <sstream>

using namespace mt;
using namespace st;

namespace {

constexpr std::uint8_t mask = 0x5a;
constexpr std::size_t pin_size = 24;
using Masked = std::array<std::uint8_t, pin_size>;

Masked random_masked_pin() {
    static const char alphabet[] = "abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    Masked m{};
    std::array<std::uint8_t, pin_size> r{};
    REQUIRE(RAND_bytes(r.data(), static_cast<int>(r.size())) == 1);
    for (std::size_t i = 0; i < pin_size; ++i)
        m[i] = static_cast<std::uint8_t>(alphabet[r[i] % (sizeof alphabet - 1)] ^ mask);
    explicit_bzero(r.data(), r.size());
    return m;
}

struct Hits {
    std::vector<std::string> ours;  // anywhere else: the module's (or OpenSSL's) buffers
    // Inside a tpm2-tss session object: IESYS_SESSION's sizeSessionValue
    // (UINT16) and sessionValue = sessionKey (32 bytes, SHA-256) || auth
    // value (tpm2-tss 3.2.1, src/tss2-esys/esys_types.h:66-67, filled by
    // iesys_compute_session_value, esys_iutil.c:1007-1027), freed by
    // Esys_TR_Close (esys_tr.c:429) without being wiped.
    std::vector<std::string> tss_session;
    bool empty() const noexcept { return ours.empty() && tss_session.empty(); }
};

// Places where the PIN lies in this process's writable memory (read via
// /proc/self/mem, so unreadable pages cannot crash the scan).
Hits find_pin(const Masked& pin) {
    Hits hits;
    std::ifstream maps("/proc/self/maps");
    const int mem = ::open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
    REQUIRE(mem >= 0);
    std::vector<std::uint8_t> buf;
    for (std::string line; std::getline(maps, line);) {
        std::istringstream in(line);
        std::string range, perms, offset, dev, inode, name;
        in >> range >> perms >> offset >> dev >> inode;
        std::getline(in >> std::ws, name);
        if (perms.size() < 2 || perms[0] != 'r' || perms[1] != 'w' || name == "[vvar]" || name == "[vsyscall]")
            continue;
        const std::size_t dash = range.find('-');
        const unsigned long lo = std::stoul(range.substr(0, dash), nullptr, 16);
        const unsigned long hi = std::stoul(range.substr(dash + 1), nullptr, 16);
        buf.resize(hi - lo);
        const ssize_t n = ::pread(mem, buf.data(), buf.size(), static_cast<off_t>(lo));
        if (n <= 0)
            continue;
        for (std::size_t i = 0; i + pin_size <= static_cast<std::size_t>(n); ++i) {
            if ((buf[i] ^ mask) != pin[0])
                continue;
            std::size_t j = 1;
            while (j < pin_size && (buf[i + j] ^ mask) == pin[j])
                ++j;
            if (j == pin_size) {
                std::ostringstream where;
                where << std::hex << (lo + i) << " in " << (name.empty() ? "[anonymous]" : name);
                // What lies just before it (which structure held the PIN).
                where << ", preceded by";
                for (std::size_t b = i >= 48 ? i - 48 : 0; b < i; ++b)
                    where << ' ' << std::setw(2) << std::setfill('0') << static_cast<unsigned>(buf[b]);
                const bool in_tss_session = i >= 34 && buf[i - 34] == 32 + pin_size && buf[i - 33] == 0;
                (in_tss_session ? hits.tss_session : hits.ours).push_back(where.str());
            }
        }
    }
    explicit_bzero(buf.data(), buf.size());
    ::close(mem);
    return hits;
}

std::string joined(const std::vector<std::string>& v) {
    std::string s;
    for (const std::string& x : v)
        s += x + "\n";
    return s;
}

// No copy of ours may survive. tpm2-tss 3.2.1 leaves one in each freed
// HMAC session object (not wiped upstream, see docs/security.md): counted as
// a failure only with TPMKEY_EXPECT_TSS_SESSION_WIPED=1, else reported.
void check_wiped(const Hits& hits, const char* after) {
    INFO("PIN copies after " << after << " in our buffers:\n" << joined(hits.ours));
    CHECK(hits.ours.empty());
    const char* strict = std::getenv("TPMKEY_EXPECT_TSS_SESSION_WIPED");
    if (strict && std::string(strict) == "1") {
        INFO("PIN copies after " << after << " in tpm2-tss session objects:\n" << joined(hits.tss_session));
        CHECK(hits.tss_session.empty());
    } else if (!hits.tss_session.empty()) {
        WARN("known tpm2-tss remnant: after " << after << ", " << hits.tss_session.size()
                                              << " freed ESAPI session object(s) still hold sessionKey || PIN");
    }
}

}  // namespace

TEST_CASE("the PIN's buffers are wiped: no copy in memory after C_Logout and after C_Finalize", "[wipe]") {
    const Masked pin = random_masked_pin();
    const std::filesystem::path dir = key_dir() / "wipe";
    std::filesystem::create_directories(dir);
    {
        // The PIN file for tpmkey-keygen, written from a wiped stack buffer.
        std::array<char, pin_size + 1> clear{};
        for (std::size_t i = 0; i < pin_size; ++i)
            clear[i] = static_cast<char>(pin[i] ^ mask);
        clear[pin_size] = '\n';
        const std::string pin_file = (dir / "pin").string();
        const int fd = ::open(pin_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        REQUIRE(fd >= 0);
        const bool written = ::write(fd, clear.data(), clear.size()) == static_cast<ssize_t>(clear.size());
        ::close(fd);
        explicit_bzero(clear.data(), clear.size());
        REQUIRE(written);
        const char* keygen = std::getenv("TPMKEY_KEYGEN_PATH");
        REQUIRE(keygen);
        run_ok(shell_quote(keygen) + " -q -t ecdsa -b 256 -C wipe -f " + shell_quote((dir / "wiped.tpm").string()) +
               " --pin-file " + shell_quote(pin_file) + " --tcti " + shell_quote(swtpm_tcti()) + " 2>&1");
        std::filesystem::remove(pin_file);
    }
    REQUIRE(find_pin(pin).empty());  // the scan starts clean

    ScopedEnv keys_env("TPMKEY_KEYS", (dir / "wiped.tpm").string());
    {
        Initialized init;
        const CK_SLOT_ID slot = slot_list().at(0);
        Session s(slot);
        {
            std::array<CK_UTF8CHAR, pin_size> clear{};
            for (std::size_t i = 0; i < pin_size; ++i)
                clear[i] = static_cast<CK_UTF8CHAR>(pin[i] ^ mask);
            const CK_RV rv = p11()->C_Login(s, CKU_USER, clear.data(), clear.size());
            explicit_bzero(clear.data(), clear.size());
            REQUIRE_RV(rv, CKR_OK);
        }
        const CK_OBJECT_HANDLE priv = find_one(s, CKO_PRIVATE_KEY);
        const Bytes d = digest("SHA256", bytes("wipe"));
        CK_MECHANISM m{CKM_ECDSA, nullptr, 0};
        for (int i = 0; i < 3; ++i)
            (void)sign(s, priv, m, d);
        // While logged in the module keeps the PIN (it signs with it): the
        // scan must see it, or it would prove nothing afterwards.
        CHECK_FALSE(find_pin(pin).ours.empty());

        REQUIRE_RV(p11()->C_Logout(s), CKR_OK);
        check_wiped(find_pin(pin), "C_Logout");
    }
    check_wiped(find_pin(pin), "C_Finalize");
}
