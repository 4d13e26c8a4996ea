// tpmkey-ca init, challenge, issue-ak: enrolling a machine's attestation
// key (docs/attestation.md, "Enrolment"). challenge checks the request
// (the EK certificate against the EK roots, the AK's public area against
// tpmkey's AK template) and makes a credential only that TPM can activate
// for that AK (TPM2_MakeCredential in software); issue-ak certifies the AK
// once the machine returns the secret.

#include "ak_certificate.hpp"
#include "ak_records.hpp"
#include "ak_request.hpp"
#include "audit_log.hpp"
#include "ca.hpp"
#include "core/attestation/acme_attestation.hpp"
#include "core/attestation/credential.hpp"
#include "core/attestation/ek_certificate.hpp"
#include "core/attestation/ek_templates.hpp"
#include "core/attestation/exchange_file.hpp"
#include "core/base/printable.hpp"
#include "core/files/atomic_file.hpp"
#include "core/keys/key_parts.hpp"
#include "core/keys/public_key.hpp"
#include "revocation.hpp"

#include <openssl/crypto.h>
#include <openssl/pem.h>
#include <openssl/rand.h>

#include <cctype>
#include <charconv>
#include <ctime>
#include <iostream>
#include <string>

namespace tpmkey::cli {

namespace {

// tpmkey's AK has nameAlg SHA-256: its name is 0x000b || 32 bytes.
constexpr std::size_t ak_name_size = 34;

// TPM_PT_MANUFACTURER as "id:" and 8 hex digits, compared without regard
// to the case of the hex digits.
bool same_manufacturer(const std::string& a, const std::string& b) {
    if (a.size() != b.size() || a.empty())
        return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (std::toupper(static_cast<unsigned char>(a[i])) != std::toupper(static_cast<unsigned char>(b[i])))
            return false;
    return true;
}

// The default AK certificate lifetime: a year, so that a machine that is
// gone, or a CA key that has aged, stops counting on its own even where
// nobody revoked it, and a CRL grows no longer than a year of revocations.
// A machine renews by enrolling again (the AK is the same key; its new
// certificate gets a new serial and record).
constexpr int default_ak_days = 365;

constexpr CommandSpec init_spec{"init",
                                "make the attestation CA: its key and root certificate",
                                "tpmkey-ca init [--ca DIR] [--name TEXT] [--crl-url URL]",
                                "Makes the attestation CA in DIR (default $XDG_DATA_HOME/tpmkey-ca, i.e.\n"
                                "~/.local/share/tpmkey-ca; made 0700): ca.key (EC P-256, PKCS#8 PEM, 0600),\n"
                                "ca.crt (its self-signed root certificate, valid 20 years: what verifiers\n"
                                "trust), pending/ (the outstanding challenges), records/ (one record per\n"
                                "AK certificate issued) and crl.pem (its CRL, empty). Every AK\n"
                                "certificate names its CRL: --crl-url, else crl.pem as a file:// URL,\n"
                                "which serves verifiers on this host only. Refuses, changing\n"
                                "nothing, a directory that has a ca.key already, and a DIR or DIR/pending/\n"
                                "that is there but not a directory of the user's that no one else may\n"
                                "write to (as challenge and issue-ak do: whoever can write pending/ can\n"
                                "get any key certified).\n"
                                "\n"
                                "  --ca DIR          the CA directory\n"
                                "  --name TEXT       the root certificate's common name (default\n"
                                "                    'tpmkey attestation CA')\n"
                                "  --crl-url URL     where verifiers get the CRL (http://, https:// or\n"
                                "                    file:///), written into every AK certificate\n",
                                {"--ca", "--name", "--crl-url", nullptr},
                                {nullptr},
                                0};

int cmd_init(const Parsed& p) {
    const CaDirectory ca = ca_directory_of(p);
    const std::string name = p.has_value("--name") ? p.value("--name") : "tpmkey attestation CA";
    if (name.empty() || name.size() > 64 || printable(name) != name)
        throw UsageError("tpmkey-ca init: --name needs 1 to 64 printable characters", init_spec.usage);
    const std::string crl_url = p.value("--crl-url");
    if (p.has_value("--crl-url") && !is_crl_url(crl_url))
        throw UsageError("tpmkey-ca init: --crl-url needs an http://, https:// or file:/// URL (at most 512 "
                         "characters; no spaces, quotes or commas)",
                         init_spec.usage);
    init_ca(ca, name, 20 * 365);
    {
        const CaLock lock(ca);
        if (p.has_value("--crl-url"))
            write_file_atomically(crl_url_file(ca), crl_url + "\n", 0644, Replace::yes);
        make_private_directory(records_dir(ca));
        (void)publish_crl(ca, load_ca(ca), std::time(nullptr), default_crl_days);
    }
    std::cout << "Made the attestation CA '" << name << "' in " << ca.dir.string()
              << ": give verifiers its root certificate, " << ca.certificate_file().string()
              << "; keep ca.key secret. AK certificates will name the CRL " << crl_distribution_point(ca)
              << " (sign a new one with tpmkey-ca crl before " << default_crl_days << " days are over).\n";
    return 0;
}

constexpr CommandSpec challenge_spec{"challenge",
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
                                     "challenge for the same AK leaves the others as they are, but it removes\n"
                                     "expired challenges (7 days) and keeps only the AK's newest 8. The\n"
                                     "decision, made or refused, goes to DIR/audit.log (never the secret).\n"
                                     "\n"
                                     "  --ek-roots DIR    the trusted EK root certificates\n"
                                     "  --ca DIR          the CA directory (default ~/.local/share/tpmkey-ca)\n"
                                     "  -o FILE           write the challenge to FILE\n",
                                     {"--ek-roots", "--ca", "-o", nullptr},
                                     {nullptr},
                                     1};

// challenge's decision; cmd_challenge logs a refusal.
void make_challenge(const Parsed& p, const CaDirectory& ca, AuditLog& log, AuditEntry& entry) {
    const std::string what = p.positional[0];
    const ExchangeFile file = read_exchange_file(what, ak_request_file::kind, ak_request_file::fields);
    const AkRequest request = checked_request(file, what);
    entry.ak_name = hex(request.ak_name);
    entry.ek_certificate_sha256 = certificate_sha256(request.ek_certificate.get());
    refuse_barred_tpm(ca, request.ek_certificate.get(), what);

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
    // The TPM's identity is the EK certificate's, which its maker signed;
    // the request's is the TPM's own report, which nothing proves. The
    // manufacturer must agree. The model and version are not compared:
    // makers write a marketing name ("SLB 9670 TPM2.0") where the TPM
    // reports vendor strings ("SLB9670"), and the firmware version of the
    // day the EK certificate was made, which a firmware update changes
    // (test/data/ek-certs); the AK certificate carries the EK
    // certificate's.
    const CertifiedTpm certified = tpm_identity_of(request.ek_certificate.get());
    if (!same_manufacturer(certified.manufacturer, request.manufacturer))
        throw Error(what + ": refused: it claims TPM manufacturer " + request.manufacturer +
                    ", but its EK certificate names " + printable(certified.manufacturer) +
                    " (tpm-manufacturer must be what the TPM reports; its maker signed the EK certificate's)");
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
    const Bytes id(secret.begin(), secret.begin() + challenge_id_size);
    entry.hidden = hex(id);
    OPENSSL_cleanse(secret.data(), secret.size());
    // Expired challenges go, and this AK's oldest beyond the newest
    // max_pending_per_ak (this one among them): challenge run in a loop
    // does not fill pending/.
    const std::size_t removed = prune_pending(ca, request.ak_name, max_pending_per_ak - 1, std::time(nullptr));
    // A file of its own, never another's: challenges for the same AK
    // coexist, each answered by its own proof.
    add_pending(ca, request.ak_name, id, pending, std::time(nullptr));

    ExchangeFile challenge(ak_challenge_file::kind);
    challenge.set_bytes(ak_challenge_file::ak_name, request.ak_name);
    challenge.set_text(ak_challenge_file::ek_certificate_index, handle_text(request.ek_template->cert_index));
    challenge.set_bytes(ak_challenge_file::credential_blob, credential.blob);
    challenge.set_bytes(ak_challenge_file::encrypted_secret, credential.encrypted_seed);
    // Not its id or secret: the log is no place for what only the CA and
    // the TPM may know.
    entry.reason = "made a challenge: the EK certificate chains to " + p.value("--ek-roots") + ", TPM " +
                   printable(certified.manufacturer) + " '" + printable(certified.model) + "' " +
                   printable(certified.version);
    if (removed > 0)
        entry.reason += "; removed " + std::to_string(removed) + " expired challenge(s), or this AK's beyond the " +
                        std::to_string(max_pending_per_ak) + " newest, from " + ca.pending_dir().string();
    log.accepted(entry);
    write_output(p, challenge.to_string(), 0644);
    if (p.has_value("-o"))
        std::cout << what << ": the EK certificate (" << request.ek_template->algorithm << ", issued by "
                  << name_line(X509_get_issuer_name(request.ek_certificate.get())) << ") chains to "
                  << p.value("--ek-roots") << "; TPM " << printable(certified.manufacturer) << " '"
                  << printable(certified.model) << "' " << printable(certified.version)
                  << " (by the EK certificate). Wrote the challenge for attestation key " << hex(request.ak_name)
                  << " to " << p.value("-o") << ": the machine answers it with tpmkey attest activate.\n";
}

int cmd_challenge(const Parsed& p) {
    if (!p.has_value("--ek-roots"))
        throw UsageError("tpmkey-ca challenge: --ek-roots DIR is required (the EK root certificates the TPM's EK "
                         "certificate must chain to)",
                         challenge_spec.usage);
    const CaDirectory ca = ca_directory_of(p);
    (void)load_ca(ca);  // no challenge the CA could not answer
    AuditLog log(audit_log_file(ca));
    AuditEntry entry{.command = "challenge", .input = p.positional[0]};
    run_audited(log, entry, [&] { make_challenge(p, ca, log, entry); });
    return 0;
}

constexpr CommandSpec issue_ak_spec{
    "issue-ak",
    "certify an attestation key whose TPM answered its challenge",
    "tpmkey-ca issue-ak --machine NAME --principals LIST [--ca DIR] [--days N] [-o FILE] PROOF",
    "Checks PROOF (tpmkey attest activate): its secret must be the one of the\n"
    "attestation key's outstanding challenge in DIR/pending/ that it answers\n"
    "(its secret names it). That challenge is used up either way: a proof\n"
    "works once, and a wrong secret voids that challenge (make a new one),\n"
    "no other. A challenge is good for 7 days: an older one is refused and\n"
    "removed. Then issues the AK's certificate (PEM, to\n"
    "FILE or standard output): empty subject, the TPM's manufacturer, model\n"
    "and version from the EK certificate in a critical subjectAltName,\n"
    "extended key usage 2.23.133.8.3 (tcg-kp-AIKCertificate), CA:FALSE, the\n"
    "EK certificate it was enrolled with and the CA's CRL\n"
    "(docs/attestation.md); records it in DIR/records/ with the machine's\n"
    "name and principals, and prints its serial: keep it to revoke it.\n"
    "Renew a certificate by enrolling the machine again. The decision, issued\n"
    "or refused, goes to DIR/audit.log.\n"
    "\n"
    "  --machine NAME    the machine's name (the SSH certificate's -I)\n"
    "  --principals LIST who may log in with its keys (-n: a,b,c)\n"
    "  --ca DIR          the CA directory (default ~/.local/share/tpmkey-ca)\n"
    "  --days N          how long the certificate is valid (default 365)\n"
    "  -o FILE           write the certificate to FILE\n",
    {"--machine", "--principals", "--ca", "--days", "-o", nullptr},
    {nullptr},
    1};

// issue-ak's decision; cmd_issue_ak logs a refusal.
void issue_ak(const Parsed& p, const CaDirectory& ca, const CaKeys& keys, int days, AuditLog& log, AuditEntry& entry) {
    const std::string machine = p.value("--machine"), principals = p.value("--principals");
    const std::string what = p.positional[0];
    const ExchangeFile proof = read_exchange_file(what, ak_proof_file::kind, ak_proof_file::fields);
    const Bytes ak_name = proof.bytes(ak_proof_file::ak_name, ak_name_size);
    if (ak_name.size() != ak_name_size)
        throw Error(what + ": ak-name is not the name of a tpmkey attestation key");
    entry.ak_name = hex(ak_name);
    Bytes secret = proof.bytes(ak_proof_file::secret, 64);
    if (secret.size() >= challenge_id_size)
        entry.hidden = hex(std::span(secret).first(challenge_id_size));

    const ExchangeFile pending = take_pending(ca, ak_name, secret, what, std::time(nullptr));
    const std::string pending_path = ca.pending_file(ak_name, std::span(secret).first(challenge_id_size)).string();
    Bytes expected = pending.bytes(ak_pending_file::secret, 64);
    const bool same =
        secret.size() == expected.size() && CRYPTO_memcmp(secret.data(), expected.data(), expected.size()) == 0;
    OPENSSL_cleanse(secret.data(), secret.size());
    OPENSSL_cleanse(expected.data(), expected.size());
    if (!same)
        throw Error(what + ": refused: its secret is not the one of the challenge for attestation key " + hex(ak_name) +
                    "; that challenge is void now (make a new one)");
    const AkRequest request = checked_request(pending, pending_path);
    if (request.ak_name != ak_name)
        throw Error(pending_path + ": holds the request of another attestation key");
    entry.ek_certificate_sha256 = certificate_sha256(request.ek_certificate.get());

    // challenge refused an EK certificate without the TPM's identity (the
    // EK-certificate rule) and a request whose manufacturer disagrees;
    // checked again, as the pending file is read back.
    const CertifiedTpm certified = tpm_identity_of(request.ek_certificate.get());
    if (certified.manufacturer.empty() || certified.model.empty() || certified.version.empty() ||
        !same_manufacturer(certified.manufacturer, request.manufacturer))
        throw Error(pending_path + ": refused: its EK certificate does not name the TPM's manufacturer, model and "
                                   "version, or names another manufacturer than the request");

    const EvpPkey ak = PublicKey(request.ak).to_evp();
    const CaLock lock(ca);
    refuse_barred_tpm(ca, request.ek_certificate.get(), what);
    // A CRL for the certificate to point to (a CA made before there were CRLs has none yet).
    if (!std::filesystem::exists(std::filesystem::symlink_status(crl_file(ca))))
        (void)publish_crl(ca, keys, std::time(nullptr), default_crl_days);
    const X509Cert cert = issue_ak_certificate({ak.get(), certified.manufacturer, certified.model, certified.version,
                                                request.ek_certificate.get(), crl_distribution_point(ca)},
                                               keys.certificate.get(), keys.key.get(), days);
    // Recorded before it is given out: no AK certificate the CA cannot list or revoke.
    AkRecord record;
    record.serial = serial_hex(cert.get());
    record.ak_certificate_sha256 = certificate_sha256(cert.get());
    record.ak_name = hex(ak_name);
    record.ek_certificate_sha256 = certificate_sha256(request.ek_certificate.get());
    record.ek_certificate_issuer = printable(name_line(X509_get_issuer_name(request.ek_certificate.get())));
    record.ek_certificate_serial = serial_hex(request.ek_certificate.get());
    // What step-ca's webhook request names the TPM by (tpmkey-ca webhook).
    record.ek_identifier = ek_permanent_identifier(X509_get0_pubkey(request.ek_certificate.get()));
    record.tpm_manufacturer = printable(certified.manufacturer);
    record.tpm_model = printable(certified.model);
    record.tpm_version = printable(certified.version);
    record.machine = machine;
    record.principals = principals;
    std::tm tm{};
    record.issued = ASN1_TIME_to_tm(X509_get0_notBefore(cert.get()), &tm) == 1 ? utc_text(::timegm(&tm)) : "";
    record.not_after = ASN1_TIME_to_tm(X509_get0_notAfter(cert.get()), &tm) == 1 ? utc_text(::timegm(&tm)) : "";
    write_record(ca, record, /*replace=*/false);
    Bio bio(BIO_new(BIO_s_mem()));
    if (!bio || PEM_write_bio_X509(bio.get(), cert.get()) != 1)
        throw Error("cannot write the certificate (OpenSSL)");
    entry.ak_serial = record.serial;
    entry.reason = "issued the AK certificate, valid " + std::to_string(days) + " days, TPM " +
                   record.tpm_manufacturer + " '" + record.tpm_model + "' " + record.tpm_version +
                   " by its EK certificate";
    log.accepted(entry);
    char* data = nullptr;
    const long size = BIO_get_mem_data(bio.get(), &data);
    write_output(p, std::string_view(data, static_cast<std::size_t>(size)), 0644);
    // The serial goes to standard error without -o: standard output is the certificate.
    std::ostream& out = p.has_value("-o") ? std::cout : std::cerr;
    if (p.has_value("-o"))
        out << what << ": the TPM activated the challenge. Issued the certificate of attestation key " << hex(ak_name)
            << " (TPM " << record.tpm_manufacturer << " '" << record.tpm_model << "' " << record.tpm_version
            << " by its EK certificate, issued by " << record.ek_certificate_issuer << "), valid " << days
            << " days, to " << p.value("-o") << ".\n";
    out << "AK certificate serial " << record.serial << " recorded for machine " << machine << " (principals "
        << principals << ") in " << records_place(ca) << ": keep the serial, to revoke it with tpmkey-ca "
        << "revoke --serial " << record.serial << ".\n";
}

int cmd_issue_ak(const Parsed& p) {
    const std::string machine = p.value("--machine"), principals = p.value("--principals");
    if (!p.has_value("--machine") || !p.has_value("--principals"))
        throw UsageError("tpmkey-ca issue-ak: --machine NAME and --principals LIST are required (the record the SSH "
                         "CA takes a certificate's -I and -n from)",
                         issue_ak_spec.usage);
    if (!is_record_name(machine) || !is_principal_list(principals))
        throw UsageError("tpmkey-ca issue-ak: --machine is 1 to 64 of A-Z a-z 0-9 . _ @ - (not starting with -), "
                         "--principals up to 32 such names separated by commas",
                         issue_ak_spec.usage);
    int days = default_ak_days;
    if (p.has_value("--days")) {
        const std::string text = p.value("--days");
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), days);
        if (ec != std::errc() || end != text.data() + text.size() || days < 1 || days > 36500)
            throw UsageError("tpmkey-ca issue-ak: --days needs a whole number of days from 1 to 36500",
                             issue_ak_spec.usage);
    }
    const CaDirectory ca = ca_directory_of(p);
    const CaKeys keys = load_ca(ca);
    AuditLog log(audit_log_file(ca));
    AuditEntry entry{.command = "issue-ak", .input = p.positional[0], .machine = machine, .principals = principals};
    run_audited(log, entry, [&] { issue_ak(p, ca, keys, days, log, entry); });
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
