// tools/enroll/acme_client's pieces that need no server: the certificate
// request a JWS signer makes (OpenSSL parses and verifies it, for each
// algorithm), and how a server's problem document is put into words (a
// hostile server's text reaches the terminal printable and bounded).
#include "acme_client.hpp"
#include "core/base/owned.hpp"
#include "core/keys/public_key.hpp"
#include "software_key.hpp"

#include <catch2/catch.hpp>

#include <openssl/x509.h>

#include <string>

using namespace tpmkey;
using namespace tpmkey::enroll;

TEST_CASE("acme: the certificate request is signed by the key and OpenSSL verifies it", "[acme]") {
    const auto [type, param, nid] =
        GENERATE(table<const char*, const char*, int>({{"EC", "P-256", NID_ecdsa_with_SHA256},
                                                       {"EC", "P-384", NID_ecdsa_with_SHA384},
                                                       {"EC", "P-521", NID_ecdsa_with_SHA512},
                                                       {"RSA", "2048", NID_sha256WithRSAEncryption}}));
    CAPTURE(type, param);
    EvpPkey key = test::generate_key(type, param);
    const PublicKey pub(test::tpm_public_of(key.get()));
    const JwsSigner signer = software_signer(std::move(key));
    const Bytes der = certificate_request(pub, signer);
    const unsigned char* p = der.data();
    const Owned<X509_REQ, X509_REQ_free> req(d2i_X509_REQ(nullptr, &p, static_cast<long>(der.size())));
    REQUIRE(req);
    CHECK(p == der.data() + der.size());
    CHECK(X509_NAME_entry_count(X509_REQ_get_subject_name(req.get())) == 0);
    CHECK(X509_REQ_get_signature_nid(req.get()) == nid);
    EVP_PKEY* in_req = X509_REQ_get0_pubkey(req.get());
    REQUIRE(in_req);
    CHECK(to_der(i2d_PUBKEY, in_req) == pub.spki_der());
    CHECK(X509_REQ_verify(req.get(), in_req) == 1);
}

TEST_CASE("acme: the certificate request names the permanent identifier as its common name", "[acme]") {
    EvpPkey key = test::generate_key("EC", "P-256");
    const PublicKey pub(test::tpm_public_of(key.get()));
    const JwsSigner signer = software_signer(std::move(key));
    // tpmkey-ca's form: "urn:ek:sha256:" and base64 of 32 bytes, 58 characters.
    const std::string id = "urn:ek:sha256:q+vrF2kVOLqsQ3/7kkXMuKGEbR7TbIJaIRa5Et0Cl5U=";
    const Bytes der = certificate_request(pub, signer, id);
    const unsigned char* p = der.data();
    const Owned<X509_REQ, X509_REQ_free> req(d2i_X509_REQ(nullptr, &p, static_cast<long>(der.size())));
    REQUIRE(req);
    const X509_NAME* subject = X509_REQ_get_subject_name(req.get());
    REQUIRE(X509_NAME_entry_count(subject) == 1);
    const X509_NAME_ENTRY* cn = X509_NAME_get_entry(subject, 0);
    CHECK(OBJ_obj2nid(X509_NAME_ENTRY_get_object(cn)) == NID_commonName);
    const ASN1_STRING* value = X509_NAME_ENTRY_get_data(cn);
    CHECK(ASN1_STRING_type(value) == V_ASN1_UTF8STRING);
    CHECK(std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(value)),
                      static_cast<std::size_t>(ASN1_STRING_length(value))) == id);
    CHECK(X509_REQ_verify(req.get(), X509_REQ_get0_pubkey(req.get())) == 1);
    CHECK_THROWS_WITH(certificate_request(pub, signer, std::string(65, 'a')),
                      "certificate request: the common name " + std::string(65, 'a') + " is longer than 64 characters");
}

TEST_CASE("acme: a signer of another key makes no request", "[acme]") {
    EvpPkey key = test::generate_key("EC", "P-256");
    const PublicKey pub(test::tpm_public_of(key.get()));
    const JwsSigner other = new_account_key();
    CHECK_THROWS_WITH(certificate_request(pub, other), Catch::Matchers::Contains("does not verify"));
}

TEST_CASE("acme: a problem document in words: type, detail, subproblems, and any other answer printable and bounded",
          "[acme]") {
    CHECK(
        problem_text(R"({"type":"urn:ietf:params:acme:error:badAttestationStatement","detail":"x5c is not valid"})") ==
        "urn:ietf:params:acme:error:badAttestationStatement: x5c is not valid");
    CHECK(problem_text(R"({"type":"urn:ietf:params:acme:error:malformed","detail":"two",)"
                       R"("subproblems":[{"type":"urn:ietf:params:acme:error:rejectedIdentifier","detail":"no",)"
                       R"("identifier":{"type":"permanent-identifier","value":"urn:ek:x"}}]})") ==
          "urn:ietf:params:acme:error:malformed: two; urn:ietf:params:acme:error:rejectedIdentifier: no (urn:ek:x)");
    CHECK(problem_text("") == "no explanation given");
    CHECK(problem_text(" \r\n") == "no explanation given");
    CHECK(problem_text("404 page not found\n") == "404 page not found");
    CHECK(problem_text("<html>\x1b[31mred\n</html>") == "<html>?[31mred?</html>");
    const std::string long_text = problem_text(std::string(5000, 'a'));
    CHECK(long_text.size() == 203);
    CHECK(problem_text(R"({"type":"t\u001b","detail":"d"})") == "t?: d");
}

TEST_CASE("acme: step-ca's refusal by its webhook is said once, not again as its subproblem", "[acme]") {
    // step-ca's acme/order.go: the webhook's message in the detail as
    // "MESSAGE (CODE)", and again as the subproblem's detail.
    CHECK(problem_text(
              R"({"type":"urn:ietf:params:acme:error:unauthorized",)"
              R"j("detail":"The client lacks sufficient authorization: tpmkey-ca revoked it (tpmkey-ca-revoked)",)j"
              R"("subproblems":[{"type":"urn:smallstep:acme:error:tpmkey-ca-revoked",)"
              R"("detail":"tpmkey-ca revoked it"}]})") ==
          "urn:ietf:params:acme:error:unauthorized: The client lacks sufficient authorization: tpmkey-ca revoked it "
          "(tpmkey-ca-revoked)");
    // The webhook's message whole, though longer than 300 characters.
    const std::string long_message(400, 'm');
    CHECK(problem_text(R"({"type":"t","detail":"refused: )" + long_message + R"j( (c)","subproblems":[{"type":"s",)j" +
                       R"("detail":")" + long_message + R"("}]})") == "t: refused: " + long_message + " (c)");
    // A subproblem that says something else stays.
    CHECK(problem_text(R"({"type":"t","detail":"d","subproblems":[{"type":"s","detail":"other"}]})") ==
          "t: d; s: other");
}

TEST_CASE("acme: refusals whose cause is known say what to do", "[acme]") {
    const std::string rsa = " (step-ca verifies only an RSA AK: enrol the TPM's RSA AK with 'tpmkey attest enroll --ak "
                            "rsa', then the CA's steps, and give its certificate as --ak-cert)";
    CHECK(refusal_advice("the challenge", "urn:ietf:params:acme:error:badAttestationStatement",
                         "urn:ietf:params:acme:error:badAttestationStatement: The request message was malformed: "
                         "only RSA verification keys are supported") == rsa);
    CHECK(refusal_advice("the challenge", "urn:ietf:params:acme:error:badAttestationStatement",
                         "urn:ietf:params:acme:error:badAttestationStatement: invalid alg -7 in attestation "
                         "statement") == rsa);
    CHECK(refusal_advice("the certificate request (finalize)", "urn:ietf:params:acme:error:serverInternal",
                         "urn:ietf:params:acme:error:serverInternal: The server experienced an internal error") ==
          " (step-ca's log says why; most likely step-ca could not ask its ACME provisioner's authorizing webhook: "
          "check that tpmkey-ca webhook runs at the URL step-ca has for it, with step-ca's secret, and read its "
          "standard error)");
    CHECK(refusal_advice("the account", "urn:ietf:params:acme:error:serverInternal", "x").empty());
    CHECK(refusal_advice("the challenge", "urn:ietf:params:acme:error:badAttestationStatement", "x5c is not valid")
              .empty());
}

namespace {

std::string nested(std::size_t levels, const char* open = "[", const char* close = "]") {
    std::string out;
    for (std::size_t i = 0; i < levels; ++i)
        out += open;
    out += "1";
    for (std::size_t i = 0; i < levels; ++i)
        out += close;
    return out;
}

}  // namespace

TEST_CASE("acme: a server's JSON nested deeper than 32 levels is refused while parsing, however deep", "[acme]") {
    CHECK(parse_answer(nested(32), "https://ca/x").is_array());
    CHECK(parse_answer(nested(31, R"({"a":)", "}"), "https://ca/x").is_object());
    CHECK_THROWS_WITH(parse_answer(nested(33), "https://ca/x"),
                      "https://ca/x: the answer is JSON nested deeper than 32 levels; refused");
    CHECK_THROWS_WITH(parse_answer(nested(33, R"({"a":)", "}"), "https://ca/x"),
                      "https://ca/x: the answer is JSON nested deeper than 32 levels; refused");
    // What a hostile server can send under the 1 MiB limit: 100000 levels
    // (copied or dumped by recursion, it would exhaust the stack).
    const std::string deep = R"({"challenges":[{"type":"device-attest-01","x":)" + nested(100000) + "}]}";
    CHECK_THROWS_WITH(parse_answer(deep, "https://ca/authz"),
                      "https://ca/authz: the answer is JSON nested deeper than 32 levels; refused");
    CHECK(problem_text(deep) == "an answer of JSON nested deeper than 32 levels");
    CHECK(problem_text(R"({"type":"t","detail":)" + nested(100000) + "}") ==
          "an answer of JSON nested deeper than 32 levels");
    CHECK(parse_answer("not json", "https://ca/x").is_discarded());
}

TEST_CASE("acme: a nonce is base64url of 1 to 256 characters", "[acme]") {
    CHECK(is_nonce("abcXYZ019-_"));
    CHECK(is_nonce(std::string(256, 'a')));
    CHECK_FALSE(is_nonce(""));
    CHECK_FALSE(is_nonce(std::string(257, 'a')));
    CHECK_FALSE(is_nonce("abc="));
    CHECK_FALSE(is_nonce("a\"b"));
    CHECK_FALSE(is_nonce("a b"));
    CHECK_FALSE(is_nonce("a\xff"));
}
