// tpmkey attest KEY: the proof, for an attestation CA, that KEY lives in
// this TPM and cannot leave it (docs/attestation.md): the TPM's attestation
// key (AK), certified by the CA beforehand (tpmkey attest enroll/activate),
// certifies KEY's public area with TPM2_Certify, bound to the CA's
// challenge; tpmkey-ca verify checks the result.
#include "cli.hpp"
#include "core/attestation/ek_certificate.hpp"
#include "core/attestation/exchange_file.hpp"
#include "core/attestation/webauthn.hpp"
#include "core/base/prompt.hpp"
#include "core/files/config.hpp"
#include "core/files/file_read.hpp"
#include "core/tpm/tpm_keys.hpp"
#include "core/trust/attestation_key.hpp"
#include "core/trust/key_attestation.hpp"

#include <openssl/x509.h>

#include <iostream>

namespace tpmkey::cli {

namespace {

constexpr CommandSpec attest_key_spec{"attest",
                                      "prove to an attestation CA that KEY lives in this TPM",
                                      "tpmkey attest KEY --ak-cert FILE --challenge FILE [--pin-file FILE] [-o FILE]",
                                      "Writes KEY's attestation for tpmkey-ca verify: this TPM's attestation key\n"
                                      "(AK) certifies KEY's public area (TPM2_Certify), which says that KEY was\n"
                                      "made in this TPM and cannot leave it, bound to the CA's challenge. The\n"
                                      "file is WebAuthn's \"tpm\" attestation statement with the SSH public key\n"
                                      "(docs/attestation.md).\n"
                                      "\n"
                                      "  --ak-cert FILE     the AK certificate the CA issued (tpmkey-ca issue-ak;\n"
                                      "                     PEM, then any CA certificates to send along)\n"
                                      "  --challenge FILE   the CA's challenge: a file of 16 to 1024 bytes\n"
                                      "  --pin-file FILE    KEY's PIN: the first line of FILE (else asked for)\n"
                                      "  -o FILE            where to write it (default: KEY without .tpm, plus .att)\n"
                                      "\n"
                                      "The AK certificate must be this TPM's: run 'tpmkey attest enroll' and\n"
                                      "'tpmkey attest activate' with the CA first. The PIN travels only in an\n"
                                      "encrypted session.\n",
                                      {"--ak-cert", "--challenge", "--pin-file", "-o", nullptr},
                                      {nullptr},
                                      1};

// KEY.tpm -> KEY.att; another name gets .att added.
std::filesystem::path default_output(const std::filesystem::path& key) {
    std::filesystem::path out = key;
    if (out.extension() == ".tpm")
        return out.replace_extension(".att");
    return out += ".att";
}

// The AK certificate (DER) and the CA certificates after it, as x5c.
std::vector<Bytes> read_ak_certificates(const std::string& file) {
    const Bytes data = read_regular_file(file, 1024 * 1024).data;
    std::vector<Bytes> out;
    for (const X509Cert& cert : certificates_in(data))
        out.push_back(to_der(i2d_X509, cert.get()));
    if (out.empty())
        throw Error(file + ": no certificate in it (PEM or DER)");
    return out;
}

// Whether the certificate's key is `ak`'s.
bool certifies(const Bytes& certificate_der, const TPMT_PUBLIC& ak) {
    const unsigned char* p = certificate_der.data();
    const X509Cert cert(d2i_X509(nullptr, &p, static_cast<long>(certificate_der.size())));
    EVP_PKEY* key = cert ? X509_get0_pubkey(cert.get()) : nullptr;
    if (!key)
        return false;
    return to_der(i2d_PUBKEY, key) == PublicKey(ak).spki_der();
}

int cmd_attest_key(const Parsed& p) {
    const std::filesystem::path path = p.positional[0];
    if (!p.has_value("--ak-cert") || !p.has_value("--challenge"))
        throw UsageError("tpmkey attest: --ak-cert and --challenge are needed", attest_key_spec.usage);
    const std::filesystem::path output =
        p.has_value("-o") ? std::filesystem::path(p.value("-o")) : default_output(path);
    const KeyFile key = read_key_file(path);
    check_usable(key, path.string());
    const std::vector<Bytes> x5c = read_ak_certificates(p.value("--ak-cert"));
    const std::string challenge_file = p.value("--challenge");
    const Bytes challenge = read_regular_file(challenge_file, max_challenge_size + 1).data;
    if (challenge.size() < min_challenge_size || challenge.size() > max_challenge_size)
        throw Error(challenge_file + ": not a challenge (" + std::to_string(min_challenge_size) + " to " +
                    std::to_string(max_challenge_size) + " bytes)");
    Secret pin;
    if (p.has_value("--pin-file"))
        pin = read_pin_file(p.value("--pin-file"));

    // The AK and the parent before the PIN is asked for: no PIN is typed
    // for a run that was going to fail, and none is sent under a storage
    // key that fails its checks.
    const Config config = load_config();
    Tpm tpm(config.tpm);
    TPMT_PUBLIC ak_area{};
    const TpmObject ak = create_ak(tpm, ak_area);
    if (!certifies(x5c.front(), ak_area))
        throw Error(p.value("--ak-cert") +
                    ": the certificate of another attestation key, not this TPM's (enrol this TPM with "
                    "'tpmkey attest enroll' and 'tpmkey attest activate')");
    KnownParents known = KnownParents::load();
    TpmObject parent;
    try {
        // The key's PIN goes under this parent: no clear accepted here (as
        // in a login; a key made before a clear cannot load anyway).
        parent = load_verified_parent(tpm, key.parent, known, nullptr,
                                      ParentPolicy{.accept_clear = false, .accept_new_tpm_ek = {}});
    } catch (const TpmError& e) {
        throw Error(path.string() + ": " + diagnose(e, tpm.address()).problem);
    } catch (const UnverifiedParent& e) {
        throw Error(path.string() + ": " + diagnosis_line(diagnose_untrusted_parent(e)));
    }
    if (!p.has_value("--pin-file") && key.needs_pin())
        pin = pin_from_terminal("Enter the PIN of " + path.stem().string() + ": ", "--pin-file");

    // TPM2_Certify needs the key's ADMIN role: its auth value (our keys
    // have no adminWithPolicy, PCR-bound ones neither), so a PIN crosses
    // the bus only in the salted, encrypted session.
    const Authorization auth = Authorization::for_secret(tpm, parent, !pin.empty());
    KeyAttestation attestation;
    try {
        const TpmObject loaded = load_key(tpm, parent, auth, key.blobs);
        const AuthValue pin_set(tpm, loaded, pin);
        attestation = attest_key(tpm, loaded, key.blobs.pub.publicArea, auth, ak, x5c, challenge);
    } catch (const TpmError& e) {
        const Diagnosis d = diagnose(e, tpm.address());
        throw Error(path.string() + ": " + d.problem + " (" + d.solution + ")");
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
