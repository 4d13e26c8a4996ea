// The TSS2 PRIVATE KEY codec: round trips, the tri-state emptyAuth, and one
// clear error for every kind of malformed file.
#include "core/keys/key_file.hpp"
#include "core/base/base64.hpp"
#include "core/base/error.hpp"
#include "core/base/owned.hpp"
#include "core/keys/public_key.hpp"
#include "core/keys/tpm_policy.hpp"
#include "core/policy/policy_signer.hpp"
#include "der_builder.hpp"

#include <catch2/catch.hpp>

#include <openssl/pem.h>
#include <tss2/tss2_mu.h>
#include <algorithm>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
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

// TPMPolicy{commandCode, commandPolicy}, by hand.
Der policy_command_der(std::initializer_list<std::uint8_t> code, const Der& body) {
    return test::seq({test::explicit_tag(0, test::integer(code)), test::explicit_tag(1, test::octets(body))});
}
const Der auth_value_der = policy_command_der({0x01, 0x6b}, {});

// The DER inside a PEM text.
Der der_of(const std::string& text) {
    const std::string body = text.substr(text.find('\n') + 1, text.rfind("-----END") - text.find('\n') - 1);
    std::string compact;
    for (char c : body)
        if (c != '\n')
            compact += c;
    const std::optional<Bytes> der = base64_decode(compact);
    REQUIRE(der);
    return *der;
}

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
        const KeyFile key = parse_text(
            key_pem({test::oid_loadable, test::explicit_tag(0, test::boolean(true)),
                     test::explicit_tag(4, test::utf8("laptop key")), test::explicit_tag(9, test::octets({1, 2, 3})),
                     parent_owner, test::octets(p.pub), test::octets(p.priv)}));
        CHECK(key.description == "laptop key");
        CHECK(key.empty_auth == true);
        CHECK_FALSE(key.has_policy());
    }
    SECTION("a policy [1] is read") {
        const KeyFile key = parse_text(key_pem({test::oid_loadable, test::explicit_tag(1, test::seq({auth_value_der})),
                                                parent_owner, test::octets(p.pub), test::octets(p.priv)}));
        CHECK(key.has_policy());
        CHECK(key.policy == std::vector{policy_auth_value()});
    }
    SECTION("an empty policy [1] is no policy") {
        const KeyFile key = parse_text(key_pem({test::oid_loadable, test::explicit_tag(1, test::seq({})), parent_owner,
                                                test::octets(p.pub), test::octets(p.priv)}));
        CHECK_FALSE(key.has_policy());
    }
    SECTION("2.23.133.10.2 (openssl_tpm2_engine v1)") {
        CHECK_NOTHROW(
            parse_text(key_pem({test::oid_old_loadable, parent_owner, test::octets(p.pub), test::octets(p.priv)})));
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
    CHECK(format_key_file(key) ==
          key_pem({test::oid_loadable, test::explicit_tag(0, test::boolean(true)), policy, description, future,
                   parent_owner, test::octets(p.pub), test::octets(p.priv)}));
    CHECK(parse_text(format_key_file(key)).description == "ssh-tpm-agent comment");
}

TEST_CASE("a description read from a file (ssh-tpm-agent, an earlier tpmkey-keygen -C) is written back as [4], and "
          "read back") {
    const Parts& p = sample();
    KeyFile key = read_key_file(data("ecdsa256.tpm"));
    key.description = "me@laptop";
    const std::string text = format_key_file(key);
    CHECK(text == key_pem({test::oid_loadable, test::explicit_tag(0, test::boolean(true)),
                           test::explicit_tag(4, test::utf8("me@laptop")), parent_owner, test::octets(p.pub),
                           test::octets(p.priv)}));
    const KeyFile again = parse_text(text);
    CHECK(again.description == "me@laptop");
    CHECK(again.other_fields.empty());
    CHECK(format_key_file(again) == text);
    // Between authPolicy [3] and a later field, in tag order.
    const Der secret = test::explicit_tag(2, test::octets({1})), future = test::explicit_tag(9, test::octets({2}));
    key.other_fields = {secret, future};
    CHECK(format_key_file(key) == key_pem({test::oid_loadable, test::explicit_tag(0, test::boolean(true)), secret,
                                           test::explicit_tag(4, test::utf8("me@laptop")), future, parent_owner,
                                           test::octets(p.pub), test::octets(p.priv)}));
    key.other_fields.clear();

    key.description = "caf\xc3\xa9 J\xc3\xbcrgen";  // UTF-8
    CHECK(parse_text(format_key_file(key)).description == key.description);
    for (const char* bad : {"tab\there", "esc\x1b[2J", "new\nline", "del\x7f", "latin1 caf\xe9", "c1 \xc2\x9b",
                            "overlong \xc0\xaf", "surrogate \xed\xa0\x80"}) {
        INFO(bad);
        CHECK_FALSE(is_printable_utf8(bad));
        key.description = bad;
        CHECK_THROWS_AS(format_key_file(key), Error);
        // A file that holds one (written by another tool) is refused.
        const std::string file = key_pem({test::oid_loadable, test::explicit_tag(4, test::utf8(bad)), parent_owner,
                                          test::octets(p.pub), test::octets(p.priv)});
        CHECK_THAT(error_of(file), Catch::Contains("the description is not printable UTF-8 text"));
    }
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
        {"not PEM", "hello\n", "not a key file (no '-----BEGIN TSS2 PRIVATE KEY-----' line)"},
        {"empty", "", "the file is empty: it was truncated, or is not a key file"},
        {"other PEM", test::pem("PRIVATE KEY", test::seq({})), "holds a 'PRIVATE KEY'"},
        {"garbled base64", "-----BEGIN TSS2 PRIVATE KEY-----\n@@@@\n-----END TSS2 PRIVATE KEY-----\n",
         "truncated or damaged"},
        {"cut short (no END line)", good.substr(0, good.size() / 2),
         "the file is truncated or damaged: its TSS2 PRIVATE KEY block has no END line"},
        {"cut after the BEGIN line", good.substr(0, good.find('\n') + 1), "the file is truncated or damaged"},
        {"not a sequence", test::pem("TSS2 PRIVATE KEY", test::octets({1})), "expected a SEQUENCE"},
        {"trailing data",
         test::pem("TSS2 PRIVATE KEY", test::cat({test::seq({test::oid_loadable, parent_owner, pub, priv}), Der{0}})),
         "trailing data"},
        {"wrong type OID", key_pem({test::oid_rsa_encryption, parent_owner, pub, priv}),
         "unknown key type 1.2.840.113549.1.1.1"},
        {"importable key", key_pem({test::oid_importable, parent_owner, pub, priv}), "importable key"},
        {"no OID", key_pem({parent_owner, pub, priv}), "the key type"},
        {"emptyAuth not boolean",
         key_pem({test::oid_loadable, test::explicit_tag(0, test::integer({1})), parent_owner, pub, priv}),
         "emptyAuth to be a BOOLEAN"},
        {"tags out of order",
         key_pem({test::oid_loadable, test::explicit_tag(4, test::utf8("x")),
                  test::explicit_tag(0, test::boolean(true)), parent_owner, pub, priv}),
         "out of order"},
        {"parent too large", key_pem({test::oid_loadable, test::integer({0x01, 0x40, 0x00, 0x00, 0x01}), pub, priv}),
         "not a 32-bit handle"},
        {"parent negative", key_pem({test::oid_loadable, test::integer({0xff}), pub, priv}), "not a 32-bit handle"},
        {"missing private part", key_pem({test::oid_loadable, parent_owner, pub}), "expected the private part"},
        {"extra field", key_pem({test::oid_loadable, parent_owner, pub, priv, priv}), "unexpected fields"},
        {"public part damaged", key_pem({test::oid_loadable, parent_owner, test::octets(pub_trailing), priv}),
         "public part is damaged"},
        {"private part damaged", key_pem({test::oid_loadable, parent_owner, pub, test::octets(priv_short)}),
         "private part is damaged"},
        {"encrypted PEM",
         "-----BEGIN TSS2 PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: "
         "AES-128-CBC,00000000000000000000000000000000\n\n" +
             good.substr(good.find('\n') + 1),
         "PEM headers"},
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
    const Der der = der_of(text);
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
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("tpmkey-unit-" + std::to_string(::getpid()));
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

TEST_CASE("read_policy_signer says what a file is before asking for chmod 600") {
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("tpmkey-signer-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const EvpPkey signer = generate_policy_signer();
    write_policy_signer(dir / "signer.pem", signer.get());
    CHECK_NOTHROW(read_policy_signer(dir / "signer.pem"));
    // Public keys, as readable by others as a .pub is: what they are, not "chmod 600".
    const std::filesystem::path ssh_pub = dir / "id_tpm.pub";
    std::filesystem::copy_file(data("tpm2-openssl-ecdsa256.pub"), ssh_pub);
    Bio bio(BIO_new(BIO_s_mem()));
    REQUIRE(PEM_write_bio_PUBKEY(bio.get(), signer.get()) == 1);
    char* text = nullptr;
    const long size = BIO_get_mem_data(bio.get(), &text);
    std::ofstream(dir / "signer.pub.pem") << std::string(text, static_cast<size_t>(size));
    std::ofstream(dir / "notes.txt") << "hello\n";
    for (const char* name : {"id_tpm.pub", "signer.pub.pem", "notes.txt"}) {
        INFO(name);
        REQUIRE(::chmod((dir / name).c_str(), 0644) == 0);
        const auto message = [&] {
            try {
                (void)read_policy_signer(dir / name);
            } catch (const Error& e) {
                return std::string(e.what());
            }
            return std::string("no error");
        }();
        CHECK_THAT(message, !Catch::Contains("chmod"));
        CHECK_THAT(message, Catch::Contains(std::string(name) == "notes.txt" ? "not a PEM private key"
                                                                             : "a public key, not the policy signer"));
    }
    // The signer itself, readable by others: chmod 600.
    REQUIRE(::chmod((dir / "signer.pem").c_str(), 0644) == 0);
    CHECK_THROWS_WITH(read_policy_signer(dir / "signer.pem"), Catch::Contains("readable by others; chmod 600"));
    std::filesystem::remove_all(dir);
}

namespace {

// Keys with policies, made as openssl_tpm2_engine makes them: userWithAuth
// cleared, the policy in [1], signed policies in [3].
KeyFile policy_key(std::vector<PolicyCommand> policy, std::vector<SignedPolicy> signed_policies = {}) {
    KeyFile key = read_key_file(data("ecdsa256.tpm"));
    key.blobs.pub.publicArea.objectAttributes &= ~TPMA_OBJECT_USERWITHAUTH;
    key.policy = std::move(policy);
    key.signed_policies = std::move(signed_policies);
    return key;
}

const Der pcr16_digest{0x2c, 0x28, 0x90, 0x1f, 0x71, 0x75, 0x1d, 0xeb, 0xfb, 0xa3, 0xf3, 0xb5, 0xbf, 0x3b, 0xe9, 0xc5,
                       0x4b, 0x8b, 0x2f, 0x8c, 0x14, 0x11, 0xf2, 0xc1, 0x17, 0xa0, 0xe8, 0x38, 0xee, 0x4e, 0x6c, 0x13};
PolicyCommand pcr16() { return policy_pcr(parse_pcr_selection("16", "sha256"), pcr16_digest); }

EvpPkey new_signer() {
    EvpPkey signer(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
    REQUIRE(signer);
    return signer;
}

TPM2B_DIGEST nonce() {
    TPM2B_DIGEST ref{};
    ref.size = 32;
    std::fill(ref.buffer, ref.buffer + 32, 0x42);
    return ref;
}

PolicyCommand authorize_by(EVP_PKEY* signer) {
    AuthorizeParts parts;
    parts.signer = signer_public(signer);
    parts.policy_ref = nonce();
    parts.signature.sigAlg = TPM2_ALG_NULL;
    return policy_authorize(parts);
}

std::string usable_error(const KeyFile& key) {
    try {
        check_usable(key, "k.tpm");
    } catch (const Error& e) {
        return e.what();
    }
    return "(usable)";
}

}  // namespace

TEST_CASE("a PCR-bound key's policy round-trips, with the engine's bytes") {
    KeyFile key = policy_key({policy_auth_value(), pcr16()});
    key.empty_auth.reset();  // a PIN, as create_tpm2_key -a -k 1234 --pcr-lock 16 writes
    const std::string text = format_key_file(key);
    const KeyFile again = parse_text(text);
    CHECK(again.policy == key.policy);
    CHECK(again.signed_policies.empty());
    CHECK(again.other_fields.empty());
    CHECK(format_key_file(again) == text);
    // The research notes' worked example, from the OID up to the parent.
    const Der der = der_of(text);
    const Der expected =
        test::cat({test::oid_loadable, Der{0xa1, 0x44, 0x30, 0x42, 0x30, 0x0a, 0xa0, 0x04, 0x02, 0x02, 0x01, 0x6b, 0xa1,
                                           0x02, 0x04, 0x00, 0x30, 0x34, 0xa0, 0x04, 0x02, 0x02, 0x01, 0x7f, 0xa1, 0x2c,
                                           0x04, 0x2a, 0x00, 0x00, 0x00, 0x01, 0x00, 0x0b, 0x03, 0x00, 0x00, 0x01},
                   pcr16_digest, parent_owner});
    CHECK(Der(der.begin() + 4, der.begin() + 4 + static_cast<long>(expected.size())) == expected);
    CHECK(usable_error(key) == "(usable)");
}

TEST_CASE("a policy alone (an attestation's key-policy) is the key file's policy [1], and read back") {
    const std::vector<PolicyCommand> policy{policy_auth_value(), pcr16()};
    const Der alone = format_policy(policy);
    // The SEQUENCE OF TPMPolicy inside the key file's [1] of the test above.
    const Der in_file = der_of(format_key_file(policy_key(policy)));
    CHECK(std::search(in_file.begin(), in_file.end(), alone.begin(), alone.end()) != in_file.end());
    CHECK(alone.size() == 0x44);
    CHECK(parse_policy(alone, "x.att: key-policy") == policy);
    Der trailing = alone;
    trailing.push_back(0);
    CHECK_THROWS_WITH(parse_policy(trailing, "x.att: key-policy"),
                      Catch::Contains("x.att: key-policy") && Catch::Contains("unexpected data after the policy"));
    CHECK_THROWS_WITH(parse_policy(Der(alone.begin(), alone.end() - 1), "x.att: key-policy"),
                      Catch::Contains("x.att: key-policy"));
    CHECK_THROWS_WITH(parse_policy(Der{0x04, 0x00}, "x.att: key-policy"), Catch::Contains("expected a policy"));
}

TEST_CASE("a signed-policy key round-trips byte for byte, fields in tag order") {
    const EvpPkey signer = new_signer();
    const std::vector<PolicyCommand> policy{authorize_by(signer.get()), policy_auth_value()};
    const SignedPolicy newest = sign_policy({policy_auth_value(), pcr16()}, signer.get(), nonce(), "kernel 6.1");
    const SignedPolicy oldest = sign_policy({pcr16()}, signer.get(), nonce(), "");
    KeyFile key = policy_key(policy, {newest, oldest});
    const Der secret = test::explicit_tag(2, test::octets({1, 2, 3}));
    const Der description = test::explicit_tag(4, test::utf8("laptop"));
    key.other_fields = {secret, description};
    const std::string text = format_key_file(key);

    const KeyFile again = parse_text(text);
    CHECK(again.policy == policy);
    CHECK(again.signed_policies == std::vector{newest, oldest});
    CHECK(again.description == "laptop");
    CHECK(format_key_file(again) == text);
    CHECK(usable_error(again) == "(usable)");

    // The same file built by hand: [0] [1] [2] [3] [4], the name only where there is one.
    auto commands_der = [](const std::vector<PolicyCommand>& commands) {
        Der list;
        for (const PolicyCommand& c : commands)
            list = test::cat({list, test::seq({test::explicit_tag(
                                                   0, test::integer({0x01, static_cast<std::uint8_t>(c.code & 0xff)})),
                                               test::explicit_tag(1, test::octets(c.body))})});
        return test::tlv(0x30, list);
    };
    const Parts p = parts_of(key);
    const std::string by_hand =
        key_pem({test::oid_loadable, test::explicit_tag(0, test::boolean(true)),
                 test::explicit_tag(1, commands_der(policy)), secret,
                 test::explicit_tag(3, test::seq({test::seq({test::explicit_tag(0, test::utf8("kernel 6.1")),
                                                             test::explicit_tag(1, commands_der(newest.commands))}),
                                                  test::seq({test::explicit_tag(1, commands_der(oldest.commands))})})),
                 description, parent_owner, test::octets(p.pub), test::octets(p.priv)});
    CHECK(text == by_hand);
}

TEST_CASE("malformed policy sections get clear errors") {
    const Parts& p = sample();
    auto with = [&](const Der& field) {
        return error_of(key_pem({test::oid_loadable, field, parent_owner, test::octets(p.pub), test::octets(p.priv)}));
    };
    auto auth_policy = [](std::initializer_list<Der> entry) {
        return test::explicit_tag(3, test::seq({test::seq(entry)}));
    };
    const Der commands = test::explicit_tag(1, test::seq({auth_value_der}));
    struct Case {
        const char* what;
        std::string message;
        const char* expected;
    };
    const Case cases[] = {
        {"policy not a SEQUENCE", with(test::explicit_tag(1, test::octets({}))),
         "expected a policy (a SEQUENCE of commands)"},
        {"command not a SEQUENCE", with(test::explicit_tag(1, test::seq({test::octets({})}))),
         "expected a policy command (a SEQUENCE)"},
        {"command without body",
         with(test::explicit_tag(1, test::seq({test::seq({test::explicit_tag(0, test::integer({1}))})}))),
         "ends too early (expected a policy command's parameters [1])"},
        {"command code [2]",
         with(test::explicit_tag(1, test::seq({test::seq({test::explicit_tag(2, test::integer({1})),
                                                          test::explicit_tag(1, test::octets({}))})}))),
         "expected a policy command's code [0]"},
        {"code not an INTEGER",
         with(test::explicit_tag(
             1, test::seq({policy_command_der({}, {}), test::seq({test::explicit_tag(0, test::octets({1})),
                                                                  test::explicit_tag(1, test::octets({}))})}))),
         "expected a policy command's code to be an INTEGER"},
        {"negative code", with(test::explicit_tag(1, test::seq({policy_command_der({0xff}, {})}))),
         "not a TPM command code"},
        {"code over 32 bits",
         with(test::explicit_tag(1, test::seq({policy_command_der({0x01, 0x00, 0x00, 0x00, 0x00}, {})}))),
         "not a TPM command code"},
        {"body not an OCTET STRING",
         with(test::explicit_tag(1, test::seq({test::seq({test::explicit_tag(0, test::integer({1})),
                                                          test::explicit_tag(1, test::integer({1}))})}))),
         "parameters to be an OCTET STRING"},
        {"extra field in a command",
         with(test::explicit_tag(1, test::seq({test::seq({test::explicit_tag(0, test::integer({1})),
                                                          test::explicit_tag(1, test::octets({})),
                                                          test::explicit_tag(2, test::octets({}))})}))),
         "unexpected data after a policy command"},
        {"authPolicy not a SEQUENCE", with(test::explicit_tag(3, test::octets({}))),
         "expected authPolicy to be a SEQUENCE"},
        {"signed policy without [1]", with(auth_policy({test::explicit_tag(0, test::utf8("x"))})),
         "ends too early (expected a signed policy's commands [1])"},
        {"empty signed policy", with(auth_policy({})), "expected a signed policy's commands [1]"},
        {"name not UTF8String", with(auth_policy({test::explicit_tag(0, test::octets({'x'})), commands})),
         "name to be a UTF8String"},
        {"name after commands", with(auth_policy({commands, test::explicit_tag(0, test::utf8("x"))})),
         "unexpected data after a signed policy"},
        {"long-form short length", with(test::cat({Der{0xa1, 0x81, 0x02}, test::seq({})})), "shortest form"},
    };
    for (const Case& c : cases) {
        INFO(c.what);
        CHECK_THAT(c.message, Catch::Contains(c.expected));
        CHECK_THAT(c.message, Catch::StartsWith("k.tpm: not a valid TSS2 PRIVATE KEY: "));
    }
}

TEST_CASE("a key without userWithAuth is usable exactly when tpmkey runs its whole policy") {
    const EvpPkey signer = new_signer();
    const SignedPolicy pcr_signed = sign_policy({pcr16()}, signer.get(), nonce(), "");
    const PolicyCommand secret{TPM2_CC_PolicySecret, {0x40, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00}};
    const SignedPolicy secret_signed{"with a secret", {secret, pcr_signed.commands.back()}};
    PolicyCommand truncated_pcr = pcr16();
    truncated_pcr.body.resize(10);

    CHECK(usable_error(policy_key({pcr16()})) == "(usable)");
    CHECK(usable_error(policy_key({authorize_by(signer.get()), policy_auth_value()}, {pcr_signed})) == "(usable)");
    CHECK(usable_error(policy_key({authorize_by(signer.get())}, {secret_signed, pcr_signed})) == "(usable)");
    CHECK(usable_error(policy_key({})) ==
          "k.tpm: the key can only be used through a TPM policy, and its file has none");
    // TPM2_PolicySecret runs only with the user's PIN object: a SHA-256
    // object's name, in the key's own policy (core/tpm/pin_object.hpp).
    CHECK_THAT(usable_error(policy_key({policy_auth_value(), secret})),
               Catch::StartsWith("k.tpm: malformed TPM2_PolicySecret (0x151)"));
    Bytes pin_object_name = {0x00, 0x0b};
    pin_object_name.resize(34, 0x5a);
    CHECK(usable_error(policy_key({policy_secret(pin_object_name)})) == "(usable)");
    CHECK_THAT(usable_error(policy_key({{0x171, {}}})),
               Catch::Contains("TPM2_PolicyOR (0x171), which tpmkey does not run"));
    CHECK_THAT(usable_error(policy_key({authorize_by(signer.get())})), Catch::Contains("its file has none"));
    CHECK_THAT(usable_error(policy_key({policy_auth_value(), authorize_by(signer.get())}, {pcr_signed})),
               Catch::Contains("TPM2_PolicyAuthorize (0x16a) after its first command"));
    CHECK_THAT(usable_error(policy_key({authorize_by(signer.get())}, {secret_signed})),
               Catch::Contains("uses TPM2_PolicySecret, which tpmkey runs only in a key's own policy"));
    CHECK_THAT(usable_error(policy_key({authorize_by(signer.get())}, {{"", {pcr16()}}})),
               Catch::Contains("a signed policy of the key does not end with its signature"));
    CHECK_THAT(usable_error(policy_key({truncated_pcr})), Catch::StartsWith("k.tpm: malformed TPM2_PolicyPCR (0x17f)"));
    // With userWithAuth the PIN is enough: the policy is not looked at.
    KeyFile with_auth = policy_key({secret});
    with_auth.blobs.pub.publicArea.objectAttributes |= TPMA_OBJECT_USERWITHAUTH;
    CHECK(usable_error(with_auth) == "(usable)");
}
