// tpmkey attest enroll / attest activate: the machine's half of enrolling
// its attestation key (AK) with an attestation CA (docs/attestation.md):
// the request the CA checks, and the answer to its challenge that proves
// the AK lives in the TPM whose EK certificate the request carried.

#include "cli.hpp"
#include "core/attestation/exchange_file.hpp"
#include "core/files/config.hpp"
#include "core/trust/attestation_key.hpp"

#include <openssl/crypto.h>

#include <iostream>
#include <string>

namespace tpmkey::cli {

namespace {

// FILE of -o, or standard output without it.
void write_output(const Parsed& p, const ExchangeFile& file, mode_t mode) {
    if (p.has_value("-o"))
        write_exchange_file(p.value("-o"), file, mode);
    else
        std::cout << file.to_string() << std::flush;
}

constexpr CommandSpec attest_enroll_spec{"attest enroll",
                                         "write this TPM's attestation key enrolment request for tpmkey-ca",
                                         "tpmkey attest enroll [--ak ecc|rsa] [-o FILE]",
                                         "Writes the request to enrol this TPM's attestation key (AK) with an\n"
                                         "attestation CA (tpmkey-ca challenge; docs/attestation.md): the TPM's EK\n"
                                         "certificate, the AK's public key (a restricted signing key the TPM\n"
                                         "re-creates in its endorsement hierarchy whenever it is needed: no file\n"
                                         "to keep), and the TPM's manufacturer, model and firmware version. It\n"
                                         "holds no secret. Needs a TPM with an EK certificate and an endorsement\n"
                                         "hierarchy without a password.\n"
                                         "\n"
                                         "  --ak ecc|rsa      the AK: ecc (ECDSA P-256, the default) or rsa (RSASSA\n"
                                         "                    2048, the AK step-ca verifies)\n"
                                         "  -o FILE           write the request to FILE (default: standard output)\n",
                                         {"--ak", "-o", nullptr},
                                         {nullptr},
                                         0};

int cmd_attest_enroll(const Parsed& p) {
    AkAlgorithm algorithm = AkAlgorithm::ecc;
    if (p.has_value("--ak")) {
        const std::string name = p.value("--ak");
        if (name == "rsa")
            algorithm = AkAlgorithm::rsa;
        else if (name != "ecc")
            throw UsageError("tpmkey attest enroll: --ak is ecc or rsa, not '" + name + "'", attest_enroll_spec.usage);
    }
    const Config config = load_config();
    Tpm tpm(config.tpm);
    const ExchangeFile request = make_ak_request(tpm, algorithm);
    write_output(p, request, 0644);
    if (p.has_value("-o"))
        std::cout << "Wrote the enrolment request of this TPM's attestation key to " << p.value("-o")
                  << ": give it to the CA (tpmkey-ca challenge), then answer its challenge with tpmkey attest "
                     "activate.\n";
    return 0;
}

constexpr CommandSpec attest_activate_spec{"attest activate",
                                           "answer an attestation CA's challenge (tpmkey-ca challenge)",
                                           "tpmkey attest activate [-o FILE] CHALLENGE",
                                           "Answers the challenge an attestation CA made from this TPM's enrolment\n"
                                           "request (tpmkey-ca challenge): the TPM recovers the CA's secret\n"
                                           "(TPM2_ActivateCredential), which only the TPM holding both the certified\n"
                                           "EK and the attestation key can do. The proof holds that secret; it is\n"
                                           "written 0600 and works once (tpmkey-ca issue-ak).\n"
                                           "\n"
                                           "  -o FILE           write the proof to FILE (default: standard output)\n",
                                           {"-o", nullptr},
                                           {nullptr},
                                           1};

int cmd_attest_activate(const Parsed& p) {
    const std::string path = p.positional[0];
    const ExchangeFile challenge = read_exchange_file(path, ak_challenge_file::kind, ak_challenge_file::fields);
    const Config config = load_config();
    Tpm tpm(config.tpm);
    SecretBytes secret;
    try {
        secret = activate_ak_credential(tpm, challenge);
    } catch (const TpmError&) {
        throw;  // main() says what the TPM's code means
    } catch (const Error& e) {
        throw Error(path + ": " + e.what());
    }
    ExchangeFile proof(ak_proof_file::kind);
    proof.set_bytes(ak_proof_file::ak_name, challenge.bytes(ak_challenge_file::ak_name));
    proof.set_bytes(ak_proof_file::secret, secret);
    write_output(p, proof, 0600);
    if (p.has_value("-o"))
        std::cout << "This TPM activated the challenge " << path << "; wrote the proof to " << p.value("-o")
                  << ": give it to the CA (tpmkey-ca issue-ak), which issues the attestation key's certificate.\n";
    return 0;
}

}  // namespace

const Command attest_enroll_command{&attest_enroll_spec, cmd_attest_enroll};
const Command attest_activate_command{&attest_activate_spec, cmd_attest_activate};

}  // namespace tpmkey::cli
