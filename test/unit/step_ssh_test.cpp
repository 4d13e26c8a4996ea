// tools/enroll/step_ssh: what tpmkey ssh-cert reads from step-ca and sends
// it. The certificate is one ssh-keygen made (ssh-keygen -s CA -I "key id"
// -n alice,bob -z 42 -V 20260101000000:20270101000000, UTC), judged by
// ssh-keygen -L when it was made; every shorter prefix and a byte more are
// refused.
#include "step_ssh.hpp"

#include "core/base/base64.hpp"
#include "core/base/error.hpp"
#include "core/keys/public_key.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace tpmkey;
using namespace tpmkey::enroll;

namespace {

constexpr const char* certificate_b64 =
    "AAAAKGVjZHNhLXNoYTItbmlzdHAyNTYtY2VydC12MDFAb3BlbnNzaC5jb20AAAAg7mN95PW4bMN9dpxVcCo7XR+wQhDL+WQURkav"
    "Jz6XB9IAAAAIbmlzdHAyNTYAAABBBAfG/lWw8HzutEAFGjOuLSUCmQFNX06+9u/iydDkcAmapJ4U2GLkvpO66jA19IP062oHqRY/"
    "65hB0WdxNHWfoR0AAAAAAAAAKgAAAAEAAAAGa2V5IGlkAAAAEAAAAAVhbGljZQAAAANib2IAAAAAaVW5AAAAAABrNuyAAAAAAAAA"
    "AIIAAAAVcGVybWl0LVgxMS1mb3J3YXJkaW5nAAAAAAAAABdwZXJtaXQtYWdlbnQtZm9yd2FyZGluZwAAAAAAAAAWcGVybWl0LXBv"
    "cnQtZm9yd2FyZGluZwAAAAAAAAAKcGVybWl0LXB0eQAAAAAAAAAOcGVybWl0LXVzZXItcmMAAAAAAAAAAAAAAGgAAAATZWNkc2Et"
    "c2hhMi1uaXN0cDI1NgAAAAhuaXN0cDI1NgAAAEEE6iyCA+TsRAv0ovKdEB610drvT9rzyjWmPT55zXov7dXpDuEYq8HAYJHvA0Pi"
    "nGNhpTKvmNfAD8BQaV1Ct5SoOgAAAGQAAAATZWNkc2Etc2hhMi1uaXN0cDI1NgAAAEkAAAAhANRDwZdubu8uosB0OYPZyuf1ehnW"
    "5vPVJGnDPtM6mPUHAAAAIG9NJgiybkWADALNLBv4pjyl00BM8nXWNMAzSMwCGpDZ";
constexpr const char* key_b64 =
    "AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBAfG/lWw8HzutEAFGjOuLSUCmQFNX06+9u/iydDkcAmapJ4U"
    "2GLkvpO66jA19IP062oHqRY/65hB0WdxNHWfoR0=";

Bytes decoded(const char* text) { return base64_decode(text).value(); }

}  // namespace

TEST_CASE("step-ca ssh: an OpenSSH certificate is read field by field", "[step-ssh]") {
    const Bytes blob = decoded(certificate_b64);
    const SshCertificate cert = parse_ssh_certificate(blob);
    CHECK(cert.type == "ecdsa-sha2-nistp256-cert-v01@openssh.com");
    CHECK(cert.public_key == decoded(key_b64));
    CHECK(cert.serial == 42);
    CHECK(cert.cert_type == 1);
    CHECK(cert.key_id == "key id");
    CHECK(cert.principals == std::vector<std::string>{"alice", "bob"});
    CHECK(cert.valid_after == 1767225600);
    CHECK(cert.valid_before == 1798761600);
    CHECK(base64(cert.blob) == certificate_b64);
}

TEST_CASE("step-ca ssh: a truncated certificate, or one with a byte more, is refused", "[step-ssh]") {
    const Bytes blob = decoded(certificate_b64);
    for (std::size_t n = 0; n < blob.size(); ++n)
        CHECK_THROWS_AS(parse_ssh_certificate(Bytes(blob.begin(), blob.begin() + static_cast<std::ptrdiff_t>(n))),
                        Error);
    Bytes longer = blob;
    longer.push_back(0);
    CHECK_THROWS_AS(parse_ssh_certificate(longer), Error);
    // A plain key is no certificate.
    CHECK_THROWS_AS(parse_ssh_certificate(decoded(key_b64)), Error);
}

TEST_CASE("step-ca ssh: the CA's address", "[step-ssh]") {
    CHECK(ca_base_url("https://ca.example:9000") == "https://ca.example:9000");
    CHECK(ca_base_url("https://ca.example/") == "https://ca.example");
    for (const char* bad :
         {"http://ca.example", "https://", "https:///", "ca.example", "https://ca.example/acme/x/directory",
          "https://ca.example?x", "https://ca.example#x", "https://ca example"}) {
        INFO(bad);
        CHECK_THROWS_AS(ca_base_url(bad), Error);
    }
}

TEST_CASE("step-ca ssh: the token's claims and the request, as step-ca's X5C provisioner reads them", "[step-ssh]") {
    SshCertificateRequest request;
    request.ca_url = "https://ca.example:9000";
    request.provisioner = "tpm x5c";
    request.key_id = "urn:ek:sha256:abc=";
    request.principals = {"alice", "bob"};
    request.ssh_public_key = decoded(key_b64);
    const nlohmann::json claims = x5c_ssh_claims(request, 1000, "id");
    CHECK(claims["aud"] == "https://ca.example:9000/1.0/ssh/sign#x5c/tpm%20x5c");
    CHECK(claims["iss"] == "tpm x5c");
    CHECK(claims["sub"] == "urn:ek:sha256:abc=");
    CHECK(claims["iat"] == 1000);
    CHECK(claims["nbf"] == 1000);
    CHECK(claims["exp"] == 1000 + ssh_token_lifetime_seconds);
    CHECK(claims["jti"] == "id");
    CHECK(claims["step"]["ssh"] ==
          nlohmann::json{{"certType", "user"}, {"keyID", "urn:ek:sha256:abc="}, {"principals", {"alice", "bob"}}});
    const nlohmann::json body = nlohmann::json::parse(ssh_sign_body(request, "TOKEN"));
    CHECK(body == nlohmann::json{{"publicKey", key_b64},
                                 {"ott", "TOKEN"},
                                 {"certType", "user"},
                                 {"keyID", "urn:ek:sha256:abc="},
                                 {"principals", {"alice", "bob"}}});
    CHECK(new_token_id().size() == 32);
    CHECK(new_token_id() != new_token_id());
}

namespace {

std::string nested(std::size_t levels) { return std::string(levels, '[') + "1" + std::string(levels, ']'); }

}  // namespace

TEST_CASE("step-ca ssh: step-ca's answer is read as the ACME client reads its server's: JSON nested deeper than 32 "
          "levels is refused",
          "[step-ssh]") {
    const std::string url = "https://ca.example:9000/1.0/ssh/sign";
    const std::string crt = R"("crt":")" + std::string(certificate_b64) + "\"";
    const SshCertificate cert = ssh_certificate_from_answer({201, {}, "{" + crt + "}"}, url);
    CHECK(cert.key_id == "key id");
    // A certificate beside a deep member, in a success and in a refusal:
    // refused while parsing (the whole answer, however deep, under 1 MiB).
    CHECK_THROWS_WITH(ssh_certificate_from_answer({201, {}, "{" + crt + R"(,"x":)" + nested(100000) + "}"}, url),
                      url + ": the answer is JSON nested deeper than 32 levels; refused");
    CHECK_THROWS_WITH(ssh_certificate_from_answer({201, {}, "{" + crt + R"(,"x":)" + nested(32) + "}"}, url),
                      url + ": the answer is JSON nested deeper than 32 levels; refused");
    CHECK(ssh_certificate_from_answer({201, {}, "{" + crt + R"(,"x":)" + nested(31) + "}"}, url).serial == 42);
    CHECK_THROWS_WITH(ssh_certificate_from_answer({401, {}, R"({"message":)" + nested(100000) + "}"}, url),
                      url + ": the answer is JSON nested deeper than 32 levels; refused");
    CHECK_THROWS_WITH(ssh_certificate_from_answer({401, {}, R"({"message":"not allowed"})"}, url),
                      "step-ca refused the SSH certificate (HTTP 401): not allowed (step-ca's log says why)");
    // 403: step-ca's words when its X5C webhook refused and when it could
    // not be asked; the message names the webhook.
    CHECK_THROWS_WITH(
        ssh_certificate_from_answer(
            {403, {}, R"({"message":"The request was forbidden by the certificate authority."})"}, url),
        "step-ca refused the SSH certificate (HTTP 403): The request was forbidden by the certificate authority. "
        "(step-ca's log says why; most likely its X5C provisioner's authorizing webhook, tpmkey-ca webhook, refused "
        "(its standard error says why) or could not be asked: check that it runs at the URL step-ca has for it, with "
        "step-ca's secret)");
    CHECK_THROWS_WITH(ssh_certificate_from_answer({201, {}, "not json"}, url),
                      url + ": the answer has no certificate (\"crt\")");
}
