// Policies of PCR-bound keys: the bytes openssl_tpm2_engine writes, the
// digests the TPM computes (known answers from docs/pcr-policy-research
// and from tpm2-tools against a swtpm), signed policies that verify, and
// clear errors for every malformed command.
#include "core/keys/tpm_policy.hpp"
#include "core/base/error.hpp"
#include "core/base/owned.hpp"
#include "core/keys/key_file.hpp"
#include "core/policy/tpm_policy_session.hpp"
#include "hex.hpp"

#include <openssl/ec.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <tss2/tss2_mu.h>
#include <catch2/catch.hpp>

#include <string>

using namespace tpmkey;

namespace {

using test::from_hex;

Bytes sha256(std::initializer_list<std::span<const std::uint8_t>> parts) {
    const EvpMdCtx ctx(EVP_MD_CTX_new());
    REQUIRE(EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr));
    for (const auto& p : parts)
        REQUIRE(EVP_DigestUpdate(ctx.get(), p.data(), p.size()));
    Bytes out(32);
    REQUIRE(EVP_DigestFinal_ex(ctx.get(), out.data(), nullptr));
    return out;
}

// PCR 16 reset, then extended with "aaa" zero-padded to 32 bytes (the
// engine's tests and the research notes, section 3): its value, and the
// digest of it that PolicyPCR carries.
Bytes pcr16_value() {
    Bytes aaa(32, 0);
    aaa[0] = aaa[1] = aaa[2] = 'a';
    return sha256({Bytes(32, 0), aaa});
}
const Bytes pcr16_digest = from_hex("2c28901f71751debfba3f3b5bf3be9c54b8b2f8c1411f2c117a0e838ee4e6c13");

PolicyCommand pcr16() { return policy_pcr(parse_pcr_selection("16", "sha256"), pcr16_digest); }

// The P-256 key whose TPM name tpm2-tools 5.4 reported, on a swtpm:
//   tpm2_loadexternal -C o -G ecc -u signer.pub -n sk.name
const char* const signer_pem = "-----BEGIN EC PRIVATE KEY-----\n"
                               "MHcCAQEEIGGJdSSFtIS07n29RsZTnWbGFRCzOaYHVL3iFQNqNflDoAoGCCqGSM49\n"
                               "AwEHoUQDQgAEIQb4cCIZBIikPzo5fJJaGaIX9/FbCF56yMvy9HunErOAJe1C38nI\n"
                               "RZv9uc/2Zn47v+0uMo2kjkJqT5w2m7yaaA==\n"
                               "-----END EC PRIVATE KEY-----\n";
const char* const signer_name = "000b76d2e0b04acfc183ac0ddffec7e02c7dd0f2eef035796978fa9e9a3f6b6ea500";

EvpPkey signer_key() {
    Bio bio(BIO_new_mem_buf(signer_pem, -1));
    EvpPkey key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
    REQUIRE(key);
    return key;
}

EvpPkey generated_key(const char* type, const char* parameter) {
    EvpPkey key(std::string(type) == "RSA" ? EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", size_t{2048})
                                           : EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", parameter));
    REQUIRE(key);
    return key;
}

TPM2B_DIGEST policy_ref_of(std::uint8_t fill) {
    TPM2B_DIGEST ref{};
    ref.size = 32;
    std::fill(ref.buffer, ref.buffer + 32, fill);
    return ref;
}

PolicyCommand unsigned_authorize(EVP_PKEY* signer, const TPM2B_DIGEST& ref) {
    AuthorizeParts parts;
    parts.signer = signer_public(signer);
    parts.policy_ref = ref;
    parts.signature.sigAlg = TPM2_ALG_NULL;
    return policy_authorize(parts);
}

Bytes marshal_public(const TPM2B_PUBLIC& pub) {
    Bytes out(sizeof pub);
    size_t n = 0;
    REQUIRE(Tss2_MU_TPM2B_PUBLIC_Marshal(&pub, out.data(), out.size(), &n) == TSS2_RC_SUCCESS);
    out.resize(n);
    return out;
}

}  // namespace

TEST_CASE("policy digests: the known answers of the research notes") {
    CHECK(hex(pcr16_value()).starts_with("c2119764"));
    CHECK(sha256({pcr16_value()}) == pcr16_digest);

    const PolicyCommand auth_value = policy_auth_value();
    CHECK(hex(policy_digest(std::vector{auth_value})) ==
          "8fcd2169ab92694e0c633f1ab772842b8241bbc20288981fc7ac1eddc1fddb0e");
    CHECK(hex(policy_digest(std::vector{pcr16()})) ==
          "7644f611ea10d760dab936c3951e1d85ecdb84ce9a7903dde1c7e0a2d909a013");
    CHECK(hex(policy_digest(std::vector{pcr16(), auth_value})) ==
          "f5659398c9b4660747ab15eff3fcd4ef10349ce6b3250da978d87b825dfc026f");
    CHECK(hex(policy_digest(std::vector{auth_value, pcr16()})) ==
          "442be86e9ff46a5f3f4f99479b418988604b2868cd74560c549e529fe3943378");
    CHECK(policy_digest({}) == Bytes(32, 0));
}

TEST_CASE("PolicyPCR and PolicyAuthValue are stored as openssl_tpm2_engine stores them") {
    // tests/policies/policy_pcr.txt of the engine: CC || TPML_PCR_SELECTION || pcrDigest.
    const PolicyCommand pcr = pcr16();
    CHECK(pcr.code == TPM2_CC_PolicyPCR);
    CHECK(hex(pcr.body) == "00000001"
                           "000b"
                           "03"
                           "000001" +
                               hex(pcr16_digest));
    CHECK(policy_auth_value() == PolicyCommand{TPM2_CC_PolicyAuthValue, {}});
    // PCRs 7 and 16 select 80 00 01.
    const PolicyCommand two = policy_pcr(parse_pcr_selection("16,7", "sha1"), pcr16_digest);
    CHECK(hex(two.body).starts_with("00000001"
                                    "0004"
                                    "03"
                                    "800001"));
    CHECK(pcr_selection_of(two) == PcrSelection{TPM2_ALG_SHA1, {7, 16}});
    CHECK(pcr_selection_of(pcr) == PcrSelection{TPM2_ALG_SHA256, {16}});
    CHECK_THROWS_WITH(policy_pcr(parse_pcr_selection("7", "sha256"), Bytes(20, 0)), Catch::Contains("SHA-256"));
}

TEST_CASE("a PCR-bound key's whole policy, as openssl_tpm2_engine writes it") {
    const PcrSelection pcr_16 = parse_pcr_selection("16", "sha256");
    const std::vector<Bytes> values{pcr16_value()};
    CHECK(pcr_policy_for(pcr_16, values) == pcr16());

    SECTION("without a signer: [PolicyAuthValue if a PIN], PolicyPCR") {
        const PcrBoundPolicy with_pin = pcr_bound_policy(pcr_16, values, true, std::nullopt);
        CHECK(with_pin.policy == std::vector{policy_auth_value(), pcr16()});
        CHECK(with_pin.signed_policies.empty());
        CHECK(hex(with_pin.digest) == "442be86e9ff46a5f3f4f99479b418988604b2868cd74560c549e529fe3943378");
        const PcrBoundPolicy no_pin = pcr_bound_policy(pcr_16, values, false, std::nullopt);
        CHECK(no_pin.policy == std::vector{pcr16()});
        CHECK(hex(no_pin.digest) == "7644f611ea10d760dab936c3951e1d85ecdb84ce9a7903dde1c7e0a2d909a013");
    }
    SECTION("with a signer: PolicyAuthorize(signer, nonce), [PolicyAuthValue]; PolicyPCR signed") {
        const EvpPkey key = signer_key();
        const TPM2B_DIGEST nonce = policy_ref_of(0x11);
        const PolicySigning signing{key.get(), nonce, "tpmkey-keygen"};
        const PcrBoundPolicy with_pin = pcr_bound_policy(pcr_16, values, true, signing);
        REQUIRE(with_pin.policy.size() == 2);
        // The engine's PolicyAuthorize: TPM2B_PUBLIC of the signer in its
        // template || TPM2B_DIGEST nonce || TPMT_SIGNATURE with sigAlg NULL; the
        // point is signer_pem's, as `openssl ec -pubout` prints it.
        CHECK(with_pin.policy[0].code == TPM2_CC_PolicyAuthorize);
        CHECK(hex(with_pin.policy[0].body) == "0056"
                                              "0023"
                                              "000b"
                                              "00060040"
                                              "0000"
                                              "0010"
                                              "0010"
                                              "0003"
                                              "0010"
                                              "0020"
                                              "2106f87022190488a43f3a397c925a19a217f7f15b085e7ac8cbf2f47ba712b3"
                                              "0020"
                                              "8025ed42dfc9c8459bfdb9cff6667e3bbfed2e328da48e426a4f9c369bbc9a68"
                                              "0020" +
                                                  std::string(64, '1') + "0010");
        CHECK(with_pin.policy[1] == policy_auth_value());
        // tpm2-tools' digest of the same (see the PolicyAuthorize case).
        CHECK(hex(with_pin.digest) == "7acbbb5b742d37a47c90101c52f26f10016ee6a5e824c33cab05d8b0d00f0afb");
        REQUIRE(with_pin.signed_policies.size() == 1);
        const SignedPolicy& signed_pcr = with_pin.signed_policies[0];
        CHECK(signed_pcr.name == "tpmkey-keygen");
        REQUIRE(signed_pcr.commands.size() == 2);
        CHECK(signed_pcr.commands[0] == pcr16());
        const AuthorizeParts parts = authorize_parts_of(signed_pcr.commands[1]);
        CHECK(marshal_public(parts.signer) == marshal_public(signer_public(key.get())));
        CHECK(hex(std::span(parts.policy_ref.buffer, parts.policy_ref.size)) == std::string(64, '1'));
        CHECK(signature_verifies(parts, authorization_digest(policy_digest(std::vector{pcr16()}), nonce)));

        const PcrBoundPolicy no_pin = pcr_bound_policy(pcr_16, values, false, signing);
        CHECK(no_pin.policy == std::vector{with_pin.policy[0]});
        CHECK(hex(no_pin.digest) == "c7923b204fdf1ee4646c96d7e14120d041f9eecc0a66ba04b5b84a5f8adeb941");
    }
    SECTION("every key its own nonce") {
        const TPM2B_DIGEST a = new_policy_nonce();
        const TPM2B_DIGEST b = new_policy_nonce();
        CHECK(a.size == 32);
        CHECK(hex(std::span(a.buffer, a.size)) != hex(std::span(b.buffer, b.size)));
    }
}

TEST_CASE("PCR selections: parsed, described, and every wrong one refused") {
    CHECK(parse_pcr_selection("0,2,4,7", "sha256") == PcrSelection{TPM2_ALG_SHA256, {0, 2, 4, 7}});
    CHECK(parse_pcr_selection("23", "sha384") == PcrSelection{TPM2_ALG_SHA384, {23}});
    CHECK(parse_pcr_selection("7,0", "sha512").pcrs == std::vector<unsigned>{0, 7});
    CHECK(pcr_selection_text(parse_pcr_selection("7", "sha256")) == "PCR 7 (sha256)");
    CHECK(pcr_selection_text(parse_pcr_selection("0,2,4,7", "sha1")) == "PCRs 0, 2, 4, 7 (sha1)");
    for (const char* bad : {"24", "", "x", "7,", ",7", "7;8", " 7", "-1", "99999999999999999999", "0x7"}) {
        INFO(bad);
        CHECK_THROWS_WITH(parse_pcr_selection(bad, "sha256"), Catch::Contains("not a list of PCR numbers"));
    }
    CHECK_THROWS_WITH(parse_pcr_selection("7,7", "sha256"), Catch::Contains("PCR 7 is named twice"));
    CHECK_THROWS_WITH(parse_pcr_selection("7", "md5"), Catch::Contains("unknown PCR bank 'md5'"));
    CHECK_THROWS_WITH(parse_pcr_selection("7", "SHA256"), Catch::Contains("unknown PCR bank"));
}

TEST_CASE("command names in messages") {
    CHECK(policy_command_text(TPM2_CC_PolicySecret) == "TPM2_PolicySecret (0x151)");
    CHECK(policy_command_text(TPM2_CC_PolicyPCR) == "TPM2_PolicyPCR (0x17f)");
    CHECK(policy_command_text(0x1234) == "TPM command 0x1234");
}

TEST_CASE("the policy signer: the engine's template, and the name tpm2-tools gives") {
    const EvpPkey key = signer_key();
    const TPM2B_PUBLIC pub = signer_public(key.get());
    // 0056 0023 000b 00060040 0000 0010 0010 0003 0010 0020<x> 0020<y>
    const std::string marshalled = hex(marshal_public(pub));
    CHECK(marshalled.starts_with("0056"
                                 "0023"
                                 "000b"
                                 "00060040"
                                 "0000"
                                 "0010"
                                 "0010"
                                 "0003"
                                 "0010"
                                 "0020"));
    CHECK(marshalled.size() == 2 * (2 + 0x56));
    CHECK(pub.size == 0x56);
    CHECK(hex(tpm_name(pub.publicArea)) == signer_name);

    SECTION("P-384 and RSA signers") {
        const EvpPkey p384 = generated_key("EC", "P-384");
        const TPM2B_PUBLIC pub384 = signer_public(p384.get());
        CHECK(pub384.publicArea.parameters.eccDetail.curveID == TPM2_ECC_NIST_P384);
        CHECK(pub384.publicArea.unique.ecc.x.size == 48);
        const EvpPkey rsa = generated_key("RSA", nullptr);
        const TPM2B_PUBLIC pub_rsa = signer_public(rsa.get());
        CHECK(pub_rsa.publicArea.type == TPM2_ALG_RSA);
        CHECK(pub_rsa.publicArea.parameters.rsaDetail.keyBits == 2048);
        CHECK(pub_rsa.publicArea.parameters.rsaDetail.exponent == 0);
        CHECK(pub_rsa.publicArea.unique.rsa.size == 256);
        CHECK(pub_rsa.publicArea.objectAttributes == 0x00060040);
        CHECK(hex(marshal_public(pub_rsa)).size() == 2 * (2u + pub_rsa.size));
        CHECK(tpm_name(pub_rsa.publicArea).size() == 34);
    }
    SECTION("other keys are refused") {
        const EvpPkey p521 = generated_key("EC", "P-521");
        CHECK_THROWS_WITH(signer_public(p521.get()), Catch::Contains("not supported"));
        const EvpPkey ed = EvpPkey(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"));
        REQUIRE(ed);
        CHECK_THROWS_WITH(signer_public(ed.get()), Catch::Contains("RSA or EC"));
    }
}

TEST_CASE("PolicyAuthorize: its parts round-trip and its digest is the TPM's (tpm2_policyauthorize, trial)") {
    const EvpPkey key = signer_key();
    const TPM2B_DIGEST ref = policy_ref_of(0x11);
    const PolicyCommand authorize = unsigned_authorize(key.get(), ref);
    CHECK(authorize.code == TPM2_CC_PolicyAuthorize);
    CHECK(hex(authorize.body).ends_with("0020" + std::string(64, '1') + "0010"));  // ref, NULL signature
    const AuthorizeParts parts = authorize_parts_of(authorize);
    CHECK(marshal_public(parts.signer) == marshal_public(signer_public(key.get())));
    CHECK(parts.signature.sigAlg == TPM2_ALG_NULL);
    CHECK(policy_authorize(parts) == authorize);

    // H(H(0 || 0000016a || name) || ref), as the TPM computes it.
    const Bytes code = from_hex("0000016a");
    const Bytes expected = sha256({sha256({Bytes(32, 0), code, from_hex(signer_name)}), std::span(ref.buffer, 32)});
    CHECK(policy_digest(std::vector{authorize}) == expected);
    // tpm2-tools 5.4 on a swtpm: tpm2_policyauthorize -i <zeros> -q <32 x 0x11> -n sk.name,
    // then tpm2_policyauthvalue.
    CHECK(hex(expected) == "c7923b204fdf1ee4646c96d7e14120d041f9eecc0a66ba04b5b84a5f8adeb941");
    CHECK(hex(policy_digest(std::vector{authorize, policy_auth_value()})) ==
          "7acbbb5b742d37a47c90101c52f26f10016ee6a5e824c33cab05d8b0d00f0afb");
    // PolicyAuthorize starts from zeros again, whatever came before.
    CHECK(policy_digest(std::vector{pcr16(), authorize}) == expected);
}

TEST_CASE("a signed policy's signature verifies over H(approvedPolicy || policyRef)") {
    const TPM2B_DIGEST ref = policy_ref_of(0x5a);
    const std::vector<PolicyCommand> commands{policy_auth_value(), pcr16()};
    const Bytes signed_digest = sha256({policy_digest(commands), std::span(ref.buffer, 32)});
    for (const char* type : {"EC", "RSA"}) {
        INFO(type);
        const EvpPkey key = generated_key(type, "P-256");
        const SignedPolicy policy = sign_policy(commands, key.get(), ref, "boot 42");
        CHECK(policy.name == "boot 42");
        REQUIRE(policy.commands.size() == 3);
        CHECK(policy.commands[0] == commands[0]);
        CHECK(policy.commands[1] == commands[1]);
        const AuthorizeParts parts = authorize_parts_of(policy.commands[2]);
        CHECK(marshal_public(parts.signer) == marshal_public(signer_public(key.get())));
        CHECK(Bytes(parts.policy_ref.buffer, parts.policy_ref.buffer + parts.policy_ref.size) ==
              Bytes(ref.buffer, ref.buffer + 32));
        // What OpenSSL verifies: DER ECDSA-Sig-Value, or the PKCS#1 signature.
        Bytes signature;
        if (std::string(type) == "EC") {
            REQUIRE(parts.signature.sigAlg == TPM2_ALG_ECDSA);
            CHECK(parts.signature.signature.ecdsa.hash == TPM2_ALG_SHA256);
            const TPMS_SIGNATURE_ECC& ecc = parts.signature.signature.ecdsa;
            Owned<ECDSA_SIG, ECDSA_SIG_free> sig(ECDSA_SIG_new());
            REQUIRE(ECDSA_SIG_set0(sig.get(), BN_bin2bn(ecc.signatureR.buffer, ecc.signatureR.size, nullptr),
                                   BN_bin2bn(ecc.signatureS.buffer, ecc.signatureS.size, nullptr)));
            signature = to_der(i2d_ECDSA_SIG, static_cast<const ECDSA_SIG*>(sig.get()));
        } else {
            REQUIRE(parts.signature.sigAlg == TPM2_ALG_RSASSA);
            CHECK(parts.signature.signature.rsassa.hash == TPM2_ALG_SHA256);
            const TPM2B_PUBLIC_KEY_RSA& s = parts.signature.signature.rsassa.sig;
            signature.assign(s.buffer, s.buffer + s.size);
        }
        const Owned<EVP_PKEY_CTX, EVP_PKEY_CTX_free> ctx(EVP_PKEY_CTX_new(key.get(), nullptr));
        REQUIRE(EVP_PKEY_verify_init(ctx.get()) == 1);
        REQUIRE(EVP_PKEY_CTX_set_signature_md(ctx.get(), EVP_sha256()) == 1);
        if (std::string(type) == "RSA")
            REQUIRE(EVP_PKEY_CTX_set_rsa_padding(ctx.get(), RSA_PKCS1_PADDING) == 1);
        CHECK(EVP_PKEY_verify(ctx.get(), signature.data(), signature.size(), signed_digest.data(),
                              signed_digest.size()) == 1);
        // The digest of the signed policy is that of its signer and ref.
        CHECK(policy_digest(policy.commands) == policy_digest(std::vector{unsigned_authorize(key.get(), ref)}));
    }
    const EvpPkey public_only = [] {
        const EvpPkey key = signer_key();
        const Bytes spki = to_der(i2d_PUBKEY, static_cast<const EVP_PKEY*>(key.get()));
        const unsigned char* p = spki.data();
        return EvpPkey(d2i_PUBKEY(nullptr, &p, static_cast<long>(spki.size())));
    }();
    REQUIRE(public_only);
    CHECK_THROWS_WITH(sign_policy(commands, public_only.get(), ref, ""), Catch::Contains("private key"));
}

TEST_CASE("malformed policy commands: a clear error, never a crash") {
    const EvpPkey key = signer_key();
    const PolicyCommand authorize = unsigned_authorize(key.get(), policy_ref_of(1));
    const PolicyCommand pcr = pcr16();

    SECTION("every truncation") {
        for (const PolicyCommand& whole : {authorize, pcr}) {
            for (std::size_t cut = 0; cut < whole.body.size(); ++cut) {
                const PolicyCommand cut_short{whole.code,
                                              Bytes(whole.body.begin(), whole.body.begin() + static_cast<long>(cut))};
                INFO(cut);
                CHECK_THROWS_AS(policy_digest(std::vector{cut_short}), Error);
            }
        }
    }
    SECTION("every single-byte corruption") {
        for (const PolicyCommand& whole : {authorize, pcr}) {
            for (std::size_t i = 0; i < whole.body.size(); ++i) {
                PolicyCommand corrupt = whole;
                corrupt.body[i] ^= 0xa5;
                try {
                    (void)policy_digest(std::vector{corrupt});
                } catch (const Error& e) {
                    CHECK_THAT(e.what(), Catch::Contains("in the key's policy") || Catch::Contains("name algorithm"));
                }
            }
        }
    }
    SECTION("specific shapes") {
        PolicyCommand longer = authorize;
        longer.body.push_back(0);
        CHECK_THROWS_WITH(authorize_parts_of(longer),
                          "malformed TPM2_PolicyAuthorize (0x16a) in the key's policy: it has 1 bytes too many");
        CHECK_THROWS_WITH(authorize_parts_of(pcr), Catch::Contains("it is TPM2_PolicyPCR (0x17f)"));
        CHECK_THROWS_WITH(pcr_selection_of(authorize), Catch::Contains("it is TPM2_PolicyAuthorize"));
        PolicyCommand auth_value = policy_auth_value();
        auth_value.body.push_back(0);
        CHECK_THROWS_WITH(policy_digest(std::vector{auth_value}), Catch::Contains("1 bytes too many"));
        // Two banks; PCR 24 (sizeofSelect 4); no PCR; no digest.
        CHECK_THROWS_WITH(
            pcr_selection_of({TPM2_CC_PolicyPCR, from_hex("00000002000b03000001000403000001" + hex(pcr16_digest))}),
            Catch::Contains("2 banks"));
        CHECK_THROWS_WITH(pcr_selection_of({TPM2_CC_PolicyPCR, from_hex("00000001000b0400000001" + hex(pcr16_digest))}),
                          Catch::Contains("PCR 24"));
        CHECK_THROWS_WITH(pcr_selection_of({TPM2_CC_PolicyPCR, from_hex("00000001000b03000000" + hex(pcr16_digest))}),
                          Catch::Contains("no PCR"));
        CHECK_THROWS_WITH(pcr_selection_of({TPM2_CC_PolicyPCR, from_hex("00000001000b03000001")}),
                          Catch::Contains("PCR digest is 0 bytes long, not 32"));
        // The public key's size field says less than its area.
        PolicyCommand short_size = authorize;
        short_size.body[1] = static_cast<std::uint8_t>(short_size.body[1] - 2);
        CHECK_THROWS_AS(authorize_parts_of(short_size), Error);
        CHECK_THROWS_WITH(policy_digest(std::vector{PolicyCommand{TPM2_CC_PolicySecret, {}}}),
                          Catch::Contains("TPM2_PolicySecret (0x151)"));
    }
}

TEST_CASE("PCR values are printed one per line, bank:index and hex, for the event log") {
    const PcrSelection selection = parse_pcr_selection("0,7,16", "sha256");
    const std::vector<Bytes> values{Bytes(32, 0), Bytes(32, 0xab), pcr16_digest};
    CHECK(pcr_values_text(selection, values) == "  sha256:0  " + std::string(64, '0') + "\n" + "  sha256:7  " +
                                                    hex(Bytes(32, 0xab)) + "\n" + "  sha256:16  " + hex(pcr16_digest) +
                                                    "\n");
}

TEST_CASE("a PolicyPCR of a bank no TPM has is refused by name, not passed to the TPM") {
    PolicyCommand odd = pcr16();
    odd.body[4] = 0x12;  // TPML_PCR_SELECTION: count (4 bytes), then the bank's hash
    odd.body[5] = 0x34;
    CHECK_THROWS_WITH(policy_digest(std::vector{odd}),
                      "malformed TPM2_PolicyPCR (0x17f) in the key's policy: its PCR bank is hash 0x1234, not "
                      "sha1, sha256, sha384 or sha512");
}

namespace {

// A key file with `policy` and its digest as authPolicy (what keygen makes).
KeyFile key_with_policy(std::vector<PolicyCommand> policy) {
    KeyFile key;
    key.policy = std::move(policy);
    const Bytes digest = policy_digest(key.policy);
    key.blobs.pub.publicArea.authPolicy.size = static_cast<UINT16>(digest.size());
    std::copy(digest.begin(), digest.end(), key.blobs.pub.publicArea.authPolicy.buffer);
    return key;
}

}  // namespace

TEST_CASE("policies are checked in software against the key before the TPM is asked") {
    SECTION("the key's own policy against its authPolicy") {
        KeyFile key = key_with_policy({policy_auth_value(), pcr16()});
        CHECK_NOTHROW(check_policy_digest(key));
        for (const std::vector<PolicyCommand>& altered :
             {std::vector{pcr16()}, std::vector{pcr16(), policy_auth_value()},
              std::vector{policy_auth_value(), policy_pcr(parse_pcr_selection("7", "sha256"), pcr16_digest)}}) {
            KeyFile changed = key;
            changed.policy = altered;
            CHECK_THROWS_WITH(check_policy_digest(changed),
                              Catch::StartsWith("the policy in the key file is not the one the key was made with"));
        }
    }
    SECTION("signed policies: signer, policy reference, signature") {
        for (const char* type : {"EC", "RSA"}) {
            INFO(type);
            const EvpPkey signer = generated_key(type, "P-256");
            const TPM2B_DIGEST ref = policy_ref_of(7);
            KeyFile key = key_with_policy({unsigned_authorize(signer.get(), ref), policy_auth_value()});
            const SignedPolicy good = sign_policy({pcr16()}, signer.get(), ref, "good");
            CHECK(signed_policy_problem(key, good).empty());

            SignedPolicy altered = good;
            altered.commands.front() = policy_pcr(parse_pcr_selection("7", "sha256"), pcr16_digest);
            CHECK(signed_policy_problem(key, altered) ==
                  "the key's signed policy 'good' has a signature that does not match its policy: the policy was "
                  "altered after it was signed");
            const EvpPkey other = generated_key(type, "P-256");
            CHECK(signed_policy_problem(key, sign_policy({pcr16()}, other.get(), ref, "")) ==
                  "a signed policy of the key is signed by another policy signer than the key's");
            CHECK(signed_policy_problem(key, sign_policy({pcr16()}, signer.get(), policy_ref_of(8), "x")) ==
                  "the key's signed policy 'x' was signed for another key (its policy reference is not this key's)");
            CHECK(signed_policy_problem(key, SignedPolicy{"empty", {}}) ==
                  "the key's signed policy 'empty' does not end with its signature (TPM2_PolicyAuthorize)");
            // A signature of another signed policy, moved onto this one.
            SignedPolicy moved =
                sign_policy({policy_pcr(parse_pcr_selection("7", "sha256"), pcr16_digest)}, signer.get(), ref, "moved");
            moved.commands.back() = good.commands.back();
            CHECK_THAT(signed_policy_problem(key, moved), Catch::Contains("does not match its policy"));
        }
    }
}

TEST_CASE("PolicySecret naming the PIN object: its body, its digest, and malformed ones refused") {
    // A SHA-256 object's name: the algorithm, then 32 bytes.
    Bytes name = from_hex("000b");
    for (std::uint8_t i = 0; i < 32; ++i)
        name.push_back(i);
    const PolicyCommand secret = policy_secret(name);
    CHECK(secret.code == TPM2_CC_PolicySecret);
    // A TPM2B_NAME: the size, then the name.
    Bytes body = from_hex("0022");
    body.insert(body.end(), name.begin(), name.end());
    CHECK(secret.body == body);
    CHECK(policy_secret_name(secret) == name);
    // TPM 2.0 Part 3, PolicySecret: PolicyUpdate(CC, authName, policyRef),
    // two hashes, the second over the empty policyRef.
    const Bytes zeros(32, 0);
    const Bytes code = from_hex("00000151");
    CHECK(policy_digest(std::vector{secret}) == sha256({sha256({zeros, code, name})}));

    PolicyCommand truncated = secret;
    truncated.body.pop_back();
    CHECK_THROWS_WITH(policy_secret_name(truncated), Catch::Contains("TPM2_PolicySecret"));
    Bytes hierarchy_name = from_hex("4000000b");  // a handle's name, not a PIN object's
    PolicyCommand not_an_object{TPM2_CC_PolicySecret, from_hex("0004")};
    not_an_object.body.insert(not_an_object.body.end(), hierarchy_name.begin(), hierarchy_name.end());
    CHECK_THROWS_WITH(policy_secret_name(not_an_object), Catch::Contains("names no SHA-256 object"));
    CHECK_THROWS(policy_secret(Bytes{}));
}
