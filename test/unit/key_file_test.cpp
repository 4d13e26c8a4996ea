// The TSS2 PRIVATE KEY codec: round trips, the tri-state emptyAuth, and one
// clear error for every kind of malformed file.
#include "der_builder.hpp"
#include "error.hpp"
#include "key_file.hpp"
#include "public_key.hpp"

#include <catch2/catch.hpp>
#include <tss2/tss2_mu.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace tpmkey;
using test::Der;

namespace {

std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

std::filesystem::path data(const char* name) { return std::filesystem::path(TPMKEY_TEST_DATA) / name; }

KeyFile parse_text(const std::string& text, const std::string& name = "k.tpm") {
    return parse_key_file(std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()), name);
}

// The marshalled public and private parts of a real key, to build variants.
struct Parts {
    Der pub, priv;
};
Parts parts_of(const KeyFile& key) {
    Parts p;
    p.pub.resize(sizeof(TPM2B_PUBLIC));
    p.priv.resize(sizeof(TPM2B_PRIVATE));
    size_t n = 0;
    REQUIRE(Tss2_MU_TPM2B_PUBLIC_Marshal(&key.blobs.pub, p.pub.data(), p.pub.size(), &n) == 0);
    p.pub.resize(n);
    n = 0;
    REQUIRE(Tss2_MU_TPM2B_PRIVATE_Marshal(&key.blobs.priv, p.priv.data(), p.priv.size(), &n) == 0);
    p.priv.resize(n);
    return p;
}

const Parts& sample() {
    static const Parts p = parts_of(read_key_file(data("ecdsa256.tpm")));
    return p;
}

std::string key_pem(std::initializer_list<Der> fields) { return test::pem("TSS2 PRIVATE KEY", test::seq(fields)); }

const Der parent_owner = test::integer({0x40, 0x00, 0x00, 0x01});

std::string error_of(const std::string& text) {
    try {
        parse_text(text);
    } catch (const Error& e) {
        return e.what();
    }
    return "(parsed without error)";
}

}  // namespace

TEST_CASE("a key file written by tpmkey-keygen round-trips byte for byte") {
    for (const char* name : {"ecdsa256.tpm", "rsa2048-pin.tpm"}) {
        INFO(name);
        const std::string text = slurp(data(name));
        const KeyFile key = parse_text(text);
        CHECK(format_key_file(key) == text);
    }
}

TEST_CASE("emptyAuth: TRUE means no PIN, FALSE and absent mean a PIN") {
    const KeyFile no_pin = read_key_file(data("ecdsa256.tpm"));
    CHECK(no_pin.empty_auth == true);
    CHECK_FALSE(no_pin.needs_pin());
    const KeyFile pin = read_key_file(data("rsa2048-pin.tpm"));
    CHECK_FALSE(pin.empty_auth.has_value());
    CHECK(pin.needs_pin());
    const Parts& p = sample();
    const KeyFile explicit_false = parse_text(key_pem({test::oid_loadable, test::explicit_tag(0, test::boolean(false)),
                                                       parent_owner, test::octets(p.pub), test::octets(p.priv)}));
    CHECK(explicit_false.empty_auth == false);
    CHECK(explicit_false.needs_pin());
}

TEST_CASE("keys of tpm2-openssl are read, with the public key it reports") {
    const KeyFile key = read_key_file(data("tpm2-openssl-ecdsa256.tpm"));
    CHECK(key.parent == owner_hierarchy);
    std::string expected = slurp(data("tpm2-openssl-ecdsa256.pub"));
    expected.erase(expected.find_last_not_of("\n") + 1);
    CHECK(PublicKey(key.blobs.pub.publicArea).ssh_line("") == expected);
}

TEST_CASE("optional fields: known ones are read, unknown ones skipped, the old OID accepted") {
    const Parts& p = sample();
    SECTION("description [4] and a future tag [9]") {
        const KeyFile key = parse_text(key_pem({test::oid_loadable, test::explicit_tag(0, test::boolean(true)),
                                                test::explicit_tag(4, test::utf8("laptop key")),
                                                test::explicit_tag(9, test::octets({1, 2, 3})), parent_owner,
                                                test::octets(p.pub), test::octets(p.priv)}));
        CHECK(key.description == "laptop key");
        CHECK(key.empty_auth == true);
        CHECK_FALSE(key.has_policy);
    }
    SECTION("a policy [1] is noted") {
        const KeyFile key = parse_text(key_pem({test::oid_loadable, test::explicit_tag(1, test::seq({})),
                                                parent_owner, test::octets(p.pub), test::octets(p.priv)}));
        CHECK(key.has_policy);
    }
    SECTION("2.23.133.10.2 (openssl_tpm2_engine v1)") {
        CHECK_NOTHROW(parse_text(key_pem({test::oid_old_loadable, parent_owner, test::octets(p.pub), test::octets(p.priv)})));
    }
    SECTION("a persistent parent") {
        const KeyFile key = parse_text(key_pem({test::oid_loadable, test::integer({0x00, 0x81, 0x00, 0x00, 0x01}),
                                                test::octets(p.pub), test::octets(p.priv)}));
        CHECK(key.parent == standard_srk);
    }
}

TEST_CASE("rewriting a key keeps every optional field it does not change (tpmkey passwd)") {
    const Parts& p = sample();
    const Der policy = test::explicit_tag(1, test::seq({test::seq({test::explicit_tag(0, test::integer({0x01, 0x6b})),
                                                                    test::explicit_tag(1, test::octets({0, 0}))})}));
    const Der description = test::explicit_tag(4, test::utf8("ssh-tpm-agent comment"));
    const Der future = test::explicit_tag(9, test::octets({1, 2, 3}));
    const std::string text = key_pem({test::oid_loadable, test::explicit_tag(0, test::boolean(false)), policy,
                                      description, future, parent_owner, test::octets(p.pub), test::octets(p.priv)});
    KeyFile key = parse_text(text);
    CHECK(format_key_file(key) == text);
    key.empty_auth = true;  // what passwd changes
    CHECK(format_key_file(key) == key_pem({test::oid_loadable, test::explicit_tag(0, test::boolean(true)), policy,
                                           description, future, parent_owner, test::octets(p.pub),
                                           test::octets(p.priv)}));
    CHECK(parse_text(format_key_file(key)).description == "ssh-tpm-agent comment");
}

TEST_CASE("every malformed key file gets its own clear error naming the file") {
    const Parts& p = sample();
    const Der pub = test::octets(p.pub), priv = test::octets(p.priv);
    struct Case {
        const char* what;
        std::string text;
        const char* message;
    };
    Der pub_trailing = p.pub;
    pub_trailing.push_back(0);
    Der priv_short(p.priv.begin(), p.priv.end() - 5);
    const std::string good = key_pem({test::oid_loadable, parent_owner, pub, priv});
    const Case cases[] = {
        {"not PEM", "hello\n", "not a PEM file"},
        {"empty", "", "not a PEM file"},
        {"other PEM", test::pem("PRIVATE KEY", test::seq({})), "holds a 'PRIVATE KEY'"},
        {"garbled base64", "-----BEGIN TSS2 PRIVATE KEY-----\n@@@@\n-----END TSS2 PRIVATE KEY-----\n", "not a PEM file"},
        {"not a sequence", test::pem("TSS2 PRIVATE KEY", test::octets({1})), "expected a SEQUENCE"},
        {"trailing data", test::pem("TSS2 PRIVATE KEY", test::cat({test::seq({test::oid_loadable, parent_owner, pub, priv}), Der{0}})), "trailing data"},
        {"wrong type OID", key_pem({test::oid_rsa_encryption, parent_owner, pub, priv}), "unknown key type 1.2.840.113549.1.1.1"},
        {"importable key", key_pem({test::oid_importable, parent_owner, pub, priv}), "importable key"},
        {"no OID", key_pem({parent_owner, pub, priv}), "the key type"},
        {"emptyAuth not boolean", key_pem({test::oid_loadable, test::explicit_tag(0, test::integer({1})), parent_owner, pub, priv}), "emptyAuth to be a BOOLEAN"},
        {"tags out of order", key_pem({test::oid_loadable, test::explicit_tag(4, test::utf8("x")), test::explicit_tag(0, test::boolean(true)), parent_owner, pub, priv}), "out of order"},
        {"parent too large", key_pem({test::oid_loadable, test::integer({0x01, 0x40, 0x00, 0x00, 0x01}), pub, priv}), "not a 32-bit handle"},
        {"parent negative", key_pem({test::oid_loadable, test::integer({0xff}), pub, priv}), "not a 32-bit handle"},
        {"missing private part", key_pem({test::oid_loadable, parent_owner, pub}), "expected the private part"},
        {"extra field", key_pem({test::oid_loadable, parent_owner, pub, priv, priv}), "unexpected fields"},
        {"public part damaged", key_pem({test::oid_loadable, parent_owner, test::octets(pub_trailing), priv}), "public part is damaged"},
        {"private part damaged", key_pem({test::oid_loadable, parent_owner, pub, test::octets(priv_short)}), "private part is damaged"},
        {"encrypted PEM", "-----BEGIN TSS2 PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00000000000000000000000000000000\n\n" +
                              good.substr(good.find('\n') + 1), "PEM headers"},
        {"oversized", std::string(max_key_file_size + 1, 'A'), "too large"},
    };
    for (const Case& c : cases) {
        INFO(c.what);
        const std::string message = error_of(c.text);
        CHECK_THAT(message, Catch::Contains(c.message));
        CHECK_THAT(message, Catch::StartsWith("k.tpm: "));
    }
}

TEST_CASE("a key the TPM could load but that cannot sign is refused") {
    KeyFile key = read_key_file(data("ecdsa256.tpm"));
    key.blobs.pub.publicArea.objectAttributes &= ~TPMA_OBJECT_SIGN_ENCRYPT;
    CHECK_THAT(error_of(format_key_file(key)), Catch::Contains("cannot sign"));
    key.blobs.pub.publicArea.objectAttributes |= TPMA_OBJECT_SIGN_ENCRYPT | TPMA_OBJECT_RESTRICTED;
    CHECK_THAT(error_of(format_key_file(key)), Catch::Contains("restricted"));
}

TEST_CASE("every truncation and every single-byte corruption is an error or a valid key, never a crash") {
    const std::string text = slurp(data("rsa2048-pin.tpm"));
    KeyFile key = read_key_file(data("rsa2048-pin.tpm"));
    // Work on the DER, where every byte matters.
    const std::string body = text.substr(text.find('\n') + 1, text.rfind("-----END") - text.find('\n') - 1);
    Der der(body.size());
    std::string compact;
    for (char c : body)
        if (c != '\n')
            compact += c;
    const int n = EVP_DecodeBlock(der.data(), reinterpret_cast<const unsigned char*>(compact.data()),
                                  static_cast<int>(compact.size()));
    REQUIRE(n > 0);
    der.resize(static_cast<std::size_t>(n));
    while (!der.empty() && der.back() == 0)  // EVP_DecodeBlock pads
        der.pop_back();
    const std::string reference = format_key_file(key);
    for (std::size_t cut = 0; cut < der.size(); ++cut) {
        const Der truncated(der.begin(), der.begin() + static_cast<long>(cut));
        CHECK_THROWS_AS(parse_text(test::pem("TSS2 PRIVATE KEY", truncated)), Error);
    }
    std::size_t parsed = 0;
    for (std::size_t i = 0; i < der.size(); ++i) {
        Der corrupt = der;
        corrupt[i] ^= 0x5a;
        try {
            parse_text(test::pem("TSS2 PRIVATE KEY", corrupt));
            ++parsed;  // e.g. a flipped bit inside the wrapped private part
        } catch (const Error&) {
        }
    }
    CHECK(parsed < der.size());
}

TEST_CASE("read_key_file refuses what is not a regular key file") {
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("tpmkey-unit-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    CHECK_THROWS_WITH(read_key_file(dir / "missing.tpm"), Catch::Contains("cannot open"));
    CHECK_THROWS_WITH(read_key_file(dir), Catch::Contains("not a regular file"));
    const std::filesystem::path fifo = dir / "fifo.tpm";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK_THROWS_WITH(read_key_file(fifo), Catch::Contains("not a regular file"));  // and does not hang
    std::ofstream(dir / "big.tpm") << std::string(max_key_file_size + 10, 'x');
    CHECK_THROWS_WITH(read_key_file(dir / "big.tpm"), Catch::Contains("too large"));
    const std::filesystem::path open_key = dir / "open.tpm";
    std::filesystem::copy_file(data("ecdsa256.tpm"), open_key);
    REQUIRE(::chmod(open_key.c_str(), 0666) == 0);
    CHECK_THROWS_WITH(read_key_file(open_key), Catch::Contains("writable by others"));
    REQUIRE(::chmod(open_key.c_str(), 0644) == 0);
    CHECK_NOTHROW(read_key_file(open_key));
    std::filesystem::remove_all(dir);
}
