// The parsers of a security key's attestation and public key
// (core/attestation/sk_attestation.hpp): what ssh-keygen -O
// write-attestation writes and the .pub it writes, each field hostile.
#include "core/attestation/sk_attestation.hpp"
#include "core/base/base64.hpp"
#include "core/base/error.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <string_view>

using namespace tpmkey;

namespace {

void put_u32(Bytes& out, std::uint32_t value) {
    for (int shift = 24; shift >= 0; shift -= 8)
        out.push_back(static_cast<std::uint8_t>(value >> shift));
}
void put_string(Bytes& out, std::string_view text) {
    put_u32(out, static_cast<std::uint32_t>(text.size()));
    out.insert(out.end(), text.begin(), text.end());
}

// As OpenSSH's fill_attestation_blob() writes it.
Bytes attestation(std::string_view cert, std::string_view signature, std::string_view authdata) {
    Bytes out;
    put_string(out, "ssh-sk-attest-v01");
    put_string(out, cert);
    put_string(out, signature);
    put_string(out, authdata);
    put_u32(out, 0);
    put_string(out, "");
    return out;
}

std::string point() { return std::string("\x04", 1) + std::string(64, 'P'); }

std::string pub_line(std::string_view type, std::string_view curve, std::string_view p, std::string_view app) {
    Bytes blob;
    put_string(blob, type);
    put_string(blob, curve);
    put_string(blob, p);
    put_string(blob, app);
    return std::string(type) + " " + base64(blob) + " comment\n";
}

constexpr std::string_view sk_type = "sk-ecdsa-sha2-nistp256@openssh.com";

}  // namespace

TEST_CASE("sk attestation: OpenSSH's file is read field by field", "[sk]") {
    const SkAttestation a = parse_sk_attestation(attestation("CERT", "SIG", "AUTHDATA"));
    CHECK(a.attestation_cert == Bytes{'C', 'E', 'R', 'T'});
    CHECK(a.signature == Bytes{'S', 'I', 'G'});
    CHECK(a.authdata.size() == 8);
}

TEST_CASE("sk attestation: hostile files are refused with a reason", "[sk]") {
    const Bytes good = attestation("CERT", "SIG", "AUTHDATA");
    // Every cut of a good file.
    for (std::size_t n = 0; n < good.size(); ++n)
        CHECK_THROWS_AS(parse_sk_attestation(std::span(good).first(n)), Error);
    Bytes longer = good;
    longer.push_back(0);
    CHECK_THROWS_WITH(parse_sk_attestation(longer), Catch::Contains("1 bytes after its last field"));
    Bytes other = good;
    other[4] = 'x';
    CHECK_THROWS_WITH(parse_sk_attestation(other), Catch::Contains("does not begin with \"ssh-sk-attest-v01\""));
    // A length beyond the file, and the largest one (no overflow).
    for (std::uint32_t claim : {100u, 0xffffffffu}) {
        Bytes bad = good;
        bad[21] = static_cast<std::uint8_t>(claim >> 24);
        bad[22] = static_cast<std::uint8_t>(claim >> 16);
        bad[23] = static_cast<std::uint8_t>(claim >> 8);
        bad[24] = static_cast<std::uint8_t>(claim);
        CHECK_THROWS_WITH(parse_sk_attestation(bad), Catch::Contains("its attestation certificate claims"));
    }
    CHECK_THROWS_WITH(parse_sk_attestation(Bytes(max_sk_attestation_size + 1, 0)), Catch::Contains("larger than"));
    CHECK_THROWS_WITH(parse_sk_attestation(attestation("", "", "")), Catch::Contains("holds no TPM statement"));
    CHECK_THROWS_WITH(parse_sk_attestation(attestation("CERT", "", "AUTHDATA")), Catch::Contains("lacks"));
}

TEST_CASE("sk attestation: the .pub's point and application", "[sk]") {
    const SkPublicKey key = parse_sk_public_key(pub_line(sk_type, "nistp256", point(), "ssh:work"));
    CHECK(key.point.size() == 65);
    CHECK(key.application == "ssh:work");
    CHECK_THROWS_WITH(parse_sk_public_key(pub_line("ecdsa-sha2-nistp256", "nistp256", point(), "ssh:")),
                      Catch::Contains("not an sk-ecdsa-sha2-nistp256@openssh.com public key"));
    CHECK_THROWS_WITH(parse_sk_public_key(pub_line(sk_type, "nistp384", point(), "ssh:")),
                      Catch::Contains("curve is not nistp256"));
    CHECK_THROWS_WITH(parse_sk_public_key(pub_line(sk_type, "nistp256", point().substr(0, 33), "ssh:")),
                      Catch::Contains("not an uncompressed P-256 point"));
    CHECK_THROWS_WITH(parse_sk_public_key(pub_line(sk_type, "nistp256", point(), std::string(2000, 'a'))),
                      Catch::Contains("application is longer"));
    CHECK_THROWS_WITH(parse_sk_public_key(std::string(sk_type) + " !!!"), Catch::Contains("not valid base64"));
    // The line's type and the blob's must agree.
    std::string mixed = pub_line("ssh-ed25519", "nistp256", point(), "ssh:");
    mixed.replace(0, 11, sk_type);
    CHECK_THROWS_WITH(parse_sk_public_key(mixed), Catch::Contains("type inside is not the one of its line"));
    // A blob cut short.
    Bytes blob;
    put_string(blob, sk_type);
    put_u32(blob, 1000);
    CHECK_THROWS_WITH(parse_sk_public_key(std::string(sk_type) + " " + base64(blob)), Catch::Contains("claims 1000"));
}

TEST_CASE("sk attestation: the certified challenge binds the challenge and the application", "[sk]") {
    const Bytes challenge(32, 7);
    const Bytes a = sk_certify_challenge(challenge, "ssh:");
    CHECK(a.size() == 64);
    CHECK(a != sk_certify_challenge(challenge, "ssh:other"));
    CHECK(a != sk_certify_challenge(Bytes(32, 8), "ssh:"));
    CHECK(a == sk_certify_challenge(challenge, "ssh:"));
}
