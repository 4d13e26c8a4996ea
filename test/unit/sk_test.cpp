// tpmkey-sk.so without a TPM: what a signature covers (the bytes
// ssh-ecdsa-sk.c rebuilds to verify it) and the key handle's checks, on
// real handles a swtpm enrolled (test/data/sk/, made with
// ssh-keygen -t ecdsa-sk -w tpmkey-sk.so [-O verify-required -O application=ssh:seed]).
#include "core/base/error.hpp"
#include "core/files/file_read.hpp"
#include "sk/key_handle.hpp"
#include "sk/security_key.hpp"

#include <catch2/catch.hpp>

#include <openssl/evp.h>

#include <string>

using namespace tpmkey;

namespace {

Bytes handle_file(const std::string& name) {
    return read_regular_file(std::string(TPMKEY_TEST_DATA) + "/sk/" + name, 1 << 16).data;
}

Bytes sha256_of(std::string_view text) {
    Bytes out(32);
    unsigned int n = 0;
    REQUIRE(EVP_Digest(text.data(), text.size(), out.data(), &n, EVP_sha256(), nullptr) == 1);
    return out;
}

std::span<const std::uint8_t> bytes_of(const std::string& s) {
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

}  // namespace

TEST_CASE("sk: a signature covers SHA-256(application), the flags, the counter (big-endian), SHA-256(message)",
          "[sk]") {
    const std::string message = "the data ssh signs";
    const Bytes data = sk::signed_data("ssh:", 0x05, 0x01020304, bytes_of(message));
    REQUIRE(data.size() == 32 + 1 + 4 + 32);
    CHECK(Bytes(data.begin(), data.begin() + 32) == sha256_of("ssh:"));
    CHECK(data[32] == 0x05);
    CHECK(Bytes(data.begin() + 33, data.begin() + 37) == Bytes{0x01, 0x02, 0x03, 0x04});
    CHECK(Bytes(data.begin() + 37, data.end()) == sha256_of(message));
}

TEST_CASE("sk: the key handles tpmkey-sk enrolled are accepted", "[sk]") {
    const KeyFile plain = sk::parse_key_handle(handle_file("handle-plain.pem"));
    CHECK(plain.empty_auth == true);
    CHECK(plain.description == "ssh:");
    const KeyFile pin = sk::parse_key_handle(handle_file("handle-pin.pem"));
    CHECK(pin.empty_auth == false);
    CHECK(pin.description == "ssh:seed");
    CHECK(sk::format_key_handle(pin) == std::string(reinterpret_cast<const char*>(handle_file("handle-pin.pem").data()),
                                                    handle_file("handle-pin.pem").size()));
}

TEST_CASE("sk: key handles that are not tpmkey-sk's are refused with a reason", "[sk]") {
    using Catch::Matchers::Contains;
    CHECK_THROWS_WITH(sk::parse_key_handle(Bytes{}), Contains("its size is 0 bytes"));
    CHECK_THROWS_WITH(sk::parse_key_handle(Bytes(sk::max_key_handle_size + 1, 'A')),
                      Contains("its size is 4097 bytes"));
    CHECK_THROWS_AS(sk::parse_key_handle(Bytes{'n', 'o', 't'}), Error);

    // A key with a PIN but without dictionary-attack protection (its PIN
    // could be guessed without limit), and one that no longer says whether
    // it has a PIN.
    KeyFile key = sk::parse_key_handle(handle_file("handle-pin.pem"));
    key.blobs.pub.publicArea.objectAttributes |= TPMA_OBJECT_NODA;
    CHECK_THROWS_WITH(sk::parse_key_handle(bytes_of(format_key_file(key))), Contains("its attributes are"));
    key = sk::parse_key_handle(handle_file("handle-plain.pem"));
    key.empty_auth.reset();
    CHECK_THROWS_WITH(sk::parse_key_handle(bytes_of(format_key_file(key))), Contains("does not say whether"));
    key = sk::parse_key_handle(handle_file("handle-plain.pem"));
    key.parent = 0x81000002;
    CHECK_THROWS_WITH(sk::parse_key_handle(bytes_of(format_key_file(key))), Contains("its parent"));
    key = sk::parse_key_handle(handle_file("handle-plain.pem"));
    key.blobs.pub.publicArea.parameters.eccDetail.curveID = TPM2_ECC_NIST_P384;
    CHECK_THROWS_WITH(sk::parse_key_handle(bytes_of(format_key_file(key))), Contains("not an ECDSA P-256 key"));
}
