#include "acme_client.hpp"

#include "core/base/owned.hpp"

#include <openssl/asn1.h>
#include <openssl/bn.h>
#include <openssl/ecdsa.h>
#include <openssl/obj_mac.h>
#include <openssl/objects.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cctype>
#include <thread>

namespace tpmkey::enroll {

namespace {

constexpr const char* jose_json = "application/jose+json";
constexpr std::chrono::seconds max_retry_after{10};

std::string string_member(const nlohmann::json& object, const char* name) {
    if (object.is_object() && object.contains(name) && object[name].is_string())
        return object[name].get<std::string>();
    return {};
}

// As parse_answer, a too deep answer discarded: for problem documents.
nlohmann::json parse_json(const std::string& body) {
    bool too_deep = false;
    return parse_bounded(body, too_deep);
}

std::chrono::seconds retry_after(const HttpResponse& response) {
    const auto it = response.headers.find("retry-after");
    if (it == response.headers.end() || it->second.empty() || it->second.size() > 6 ||
        !std::all_of(it->second.begin(), it->second.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return std::chrono::seconds{1};  // absent, or an HTTP date: a second
    return std::clamp(std::chrono::seconds{std::stol(it->second)}, std::chrono::seconds{1}, max_retry_after);
}

using X509Req = Owned<X509_REQ, X509_REQ_free>;
using EcdsaSig = Owned<ECDSA_SIG, ECDSA_SIG_free>;

}  // namespace

bool is_nonce(std::string_view text) {
    return !text.empty() && text.size() <= 256 && std::all_of(text.begin(), text.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
    });
}

std::string problem_text(const std::string& body) {
    bool too_deep = false;
    const nlohmann::json problem = parse_bounded(body, too_deep);
    if (too_deep)
        return "an answer of JSON nested deeper than " + std::to_string(max_json_depth) + " levels";
    const std::string type = string_member(problem, "type");
    if (type.empty()) {
        // A plain text answer's final newline is no part of its words.
        const std::size_t end = body.find_last_not_of(" \t\r\n");
        return end == std::string::npos ? "no explanation given" : server_text(body.substr(0, end + 1), 200);
    }
    std::string out = server_text(type);
    const std::string detail = string_member(problem, "detail");
    if (!detail.empty())
        out += ": " + server_text(detail, 1000);  // step-ca's holds its webhook's whole message
    if (problem.contains("subproblems") && problem["subproblems"].is_array()) {
        int n = 0;
        for (const auto& sub : problem["subproblems"]) {
            if (++n > 10)
                break;
            const std::string sub_detail = string_member(sub, "detail");
            // step-ca puts a webhook's refusal into the detail, "MESSAGE
            // (CODE)", and again as a subproblem: say it once.
            if (!sub_detail.empty() && !sub.contains("identifier") && detail.find(sub_detail) != std::string::npos)
                continue;
            out += "; " + server_text(string_member(sub, "type"));
            if (!sub_detail.empty())
                out += ": " + server_text(sub_detail);
            if (sub.contains("identifier"))
                out += " (" + server_text(string_member(sub["identifier"], "value")) + ")";
        }
    }
    return out;
}

std::string refusal_advice(const std::string& what, const std::string& problem_type, const std::string& text) {
    // step-ca's go-attestation verifies an RSA AK only; an ECC AK's
    // attestation gets one of these.
    if (text.find("only RSA verification keys are supported") != std::string::npos ||
        (text.find("invalid alg") != std::string::npos && text.find("attestation statement") != std::string::npos))
        return " (step-ca verifies only an RSA AK: enrol the TPM's RSA AK with 'tpmkey attest enroll --ak rsa', then "
               "the CA's steps, and give its certificate as --ak-cert)";
    // step-ca answers serverInternal when its authorizing webhook could not
    // be asked (down, unreachable, a TLS failure, another secret): the
    // reason is only in its log.
    if (problem_type == "urn:ietf:params:acme:error:serverInternal" && what.find("finalize") != std::string::npos)
        return " (step-ca's log says why; most likely step-ca could not ask its ACME provisioner's authorizing "
               "webhook: check that tpmkey-ca webhook runs at the URL step-ca has for it, with step-ca's secret, and "
               "read its standard error)";
    return "";
}

Bytes certificate_request(const PublicKey& key, const JwsSigner& signer, const std::string& common_name) {
    const X509Req req(X509_REQ_new());
    const EvpPkey pub = key.to_evp();
    if (!req || !pub || !X509_REQ_set_version(req.get(), 0) || !X509_REQ_set_pubkey(req.get(), pub.get()))
        throw Error("OpenSSL: cannot make the certificate request");
    // X.520's upper bound for a common name (OpenSSL enforces it too).
    if (common_name.size() > 64)
        throw Error("certificate request: the common name " + server_text(common_name) +
                    " is longer than 64 characters");
    if (!common_name.empty() &&
        !X509_NAME_add_entry_by_NID(X509_REQ_get_subject_name(req.get()), NID_commonName, MBSTRING_UTF8,
                                    reinterpret_cast<const unsigned char*>(common_name.data()),
                                    static_cast<int>(common_name.size()), -1, 0))
        throw Error("OpenSSL: cannot set the certificate request's common name");
    const int nid = signer.alg == "RS256"   ? NID_sha256WithRSAEncryption
                    : signer.alg == "ES256" ? NID_ecdsa_with_SHA256
                    : signer.alg == "ES384" ? NID_ecdsa_with_SHA384
                    : signer.alg == "ES512" ? NID_ecdsa_with_SHA512
                                            : NID_undef;
    if (nid == NID_undef)
        throw Error("certificate request: no signature algorithm for " + signer.alg);
    // The signature algorithm: RSA's with a NULL parameter, ECDSA's without
    // one (RFC 4055 5, RFC 5758 3.2).
    Owned<X509_ALGOR, X509_ALGOR_free> alg(X509_ALGOR_new());
    if (!alg ||
        !X509_ALGOR_set0(alg.get(), OBJ_nid2obj(nid), nid == NID_sha256WithRSAEncryption ? V_ASN1_NULL : V_ASN1_UNDEF,
                         nullptr) ||
        !X509_REQ_set1_signature_algo(req.get(), alg.get()))
        throw Error("OpenSSL: cannot set the certificate request's algorithm");
    unsigned char* tbs_raw = nullptr;
    const int tbs_size = i2d_re_X509_REQ_tbs(req.get(), &tbs_raw);
    if (tbs_size <= 0)
        throw Error("OpenSSL: cannot encode the certificate request");
    const Bytes tbs(tbs_raw, tbs_raw + tbs_size);
    OPENSSL_free(tbs_raw);
    Bytes sig = signer.sign(tbs);
    if (signer.alg != "RS256") {
        // JWS's raw r||s back into X.509's ECDSA-Sig-Value.
        const std::size_t half = sig.size() / 2;
        EcdsaSig ecdsa(ECDSA_SIG_new());
        BIGNUM* r = BN_bin2bn(sig.data(), static_cast<int>(half), nullptr);
        BIGNUM* s = BN_bin2bn(sig.data() + half, static_cast<int>(half), nullptr);
        if (!ecdsa || !r || !s || !ECDSA_SIG_set0(ecdsa.get(), r, s)) {
            BN_free(r);
            BN_free(s);
            throw Error("OpenSSL: cannot encode the signature");
        }
        sig = to_der(i2d_ECDSA_SIG, ecdsa.get());
    }
    ASN1_BIT_STRING* bits = ASN1_BIT_STRING_new();
    if (!bits || !ASN1_BIT_STRING_set(bits, sig.data(), static_cast<int>(sig.size()))) {
        ASN1_BIT_STRING_free(bits);
        throw Error("OpenSSL: cannot set the certificate request's signature");
    }
    bits->flags &= ~(ASN1_STRING_FLAG_BITS_LEFT | 0x07);
    bits->flags |= ASN1_STRING_FLAG_BITS_LEFT;
    X509_REQ_set0_signature(req.get(), bits);
    if (X509_REQ_verify(req.get(), pub.get()) != 1)
        throw Error("the certificate request's signature made by the key does not verify");
    return to_der(i2d_X509_REQ, req.get());
}

AcmeClient::AcmeClient(HttpClient& http, std::string directory_url, std::string server,
                       std::chrono::milliseconds time_limit)
    : http_(http), directory_url_(std::move(directory_url)), server_(std::move(server)), time_limit_(time_limit) {
    // scheme://host[:port] of the directory: where every later URL must be.
    const std::size_t authority = directory_url_.find("://");
    const std::size_t path =
        authority == std::string::npos ? std::string::npos : directory_url_.find('/', authority + 3);
    origin_ = directory_url_.substr(0, path);
}

const std::string& AcmeClient::checked_url(const std::string& url, const std::string& what) const {
    if (url.empty() || url.size() > 2048 ||
        !std::all_of(url.begin(), url.end(), [](char c) { return c >= 0x21 && c <= 0x7e; }))
        throw Error(server_ + ": " + what + " \"" + server_text(url, 200) +
                    "\" is not a URL of printable ASCII; refused");
    if (url.rfind(origin_ + "/", 0) != 0)
        throw Error(server_ + ": " + what + " " + url + " is not at " + origin_ +
                    "/ (the directory's server); refused");
    return url;
}

std::string AcmeClient::url_in(const nlohmann::json& object, const char* member, const std::string& what) const {
    const std::string url = string_member(object, member);
    if (url.empty())
        throw Error(what + ": no URL \"" + member + "\" in the answer");
    return checked_url(url, what + "'s " + member);
}

std::chrono::milliseconds AcmeClient::time_left() const {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - std::chrono::steady_clock::now());
    if (left.count() <= 0)
        time_over();
    return left;
}

void AcmeClient::time_over() const {
    const auto limit = std::chrono::duration_cast<std::chrono::seconds>(time_limit_ + std::chrono::milliseconds{999});
    throw Error(server_ + " did not finish the enrolment within " + std::to_string(limit.count()) +
                " s; stopped (nothing was written: try again later, or ask the CA's operator)");
}

HttpResponse AcmeClient::send(const std::string& url, const std::string* jws) {
    const std::chrono::milliseconds left = time_left();
    ++requests_;
    try {
        return jws ? http_.post(url, jose_json, *jws, left) : http_.get(url, left);
    } catch (const Error&) {
        // curl's timeout was the deadline's (curl may stop a little early).
        if (deadline_ - std::chrono::steady_clock::now() < std::chrono::milliseconds{250})
            time_over();
        throw;
    }
}

void AcmeClient::refused(const std::string& what, const HttpResponse& response) const {
    const nlohmann::json problem = parse_json(response.body);
    const std::string type = string_member(problem, "type");
    const std::string text = problem_text(response.body);
    throw AcmeError(server_ + " refused " + what + " (HTTP " + std::to_string(response.status) + "): " + text +
                        refusal_advice(what, type, text),
                    type);
}

void AcmeClient::read_directory() {
    const HttpResponse r = send(directory_url_, nullptr);
    // A URL without the directory's path (the CA's address, or the
    // provisioner's path alone) gets a 404 or some other answer: say which
    // URL is meant.
    const std::string expected =
        "; give the ACME provisioner's directory URL, for step-ca " + std::string(step_ca_directory_form);
    if (r.status == 404)
        throw AcmeError(server_ + " has no ACME directory at " + directory_url_ +
                            " (HTTP 404: " + problem_text(r.body) + ")" + expected,
                        string_member(parse_json(r.body), "type"));
    if (r.status != 200)
        refused("the directory " + directory_url_, r);
    directory_ = parse_answer(r.body, directory_url_);
    if (!directory_.is_object())
        throw Error(directory_url_ + ": not an ACME directory (no JSON object)" + expected);
    for (const char* member : {"newNonce", "newAccount", "newOrder"})
        if (string_member(directory_, member).empty())
            throw Error(directory_url_ + ": not an ACME directory (no URL \"" + std::string(member) + "\" in it)" +
                        expected);
    for (const char* member : {"newNonce", "newAccount", "newOrder"})
        url_in(directory_, member, directory_url_ + " (the ACME directory)");
}

std::string AcmeClient::fresh_nonce() {
    const std::string url = url_in(directory_, "newNonce", "the directory");
    const HttpResponse r = send(url, nullptr);
    if (r.status != 200 && r.status != 204)
        refused("a nonce", r);
    const auto it = r.headers.find("replay-nonce");
    if (it == r.headers.end() || !is_nonce(it->second))
        throw Error(server_ + ": " + url + " gave no usable nonce (Replay-Nonce: base64url, 1 to 256 characters)");
    return it->second;
}

AcmeClient::Answer AcmeClient::post(const std::string& url, const std::string& payload, const std::string& what) {
    for (int attempt = 0;; ++attempt) {
        if (nonce_.empty())
            nonce_ = fresh_nonce();
        nlohmann::json header = {{"nonce", nonce_}, {"url", url}};
        if (kid_.empty())
            header["jwk"] = account_.jwk;
        else
            header["kid"] = kid_;
        nonce_.clear();  // a nonce is good for one request
        const std::string jws = jws_flattened(account_, header, payload);
        Answer a{send(url, &jws), nullptr};
        // RFC 8555 6.5.1: a Replay-Nonce that is not base64url is as none.
        const auto nonce = a.response.headers.find("replay-nonce");
        if (nonce != a.response.headers.end() && is_nonce(nonce->second))
            nonce_ = nonce->second;
        a.json = parse_answer(a.response.body, url);
        if (a.response.status >= 200 && a.response.status < 300)
            return a;
        // RFC 8555 6.5: a client may retry a request refused for its nonce
        // with the fresh one that came with the refusal; once is enough.
        if (attempt == 0 && string_member(a.json, "type") == "urn:ietf:params:acme:error:badNonce")
            continue;
        refused(what, a.response);
    }
}

nlohmann::json AcmeClient::poll(const std::string& url, nlohmann::json object,
                                std::initializer_list<const char*> pending, const std::string& what) {
    const auto deadline = std::chrono::steady_clock::now() + max_wait;
    std::chrono::seconds wait{1};
    for (;;) {
        const std::string status = string_member(object, "status");
        if (std::none_of(pending.begin(), pending.end(), [&](const char* s) { return status == s; }))
            return object;
        if (std::chrono::steady_clock::now() + wait > deadline)
            throw Error(what + ": still " + server_text(status) + " after " + std::to_string(max_wait.count()) +
                        " s; " + server_ + " did not decide");
        std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(wait, time_left()));
        Answer a = post_as_get(url, what);
        object = std::move(a.json);
        wait = retry_after(a.response);
    }
}

std::string AcmeClient::device_attest(const DeviceAttestOrder& order) {
    requests_ = 0;
    deadline_ = std::chrono::steady_clock::now() + time_limit_;
    account_ = new_account_key();
    kid_.clear();
    nonce_.clear();
    read_directory();

    // The account: a new key per enrolment, nothing to keep.
    const Answer account =
        post(url_in(directory_, "newAccount", "the directory"), R"({"termsOfServiceAgreed":true})", "the account");
    const auto location = account.response.headers.find("location");
    if (location == account.response.headers.end())
        throw Error(server_ + ": the new account has no Location");
    kid_ = checked_url(location->second, "the new account's Location");

    const nlohmann::json new_order = {
        {"identifiers", nlohmann::json::array({{{"type", "permanent-identifier"}, {"value", order.identifier}}})}};
    const Answer placed = post(url_in(directory_, "newOrder", "the directory"), new_order.dump(),
                               "the order for permanent identifier " + order.identifier);
    const auto order_location = placed.response.headers.find("location");
    if (order_location == placed.response.headers.end())
        throw Error(server_ + ": the new order has no Location");
    const std::string order_url = checked_url(order_location->second, "the new order's Location");
    const nlohmann::json& order_object = placed.json;
    if (!order_object.is_object() || !order_object.contains("authorizations") ||
        !order_object["authorizations"].is_array() || order_object["authorizations"].size() != 1 ||
        !order_object["authorizations"][0].is_string())
        throw Error(server_ + ": the order does not have exactly one authorization");
    const std::string finalize_url = url_in(order_object, "finalize", "the order");

    // The authorization and its device-attest-01 challenge.
    const std::string authz_url =
        checked_url(order_object["authorizations"][0].get<std::string>(), "the order's authorization");
    const Answer authz = post_as_get(authz_url, "the authorization");
    const nlohmann::json* found = nullptr;
    if (authz.json.is_object() && authz.json.contains("challenges") && authz.json["challenges"].is_array())
        for (const auto& c : authz.json["challenges"])
            if (string_member(c, "type") == "device-attest-01")
                found = &c;
    if (!found)
        throw Error(server_ + ": the authorization offers no device-attest-01 challenge (is the provisioner an ACME "
                              "provisioner with device-attest-01?)");
    const nlohmann::json& challenge = *found;
    const std::string challenge_url = url_in(challenge, "url", "the challenge");
    const std::string token = string_member(challenge, "token");
    if (token.empty() || token.size() > 256 || !std::all_of(token.begin(), token.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
        }))
        throw Error(server_ + ": the challenge's token is not base64url");

    if (string_member(challenge, "status") != "valid") {
        // RFC 8555 8.1: the key authorization binds the token to this account.
        const std::string key_authorization = token + "." + jwk_thumbprint(account_.jwk);
        const Bytes attestation = order.attest(key_authorization);
        const nlohmann::json answer = {{"attObj", base64url(attestation)}};
        Answer posted = post(challenge_url, answer.dump(), "the challenge");
        const nlohmann::json decided =
            poll(challenge_url, std::move(posted.json), {"pending", "processing"}, "the challenge");
        const std::string status = string_member(decided, "status");
        if (status != "valid") {
            const std::string problem =
                decided.contains("error") ? problem_text(decided["error"].dump()) : "no reason given";
            const std::string type = decided.contains("error") ? string_member(decided["error"], "type") : "";
            throw AcmeError(server_ + " refused the attestation (challenge " + server_text(status) + "): " + problem +
                                refusal_advice("the challenge", type, problem),
                            type);
        }
    }

    // The order is ready once its one authorization is valid.
    nlohmann::json finished =
        poll(order_url, post_as_get(order_url, "the order").json, {"pending", "processing"}, "the order");
    const std::string ready = string_member(finished, "status");
    if (ready != "ready" && ready != "valid")
        throw AcmeError(server_ + ": the order is " + server_text(ready) +
                            (finished.contains("error") ? ": " + problem_text(finished["error"].dump()) : ""),
                        "");
    if (ready == "ready") {
        const nlohmann::json csr = {{"csr", base64url(order.csr())}};
        finished = post(finalize_url, csr.dump(), "the certificate request (finalize)").json;
        finished = poll(order_url, std::move(finished), {"ready", "processing"}, "the order");
    }
    if (string_member(finished, "status") != "valid")
        throw AcmeError(server_ + ": the order is " + server_text(string_member(finished, "status")) +
                            (finished.contains("error") ? ": " + problem_text(finished["error"].dump()) : ""),
                        "");
    const Answer chain = post_as_get(url_in(finished, "certificate", "the order"), "the certificate");
    const auto type = chain.response.headers.find("content-type");
    if (type == chain.response.headers.end() || type->second.rfind("application/pem-certificate-chain", 0) != 0)
        throw Error(server_ + ": the certificate is not application/pem-certificate-chain");
    return chain.response.body;
}

}  // namespace tpmkey::enroll
