// tpmkey-ca init, challenge, issue-ak: enrolling a machine's attestation
// key (docs/attestation.md, "Enrolment"). challenge checks the request
// (the EK certificate against the EK roots, the AK's public area against
// tpmkey's AK template) and makes a credential only that TPM can activate
// for that AK (TPM2_MakeCredential in software); issue-ak certifies the AK
// once the machine returns the secret.

#include "ak_certificate.hpp"
#include "ak_request.hpp"
#include "ca.hpp"
#include "core/base/printable.hpp"
#include "core/files/atomic_file.hpp"
#include "core/attestation/credential.hpp"
#include "core/attestation/ek_certificate.hpp"
#include "core/attestation/ek_templates.hpp"
#include "core/attestation/exchange_file.hpp"
#include "core/keys/key_parts.hpp"
#include "core/keys/public_key.hpp"

#include <openssl/crypto.h>
#include <openssl/pem.h>
#include <openssl/rand.h>

#include <charconv>
#include <ctime>
#include <iostream>
#include <string>

namespace tpmkey::cli {

namespace {

// tpmkey's AK has nameAlg SHA-256: its name is 0x000b || 32 bytes.
constexpr std::size_t ak_name_size = 34;

constexpr CommandSpec init_spec{
    "init",
    "make the attestation CA: its key and root certificate",
    "tpmkey-ca init [--ca DIR] [--name TEXT]",
    "Makes the attestation CA in DIR (default $XDG_DATA_HOME/tpmkey-ca, i.e.\n"
    "~/.local/share/tpmkey-ca; made 0700): ca.key (EC P-256, PKCS#8 PEM, 0600),\n"
    "ca.crt (its self-signed root certificate, valid 20 years: what verifiers\n"
    "trust) and pending/ (the outstanding challenges). Refuses, changing\n"
    "nothing, a directory that has a ca.key already, and a DIR or DIR/pending/\n"
    "that is there but not a directory of the user's that no one else may\n"
    "write to (as challenge and issue-ak do: whoever can write pending/ can\n"
    "get any key certified).\n"
    "\n"
    "  --ca DIR          the CA directory\n"
    "  --name TEXT       the root certificate's common name (default\n"
    "                    'tpmkey attestation CA')\n",
    {"--ca", "--name", nullptr}, {nullptr}, 0};

int cmd_init(const Parsed& p) {
    const CaDirectory ca = ca_directory_of(p);
    const std::string name = p.has_value("--name") ? p.value("--name") : "tpmkey attestation CA";
    if (name.empty() || name.size() > 64 || printable(name) != name)
        throw UsageError("tpmkey-ca init: --name needs 1 to 64 printable characters", init_spec.usage);
    init_ca(ca, name, 20 * 365);
    std::cout << "Made the attestation CA '" << name << "' in " << ca.dir.string()
              << ": give verifiers its root certificate, " << ca.certificate_file().string()
              << "; keep ca.key secret.\n";
    return 0;
}

constexpr CommandSpec challenge_spec{
    "challenge",
    "check a machine's enrolment request and make its challenge",
    "tpmkey-ca challenge --ek-roots DIR [--ca DIR] [-o FILE] REQUEST",
    "Checks REQUEST (tpmkey attest enroll): its EK certificate must chain to\n"
    "a root in the --ek-roots directory (the TPM makers' EK roots and\n"
    "intermediates, PEM or DER), and its attestation key (AK) must be one\n"
    "made from tpmkey's template (restricted, fixedTPM). Then makes a\n"
    "credential for a random secret that only the TPM holding that EK and\n"
    "that AK can activate (TPM2_MakeCredential), keeps the secret in\n"
    "DIR/pending/ and writes the challenge to FILE (default: standard output)\n"
    "for tpmkey attest activate. Each challenge is a file of its own: a new\n"
    "challenge for the same AK leaves the others as they are.\n"
    "\n"
    "  --ek-roots DIR    the trusted EK root certificates\n"
    "  --ca DIR          the CA directory (default ~/.local/share/tpmkey-ca)\n"
    "  -o FILE           write the challenge to FILE\n",
    {"--ek-roots", "--ca", "-o", nullptr}, {nullptr}, 1};

int cmd_challenge(const Parsed& p) {
    if (!p.has_value("--ek-roots"))
        throw UsageError("tpmkey-ca challenge: --ek-roots DIR is required (the EK root certificates the TPM's EK "
                         "certificate must chain to)",
                         challenge_spec.usage);
    const CaDirectory ca = ca_directory_of(p);
    (void)load_ca(ca);  // no challenge the CA could not answer
    const std::string what = p.positional[0];
    const ExchangeFile file = read_exchange_file(what, ak_request_file::kind, ak_request_file::fields);
    const AkRequest request = checked_request(file, what);

    const EkRoots roots{{p.value("--ek-roots")}};
    if (!has_trusted_ek_root(roots))
        throw Error(what + ": refused: no trusted EK root certificate (self-signed) in " + p.value("--ek-roots"));
    const std::string not_ek = ek_profile_problem(request.ek_certificate.get());
    if (!not_ek.empty())
        throw Error(what + ": refused: its certificate at the EK index (issued by " +
                    name_line(X509_get_issuer_name(request.ek_certificate.get())) +
                    ") is not an EK certificate by the TCG EK Credential Profile: " + not_ek);
    const std::string problem = ek_chain_problem(request.ek_der, roots);
    if (!problem.empty())
        throw Error(what + ": refused: its EK certificate (issued by " +
                    name_line(X509_get_issuer_name(request.ek_certificate.get())) + ") does not chain to a root in " +
                    p.value("--ek-roots") + ": " + problem);
    TPMT_PUBLIC ek_public{};
    try {
        ek_public = ek_public_of(request.ek_certificate.get(), *request.ek_template);
    } catch (const Error& e) {
        throw Error(what + ": refused: its EK certificate does not fit template " + request.ek_template->label +
                    " of its index: " + e.what());
    }

    Bytes secret(challenge_secret_size);  // the challenge's id, then its key
    if (RAND_bytes(secret.data(), static_cast<int>(secret.size())) != 1)
        throw Error("cannot get random bytes (OpenSSL)");
    const Credential credential = make_credential(ek_public, request.ak_name, secret);

    ExchangeFile pending(ak_pending_file::kind);
    for (const char* field : ak_request_file::fields)
        pending.set_text(field, file.text(field));
    pending.set_bytes(ak_pending_file::secret, secret);
    pending.set_text(ak_pending_file::created, utc_text(std::time(nullptr)));
    const std::filesystem::path pending_path = ca.pending_file(request.ak_name, std::span(secret).first(challenge_id_size));
    OPENSSL_cleanse(secret.data(), secret.size());
    // A file of its own, never another's: challenges for the same AK
    // coexist, each answered by its own proof.
    write_file_atomically(pending_path, pending.to_string(), 0600, Replace::no);

    ExchangeFile challenge(ak_challenge_file::kind);
    challenge.set_bytes(ak_challenge_file::ak_name, request.ak_name);
    challenge.set_text(ak_challenge_file::ek_certificate_index, handle_text(request.ek_template->cert_index));
    challenge.set_bytes(ak_challenge_file::credential_blob, credential.blob);
    challenge.set_bytes(ak_challenge_file::encrypted_secret, credential.encrypted_seed);
    write_output(p, challenge.to_string(), 0644);
    if (p.has_value("-o"))
        std::cout << what << ": the EK certificate (" << request.ek_template->algorithm << ", issued by "
                  << name_line(X509_get_issuer_name(request.ek_certificate.get())) << ") chains to "
                  << p.value("--ek-roots") << "; TPM " << request.manufacturer << " '" << request.model << "' "
                  << request.version << ". Wrote the challenge for attestation key " << hex(request.ak_name)
                  << " to " << p.value("-o") << ": the machine answers it with tpmkey attest activate.\n";
    return 0;
}

constexpr CommandSpec issue_ak_spec{
    "issue-ak",
    "certify an attestation key whose TPM answered its challenge",
    "tpmkey-ca issue-ak [--ca DIR] [--days N] [-o FILE] PROOF",
    "Checks PROOF (tpmkey attest activate): its secret must be the one of the\n"
    "attestation key's outstanding challenge in DIR/pending/ that it answers\n"
    "(its secret names it). That challenge is used up either way: a proof\n"
    "works once, and a wrong secret voids that challenge (make a new one),\n"
    "no other. A challenge is good for 7 days: an older one is refused and\n"
    "removed. Then issues the AK's certificate (PEM, to\n"
    "FILE or standard output): empty subject, the TPM's manufacturer, model\n"
    "and version in a critical subjectAltName, extended key usage\n"
    "2.23.133.8.3 (tcg-kp-AIKCertificate), CA:FALSE, and the EK certificate\n"
    "it was enrolled with (docs/attestation.md).\n"
    "\n"
    "  --ca DIR          the CA directory (default ~/.local/share/tpmkey-ca)\n"
    "  --days N          how long the certificate is valid (default 3650)\n"
    "  -o FILE           write the certificate to FILE\n",
    {"--ca", "--days", "-o", nullptr}, {nullptr}, 1};

int cmd_issue_ak(const Parsed& p) {
    int days = 3650;
    if (p.has_value("--days")) {
        const std::string text = p.value("--days");
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), days);
        if (ec != std::errc() || end != text.data() + text.size() || days < 1 || days > 36500)
            throw UsageError("tpmkey-ca issue-ak: --days needs a whole number of days from 1 to 36500",
                             issue_ak_spec.usage);
    }
    const CaDirectory ca = ca_directory_of(p);
    const CaKeys keys = load_ca(ca);
    const std::string what = p.positional[0];
    const ExchangeFile proof = read_exchange_file(what, ak_proof_file::kind, ak_proof_file::fields);
    const Bytes ak_name = proof.bytes(ak_proof_file::ak_name, ak_name_size);
    if (ak_name.size() != ak_name_size)
        throw Error(what + ": ak-name is not the name of a tpmkey attestation key");
    Bytes secret = proof.bytes(ak_proof_file::secret, 64);

    const ExchangeFile pending = take_pending(ca, ak_name, secret, what, std::time(nullptr));
    const std::string pending_path = ca.pending_file(ak_name, std::span(secret).first(challenge_id_size)).string();
    Bytes expected = pending.bytes(ak_pending_file::secret, 64);
    const bool same = secret.size() == expected.size() &&
                      CRYPTO_memcmp(secret.data(), expected.data(), expected.size()) == 0;
    OPENSSL_cleanse(secret.data(), secret.size());
    OPENSSL_cleanse(expected.data(), expected.size());
    if (!same)
        throw Error(what + ": refused: its secret is not the one of the challenge for attestation key " +
                    hex(ak_name) + "; that challenge is void now (make a new one)");
    const AkRequest request = checked_request(pending, pending_path);
    if (request.ak_name != ak_name)
        throw Error(pending_path + ": holds the request of another attestation key");

    const EvpPkey ak = PublicKey(request.ak).to_evp();
    const X509Cert cert = issue_ak_certificate(
        {ak.get(), request.manufacturer, request.model, request.version, request.ek_certificate.get()},
        keys.certificate.get(), keys.key.get(), days);
    Bio bio(BIO_new(BIO_s_mem()));
    if (!bio || PEM_write_bio_X509(bio.get(), cert.get()) != 1)
        throw Error("cannot write the certificate (OpenSSL)");
    char* data = nullptr;
    const long size = BIO_get_mem_data(bio.get(), &data);
    write_output(p, std::string_view(data, static_cast<std::size_t>(size)), 0644);
    if (p.has_value("-o"))
        std::cout << what << ": the TPM activated the challenge. Issued the certificate of attestation key "
                  << hex(ak_name) << " (TPM " << request.manufacturer << " '" << request.model << "' "
                  << request.version << ", EK certificate issued by "
                  << name_line(X509_get_issuer_name(request.ek_certificate.get())) << "), valid " << days
                  << " days, to " << p.value("-o") << ".\n";
    return 0;
}

}  // namespace

CaDirectory ca_directory_of(const Parsed& p) {
    return {p.has_value("--ca") ? std::filesystem::path(p.value("--ca")) : default_ca_directory()};
}

void write_output(const Parsed& p, std::string_view contents, mode_t mode) {
    if (p.has_value("-o"))
        write_file_atomically(p.value("-o"), contents, mode, Replace::yes);
    else
        std::cout << contents << std::flush;
}

const Command init_command{&init_spec, cmd_init};
const Command challenge_command{&challenge_spec, cmd_challenge};
const Command issue_ak_command{&issue_ak_spec, cmd_issue_ak};

}  // namespace tpmkey::cli
