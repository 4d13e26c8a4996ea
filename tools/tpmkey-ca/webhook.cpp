// tpmkey-ca webhook: step-ca's authorizing webhook (docs/attestation.md,
// "step-ca"). step-ca does not check whether an AK was revoked; for each
// certificate of a device-attest-01 order, it asks this server, which
// answers from DIR/records/: allow only while the EK that the order names
// has an AK certificate that is neither revoked nor expired.
//
// The protocol is step-ca's (certificates, authority/provisioner/
// webhook.go): a POST of a JSON body with attestationData.
// permanentIdentifier, signed by X-Smallstep-Signature, the hex of
// HMAC-SHA256 of the body keyed with the base64-decoded webhook secret;
// the answer {"allow": bool} and, when refused, an "error" {code, message}
// that step-ca passes to the ACME client.

#include "webhook.hpp"

#include "ak_records.hpp"
#include "audit_log.hpp"
#include "ca.hpp"
#include "https_server.hpp"

#include "core/base/error.hpp"
#include "core/base/secret.hpp"
#include "core/files/file_read.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <nlohmann/json.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <iostream>
#include <string>
#include <vector>

namespace tpmkey::cli {

namespace {

constexpr CommandSpec webhook_spec{
    "webhook",
    "answer step-ca's authorizing webhook: no certificate for a TPM whose AKs were revoked",
    "tpmkey-ca webhook [--ca DIR] --listen ADDRESS:PORT --tls-cert FILE --tls-key FILE --secret-file FILE",
    "Serves step-ca's authorizing webhook over HTTPS on ADDRESS:PORT, one\n"
    "request at a time, until it is stopped. For each certificate that\n"
    "step-ca's ACME provisioner would issue for a device-attest-01 order, it\n"
    "answers allow when the TPM the order names (its EK's permanent\n"
    "identifier) has an AK certificate in DIR/records/ that is neither\n"
    "revoked nor expired, and refuses otherwise: a TPM the CA never\n"
    "certified, every AK revoked (tpmkey-ca revoke), or a request without\n"
    "attestation. It refuses a request whose X-Smallstep-Signature is not the\n"
    "HMAC of its body with the webhook's secret. Each decision goes to\n"
    "DIR/audit.log. It prints 'listening on ADDRESS:PORT' when it is ready.\n"
    "\n"
    "  --ca DIR           the CA directory (default ~/.local/share/tpmkey-ca)\n"
    "  --listen ADDR:PORT where to listen: 127.0.0.1:8443, [::1]:8443 (port 0:\n"
    "                     any free one)\n"
    "  --tls-cert FILE    the server's certificate chain (PEM), one that step-ca\n"
    "                     trusts (its system roots: SSL_CERT_FILE, SSL_CERT_DIR)\n"
    "  --tls-key FILE     its private key (PEM)\n"
    "  --secret-file FILE the webhook's secret as step-ca gives it (base64), in a\n"
    "                     file of yours that others may not read\n",
    {"--ca", "--listen", "--tls-cert", "--tls-key", "--secret-file", nullptr},
    {nullptr},
    0};

constexpr std::size_t max_secret_file = 4096;

// A strict standard base64 (padded, no white space) decoded; nullopt else.
// EVP_DecodeBlock decodes; the checks before it are what it would let
// through (white space, '=' inside the text), and the padding it counts as
// zero bytes, taken off after it.
std::optional<Secret> base64_decode(const std::string& text) {
    if (text.empty() || text.size() % 4 != 0 ||
        text.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") !=
            std::string::npos)
        return std::nullopt;
    // Everything from the first '=' on, and only '=': none at all for a
    // secret whose length is a multiple of 3 bytes (openssl rand -base64 48).
    const std::size_t padding = text.size() - std::min(text.size(), text.find('='));
    if (padding > 2 || text.find_first_not_of('=', text.size() - padding) != std::string::npos)
        return std::nullopt;
    std::vector<std::uint8_t> out(text.size() / 4 * 3);
    const int size =
        EVP_DecodeBlock(out.data(), reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
    if (size < 0) {
        OPENSSL_cleanse(out.data(), out.size());
        return std::nullopt;
    }
    Secret secret(std::span<const std::uint8_t>(out.data(), static_cast<std::size_t>(size) - padding));
    OPENSSL_cleanse(out.data(), out.size());
    return secret;
}

}  // namespace

Secret read_webhook_secret(const std::string& path) {
    FileRead file = read_regular_file(path, max_secret_file);
    std::string text(file.data.begin(), file.data.end());
    OPENSSL_cleanse(file.data.data(), file.data.size());
    if (file.owner != ::geteuid() || (file.mode & 0077)) {
        OPENSSL_cleanse(text.data(), text.size());
        throw Error("--secret-file " + path + ": others may read it, or it is not yours: chmod 600 it (and give " +
                    "step-ca's webhook a new secret if someone else could have read it)");
    }
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' '))
        text.pop_back();
    std::optional<Secret> secret = base64_decode(text);
    OPENSSL_cleanse(text.data(), text.size());
    if (!secret || secret->size() < 16)
        throw Error("--secret-file " + path +
                    ": not a webhook secret as step-ca gives it (base64 of at least 16 bytes, on one line)");
    return std::move(*secret);
}

namespace {

bool signature_matches(const Secret& secret, const HttpRequest& request) {
    const auto header = request.headers.find("x-smallstep-signature");
    if (header == request.headers.end() || header->second.size() != 64)
        return false;
    std::uint8_t given[32];
    for (std::size_t i = 0; i < 32; ++i) {
        const std::string pair = header->second.substr(2 * i, 2);
        if (pair.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
            return false;
        given[i] = static_cast<std::uint8_t>(std::stoul(pair, nullptr, 16));
    }
    std::uint8_t mac[EVP_MAX_MD_SIZE];
    unsigned int mac_size = 0;
    if (!HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
              reinterpret_cast<const unsigned char*>(request.body.data()), request.body.size(), mac, &mac_size) ||
        mac_size != 32)
        return false;
    return CRYPTO_memcmp(mac, given, 32) == 0;
}

struct Decision {
    bool allow = false;
    std::string code, message;
};

// The decision for the TPM named `identifier`, from the records.
Decision decide(const CaDirectory& ca, const std::string& identifier, AuditEntry& entry) {
    std::vector<AkRecord> records;
    for (AkRecord& record : all_records(ca))
        if (record.ek_identifier == identifier)
            records.push_back(std::move(record));
    if (records.empty())
        return {false, "tpmkey-ca-unknown-tpm",
                "tpmkey-ca certified no AK of this TPM (" + identifier +
                    "): enrol it with tpmkey-ca first ('tpmkey attest enroll')"};
    const std::string now = utc_text(std::time(nullptr));
    const auto log_record = [&entry](const AkRecord& record) {
        entry.ak_serial = record.serial;
        entry.ak_name = record.ak_name;
        entry.ek_certificate_sha256 = record.ek_certificate_sha256;
        entry.machine = record.machine;
        entry.principals = record.principals;
    };
    const AkRecord* revoked = nullptr;
    for (const AkRecord& record : records) {
        if (record.revoked.empty() && record.not_after > now) {
            log_record(record);
            return {true, {}, "AK certificate " + record.serial + " of this TPM is valid until " + record.not_after};
        }
        if (!record.revoked.empty())
            revoked = &record;
    }
    log_record(revoked ? *revoked : records.back());
    if (revoked)
        return {false, "tpmkey-ca-ak-revoked",
                "tpmkey-ca revoked the AK of this TPM (" + identifier + ": AK certificate " + revoked->serial +
                    ", machine " + revoked->machine + ", " + revoked->revoked + ", " + revoked->revocation_reason +
                    "): enrol the TPM again ('tpmkey attest enroll') if it is to be trusted again"};
    return {false, "tpmkey-ca-ak-expired",
            "every AK certificate tpmkey-ca issued for this TPM (" + identifier +
                ") has expired: enrol the TPM again ('tpmkey attest enroll')"};
}

HttpResponse answer(const CaDirectory& ca, const Secret& secret, AuditLog& log, const HttpRequest& request) {
    if (request.method != "POST")
        return {405, R"({"allow":false})"};
    AuditEntry entry{.command = "webhook", .input = "request from " + request.peer};
    if (!signature_matches(secret, request)) {
        entry.reason = "refused a request: its X-Smallstep-Signature is missing or is not the HMAC-SHA256 of its "
                       "body with the secret of --secret-file (not from step-ca, or step-ca has another secret)";
        log.refused(entry);
        std::cerr << "tpmkey-ca webhook: " << request.peer << ": " << entry.reason << "\n";
        return {401, R"({"allow":false})"};
    }
    const nlohmann::json body = nlohmann::json::parse(request.body, nullptr, /*allow_exceptions=*/false);
    if (!body.is_object()) {
        entry.reason = "refused a request: its body is not a JSON object (not a step-ca webhook request)";
        log.refused(entry);
        std::cerr << "tpmkey-ca webhook: " << request.peer << ": " << entry.reason << "\n";
        return {400, R"({"allow":false})"};
    }
    Decision decision;
    const auto attestation = body.find("attestationData");
    if (attestation == body.end() || !attestation->is_object() || !attestation->contains("permanentIdentifier") ||
        !(*attestation)["permanentIdentifier"].is_string()) {
        decision = {false, "tpmkey-ca-no-attestation",
                    "this certificate is not for an attested TPM (no attestationData.permanentIdentifier: not a "
                    "device-attest-01 order); tpmkey-ca allows only those"};
    } else {
        const std::string identifier = (*attestation)["permanentIdentifier"].get<std::string>();
        entry.input = identifier;
        decision = decide(ca, identifier, entry);
    }
    entry.reason = decision.message;
    nlohmann::json out = {{"allow", decision.allow}};
    if (decision.allow) {
        log.accepted(entry);
    } else {
        log.refused(entry);
        out["error"] = {{"code", decision.code}, {"message", decision.message}};
    }
    std::cerr << "tpmkey-ca webhook: " << (decision.allow ? "allowed" : "refused") << ": " << decision.message << "\n";
    return {200, out.dump()};
}

int cmd_webhook(const Parsed& p) {
    for (const char* option : {"--listen", "--tls-cert", "--tls-key", "--secret-file"})
        if (!p.has_value(option))
            throw UsageError(std::string("tpmkey-ca webhook: ") + option + " is needed", webhook_spec.usage);
    const CaDirectory ca = ca_directory_of(p);
    (void)load_ca(ca);
    (void)all_records(ca);  // a records/ that fails its checks stops it now, not at the first request
    const Secret secret = read_webhook_secret(p.value("--secret-file"));
    AuditLog log(audit_log_file(ca));
    // A client that goes away mid-answer must not end the server.
    ::signal(SIGPIPE, SIG_IGN);
    HttpsServer server(p.value("--listen"), p.value("--tls-cert"), p.value("--tls-key"));
    std::cout << "listening on " << server.address() << std::endl;
    server.serve([&](const HttpRequest& request) { return answer(ca, secret, log, request); });
}

}  // namespace

const Command webhook_command{&webhook_spec, cmd_webhook};

}  // namespace tpmkey::cli
