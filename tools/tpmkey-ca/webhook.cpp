// tpmkey-ca webhook: step-ca's authorizing webhooks (docs/step-ca.md, "The
// webhooks"). step-ca does not check whether an AK was revoked, and its
// X5C provisioner signs whatever key, principals and key ID a token's
// holder asks for. On the ACME provisioner, for each certificate of a
// device-attest-01 order, this server allows only while the TPM the order
// names is trusted by DIR/records/: a valid AK certificate, and none
// revoked since the TPM was last reinstated. On the X5C provisioner, it
// allows only an SSH user certificate for the very key of a certificate
// the ACME provisioner issued for such a TPM, with the TPM's identifier as
// key ID and the principals recorded for it.
//
// The protocol is step-ca's (certificates, authority/provisioner/
// webhook.go): a POST of a JSON body, signed by X-Smallstep-Signature, the
// hex of HMAC-SHA256 of the body keyed with the base64-decoded webhook
// secret (each webhook its own: that tells the provisioners apart); the
// answer {"allow": bool} and, when refused, an "error" {code, message}
// that step-ca passes to the ACME client (for SSH only to its log).

#include "webhook.hpp"

#include "ak_records.hpp"
#include "audit_log.hpp"
#include "ca.hpp"
#include "ca_store.hpp"
#include "step_ca_request.hpp"
#include "webhook_server.hpp"

#include "core/attestation/acme_attestation.hpp"

#include "core/base/base64.hpp"
#include "core/base/error.hpp"
#include "core/base/secret.hpp"
#include "core/files/file_read.hpp"
#include "core/keys/public_key.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <nlohmann/json.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tpmkey::cli {

namespace {

constexpr CommandSpec webhook_spec{
    "webhook",
    "answer step-ca's authorizing webhooks: certificates only for attested, trusted TPM keys",
    "tpmkey-ca webhook [--ca DIR] --listen ADDRESS:PORT --tls-cert FILE --tls-key FILE --secret-file FILE\n"
    "                  [--x5c-secret-file FILE] [--acme-provisioner NAME]",
    "Serves step-ca's authorizing webhooks over HTTPS on ADDRESS:PORT until\n"
    "SIGTERM or SIGINT (it answers the requests in flight, then exits 0).\n"
    "SIGHUP reloads the TLS certificate and key and the secret files with\n"
    "no connection refused: new connections get the new certificate, those\n"
    "begun are answered as before; if any file is not good, it logs why and\n"
    "goes on with the old ones.\n"
    "Idle or slow clients do not hold up others: at most 512 connections,\n"
    "each dropped when its request is not whole within 10 s. Each request\n"
    "is told by the secret that signed it (X-Smallstep-Signature, the HMAC\n"
    "of its body):\n"
    "\n"
    "The ACME provisioner's webhook (--secret-file): for each certificate of\n"
    "a device-attest-01 order, it allows when the TPM the order names (its\n"
    "EK's permanent identifier) has an AK certificate in DIR/records/ that is\n"
    "neither revoked nor expired, and refuses otherwise: a TPM the CA never\n"
    "certified, every AK revoked (tpmkey-ca revoke), or a request without\n"
    "attestation.\n"
    "\n"
    "The X5C provisioner's webhook (--x5c-secret-file): it allows an SSH user\n"
    "certificate only for the key of the token's certificate, one that the\n"
    "ACME provisioner NAME issued for a TPM (its permanent identifier), with\n"
    "that identifier as key ID and principals among those issue-ak recorded\n"
    "for the TPM, while the TPM's AK is valid as above. It refuses every\n"
    "X.509 certificate through the X5C provisioner.\n"
    "\n"
    "It refuses a request signed by neither secret. Each decision on a signed\n"
    "request goes to DIR/audit.log; so do requests refused before a decision\n"
    "(no valid signature, not a POST, a body over 64 KiB or not JSON), at\n"
    "most 10 lines a minute for each of these reasons, then one line with how\n"
    "many more. It prints 'listening on ADDRESS:PORT' when it is ready.\n"
    "With DIR/database (a libpq connection string), the records are in that\n"
    "PostgreSQL database, asked at each decision: replicas on one database\n"
    "decide alike, and while it cannot answer every request is refused (503).\n"
    "\n"
    "  --ca DIR           the CA directory (default ~/.local/share/tpmkey-ca)\n"
    "  --listen ADDR:PORT where to listen: 127.0.0.1:8443, [::1]:8443 (port 0:\n"
    "                     any free one)\n"
    "  --tls-cert FILE    the server's certificate chain (PEM), one that step-ca\n"
    "                     trusts: issued under step-ca's own root (it trusts its\n"
    "                     roots and intermediates), or under its system roots\n"
    "  --tls-key FILE     its private key (PEM)\n"
    "  --secret-file FILE the ACME provisioner's webhook secret as step-ca gives\n"
    "                     it (base64), in a file of yours that others may not read;\n"
    "                     while it is rotated two lines, the new secret, then the\n"
    "                     old one: either signs (the log says which)\n"
    "  --x5c-secret-file FILE\n"
    "                     the X5C provisioner's webhook secret, likewise\n"
    "  --acme-provisioner NAME\n"
    "                     the ACME provisioner whose certificates the X5C\n"
    "                     provisioner takes (default tpm)\n",
    {"--ca", "--listen", "--tls-cert", "--tls-key", "--secret-file", "--x5c-secret-file", "--acme-provisioner",
     nullptr},
    {nullptr},
    0};

constexpr std::size_t max_secret_file = 4096;

}  // namespace

namespace {

Secret decoded_secret(const std::string& option, const std::string& path, std::string& line) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' '))
        line.pop_back();
    // Padded or not: a secret whose length is a multiple of 3 bytes (openssl
    // rand -base64 48) has no '='.
    std::optional<Bytes> decoded = base64_decode(line);
    OPENSSL_cleanse(line.data(), line.size());
    if (!decoded || decoded->size() < 16) {
        if (decoded)
            OPENSSL_cleanse(decoded->data(), decoded->size());
        throw Error(option + " " + path +
                    ": not a webhook secret as step-ca gives it (base64 of at least 16 bytes, one a line: one "
                    "secret, or two while it is rotated, the new one first)");
    }
    Secret secret(std::span<const std::uint8_t>(decoded->data(), decoded->size()));
    OPENSSL_cleanse(decoded->data(), decoded->size());
    return secret;
}

}  // namespace

std::vector<Secret> read_webhook_secrets(const std::string& option, const std::string& path) {
    FileRead file = read_regular_file(path, max_secret_file);
    std::string text(file.data.begin(), file.data.end());
    OPENSSL_cleanse(file.data.data(), file.data.size());
    if (file.owner != ::geteuid() || (file.mode & 0077)) {
        OPENSSL_cleanse(text.data(), text.size());
        throw Error(option + " " + path + ": others may read it, or it is not yours: chmod 600 it (and give " +
                    "step-ca's webhook a new secret if someone else could have read it)");
    }
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' '))
        text.pop_back();
    std::vector<Secret> secrets;
    std::size_t start = 0;
    try {
        while (secrets.size() < 3) {
            const std::size_t end = std::min(text.find('\n', start), text.size());
            std::string line = text.substr(start, end - start);
            secrets.push_back(decoded_secret(option, path, line));
            if (end == text.size())
                break;
            start = end + 1;
        }
    } catch (const Error&) {
        OPENSSL_cleanse(text.data(), text.size());
        throw;
    }
    OPENSSL_cleanse(text.data(), text.size());
    if (secrets.size() > 2)
        throw Error(option + " " + path +
                    ": more than two secrets: one, or two while it is rotated (the new one, then the old one)");
    return secrets;
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
    std::string machine, principals;  // allowed: the record's
};

// The decision for the TPM named `identifier`, from the records: one
// revoked AK certificate of the TPM (not reinstated since) refuses it,
// whatever other AK certificates it has; else its newest valid one allows.
Decision decide(const CaDirectory& ca, const std::string& identifier, AuditEntry& entry) {
    // One indexed look-up, made for every decision: no copy, no cache, so
    // every replica on one database store sees a revocation as soon as it
    // is committed. A store that cannot answer throws: the caller refuses.
    const std::vector<AkRecord> records = records_with(ca, RecordKey::ek_identifier, identifier);
    if (records.empty())
        return {false,
                "tpmkey-ca-unknown-tpm",
                "tpmkey-ca certified no AK of this TPM (" + identifier +
                    "): enrol it with tpmkey-ca first ('tpmkey attest enroll')",
                {},
                {}};
    const std::string now = utc_text(std::time(nullptr));
    const auto log_record = [&entry](const AkRecord& record) {
        entry.ak_serial = record.serial;
        entry.ak_name = record.ak_name;
        entry.ek_certificate_sha256 = record.ek_certificate_sha256;
        entry.machine = record.machine;
        entry.principals = record.principals;
    };
    for (auto record = records.rbegin(); record != records.rend(); ++record)
        if (bars_tpm(*record)) {
            log_record(*record);
            return {false,
                    "tpmkey-ca-ak-revoked",
                    "tpmkey-ca revoked the AK of this TPM (" + identifier + ": AK certificate " + record->serial +
                        ", machine " + record->machine + ", " + record->revoked + ", " + record->revocation_reason +
                        "): no certificate for this TPM until the operator reinstates it ('tpmkey-ca reinstate "
                        "--ek-identifier " +
                        identifier + "') and it enrols again",
                    {},
                    {}};
        }
    // The newest valid record (all_records() sorts by issue time) names the
    // machine and its principals.
    for (auto record = records.rbegin(); record != records.rend(); ++record)
        if (record->revoked.empty() && record->not_after > now) {
            log_record(*record);
            return {true,
                    {},
                    "AK certificate " + record->serial + " of this TPM is valid until " + record->not_after,
                    record->machine,
                    record->principals};
        }
    log_record(records.back());
    return {false,
            "tpmkey-ca-ak-expired",
            "no AK certificate tpmkey-ca issued for this TPM (" + identifier +
                ") is valid (each expired, or revoked before the TPM was reinstated): enrol the TPM again "
                "('tpmkey attest enroll')",
            {},
            {}};
}

const nlohmann::json* object_member(const nlohmann::json& body, const char* name) {
    const auto it = body.find(name);
    return it != body.end() && it->is_object() ? &*it : nullptr;
}

std::string string_member(const nlohmann::json* object, const char* name) {
    if (!object)
        return {};
    const auto it = object->find(name);
    return it != object->end() && it->is_string() ? it->get<std::string>() : std::string{};
}

// The X5C provisioner's request for an SSH certificate: allowed only for a
// user certificate of the very key of a certificate that step-ca's ACME
// provisioner `acme_provisioner` issued for a TPM (device-attest-01), with
// that TPM's permanent identifier as key ID and principals among those
// tpmkey-ca recorded for it, while tpmkey-ca trusts the TPM. step-ca has
// checked that this certificate's key signed the token (docs/step-ca.md,
// "What the webhook checks").
Decision decide_x5c(const CaDirectory& ca, const std::string& acme_provisioner, const nlohmann::json& body,
                    AuditEntry& entry) {
    if (body.contains("x509Certificate") || body.contains("x509CertificateRequest"))
        return {false,
                "tpmkey-ca-x509-via-x5c",
                "step-ca's X5C provisioner was asked for an X.509 certificate (POST /1.0/sign, or an identityCSR "
                "with an SSH certificate): refused, it would certify a key no TPM attested; X.509 certificates "
                "come from the ACME provisioner '" +
                    acme_provisioner + "' ('tpmkey enroll')",
                {},
                {}};
    const nlohmann::json* ssh = object_member(body, "sshCertificate");
    const nlohmann::json* x5c = object_member(body, "x5cCertificate");
    if (!ssh || !x5c)
        return {false,
                "tpmkey-ca-not-x5c-ssh",
                "not step-ca's authorizing request for an SSH certificate from the X5C provisioner (no "
                "sshCertificate and x5cCertificate): give the webhook on the X5C provisioner kind AUTHORIZING",
                {},
                {}};
    const std::optional<Bytes> der = base64_decode(string_member(x5c, "raw"));
    const unsigned char* p = der ? der->data() : nullptr;
    const X509Cert leaf(der ? d2i_X509(nullptr, &p, static_cast<long>(der->size())) : nullptr);
    if (!leaf || p != der->data() + der->size())
        return {false, "tpmkey-ca-not-x5c-ssh", "x5cCertificate.raw is not a certificate (DER, base64)", {}, {}};
    const std::optional<StepProvisioner> provisioner = step_provisioner_of(leaf.get());
    if (!provisioner || provisioner->type != step_provisioner_acme || provisioner->name != acme_provisioner)
        return {false,
                "tpmkey-ca-not-attested",
                "the token's certificate was not issued by step-ca's ACME provisioner '" + acme_provisioner +
                    "' (device attestation; " +
                    (provisioner ? "its provisioner: type " + std::to_string(provisioner->type) + ", '" +
                                       provisioner->name + "'"
                                 : std::string("no step provisioner extension")) +
                    "): only a key whose TPM step-ca attested gets an SSH certificate ('tpmkey enroll' first)",
                {},
                {}};
    std::optional<std::string> identifier;
    try {
        identifier = permanent_identifier_of(*der);
    } catch (const Error&) {
        identifier.reset();
    }
    if (!identifier || identifier->empty())
        return {false,
                "tpmkey-ca-no-permanent-identifier",
                "the token's certificate names no TPM (no permanentIdentifier in its subjectAltName): "
                "run 'tpmkey enroll' for the key again",
                {},
                {}};
    entry.input = *identifier;
    Decision decision = decide(ca, *identifier, entry);
    if (!decision.allow)
        return decision;
    const auto refuse = [&](const char* code, const std::string& message) {
        return Decision{false, code, message, {}, {}};
    };
    const std::string type = string_member(ssh, "type");
    if (type != "user")
        return refuse("tpmkey-ca-ssh-not-user", "an SSH certificate of type '" + type +
                                                    "' was asked for: tpmkey-ca allows only user certificates");
    const std::optional<Bytes> asked = base64_decode(string_member(ssh, "publicKey"));
    const std::optional<Bytes> attested = ssh_blob_of(X509_get0_pubkey(leaf.get()));
    if (!attested)
        return refuse("tpmkey-ca-ssh-other-key", "the token's certificate holds a key SSH has no form for");
    entry.key_fingerprint = asked ? ssh_fingerprint(*asked) : std::string("(none)");
    if (!asked || *asked != *attested)
        return refuse("tpmkey-ca-ssh-other-key",
                      "the SSH certificate would be for the key " + entry.key_fingerprint +
                          ", not for the TPM key that step-ca's certificate names (" + ssh_fingerprint(*attested) +
                          "): tpmkey-ca allows SSH certificates only for the attested key ('tpmkey ssh-cert KEY')");
    const std::string key_id = string_member(ssh, "keyId");
    if (key_id != *identifier)
        return refuse("tpmkey-ca-ssh-key-id", "the SSH certificate's key ID would be '" + key_id +
                                                  "', not the TPM's permanent identifier " + *identifier +
                                                  " (what 'tpmkey ssh-cert' asks for)");
    const auto principals = ssh->find("principals");
    if (principals == ssh->end() || !principals->is_array() || principals->empty())
        return refuse("tpmkey-ca-ssh-principal", "the SSH certificate would have no principals (valid for every "
                                                 "user): ask for the machine's (" +
                                                     decision.principals + ")");
    const std::string allowed = "," + decision.principals + ",";
    std::string asked_principals;
    for (const nlohmann::json& principal : *principals) {
        const std::string name = principal.is_string() ? principal.get<std::string>() : principal.dump();
        if (!principal.is_string() || !is_record_name(name) || allowed.find("," + name + ",") == std::string::npos)
            return refuse("tpmkey-ca-ssh-principal",
                          "principal '" + name + "' is not one tpmkey-ca recorded for machine " + decision.machine +
                              " (" + decision.principals +
                              "): ask for those ('tpmkey ssh-cert --principal'), or have the operator enrol the "
                              "machine again with other 'issue-ak --principals'");
        asked_principals += (asked_principals.empty() ? "" : ",") + name;
    }
    decision.message = "SSH user certificate for the attested key " + entry.key_fingerprint + " of TPM " + *identifier +
                       " (machine " + decision.machine + ", principals " + asked_principals + "); " + decision.message;
    return decision;
}

// The secrets of step-ca's two webhooks: each webhook has its own, so the
// one that signed a request says which provisioner sent it. Each list holds
// one secret, or two while it is rotated: the new one, then the old one.
// Replaced whole by a reload (SIGHUP).
struct Secrets {
    std::vector<Secret> acme;
    std::vector<Secret> x5c;  // empty: no --x5c-secret-file
};

Secrets read_secrets(const Parsed& p) {
    Secrets secrets{read_webhook_secrets("--secret-file", p.value("--secret-file")), {}};
    if (p.has_value("--x5c-secret-file"))
        secrets.x5c = read_webhook_secrets("--x5c-secret-file", p.value("--x5c-secret-file"));
    for (const Secret& x5c : secrets.x5c)
        for (const Secret& acme : secrets.acme)
            if (x5c.size() == acme.size() && CRYPTO_memcmp(x5c.data(), acme.data(), acme.size()) == 0)
                throw Error("--x5c-secret-file holds a secret of --secret-file: give each the secret step-ca "
                            "gave that provisioner's webhook (they tell the two provisioners' requests apart)");
    return secrets;
}

// Which of `secrets` signed the request: its index, or none.
std::optional<std::size_t> signed_by(const std::vector<Secret>& secrets, const HttpRequest& request) {
    for (std::size_t i = 0; i < secrets.size(); ++i)
        if (signature_matches(secrets[i], request))
            return i;
    return std::nullopt;
}

// Requests refused before any decision (not signed by step-ca, not a POST,
// too large, not JSON) are audited, but at most `lines_per_minute` lines a
// minute for each kind: then one line says how many more there were, so
// that anyone who can reach the port cannot grow audit.log without bound.
// Decisions on signed requests are always logged. Used from the server's
// one thread only.
class RefusalLog {
public:
    static constexpr unsigned lines_per_minute = 10;

    explicit RefusalLog(AuditLog& log) : log_(log) {}
    ~RefusalLog() {
        try {
            for (auto& [kind, window] : windows_)
                summarize(window);
        } catch (const std::exception& e) {
            std::cerr << "tpmkey-ca webhook: " << e.what() << "\n";
        }
    }
    RefusalLog(const RefusalLog&) = delete;
    RefusalLog& operator=(const RefusalLog&) = delete;

    void refused(const std::string& kind, const std::string& peer, const AuditEntry& entry) {
        const std::time_t now = std::time(nullptr);
        Window& window = windows_[kind];
        if (now - window.start >= 60) {
            summarize(window);
            window = {now, 0, 0, entry.reason};
        }
        if (window.lines < lines_per_minute) {
            ++window.lines;
            log_.refused(entry);
            std::cerr << "tpmkey-ca webhook: " << peer << ": " << entry.reason << "\n";
        } else {
            ++window.more;
        }
    }

private:
    struct Window {
        std::time_t start = 0;
        unsigned lines = 0, more = 0;
        std::string reason;
    };
    void summarize(Window& window) {
        if (window.more == 0)
            return;
        AuditEntry summary{.command = "webhook",
                           .input = "requests since " + utc_text(window.start),
                           .reason = std::to_string(window.more) +
                                     " more refused requests like this (not logged "
                                     "one by one: at most " +
                                     std::to_string(lines_per_minute) + " a minute): " + window.reason};
        window.more = 0;
        log_.refused(summary);
        std::cerr << "tpmkey-ca webhook: " << summary.reason << "\n";
    }
    AuditLog& log_;
    std::map<std::string, Window> windows_;
};

HttpResponse answer(const CaDirectory& ca, const Secrets& secrets, const std::string& acme_provisioner, AuditLog& log,
                    RefusalLog& refusals, const HttpRequest& request) {
    AuditEntry entry{.command = "webhook", .input = "request from " + request.peer};
    const auto refuse = [&](int status, const std::string& kind, const std::string& why) {
        entry.reason = "refused a request: " + why;
        refusals.refused(kind, request.peer, entry);
        return HttpResponse{status, R"({"allow":false})"};
    };
    if (request.refusal_status != 0)
        return refuse(request.refusal_status, "status " + std::to_string(request.refusal_status), request.refusal);
    if (request.method != "POST")
        return refuse(405, "method", "its method is " + request.method + ", not POST (not a step-ca webhook request)");
    const std::optional<std::size_t> acme_secret = signed_by(secrets.acme, request);
    const std::optional<std::size_t> x5c_secret = acme_secret ? std::nullopt : signed_by(secrets.x5c, request);
    const bool from_acme = acme_secret.has_value();
    const bool from_x5c = x5c_secret.has_value();
    if (!from_acme && !from_x5c)
        return refuse(401, "signature",
                      "its X-Smallstep-Signature is missing or is not the HMAC-SHA256 of its body with the secret "
                      "of --secret-file or --x5c-secret-file (not from step-ca, or step-ca has another secret)");
    const nlohmann::json body = nlohmann::json::parse(request.body, nullptr, /*allow_exceptions=*/false);
    if (!body.is_object())
        return refuse(400, "json", "its body is not a JSON object (not a step-ca webhook request)");
    Decision decision;
    int status = 200;
    const auto attestation = body.find("attestationData");
    try {
        if (from_x5c) {
            decision = decide_x5c(ca, acme_provisioner, body, entry);
        } else if (body.contains("x5cCertificate") || body.contains("sshCertificate") ||
                   body.contains("sshCertificateRequest")) {
            decision = {
                false,
                "tpmkey-ca-x5c-with-acme-secret",
                "a request from step-ca's X5C provisioner signed with the ACME webhook's secret (--secret-file): "
                "give the X5C provisioner's webhook secret with --x5c-secret-file",
                {},
                {}};
        } else if (attestation == body.end() || !attestation->is_object() ||
                   !attestation->contains("permanentIdentifier") ||
                   !(*attestation)["permanentIdentifier"].is_string()) {
            decision = {false,
                        "tpmkey-ca-no-attestation",
                        "this certificate is not for an attested TPM (no attestationData.permanentIdentifier: not a "
                        "device-attest-01 order); tpmkey-ca allows only those",
                        {},
                        {}};
        } else {
            const std::string identifier = (*attestation)["permanentIdentifier"].get<std::string>();
            entry.input = identifier;
            decision = decide(ca, identifier, entry);
        }
    } catch (const Error& e) {
        // The store could not answer (the database unreachable, a record
        // that fails its checks): never allowed without it. 503, so that a
        // load balancer and step-ca's log tell it from a "no".
        status = 503;
        decision = {false,
                    "tpmkey-ca-store-unavailable",
                    std::string("the CA's records could not be read, so nothing is allowed: ") + e.what(),
                    {},
                    {}};
    }
    // While a secret is rotated, which one signed: step-ca has the new one
    // when no request comes with the old one any more.
    if ((from_acme ? secrets.acme : secrets.x5c).size() == 2)
        decision.message += (from_acme ? *acme_secret : *x5c_secret) == 0 ? " (signed with the new secret)"
                                                                          : " (signed with the old secret)";
    entry.reason = decision.message;
    nlohmann::json out = {{"allow", decision.allow}};
    if (decision.allow) {
        log.accepted(entry);
    } else {
        log.refused(entry);
        out["error"] = {{"code", decision.code}, {"message", decision.message}};
    }
    std::cerr << "tpmkey-ca webhook: " << (from_x5c ? "x5c: " : "acme: ") << (decision.allow ? "allowed" : "refused")
              << ": " << decision.message << "\n";
    return {status, out.dump()};
}

int cmd_webhook(const Parsed& p) {
    for (const char* option : {"--listen", "--tls-cert", "--tls-key", "--secret-file"})
        if (!p.has_value(option))
            throw UsageError(std::string("tpmkey-ca webhook: ") + option + " is needed", webhook_spec.usage);
    const std::string acme_provisioner = p.has_value("--acme-provisioner") ? p.value("--acme-provisioner") : "tpm";
    if (acme_provisioner.empty())
        throw UsageError("tpmkey-ca webhook: --acme-provisioner needs the ACME provisioner's name", webhook_spec.usage);
    const CaDirectory ca = ca_directory_of(p);
    (void)load_ca(ca);
    // A records/ that fails its checks, or a DIR/database that is not ours,
    // stops it now, not at the first request. An unreachable database does
    // not: each decision asks it, and refuses while it cannot answer.
    if (database_store(ca) == nullptr)
        (void)all_records(ca);
    Secrets secrets = read_secrets(p);
    AuditLog log(audit_log_file(ca));
    RefusalLog refusals(log);
    // A client that goes away mid-answer must not end the server.
    ::signal(SIGPIPE, SIG_IGN);
    serve_https(
        p.value("--listen"), p.value("--tls-cert"), p.value("--tls-key"), HttpsLimits{},
        [](const std::string& address) { std::cout << "listening on " << address << std::endl; },
        [&](const HttpRequest& request) { return answer(ca, secrets, acme_provisioner, log, refusals, request); },
        [&]() -> std::function<void()> {
            // Read now; put in use by the server once the certificate read
            // again serves too (a shared_ptr: std::function copies).
            auto next = std::make_shared<Secrets>(read_secrets(p));
            return [&secrets, &p, next]() {
                secrets = std::move(*next);
                std::cerr << "tpmkey-ca webhook: reloaded the secrets: --secret-file " << secrets.acme.size()
                          << (secrets.acme.size() == 2 ? " (the new one, then the old one)" : "");
                if (p.has_value("--x5c-secret-file"))
                    std::cerr << ", --x5c-secret-file " << secrets.x5c.size()
                              << (secrets.x5c.size() == 2 ? " (the new one, then the old one)" : "");
                std::cerr << "\n";
            };
        });
    std::cerr << "tpmkey-ca webhook: stopped\n";
    return 0;
}

}  // namespace

const Command webhook_command{&webhook_spec, cmd_webhook};

}  // namespace tpmkey::cli
