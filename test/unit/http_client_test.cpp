// tools/enroll/http_client: what it refuses before any byte goes out (the
// root file, a URL that is not https) and a failure named with the URL.
// The TLS checks against a real server are in the step-ca test
// (test/e2e/tools/step-ca-enroll.sh: the wrong root is refused).
#include "http_client.hpp"
#include "acme_client.hpp"
#include "core/base/error.hpp"
#include "core/base/owned.hpp"
#include "temp_dir.hpp"

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <fstream>
#include <string>

using namespace tpmkey;
using namespace tpmkey::enroll;
using Catch::Matchers::Contains;
using test::TempDir;

namespace {

// A self-signed certificate made once by openssl (any certificate does:
// no connection gets that far).
const char* const root_pem = R"(-----BEGIN CERTIFICATE-----
MIIBfjCCASOgAwIBAgIUevcXl/dcQvZHBTfp+N4b32Lbk+kwCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJdGVzdCByb290MB4XDTI2MTEyNzA4NTAyNloXDTM2MTEyNDA4
NTAyNlowFDESMBAGA1UEAwwJdGVzdCByb290MFkwEwYHKoZIzj0CAQYIKoZIzj0D
AQcDQgAEcBu5H56wiOXJwGTVj0OjOgzbYEDSrF1z3D7c/6fin79jQ3ntij0jTcnQ
I2KPzj/CZ+VAhEkCoXQ1haxxJj1QqqNTMFEwHQYDVR0OBBYEFBhKAsXovqJcdRlE
03U0p6CKBBiAMB8GA1UdIwQYMBaAFBhKAsXovqJcdRlE03U0p6CKBBiAMA8GA1Ud
EwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSQAwRgIhAJEYuhxFyDBgs0HctE5wZsK/
yk9sGdFduRsvduDW1J8cAiEA/OLyaFmKAI4Fa6aEVErbc8/oqx1qboe/cik1hZJB
E5E=
-----END CERTIFICATE-----
)";

void write(const std::filesystem::path& p, const std::string& text) { std::ofstream(p) << text; }

}  // namespace

TEST_CASE("http: the CA root must be a regular file holding a certificate", "[http]") {
    TempDir dir;
    CHECK_THROWS_WITH(HttpClient(dir.path / "missing.crt"), Contains("missing.crt"));
    write(dir.path / "empty.crt", "");
    CHECK_THROWS_WITH(HttpClient(dir.path / "empty.crt"), Contains("empty.crt: no certificate in it"));
    write(dir.path / "junk.crt", "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n");
    CHECK_THROWS_WITH(HttpClient(dir.path / "junk.crt"), Contains("no certificate in it"));
    CHECK_THROWS_WITH(HttpClient(dir.path), Contains("not a regular file"));
}

TEST_CASE("http: only https URLs; a failure names the URL and curl's reason", "[http]") {
    TempDir dir;
    write(dir.path / "root.crt", root_pem);
    HttpClient http(dir.path / "root.crt");
    CHECK_THROWS_WITH(http.get("http://127.0.0.1:1/directory"),
                      Contains("http://127.0.0.1:1/directory: not an https URL"));
    CHECK_THROWS_WITH(http.post("file:///etc/passwd", "application/json", "{}"), Contains("not an https URL"));
    // Port 1 on loopback: nothing listens there.
    CHECK_THROWS_WITH(http.get("https://127.0.0.1:1/directory"),
                      Contains("https://127.0.0.1:1/directory: ") && Contains("onnect"));
}

TEST_CASE("http: the ACME client's one deadline bounds a server that never answers", "[http][acme]") {
    TempDir dir;
    write(dir.path / "root.crt", root_pem);
    HttpClient http(dir.path / "root.crt");
    // A socket that listens and never accepts: the kernel completes the
    // TCP handshake, then the TLS handshake waits for ever.
    const UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    REQUIRE(listener);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof addr;
    REQUIRE(::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), size) == 0);
    REQUIRE(::listen(listener.get(), 4) == 0);
    REQUIRE(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &size) == 0);
    const std::string url = "https://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/directory";
    AcmeClient acme(http, url, "the CA", std::chrono::milliseconds{1500});
    DeviceAttestOrder order;
    order.identifier = "urn:ek:sha256:x";
    order.attest = [](const std::string&) -> Bytes {
        FAIL("attested");
        return {};
    };
    order.csr = []() -> Bytes {
        FAIL("made a CSR");
        return {};
    };
    const auto start = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH(acme.device_attest(order),
                      "the CA did not finish the enrolment within 2 s; stopped (nothing was written: try again later, "
                      "or ask the CA's operator)");
    const auto took = std::chrono::steady_clock::now() - start;
    CHECK(took >= std::chrono::milliseconds{1400});
    CHECK(took < std::chrono::seconds{5});
}
