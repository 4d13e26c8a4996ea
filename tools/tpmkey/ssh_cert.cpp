// tpmkey ssh-cert KEY: an SSH user certificate for KEY from step-ca's X5C
// provisioner (docs/step-ca.md). KEY.crt, the X.509 certificate step-ca's
// ACME provisioner issued for KEY after checking its attestation (tpmkey
// enroll), authenticates the request: it goes in the x5c header of a token
// KEY signs inside the TPM. The certificate is written as KEY-cert.pub,
// where ssh looks for it beside KEY.pub; running the command again renews it.
#include "cli.hpp"
#include "core/attestation/ek_certificate.hpp"
#include "core/files/atomic_file.hpp"
#include "core/files/config.hpp"
#include "core/files/file_read.hpp"
#include "core/pin/prompt.hpp"
#include "core/tpm/pin_object.hpp"
#include "core/tpm/tpm_keys.hpp"
#include "http_client.hpp"
#include "jose.hpp"
#include "step_ssh.hpp"

#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <pwd.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <iostream>
#include <system_error>

namespace tpmkey::cli {

namespace {

constexpr CommandSpec ssh_cert_spec{
    "ssh-cert",
    "get (or renew) an SSH certificate for KEY from step-ca",
    "tpmkey ssh-cert --step-ca URL --ca-root ROOT.crt --provisioner NAME [--principal NAME]... [--pin-file FILE] "
    "KEY",
    "Asks step-ca's X5C provisioner for an SSH user certificate of KEY and writes\n"
    "it as KEY-cert.pub (id_tpm.tpm -> id_tpm-cert.pub, beside id_tpm.pub), where\n"
    "ssh finds it. KEY.crt, the certificate 'tpmkey enroll' got from step-ca for\n"
    "KEY, proves the request: it is sent in a token that KEY signs inside the TPM.\n"
    "Run it again to renew the certificate before it expires.\n"
    "\n"
    "  --step-ca URL         step-ca's address, https://HOST[:PORT]\n"
    "  --ca-root ROOT.crt    step-ca's root certificate (PEM): its TLS certificate\n"
    "                        is checked against this one only\n"
    "  --provisioner NAME    the name of step-ca's X5C provisioner with SSH enabled\n"
    "  --principal NAME      a user name the certificate is for (again for more;\n"
    "                        default: the name of the user running this)\n"
    "  --pin-file FILE       KEY's PIN: the first line of FILE (else asked for)\n"
    "\n"
    "The certificate's key ID is KEY.crt's subject (its common name, else its\n"
    "permanent identifier). step-ca decides the validity (at most until KEY.crt\n"
    "expires). The PIN travels only in an encrypted session.\n",
    {"--step-ca", "--ca-root", "--provisioner", "--principal", "--pin-file", nullptr},
    {nullptr},
    1};

// KEY.tpm -> KEY + SUFFIX; another name gets SUFFIX added.
std::filesystem::path beside_key(const std::filesystem::path& key, const std::string& suffix) {
    std::filesystem::path out = key;
    if (out.extension() == ".tpm")
        out.replace_extension();
    return out += suffix;
}

std::vector<X509Cert> read_key_certificate(const std::filesystem::path& file, const std::filesystem::path& key) {
    std::error_code ec;
    if (!std::filesystem::exists(std::filesystem::symlink_status(file, ec)))
        throw Error(file.string() + ": no such file: " + key.string() +
                    " has no certificate from step-ca yet (run 'tpmkey enroll --acme DIRECTORY-URL --ca-root "
                    "ROOT.crt --ak-cert AK.crt " +
                    key.string() + "' first)");
    std::vector<X509Cert> chain = certificates_in(read_regular_file(file, 1024 * 1024).data);
    if (chain.empty())
        throw Error(file.string() + ": no certificate in it (PEM)");
    return chain;
}

// The permanent identifier (RFC 4043: otherName 1.3.6.1.5.5.7.8.3,
// SEQUENCE { identifierValue UTF8String OPTIONAL, assigner OID OPTIONAL })
// in the certificate's subjectAltName, or "".
std::string permanent_identifier(X509* cert) {
    auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
    if (!names)
        return "";
    const Owned<GENERAL_NAMES, GENERAL_NAMES_free> owned(names);
    for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
        const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
        if (name->type != GEN_OTHERNAME || OBJ_obj2nid(name->d.otherName->type_id) != NID_id_on_permanentIdentifier)
            continue;
        const ASN1_TYPE* value = name->d.otherName->value;
        if (value->type != V_ASN1_SEQUENCE)
            continue;
        const unsigned char* p = value->value.sequence->data;
        long left = value->value.sequence->length;
        // The SEQUENCE's contents: its first element, if a UTF8String.
        long length = 0;
        int tag = 0, cls = 0;
        if ((ASN1_get_object(&p, &length, &tag, &cls, left) & 0x80) != 0 || tag != V_ASN1_SEQUENCE)
            continue;
        left = length;
        if (left == 0 || (ASN1_get_object(&p, &length, &tag, &cls, left) & 0x80) != 0 || tag != V_ASN1_UTF8STRING ||
            cls != V_ASN1_UNIVERSAL)
            continue;
        return std::string(reinterpret_cast<const char*>(p), static_cast<std::size_t>(length));
    }
    return "";
}

std::string common_name(X509* cert) {
    const X509_NAME* subject = X509_get_subject_name(cert);
    const int at = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
    if (at < 0)
        return "";
    const ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, at));
    unsigned char* utf8 = nullptr;
    const int n = ASN1_STRING_to_UTF8(&utf8, data);
    if (n < 0)
        return "";
    std::string out(reinterpret_cast<const char*>(utf8), static_cast<std::size_t>(n));
    OPENSSL_free(utf8);
    return out;
}

// Whether Go's crypto/x509 (step-ca's X5C provisioner) refuses to verify
// the certificate: a critical subjectAltName (RFC 5280 4.2.1.6: critical
// when the subject is empty) in which it understands no name (only an
// otherName such as the permanent identifier) is an "unhandled critical
// extension" (crypto/x509 parseSANExtension and the critical check after it).
bool go_refuses_san(X509* cert) {
    const int at = X509_get_ext_by_NID(cert, NID_subject_alt_name, -1);
    if (at < 0 || !X509_EXTENSION_get_critical(X509_get_ext(cert, at)))
        return false;
    auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
    if (!names)
        return false;
    const Owned<GENERAL_NAMES, GENERAL_NAMES_free> owned(names);
    for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
        const int type = sk_GENERAL_NAME_value(names, i)->type;
        if (type == GEN_DNS || type == GEN_EMAIL || type == GEN_IPADD || type == GEN_URI)
            return false;
    }
    return true;
}

std::string user_name() {
    const passwd* pw = getpwuid(geteuid());
    if (!pw || !pw->pw_name || !*pw->pw_name)
        throw Error("who is this user? (no name for uid " + std::to_string(geteuid()) + "): give --principal NAME");
    return pw->pw_name;
}

std::string utc_time(std::uint64_t t) {
    if (t == ~std::uint64_t{0})
        return "forever";
    const auto tt = static_cast<std::time_t>(t);
    std::tm tm{};
    gmtime_r(&tt, &tm);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &tm);
    return text;
}

int cmd_ssh_cert(const Parsed& p) {
    const std::filesystem::path path = p.positional[0];
    for (const char* option : {"--step-ca", "--ca-root", "--provisioner"})
        if (!p.has_value(option))
            throw UsageError(std::string("tpmkey ssh-cert: ") + option + " is needed", ssh_cert_spec.usage);
    enroll::SshCertificateRequest request;
    request.ca_url = enroll::ca_base_url(p.value("--step-ca"));
    request.provisioner = p.value("--provisioner");
    if (request.provisioner.empty())
        throw UsageError("tpmkey ssh-cert: --provisioner needs a name", ssh_cert_spec.usage);
    request.principals = p.values_of("--principal");
    for (const std::string& principal : request.principals)
        if (principal.empty() || principal.find_first_of(", \t\r\n") != std::string::npos)
            throw UsageError("tpmkey ssh-cert: --principal '" + principal +
                                 "': one user name (no comma, no space); repeat --principal for more",
                             ssh_cert_spec.usage);
    if (request.principals.empty())
        request.principals.push_back(user_name());

    const std::filesystem::path crt_file = beside_key(path, ".crt");
    const std::filesystem::path output = beside_key(path, "-cert.pub");
    // Checked again when written: here so that a place the certificate
    // cannot go fails before the PIN, the TPM and step-ca.
    check_writable_target(output, Replace::yes);

    const KeyFile key = read_key_file(path);
    check_usable(key, path.string());
    const PublicKey pub(key.blobs.pub.publicArea);
    request.ssh_public_key = pub.ssh_blob();

    // KEY.crt: step-ca's certificate for this very key, still valid (step-ca
    // would refuse it; this says what to do).
    const std::vector<X509Cert> chain = read_key_certificate(crt_file, path);
    X509* leaf = chain.front().get();
    EVP_PKEY* leaf_key = X509_get0_pubkey(leaf);
    if (!leaf_key || to_der(i2d_PUBKEY, leaf_key) != pub.spki_der())
        throw Error(crt_file.string() + ": the certificate of another key, not " + path.string() +
                    "'s (run 'tpmkey enroll' for " + path.string() + " again)");
    if (X509_cmp_current_time(X509_get0_notAfter(leaf)) <= 0)
        throw Error(crt_file.string() + ": expired (run 'tpmkey enroll' for " + path.string() +
                    " again, then this command)");
    // tpmkey enroll asks for a subject (CN = the permanent identifier);
    // another ACME client's certificate may have none.
    if (go_refuses_san(leaf))
        throw Error(crt_file.string() +
                    ": its subject is empty and its critical subjectAltName holds only the permanent identifier, "
                    "which step-ca's X5C provisioner cannot verify (Go: \"x509: unhandled critical extension\"); "
                    "run 'tpmkey enroll' for " +
                    path.string() + " again (its certificate's subject is the permanent identifier)");
    for (const X509Cert& cert : chain)
        request.x5c.push_back(to_der(i2d_X509, cert.get()));
    request.key_id = common_name(leaf);
    if (request.key_id.empty())
        request.key_id = permanent_identifier(leaf);
    if (request.key_id.empty())
        request.key_id = pub.ssh_fingerprint();

    enroll::HttpClient http(p.value("--ca-root"));

    if (!shared_pin_name(key).empty())
        throw Error(path.string() +
                    ": has the shared PIN (a TPM2_PolicySecret policy); tpmkey ssh-cert signs with the key's own PIN: "
                    "make the key with tpmkey-keygen --own-pin");
    // The parent before the PIN is asked for (as in tpmkey attest).
    OpenedKey opened(key, path, p);
    std::string token;
    opened.use([&](const TpmObject& loaded, const Authorization& auth) {
        const enroll::JwsSigner signer = enroll::tpm_signer(opened.tpm(), loaded, auth, key.blobs.pub.publicArea);
        token = enroll::x5c_token(signer, request.x5c,
                                  enroll::x5c_ssh_claims(request, std::time(nullptr), enroll::new_token_id()));
    });

    // One request, bounded as each of tpmkey enroll's (HttpClient's 10 s
    // to connect, 60 s in all); the token is valid 5 minutes.
    const enroll::SshCertificate cert = enroll::request_ssh_certificate(
        http, request, token, std::chrono::seconds{enroll::HttpClient::total_timeout_seconds});
    if (cert.public_key != request.ssh_public_key)
        throw Error("step-ca's SSH certificate is for another key, not " + path.string() + "'s; not written");
    if (cert.cert_type != 1)
        throw Error("step-ca's SSH certificate is not a user certificate; not written");
    write_file_atomically(
        output, cert.type + " " + base64(cert.blob) + (key.description.empty() ? "" : " ") + key.description + "\n",
        0644, Replace::yes);
    std::string principals;
    for (const std::string& principal : cert.principals)
        principals += (principals.empty() ? "" : ",") + principal;
    std::cout << "Wrote " << output.string() << ": an SSH user certificate from step-ca, serial " << cert.serial
              << ", key ID \"" << cert.key_id << "\", principals " << principals << ", valid from "
              << utc_time(cert.valid_after) << " to " << utc_time(cert.valid_before)
              << " (run this command again to renew it).\n";
    return 0;
}

}  // namespace

const Command ssh_cert_command{&ssh_cert_spec, cmd_ssh_cert};

}  // namespace tpmkey::cli
