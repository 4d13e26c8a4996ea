#include "verify.hpp"

#include "core/attestation/exchange_file.hpp"
#include "core/attestation/key_verification.hpp"
#include "core/attestation/webauthn.hpp"
#include "core/files/file_read.hpp"
#include "core/keys/key_file.hpp"

#include <iostream>
#include <optional>
#include <string>
#include <variant>

namespace tpmkey::cli {

namespace {

constexpr CommandSpec verify_spec{
    "verify",
    "check a key's attestation; print what it proves, or refuse it",
    "tpmkey-ca verify ATTESTATION --roots FILE --challenge FILE [--key-file KEY] [-o FILE]",
    "Checks ATTESTATION (written by 'tpmkey attest'): the AK certificate in it\n"
    "was issued by a CA of --roots and is an AK certificate (WebAuthn 8.3.1);\n"
    "the AK signed TPM2_Certify's result over the key (certInfo) for the\n"
    "challenge in --challenge (the same file the machine was given: a replay\n"
    "of an older attestation is refused); the certified key is the SSH key in\n"
    "the file and was made in a TPM that will not let it out (fixedTPM,\n"
    "fixedParent, sensitiveDataOrigin). Then prints what that proves, and\n"
    "what it cannot prove. Exit 0 only if every check holds; a refusal is\n"
    "'tpmkey-ca: REFUSED: REASON', exit 1, and prints nothing on standard\n"
    "output. With -o, writes the verified key's .pub line to FILE: sign\n"
    "that one (ssh-keygen -s), never the ATTESTATION file read again, which\n"
    "its sender may have changed since.\n"
    "\n"
    "  --roots FILE       the CA certificates to trust (PEM)\n"
    "  --challenge FILE   the challenge the machine was given (16 to 1024 bytes)\n"
    "  --key-file KEY     the key file (KEY.tpm), whose policy then explains\n"
    "                     the key's authPolicy; its public key must be the\n"
    "                     attested one\n"
    "  -o FILE            write the verified key's .pub line to FILE (replaced\n"
    "                     in one step; in a directory only the CA can write)\n",
    {"--roots", "--challenge", "--key-file", "-o", nullptr},
    {nullptr},
    1};

// "id:49424D00" -> "IBM" (TPM_PT_MANUFACTURER: four ASCII bytes).
std::string manufacturer_text(const std::string& id) {
    std::string out;
    if (id.size() == 11 && id.rfind("id:", 0) == 0)
        for (std::size_t i = 3; i < 11; i += 2) {
            const int c = std::stoi(id.substr(i, 2), nullptr, 16);
            if (c >= 0x21 && c < 0x7f)
                out += static_cast<char>(c);
        }
    return out.empty() ? id : out + " (" + id + ")";
}

// Reads the files, has the core verify (core/attestation/key_verification.hpp)
// and prints what it proves; nothing is printed before every check held.
int cmd_verify(const Parsed& p) {
    if (!p.has_value("--roots") || !p.has_value("--challenge"))
        throw UsageError("tpmkey-ca verify: --roots and --challenge are needed", verify_spec.usage);
    const std::string path = p.positional[0];
    const std::string challenge_file = p.value("--challenge");
    const Bytes challenge = read_regular_file(challenge_file, max_challenge_size + 1).data;
    if (challenge.size() < min_challenge_size || challenge.size() > max_challenge_size)
        throw Error(challenge_file + ": not a challenge (" + std::to_string(min_challenge_size) + " to " +
                    std::to_string(max_challenge_size) + " bytes)");
    std::optional<KeyFile> key_file;
    if (p.has_value("--key-file"))
        key_file = read_key_file(p.value("--key-file"));
    // The attestation is the sender's: a file that cannot be read is refused.
    Bytes attestation;
    try {
        attestation = read_regular_file(path, max_exchange_file_size).data;
    } catch (const Error& e) {
        throw Error(std::string("REFUSED: ") + e.what());
    }
    const Bytes roots = read_regular_file(p.value("--roots"), 1024 * 1024).data;

    const std::variant<VerifiedKey, Refusal> outcome = verify_key_attestation(
        {std::string_view(reinterpret_cast<const char*>(attestation.data()), attestation.size()), path, challenge,
         challenge_file, roots, p.value("--roots"), key_file ? &*key_file : nullptr,
         p.has_value("--key-file") ? p.value("--key-file") : std::string()});
    // main() prints "tpmkey-ca: REFUSED: REASON" and exits 1.
    if (const Refusal* refusal = std::get_if<Refusal>(&outcome))
        throw Error("REFUSED: " + refusal->reason);
    const VerifiedKey& key = std::get<VerifiedKey>(outcome);
    if (p.has_value("-o"))
        write_output(p, key.ssh_public_key + "\n", 0644);

    std::cout << "Verified:      " << path << "\n"
              << "SSH key:       " << key.bits << " " << key.fingerprint << " (" << (key.rsa ? "RSA" : "ECDSA")
              << ")\n"
              << "               TPM-resident, not exportable (fixedTPM, fixedParent, sensitiveDataOrigin)\n";
    if (key.ek_certificate_sha256)
        std::cout << "EK:            the CA enrolled the AK with the EK certificate of SHA-256 "
                  << *key.ek_certificate_sha256 << "\n";
    else
        std::cout << "EK:            not recorded by the CA\n";
    std::cout << "AK:            certificate serial " << key.ak_serial << ", issuer " << key.ak_issuer
              << ", subject (empty)\n"
              << "TPM:           manufacturer " << manufacturer_text(key.tpm_manufacturer) << ", model "
              << key.tpm_model << ", version " << key.tpm_version
              << " (as the machine reported them at enrolment; not proven)\n";
    for (std::size_t i = 0; i < key.policy.size(); ++i)
        std::cout << (i == 0 ? "Policy:        " : "               ") << key.policy[i] << "\n";
    std::cout << "Not proven:    whether the key has a PIN (its auth value is not in the public area)";
    if (key.user_with_auth)
        std::cout << "; userWithAuth: the key is usable with its auth value alone";
    std::cout << "\n";
    return 0;
}

}  // namespace

const Command verify_command{&verify_spec, cmd_verify};

}  // namespace tpmkey::cli
