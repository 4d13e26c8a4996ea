// An ACME client (RFC 8555) for one thing: a certificate for a TPM key
// through the device-attest-01 challenge (draft-acme-device-attest), as
// step-ca verifies it: a fresh account, an order for the TPM's permanent
// identifier, the challenge answered with the key's attestation made for
// the key authorization, a CSR signed inside the TPM, the chain. Every
// answer of the server is hostile until parsed; a refusal is reported with
// the server's problem document (RFC 7807: type, detail, subproblems).
#pragma once

#include "core/base/bytes.hpp"
#include "core/base/error.hpp"
#include "core/keys/public_key.hpp"
#include "http_client.hpp"
#include "jose.hpp"
#include "json_answer.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

namespace tpmkey::enroll {

// A refusal by the ACME server; what() says what was refused and the
// server's problem: "step-ca refused the challenge: TYPE: DETAIL[; sub...]".
class AcmeError : public Error {
public:
    AcmeError(const std::string& what, std::string problem_type)
        : Error(what), problem_type_(std::move(problem_type)) {}
    const std::string& problem_type() const noexcept { return problem_type_; }

private:
    std::string problem_type_;
};

// A nonce as RFC 8555 6.5.1 defines it: base64url, here 1 to 256
// characters. Any other Replay-Nonce is treated as absent.
bool is_nonce(std::string_view text);

// "TYPE: DETAIL" of a problem document (DETAIL at most 1000 characters),
// then "; TYPE: DETAIL (identifier)" for each subproblem but one without
// identifier that only repeats DETAIL's words (step-ca's webhook refusal);
// for a body that is no problem document, its first 200 printable
// characters, without a final newline.
std::string problem_text(const std::string& body);

// What to do about a refusal whose usual cause is known (step-ca's), as
// " (...)" to append to its message, else "". `what` is what was refused
// ("the certificate request (finalize)", ...), `text` problem_text's.
std::string refusal_advice(const std::string& what, const std::string& problem_type, const std::string& text);

// How step-ca names an ACME provisioner's directory, for messages.
inline constexpr const char* step_ca_directory_form = "https://HOST[:PORT]/acme/PROVISIONER/directory";

// A PKCS#10 request (DER) for `key`, signed with `signer` (the key itself,
// inside the TPM: ES256/384/512 or RS256), checked with OpenSSL before it
// is returned. Its subject is CN=`common_name` (UTF8String, at most 64
// characters), or empty when that is "". tpmkey enroll gives the order's
// permanent identifier: step-ca accepts that CN (acme/order.go, Finalize)
// and its attested-leaf template puts it into the certificate's subject,
// so that the subjectAltName is not critical (RFC 5280 4.2.1.6), which Go's
// crypto/x509, hence step-ca's X5C provisioner, needs (docs/step-ca.md).
Bytes certificate_request(const PublicKey& key, const JwsSigner& signer, const std::string& common_name = "");

struct DeviceAttestOrder {
    std::string identifier;  // the permanent identifier the order is for
    // The attestation object (CBOR) for the challenge's key authorization.
    std::function<Bytes(const std::string& key_authorization)> attest;
    // The CSR (DER) to finalise with.
    std::function<Bytes()> csr;
};

class AcmeClient {
public:
    // How long the client waits for the server to decide (challenge,
    // order), in all; each wait is the server's Retry-After, at most 10 s.
    static constexpr std::chrono::seconds max_wait{60};
    // How long one device_attest may take in all: each request gets the
    // time left (a server that drips its answers is stopped), and the PIN
    // is not kept in memory longer.
    static constexpr std::chrono::milliseconds default_time_limit{std::chrono::minutes{5}};

    // `server` names the CA in messages ("step-ca"). Every URL the server
    // gives must be at the directory's scheme://host[:port]/.
    AcmeClient(HttpClient& http, std::string directory_url, std::string server = "the ACME server",
               std::chrono::milliseconds time_limit = default_time_limit);

    // A new account (termsOfServiceAgreed) with a fresh account key, the
    // order, the challenge, finalize; returns the certificate chain (PEM)
    // as the server sent it. Throws AcmeError when the server refuses,
    // Error for anything else.
    std::string device_attest(const DeviceAttestOrder& order);

    // How many requests the last device_attest sent (for the figures).
    int requests() const noexcept { return requests_; }

private:
    struct Answer {
        HttpResponse response;
        nlohmann::json json;  // null unless the body is JSON
    };
    void read_directory();
    // One request in the time left; throws the deadline's Error when it
    // is over.
    HttpResponse send(const std::string& url, const std::string* jws);
    std::chrono::milliseconds time_left() const;
    [[noreturn]] void time_over() const;
    // `url` (from the server, as `what`) if it is printable ASCII and at
    // origin_; else throws Error naming it.
    const std::string& checked_url(const std::string& url, const std::string& what) const;
    std::string fresh_nonce();
    // A JWS POST (kid, or jwk before there is an account); a badNonce is
    // retried once with the nonce that answer carried.
    Answer post(const std::string& url, const std::string& payload, const std::string& what);
    Answer post_as_get(const std::string& url, const std::string& what) { return post(url, "", what); }
    // Polls `url` (POST-as-GET) until its status is not one of `pending`.
    nlohmann::json poll(const std::string& url, nlohmann::json object, std::initializer_list<const char*> pending,
                        const std::string& what);
    [[noreturn]] void refused(const std::string& what, const HttpResponse& response) const;
    std::string url_in(const nlohmann::json& object, const char* member, const std::string& what) const;

    HttpClient& http_;
    std::string directory_url_;
    std::string origin_;  // the directory's scheme://host[:port]
    std::string server_;
    std::chrono::milliseconds time_limit_;
    std::chrono::steady_clock::time_point deadline_;
    nlohmann::json directory_;
    JwsSigner account_;
    std::string kid_;
    std::string nonce_;
    int requests_ = 0;
};

}  // namespace tpmkey::enroll
