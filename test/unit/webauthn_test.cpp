// CBOR (core/attestation/cbor.hpp) against RFC 8949's examples (Appendix A) and
// every refusal of the strict decoder; WebAuthn's pieces
// (core/attestation/webauthn.hpp): COSE keys, clientDataJSON, authData, the
// attestation object and certInfo, each built and read back, and each
// refusal.
#include "core/attestation/webauthn.hpp"
#include "core/attestation/acme_attestation.hpp"
#include "core/attestation/cbor.hpp"
#include "core/base/error.hpp"
#include "core/keys/algorithms.hpp"
#include "hex.hpp"

#include <openssl/evp.h>
#include <tss2/tss2_mu.h>
#include <catch2/catch.hpp>

#include <string>

using namespace tpmkey;

namespace {

using test::from_hex;

std::string to_hex(const Bytes& data) {
    static const char digits[] = "0123456789abcdef";
    std::string out;
    for (std::uint8_t b : data)
        out += {digits[b >> 4], digits[b & 15]};
    return out;
}

std::string int_hex(std::int64_t v) {
    Bytes out;
    cbor::put_int(out, v);
    return to_hex(out);
}

void refused(const std::string& hex, const std::string& reason) {
    INFO(hex);
    REQUIRE_THROWS_WITH(cbor::decode(from_hex(hex), "x"),
                        Catch::Contains("x: not valid CBOR: ") && Catch::Contains(reason));
}

TPMT_PUBLIC ecc_area() {
    TPMT_PUBLIC area{};
    area.type = TPM2_ALG_ECC;
    area.nameAlg = TPM2_ALG_SHA256;
    area.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN |
                            TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_SIGN_ENCRYPT;
    area.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_NULL;
    area.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
    area.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
    area.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
    area.unique.ecc.x.size = 32;
    area.unique.ecc.y.size = 32;
    for (std::uint8_t i = 0; i < 32; ++i) {
        area.unique.ecc.x.buffer[i] = i;
        area.unique.ecc.y.buffer[i] = static_cast<std::uint8_t>(0x80 + i);
    }
    return area;
}

Bytes sha256(const std::string& s) {
    Bytes out(32);
    EVP_Digest(s.data(), s.size(), out.data(), nullptr, EVP_sha256(), nullptr);
    return out;
}

}  // namespace

TEST_CASE("cbor: the encoder writes RFC 8949's examples", "[cbor]") {
    CHECK(int_hex(0) == "00");
    CHECK(int_hex(23) == "17");
    CHECK(int_hex(24) == "1818");
    CHECK(int_hex(100) == "1864");
    CHECK(int_hex(1000) == "1903e8");
    CHECK(int_hex(1000000) == "1a000f4240");
    CHECK(int_hex(1000000000000) == "1b000000e8d4a51000");
    CHECK(int_hex(-1) == "20");
    CHECK(int_hex(-10) == "29");
    CHECK(int_hex(-100) == "3863");
    CHECK(int_hex(-1000) == "3903e7");
    CHECK(int_hex(-257) == "390100");
    Bytes out;
    cbor::put_bytes(out, from_hex("01020304"));
    cbor::put_text(out, "IETF");
    CHECK(to_hex(out) == "44010203046449455446");
    out.clear();
    // {"a": 1, "b": [2, 3]}
    cbor::put_map(out, 2);
    cbor::put_text(out, "a");
    cbor::put_int(out, 1);
    cbor::put_text(out, "b");
    cbor::put_array(out, 2);
    cbor::put_int(out, 2);
    cbor::put_int(out, 3);
    CHECK(to_hex(out) == "a26161016162820203");
}

TEST_CASE("cbor: the decoder reads RFC 8949's examples", "[cbor]") {
    CHECK(cbor::decode(from_hex("1b000000e8d4a51000"), "x").integer == 1000000000000);
    CHECK(cbor::decode(from_hex("3903e7"), "x").integer == -1000);
    CHECK(cbor::decode(from_hex("1b7fffffffffffffff"), "x").integer == INT64_MAX);
    CHECK(cbor::decode(from_hex("3b7fffffffffffffff"), "x").integer == INT64_MIN);
    CHECK(cbor::decode(from_hex("4401020304"), "x").bytes == from_hex("01020304"));
    CHECK(cbor::decode(from_hex("62c3bc"), "x").text == "\xc3\xbc");
    const cbor::Item nested = cbor::decode(from_hex("8301820203820405"), "x");
    REQUIRE(nested.type == cbor::Item::Type::array);
    REQUIRE(nested.items.size() == 3);
    CHECK(nested.items[2].items[1].integer == 5);
    const cbor::Item map = cbor::decode(from_hex("a26161016162820203"), "x");
    REQUIRE(map.find("a"));
    CHECK(map.find("a")->integer == 1);
    CHECK(map.find("b")->items.size() == 2);
    CHECK(!map.find("c"));
    CHECK(!map.find(std::int64_t{1}));
    const cbor::Item int_keys = cbor::decode(from_hex("a201022021"), "x");  // {1: 2, -1: -2}
    REQUIRE(int_keys.find(std::int64_t{-1}));
    CHECK(int_keys.find(std::int64_t{-1})->integer == -2);
    std::size_t used = 0;
    CHECK(cbor::decode_prefix(from_hex("0102"), used, "x").integer == 1);
    CHECK(used == 1);
}

TEST_CASE("cbor: the decoder refuses what WebAuthn does not use, and damage", "[cbor]") {
    refused("", "ends too early");
    refused("1903", "ends too early");
    refused("5f4101ff", "an indefinite length");
    refused("9fff", "an indefinite length");
    refused("1c", "a reserved head");
    refused("c074323031332d30332d32315432303a30343a30305a", "a tag");
    refused("f93c00", "a float or a simple value");
    refused("f5", "a float or a simple value");
    refused("1817", "a head longer than needed");
    refused("190017", "a head longer than needed");
    refused("1a0000ffff", "a head longer than needed");
    refused("1b00000000ffffffff", "a head longer than needed");
    refused("1bffffffffffffffff", "an integer out of range");
    refused("3b8000000000000000", "an integer out of range");
    refused("0001", "1 bytes after the item");
    refused("4501020304", "a string longer than what is left");
    refused("5bffffffffffffffff", "a string longer than what is left");
    refused("62c328", "not UTF-8");
    refused("62c0af", "not UTF-8");    // overlong '/'
    refused("63eda080", "not UTF-8");  // a surrogate
    refused("a2616101616102", "a map key given twice");
    refused("a1410101", "neither an integer nor a text string");
    refused("818181818181818181818101", "nested deeper than 8");
    refused("9a00010000", "more than 1024 items");
}

TEST_CASE("webauthn: COSE keys of ECC and RSA public areas", "[webauthn]") {
    const TPMT_PUBLIC ecc = ecc_area();
    Bytes x(ecc.unique.ecc.x.buffer, ecc.unique.ecc.x.buffer + 32);
    Bytes y(ecc.unique.ecc.y.buffer, ecc.unique.ecc.y.buffer + 32);
    // {1: 2, 3: -7, -1: 1, -2: x, -3: y}
    CHECK(to_hex(cose_key(ecc)) == "a5010203262001215820" + to_hex(x) + "225820" + to_hex(y));
    TPMT_PUBLIC p384 = ecc;
    p384.parameters.eccDetail.curveID = TPM2_ECC_NIST_P384;
    CHECK(to_hex(cose_key(p384)).substr(0, 14) == "a5010203382220");
    CHECK(to_hex(cose_key(p384)).substr(14, 2) == "02");
    TPMT_PUBLIC p521 = ecc;
    p521.parameters.eccDetail.curveID = TPM2_ECC_NIST_P521;
    CHECK(to_hex(cose_key(p521)).substr(0, 16) == "a501020338232003");  // alg -36, crv 3
    TPMT_PUBLIC p192 = ecc;
    p192.parameters.eccDetail.curveID = TPM2_ECC_NIST_P192;
    CHECK_THROWS_WITH(cose_key(p192), Catch::Contains("not supported"));

    TPMT_PUBLIC rsa{};
    rsa.type = TPM2_ALG_RSA;
    rsa.parameters.rsaDetail.keyBits = 2048;
    rsa.unique.rsa.size = 3;
    rsa.unique.rsa.buffer[0] = 0xc1;
    // {1: 3, 3: -257, -1: n, -2: e = 65537}
    CHECK(to_hex(cose_key(rsa)) == "a401030339010020"
                                   "43c10000"
                                   "21"
                                   "43010001");
    rsa.parameters.rsaDetail.exponent = 3;
    CHECK(to_hex(cose_key(rsa)).substr(to_hex(cose_key(rsa)).size() - 6) == "214103");

    TPMT_PUBLIC hmac{};
    hmac.type = TPM2_ALG_KEYEDHASH;
    CHECK_THROWS_WITH(cose_key(hmac), Catch::Contains("not supported"));
}

TEST_CASE("webauthn: clientDataJSON is exactly the plan's bytes", "[webauthn]") {
    const Bytes challenge = from_hex("fbff00112233445566778899aabbccddeeff");
    CHECK(client_data_json(challenge) ==
          R"({"type":"webauthn.create","challenge":"-_8AESIzRFVmd4iZqrvM3e7_","origin":"tpmkey:"})");
    CHECK_THROWS_WITH(client_data_json(Bytes(15)), Catch::Contains("16 to 1024 bytes, not 15"));
    CHECK_THROWS_WITH(client_data_json(Bytes(1025)), Catch::Contains("not 1025"));
    CHECK_NOTHROW(client_data_json(Bytes(1024)));
}

TEST_CASE("webauthn: authData is built and read back; damage is refused", "[webauthn]") {
    const Bytes name = from_hex("000b" + std::string(64, 'a'));
    const Bytes key = cose_key(ecc_area());
    const Bytes data = auth_data(name, key);
    CHECK(data.size() == 32 + 1 + 4 + 16 + 2 + name.size() + key.size());
    const AuthData parsed = parse_auth_data(data);
    CHECK(parsed.rp_id_hash == sha256("tpmkey"));
    CHECK(parsed.flags == 0x41);
    CHECK(parsed.sign_count == 0);
    CHECK(parsed.aaguid == Bytes(16));
    CHECK(parsed.credential_id == name);
    CHECK(parsed.credential_public_key == key);

    CHECK_THROWS_WITH(parse_auth_data(Bytes(data.begin(), data.begin() + 54)),
                      Catch::Contains("shorter than its fixed part"));
    Bytes no_at = data;
    no_at[32] = 0x01;
    CHECK_THROWS_WITH(parse_auth_data(no_at), Catch::Contains("no attested credential data"));
    Bytes with_ed = data;
    with_ed[32] = 0xc1;
    CHECK_THROWS_WITH(parse_auth_data(with_ed), Catch::Contains("extensions (flag ED)"));
    Bytes long_id = data;
    long_id[53] = 0xff;
    CHECK_THROWS_WITH(parse_auth_data(long_id), Catch::Contains("longer than what is left"));
    Bytes trailing = data;
    trailing.push_back(0xa0);
    CHECK_THROWS_WITH(parse_auth_data(trailing), Catch::Contains("1 bytes after the item"));
    Bytes truncated(data.begin(), data.end() - 1);
    CHECK_THROWS_WITH(parse_auth_data(truncated), Catch::Contains("not valid CBOR"));
}

TEST_CASE("webauthn: the extraData TPM2_Certify signs", "[webauthn]") {
    const Bytes data = from_hex("0102");
    const std::string json = "{}";
    Bytes joined = data;
    const Bytes h = sha256(json);
    joined.insert(joined.end(), h.begin(), h.end());
    CHECK(certify_extra_data(data, json) == sha256(std::string(joined.begin(), joined.end())));
}

TEST_CASE("webauthn: the attestation object is built and read back; others are refused", "[webauthn]") {
    TpmAttestation a;
    a.auth_data = from_hex("aa");
    a.x5c = {from_hex("3001"), from_hex("3002")};
    a.sig = from_hex("30");
    a.cert_info = from_hex("ff544347");
    a.pub_area = from_hex("0023");
    const Bytes object = attestation_object(a);
    // Canonical order: fmt, attStmt {alg, sig, ver, x5c, pubArea, certInfo}, authData.
    CHECK(to_hex(object).rfind("a363666d746374706d6761747453746d74a663616c6726", 0) == 0);
    const TpmAttestation back = parse_attestation_object(object);
    CHECK(back.auth_data == a.auth_data);
    CHECK(back.alg == -7);
    CHECK(back.x5c == a.x5c);
    CHECK(back.sig == a.sig);
    CHECK(back.cert_info == a.cert_info);
    CHECK(back.pub_area == a.pub_area);

    const auto refuses = [](const Bytes& bytes, const char* reason) {
        CHECK_THROWS_WITH(parse_attestation_object(bytes), Catch::Contains(reason));
    };
    Bytes other_fmt;
    cbor::put_map(other_fmt, 3);
    cbor::put_text(other_fmt, "fmt");
    cbor::put_text(other_fmt, "packed");
    cbor::put_text(other_fmt, "attStmt");
    cbor::put_map(other_fmt, 0);
    cbor::put_text(other_fmt, "authData");
    cbor::put_bytes(other_fmt, a.auth_data);
    refuses(other_fmt, "its format is not \"tpm\"");
    Bytes not_map;
    cbor::put_array(not_map, 0);
    refuses(not_map, "not a map of fmt, attStmt and authData");
    TpmAttestation no_certs = a;
    no_certs.x5c.clear();
    refuses(attestation_object(no_certs), "x5c is empty");
    Bytes trailing = object;
    trailing.push_back(0);
    refuses(trailing, "bytes after the item");
    // ver "2.0" -> "2.1"
    Bytes other_ver = object;
    const std::string ver = "6376657263322e30";
    const auto at = to_hex(other_ver).find(ver) / 2;
    other_ver[at + 7] = '1';
    refuses(other_ver, "ver is not \"2.0\"");
    // the type of sig: a byte string -> a text string
    Bytes sig_text = object;
    const auto sig_at = to_hex(sig_text).find("63736967"
                                              "4130") /
                        2;
    sig_text[sig_at + 4] = 0x61;
    refuses(sig_text, "sig has the wrong type");
    // attStmt without alg, with a seventh field, with a non-certificate in x5c
    const auto statement = [&](std::size_t fields, bool with_alg, bool text_in_x5c) {
        Bytes out;
        cbor::put_map(out, 3);
        cbor::put_text(out, "fmt");
        cbor::put_text(out, "tpm");
        cbor::put_text(out, "attStmt");
        cbor::put_map(out, fields);
        cbor::put_text(out, with_alg ? "alg" : "ecdaaKeyId");
        cbor::put_int(out, -7);
        for (const char* name : {"sig", "pubArea", "certInfo"}) {
            cbor::put_text(out, name);
            cbor::put_bytes(out, a.sig);
        }
        cbor::put_text(out, "ver");
        cbor::put_text(out, "2.0");
        cbor::put_text(out, "x5c");
        cbor::put_array(out, 1);
        if (text_in_x5c)
            cbor::put_text(out, "cert");
        else
            cbor::put_bytes(out, a.x5c[0]);
        if (fields == 7) {
            cbor::put_text(out, "extra");
            cbor::put_int(out, 0);
        }
        cbor::put_text(out, "authData");
        cbor::put_bytes(out, a.auth_data);
        return out;
    };
    CHECK_NOTHROW(parse_attestation_object(statement(6, true, false)));
    refuses(statement(6, false, false), "attStmt: no alg");
    refuses(statement(7, true, false), "not exactly ver, alg, x5c, sig, certInfo and pubArea");
    refuses(statement(6, true, true), "x5c holds something other than certificates");
    Bytes no_auth_data;
    cbor::put_map(no_auth_data, 3);
    cbor::put_text(no_auth_data, "fmt");
    cbor::put_text(no_auth_data, "tpm");
    cbor::put_text(no_auth_data, "attStmt");
    cbor::put_map(no_auth_data, 0);
    cbor::put_text(no_auth_data, "authDatum");
    cbor::put_bytes(no_auth_data, a.auth_data);
    refuses(no_auth_data, "attestation-object: no authData");
}

TEST_CASE("acme: device-attest-01's attestation object has no authData; extraData from the key authorization",
          "[webauthn]") {
    AcmeTpmAttestation a;
    a.alg = cose_rs256;
    a.x5c = {from_hex("3001"), from_hex("3002")};
    a.sig = from_hex("0014000b0001aa");  // TPMT_SIGNATURE RSASSA SHA-256, a 1-byte signature
    a.cert_info = from_hex("ff544347");
    a.pub_area = from_hex("0001");
    const Bytes object = acme_attestation_object(a);
    // {fmt "tpm", attStmt {alg -257, sig, ver "2.0", x5c, pubArea, certInfo}}: canonical order.
    CHECK(to_hex(object) == "a2"
                            "63666d74"
                            "6374706d"
                            "6761747453746d74"
                            "a6"
                            "63616c67"
                            "390100"
                            "63736967"
                            "47"
                            "0014000b0001aa"
                            "63766572"
                            "63322e30"
                            "63783563"
                            "82"
                            "423001"
                            "423002"
                            "6770756241726561"
                            "42"
                            "0001"
                            "6863657274496e666f"
                            "44"
                            "ff544347");
    const cbor::Item item = cbor::decode(object, "object");
    REQUIRE(item.entries.size() == 2);
    CHECK(item.find("authData") == nullptr);
    CHECK(item.find("attStmt")->find("alg")->integer == -257);

    // sha256sum of the same bytes.
    CHECK(to_hex(acme_certify_extra_data("tok-en_1.thumb_print-2")) ==
          "85583fa095b2aa316632c4d449e1c16d6991e844247caf8c7b227c8c0c431755");
    for (const char* bad : {"", "nodot", "a.b.c", ".ab", "ab.", "a b.c", "a.b\n", "a+/.b="})
        CHECK_THROWS_WITH(acme_certify_extra_data(bad), Catch::Contains("not an ACME key authorization"));
    CHECK_THROWS(acme_certify_extra_data(std::string(300, 'a') + "." + std::string(300, 'b')));
}

TEST_CASE("webauthn: certInfo of TPM2_Certify is read; others are refused", "[webauthn]") {
    TPMS_ATTEST attest{};
    attest.magic = TPM2_GENERATED_VALUE;
    attest.type = TPM2_ST_ATTEST_CERTIFY;
    attest.extraData.size = 2;
    attest.extraData.buffer[0] = 0xee;
    attest.extraData.buffer[1] = 0xff;
    attest.attested.certify.name.size = 3;
    attest.attested.certify.name.name[0] = 0x00;
    attest.attested.certify.name.name[1] = 0x0b;
    attest.attested.certify.name.name[2] = 0x42;
    const auto marshal = [](const TPMS_ATTEST& a) {
        Bytes out(sizeof a);
        size_t offset = 0;
        REQUIRE(Tss2_MU_TPMS_ATTEST_Marshal(&a, out.data(), out.size(), &offset) == TSS2_RC_SUCCESS);
        out.resize(offset);
        return out;
    };
    const CertifyInfo info = parse_certify_info(marshal(attest));
    CHECK(info.extra_data == from_hex("eeff"));
    CHECK(info.attested_name == from_hex("000b42"));

    TPMS_ATTEST wrong_magic = attest;
    wrong_magic.magic = 0x1234;
    CHECK_THROWS_WITH(parse_certify_info(marshal(wrong_magic)), Catch::Contains("not TPM_GENERATED_VALUE"));
    TPMS_ATTEST creation = attest;
    creation.type = TPM2_ST_ATTEST_CREATION;
    CHECK_THROWS_WITH(parse_certify_info(marshal(creation)), Catch::Contains("TPM_ST_ATTEST_CERTIFY"));
    Bytes trailing = marshal(attest);
    trailing.push_back(0);
    CHECK_THROWS_WITH(parse_certify_info(trailing), Catch::Contains("1 bytes after the TPMS_ATTEST"));
    Bytes truncated = marshal(attest);
    truncated.pop_back();
    CHECK_THROWS_WITH(parse_certify_info(truncated), Catch::Contains("not a TPMS_ATTEST"));
}

TEST_CASE("webauthn: pubArea is read back exactly", "[webauthn]") {
    const TPMT_PUBLIC area = ecc_area();
    const Bytes bytes = public_area_bytes(area);
    CHECK(public_area_bytes(parse_public_area(bytes)) == bytes);
    Bytes trailing = bytes;
    trailing.push_back(0);
    CHECK_THROWS_WITH(parse_public_area(trailing), Catch::Contains("bytes after the TPMT_PUBLIC"));
    CHECK_THROWS_WITH(parse_public_area(Bytes(bytes.begin(), bytes.end() - 1)), Catch::Contains("not a TPMT_PUBLIC"));
}
