// An SSH user certificate from step-ca's X5C provisioner (docs/step-ca.md):
// a JWT whose x5c header carries the X.509 certificate step-ca's ACME
// provisioner issued for a TPM key (tpmkey enroll), signed inside the TPM
// by that key, authorises POST /1.0/ssh/sign of the same key's SSH public
// key. The claims are those step-ca's X5C provisioner reads
// (authority/provisioner/x5c.go, AuthorizeSSHSign) and the `step` CLI
// writes: iss the provisioner's name, aud the CA's /1.0/ssh/sign URL, sub
// = the certificate's key ID, a short validity, a fresh jti, and
// "step": {"ssh": {certType, keyID, principals}}.
#pragma once

#include "core/base/bytes.hpp"
#include "http_client.hpp"
#include "jose.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

namespace tpmkey::enroll {

// How long a token is valid: step-ca accepts a minute of clock skew on
// top (jose.Claims.ValidateWithLeeway), and the token is used at once.
constexpr std::time_t ssh_token_lifetime_seconds = 5 * 60;

struct SshCertificateRequest {
    std::string ca_url;                   // https://HOST[:PORT], no path
    std::string provisioner;              // the X5C provisioner's name
    std::vector<Bytes> x5c;               // DER: the leaf, then its intermediates
    std::string key_id;                   // sub and keyID
    std::vector<std::string> principals;  // at least one
    Bytes ssh_public_key;                 // the key's SSH wire blob
};

// The CA URL a user gave, checked (https, a host, no query or fragment)
// and without a trailing slash or path beyond it: "https://ca:9000".
// Throws Error naming it.
std::string ca_base_url(std::string_view url);

// A fresh token ID (jti): 16 random bytes, hex.
std::string new_token_id();
// The token's claims at `now`, with `jti` as its ID.
nlohmann::json x5c_ssh_claims(const SshCertificateRequest& request, std::time_t now, const std::string& jti);
// The token: {"alg", "typ": "JWT", "x5c": [base64 DER...]} . claims,
// signed by `signer` (the key the leaf certifies).
std::string x5c_token(const JwsSigner& signer, const std::vector<Bytes>& x5c, const nlohmann::json& claims);
// The body of POST /1.0/ssh/sign for `request` with `token`.
std::string ssh_sign_body(const SshCertificateRequest& request, const std::string& token);

// What an OpenSSH certificate says (PROTOCOL.certkeys), as far as the
// client checks it before writing it.
struct SshCertificate {
    Bytes blob;        // the whole certificate, wire format
    std::string type;  // "ecdsa-sha2-nistp256-cert-v01@openssh.com", ...
    Bytes public_key;  // the certified key's plain SSH blob
    std::uint64_t serial = 0;
    std::uint32_t cert_type = 0;  // 1 user, 2 host
    std::string key_id;
    std::vector<std::string> principals;
    std::uint64_t valid_after = 0, valid_before = 0;
};
// Parses a certificate blob (ECDSA and RSA key types); throws Error for
// anything else, a truncated field or bytes after the signature.
SshCertificate parse_ssh_certificate(const Bytes& blob);

// step-ca's answer to POST `url` (/1.0/ssh/sign), hostile until parsed:
// the certificate it signed, or Error with step-ca's own message when it
// refused, or when the answer is not a certificate.
SshCertificate ssh_certificate_from_answer(const HttpResponse& response, const std::string& url);

// POSTs the request to step-ca and returns the certificate it signed;
// throws Error with step-ca's own message when it refuses, or when the
// answer is not a certificate. The request takes at most `timeout` (and
// never more than HttpClient::total_timeout_seconds).
SshCertificate request_ssh_certificate(HttpClient& http, const SshCertificateRequest& request, const std::string& token,
                                       std::chrono::milliseconds timeout);

}  // namespace tpmkey::enroll
