// tpmkey enroll KEY: an X.509 certificate for a TPM key from an ACME CA
// that verifies TPM device attestation (step-ca's device-attest-01, format
// "tpm"; docs/attestation.md, "step-ca"). The TPM's AK, certified by
// tpmkey-ca (tpmkey attest enroll --ak rsa), attests KEY for the ACME
// challenge; the CSR is signed by KEY inside the TPM; the chain is written
// beside the key, where the module serves it as the key's certificate.
#include "acme_client.hpp"
#include "cli.hpp"
#include "core/attestation/acme_attestation.hpp"
#include "core/attestation/ek_certificate.hpp"
#include "core/base/owned.hpp"
#include "core/base/printable.hpp"
#include "core/files/atomic_file.hpp"
#include "core/files/config.hpp"
#include "core/pin/prompt.hpp"
#include "core/tpm/pin_object.hpp"
#include "core/tpm/tpm_keys.hpp"
#include "core/trust/attestation_key.hpp"
#include "core/trust/key_attestation.hpp"
#include "http_client.hpp"
#include "jose.hpp"

#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <chrono>
#include <iostream>

namespace tpmkey::cli {

namespace {

constexpr CommandSpec enroll_spec{"enroll",
                                  "get an X.509 certificate for KEY from an ACME CA by TPM attestation",
                                  "tpmkey enroll --acme URL --ca-root ROOT.crt --ak-cert AK.crt [--pin-file FILE] KEY",
                                  "Asks an ACME CA that verifies TPM device attestation (step-ca's ACME\n"
                                  "provisioner with device-attest-01, format tpm) for a certificate of KEY:\n"
                                  "this TPM's attestation key (AK) proves that KEY lives in this TPM, KEY\n"
                                  "signs the certificate request inside the TPM, and the certificate chain\n"
                                  "(PEM) is written beside the key: KEY without .tpm, plus .crt.\n"
                                  "\n"
                                  "  --acme URL           the ACME provisioner's directory URL (https only;\n"
                                  "                        step-ca: https://HOST[:PORT]/acme/PROVISIONER/directory)\n"
                                  "  --ca-root ROOT.crt    the CA's root certificate: the only one trusted\n"
                                  "                        for the connection\n"
                                  "  --ak-cert AK.crt      this TPM's AK certificate from tpmkey-ca (RSA AK:\n"
                                  "                        'tpmkey attest enroll --ak rsa'); its permanent\n"
                                  "                        identifier is what the order asks for\n"
                                  "  --pin-file FILE       KEY's PIN: the first line of FILE (else asked for)\n"
                                  "\n"
                                  "The CA must trust tpmkey-ca's root as an attestation root. The PIN\n"
                                  "travels only in an encrypted session; nothing secret leaves the TPM.\n",
                                  {"--acme", "--ca-root", "--ak-cert", "--pin-file", nullptr},
                                  {nullptr},
                                  1};

// KEY.tpm -> KEY.crt; another name gets .crt added.
std::filesystem::path certificate_file(const std::filesystem::path& key) {
    std::filesystem::path out = key;
    if (out.extension() == ".tpm")
        return out.replace_extension(".crt");
    return out += ".crt";
}

// The chain the CA sent, each certificate parsed; the first must be for
// KEY (a CA could answer with anything). Returns it again as PEM, written
// by OpenSSL, and the leaf's lines for the user.
std::string checked_chain(const std::string& pem, const PublicKey& key, const std::string& server, int& count,
                          std::string& leaf_subject, std::string& not_after) {
    const Bytes data(pem.begin(), pem.end());
    const std::vector<X509Cert> chain = certificates_in(data);
    if (chain.empty())
        throw Error(server + " sent no certificate");
    if (to_der(i2d_PUBKEY, X509_get0_pubkey(chain.front().get())) != key.spki_der())
        throw Error(server + " sent a certificate for another key; nothing written");
    const Bio out(BIO_new(BIO_s_mem()));
    for (const X509Cert& cert : chain)
        if (!out || PEM_write_bio_X509(out.get(), cert.get()) != 1)
            throw Error("OpenSSL: cannot write the certificate chain");
    char* text = nullptr;
    const long size = BIO_get_mem_data(out.get(), &text);
    count = static_cast<int>(chain.size());
    leaf_subject = name_line(X509_get_subject_name(chain.front().get()));
    const Bio date(BIO_new(BIO_s_mem()));
    char* date_text = nullptr;
    if (date && ASN1_TIME_print(date.get(), X509_get0_notAfter(chain.front().get())) == 1) {
        const long n = BIO_get_mem_data(date.get(), &date_text);
        not_after.assign(date_text, static_cast<std::size_t>(n));
    }
    return std::string(text, static_cast<std::size_t>(size));
}

// The AK certificate's permanent identifier (tpmkey-ca writes the EK's,
// urn:ek:sha256:...): what the order asks for, and what step-ca compares.
std::string order_identifier(const Bytes& ak_certificate, const std::string& file) {
    std::optional<std::string> id;
    try {
        id = permanent_identifier_of(ak_certificate);
    } catch (const Error& e) {
        throw Error(file + ": " + e.what());
    }
    if (!id)
        throw Error(file +
                    ": the AK certificate names no permanent identifier (subjectAltName otherName "
                    "1.3.6.1.5.5.7.8.3); enrol the TPM again ('tpmkey attest enroll --ak rsa') at a tpmkey-ca that "
                    "writes it");
    if (id->empty() || id->size() > 1024 ||
        !std::all_of(id->begin(), id->end(), [](char c) { return c > 0x20 && c < 0x7f; }))
        throw Error(file + ": the AK certificate's permanent identifier is not printable text");
    return *id;
}

// The CA's address alone, or step-ca's provisioner path without
// /directory, is no directory: say so before anything is sent (the
// server's 404 would say less). Other paths are the server's to judge.
void check_directory_url(const std::string& url) {
    const std::size_t host = std::string_view("https://").size();
    const std::size_t slash = url.find('/', host);
    std::string path = slash == std::string::npos ? "" : url.substr(slash);
    while (path.ends_with('/'))
        path.pop_back();
    const bool provisioner_only =
        path.starts_with("/acme/") && path.size() > 6 && path.find('/', 6) == std::string::npos;
    if (path.empty() || provisioner_only)
        throw UsageError("tpmkey enroll: --acme " + printable(url) + " is not an ACME directory URL; step-ca's is " +
                             enroll::step_ca_directory_form + (provisioner_only ? " (add /directory)" : ""),
                         enroll_spec.usage);
}

// step-ca verifies the attestation of an RSA AK only (go-attestation):
// an ECC AK's certificate is refused here, before the TPM and the CA.
void check_rsa_ak(const Bytes& ak_certificate, const std::string& file) {
    const std::vector<X509Cert> certs = certificates_in(ak_certificate);
    const EVP_PKEY* key = certs.empty() ? nullptr : X509_get0_pubkey(certs.front().get());
    if (key && EVP_PKEY_get_base_id(key) != EVP_PKEY_RSA)
        throw Error(file +
                    ": the certificate of an ECC AK; step-ca verifies the attestation of an RSA AK only: enrol the "
                    "TPM's RSA AK ('tpmkey attest enroll --ak rsa', then the CA's steps) and give its certificate");
}

int cmd_enroll(const Parsed& p) {
    const std::filesystem::path path = p.positional[0];
    if (!p.has_value("--acme") || !p.has_value("--ca-root") || !p.has_value("--ak-cert"))
        throw UsageError("tpmkey enroll: --acme, --ca-root and --ak-cert are needed", enroll_spec.usage);
    const auto started = std::chrono::steady_clock::now();
    const std::string directory = p.value("--acme");
    if (directory.rfind("https://", 0) != 0)
        throw UsageError("tpmkey enroll: --acme must be an https URL", enroll_spec.usage);
    check_directory_url(directory);
    const std::filesystem::path output = certificate_file(path);
    // Checked again when written: here so that a place the chain cannot go
    // fails before the PIN, the TPM and the CA.
    check_writable_target(output, Replace::yes);

    // Every file first: a run that was going to fail fails before the TPM
    // and the network.
    KeyFile key;
    try {
        key = read_key_file(path);
    } catch (const Error& e) {
        throw Error(std::string(e.what()) +
                    " (tpmkey enroll certifies TPM keys only: make one with tpmkey-keygen; a key in a file has "
                    "no TPM to attest it)");
    }
    check_usable(key, path.string());
    if (!shared_pin_name(key).empty())
        throw Error(path.string() +
                    ": has the shared PIN (a TPM2_PolicySecret policy); tpmkey enroll signs the certificate request "
                    "with the key's own PIN: make the key with tpmkey-keygen --own-pin");
    if (key.has_policy())
        throw Error(path.string() +
                    ": bound to a PCR policy; tpmkey enroll signs the certificate request with the key's PIN alone, "
                    "so it certifies keys without a policy only");
    const TPMT_PUBLIC& key_area = key.blobs.pub.publicArea;
    const PublicKey key_public(key_area);
    const std::string ak_file = p.value("--ak-cert");
    const std::vector<Bytes> x5c = read_ak_certificates(ak_file);
    const std::string identifier = order_identifier(x5c.front(), ak_file);
    check_rsa_ak(x5c.front(), ak_file);
    enroll::HttpClient http(p.value("--ca-root"));

    // The AK and the parent before the PIN is asked for (as tpmkey attest).
    OpenedKey opened(key, path, p, &x5c.front(), ak_file);
    enroll::AcmeClient acme(http, directory, "the CA");
    std::string chain_pem;
    opened.use([&](const TpmObject& loaded, const Authorization& auth) {
        const enroll::JwsSigner key_signer = enroll::tpm_signer(opened.tpm(), loaded, auth, key_area);
        enroll::DeviceAttestOrder order;
        order.identifier = identifier;
        order.attest = [&](const std::string& key_authorization) {
            return attest_key_for_acme(opened.tpm(), loaded, key_area, auth, opened.ak(), x5c, key_authorization);
        };
        order.csr = [&] { return enroll::certificate_request(key_public, key_signer, identifier); };
        chain_pem = acme.device_attest(order);
    });
    int count = 0;
    std::string subject, not_after;
    const std::string checked = checked_chain(chain_pem, key_public, "the CA", count, subject, not_after);
    write_file_atomically(output, checked, 0644, Replace::yes);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
    std::cout << "Wrote the certificate of " << path.string() << " for permanent identifier " << identifier << " to "
              << output.string() << " (" << count << " certificate" << (count == 1 ? "" : "s") << "; subject "
              << (subject.empty() ? "empty" : printable(subject)) << "; valid until " << not_after << ").\n"
              << "ACME: " << acme.requests() << " requests, " << ms << " ms.\n";
    return 0;
}

}  // namespace

const Command enroll_command{&enroll_spec, cmd_enroll};

}  // namespace tpmkey::cli
