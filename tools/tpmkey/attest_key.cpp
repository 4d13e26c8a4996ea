// tpmkey attest KEY: the proof, for an attestation CA, that KEY lives in
// this TPM and cannot leave it (docs/attestation.md): the TPM's attestation
// key (AK), certified by the CA beforehand (tpmkey attest enroll/activate),
// certifies KEY's public area with TPM2_Certify, bound to the CA's
// challenge; tpmkey-ca verify checks the result. With
// --acme-key-authorization, the same certification bound to an ACME
// key authorization, in the form step-ca verifies (attest_key_for_acme).
#include "cli.hpp"
#include "core/attestation/acme_attestation.hpp"
#include "core/attestation/exchange_file.hpp"
#include "core/attestation/webauthn.hpp"
#include "core/files/atomic_file.hpp"
#include "core/files/config.hpp"
#include "core/files/file_read.hpp"
#include "core/pin/prompt.hpp"
#include "core/tpm/tpm_keys.hpp"
#include "core/trust/attestation_key.hpp"
#include "core/trust/key_attestation.hpp"

#include <iostream>

namespace tpmkey::cli {

namespace {

constexpr CommandSpec attest_key_spec{
    "attest",
    "prove to an attestation CA that KEY lives in this TPM",
    "tpmkey attest KEY --ak-cert FILE (--challenge FILE | --acme-key-authorization FILE) [--pin-file FILE] [-o FILE]",
    "Writes KEY's attestation for tpmkey-ca verify: this TPM's attestation key\n"
    "(AK) certifies KEY's public area (TPM2_Certify), which says that KEY was\n"
    "made in this TPM and cannot leave it, bound to the CA's challenge. The\n"
    "file is WebAuthn's \"tpm\" attestation statement with the SSH public key\n"
    "(docs/attestation.md).\n"
    "\n"
    "  --ak-cert FILE     the AK certificate the CA issued (tpmkey-ca issue-ak;\n"
    "                     PEM, then any CA certificates to send along); the AK\n"
    "                     (ECC or RSA) is the one whose key it holds\n"
    "  --challenge FILE   the CA's challenge: a file of 16 to 1024 bytes\n"
    "  --acme-key-authorization FILE\n"
    "                     instead of --challenge: write the attestation object of\n"
    "                     ACME device-attest-01 (CBOR, as step-ca verifies it)\n"
    "                     for the key authorization in FILE (token.thumbprint)\n"
    "  --pin-file FILE    KEY's PIN: the first line of FILE (else asked for)\n"
    "  -o FILE            where to write it (default: KEY without .tpm, plus .att;\n"
    "                     .attobj with --acme-key-authorization)\n"
    "\n"
    "The AK certificate must be this TPM's: run 'tpmkey attest enroll' and\n"
    "'tpmkey attest activate' with the CA first. The PIN travels only in an\n"
    "encrypted session.\n",
    {"--ak-cert", "--challenge", "--acme-key-authorization", "--pin-file", "-o", nullptr},
    {nullptr},
    1};

// KEY.tpm -> KEY.att (or .attobj); another name gets it added.
std::filesystem::path default_output(const std::filesystem::path& key, const char* extension) {
    std::filesystem::path out = key;
    if (out.extension() == ".tpm")
        return out.replace_extension(extension);
    return out += extension;
}

// The ACME key authorization in `file` (one line; a final newline is
// dropped), checked as acme_certify_extra_data() checks it.
std::string read_key_authorization(const std::string& file) {
    const Bytes data = read_regular_file(file, 1024).data;
    std::string text(data.begin(), data.end());
    if (!text.empty() && text.back() == '\n')
        text.pop_back();
    try {
        (void)acme_certify_extra_data(text);
    } catch (const Error& e) {
        throw Error(file + ": " + e.what());
    }
    return text;
}

int cmd_attest_key(const Parsed& p) {
    const std::filesystem::path path = p.positional[0];
    const bool acme = p.has_value("--acme-key-authorization");
    if (!p.has_value("--ak-cert") || acme == p.has_value("--challenge"))
        throw UsageError("tpmkey attest: --ak-cert and one of --challenge and --acme-key-authorization are needed",
                         attest_key_spec.usage);
    const std::filesystem::path output =
        p.has_value("-o") ? std::filesystem::path(p.value("-o")) : default_output(path, acme ? ".attobj" : ".att");
    const KeyFile key = read_key_file(path);
    check_usable(key, path.string());
    const std::vector<Bytes> x5c = read_ak_certificates(p.value("--ak-cert"));
    Bytes challenge;
    std::string key_authorization;
    if (acme) {
        key_authorization = read_key_authorization(p.value("--acme-key-authorization"));
    } else {
        const std::string challenge_file = p.value("--challenge");
        challenge = read_regular_file(challenge_file, max_challenge_size + 1).data;
        if (challenge.size() < min_challenge_size || challenge.size() > max_challenge_size)
            throw Error(challenge_file + ": not a challenge (" + std::to_string(min_challenge_size) + " to " +
                        std::to_string(max_challenge_size) + " bytes)");
    }
    // The AK and the parent before the PIN is asked for.
    OpenedKey opened(key, path, p, &x5c.front(), p.value("--ak-cert"));
    // TPM2_Certify needs the key's ADMIN role: its auth value (our keys
    // have no adminWithPolicy, PCR-bound ones neither), so a PIN crosses
    // the bus only in the salted, encrypted session.
    KeyAttestation attestation;
    Bytes acme_object;
    opened.use([&](const TpmObject& loaded, const Authorization& auth) {
        if (acme)
            acme_object = attest_key_for_acme(opened.tpm(), loaded, key.blobs.pub.publicArea, auth, opened.ak(), x5c,
                                              key_authorization);
        else
            attestation = attest_key(opened.tpm(), loaded, key.blobs.pub.publicArea, auth, opened.ak(), x5c, challenge);
    });
    if (acme) {
        write_file_atomically(output,
                              std::string_view(reinterpret_cast<const char*>(acme_object.data()), acme_object.size()),
                              0644, Replace::yes);
        std::cout << "Wrote the ACME device-attest-01 attestation of " << path.string() << " to " << output.string()
                  << " (send it as {\"attObj\": base64url of it}).\n";
        return 0;
    }

    ExchangeFile file(attestation_file::kind);
    file.set_text(attestation_file::ssh_public_key, PublicKey(key.blobs.pub.publicArea).ssh_line(key.description));
    file.set_bytes(attestation_file::client_data_json,
                   Bytes(attestation.client_data_json.begin(), attestation.client_data_json.end()));
    file.set_bytes(attestation_file::attestation_object, attestation.attestation_object);
    if (key.has_policy())
        file.set_bytes(attestation_file::key_policy, format_policy(key.policy));
    write_exchange_file(output, file);
    std::cout << "Wrote the attestation of " << path.string() << " to " << output.string()
              << " (check it with tpmkey-ca verify).\n";
    return 0;
}

}  // namespace

const Command attest_key_command{&attest_key_spec, cmd_attest_key};

}  // namespace tpmkey::cli
