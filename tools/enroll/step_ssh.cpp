#include "step_ssh.hpp"

#include "core/base/error.hpp"
#include "core/keys/public_key.hpp"
#include "json_answer.hpp"

#include <openssl/rand.h>

#include <array>

namespace tpmkey::enroll {

namespace {

// The SSH wire format's fields (RFC 4251 5), each read or refused.
class WireReader {
public:
    explicit WireReader(const Bytes& data) : data_(data) {}

    std::uint32_t u32() { return static_cast<std::uint32_t>(take_uint(4)); }
    std::uint64_t u64() { return take_uint(8); }
    Bytes string() {
        const std::size_t n = u32();
        need(n);
        Bytes out(data_.begin() + static_cast<std::ptrdiff_t>(at_),
                  data_.begin() + static_cast<std::ptrdiff_t>(at_ + n));
        at_ += n;
        return out;
    }
    std::string text() {
        const Bytes b = string();
        return std::string(b.begin(), b.end());
    }
    bool done() const { return at_ == data_.size(); }

private:
    void need(std::size_t n) const {
        if (data_.size() - at_ < n)
            throw Error("step-ca's SSH certificate is truncated");
    }
    std::uint64_t take_uint(std::size_t n) {
        need(n);
        std::uint64_t v = 0;
        for (std::size_t i = 0; i < n; ++i)
            v = v << 8 | data_[at_ + i];
        at_ += n;
        return v;
    }

    const Bytes& data_;
    std::size_t at_ = 0;
};

void put_string(Bytes& out, std::span<const std::uint8_t> s) {
    const auto n = static_cast<std::uint32_t>(s.size());
    for (int shift = 24; shift >= 0; shift -= 8)
        out.push_back(static_cast<std::uint8_t>(n >> shift));
    out.insert(out.end(), s.begin(), s.end());
}
void put_string(Bytes& out, std::string_view s) {
    put_string(out, std::span(reinterpret_cast<const std::uint8_t*>(s.data()), s.size()));
}

// RFC 3986 3.5: a fragment's characters, others percent-encoded (Go's
// url.Parse decodes them again).
std::string fragment_escaped(const std::string& text) {
    static constexpr std::string_view kept =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~/?:@!$&'()*+,;=";
    std::string out;
    for (const char c : text) {
        if (kept.find(c) != std::string_view::npos) {
            out += c;
        } else {
            static constexpr char digits[] = "0123456789ABCDEF";
            const auto b = static_cast<unsigned char>(c);
            out += '%';
            out += digits[b >> 4];
            out += digits[b & 15];
        }
    }
    return out;
}

}  // namespace

std::string new_token_id() {
    std::array<std::uint8_t, 16> bytes{};
    if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1)
        throw Error("OpenSSL: no random bytes for the token's ID");
    return hex(bytes);
}

std::string ca_base_url(std::string_view url) {
    constexpr std::string_view scheme = "https://";
    std::string out(url);
    if (!out.starts_with(scheme) || out.size() == scheme.size())
        throw Error("--step-ca " + out + ": not an https URL (https://HOST[:PORT] of step-ca)");
    if (out.find_first_of("?# \t\r\n") != std::string::npos)
        throw Error("--step-ca " + out + ": the CA's address only, https://HOST[:PORT]");
    while (out.size() > scheme.size() && out.ends_with('/'))
        out.pop_back();
    if (out.find('/', scheme.size()) != std::string::npos || out.size() == scheme.size())
        throw Error("--step-ca " + std::string(url) + ": the CA's address only, https://HOST[:PORT], no path");
    return out;
}

nlohmann::json x5c_ssh_claims(const SshCertificateRequest& request, std::time_t now, const std::string& jti) {
    // step-ca's audiences for SSH signing are https://HOST/1.0/ssh/sign for
    // each of its DNS names (compared without the port); the fragment
    // names the provisioner that judges the token, "x5c/NAME"
    // (provisioner.Collection.LoadByToken, X5C.GetIDForToken).
    return nlohmann::json{
        {"aud", request.ca_url + "/1.0/ssh/sign#" + fragment_escaped("x5c/" + request.provisioner)},
        {"iss", request.provisioner},
        {"sub", request.key_id},
        {"iat", now},
        {"nbf", now},
        {"exp", now + ssh_token_lifetime_seconds},
        {"jti", jti},
        // No validAfter/validBefore: step-ca then gives its default
        // duration, cut at the X.509 certificate's notAfter.
        {"step", {{"ssh", {{"certType", "user"}, {"keyID", request.key_id}, {"principals", request.principals}}}}},
    };
}

std::string x5c_token(const JwsSigner& signer, const std::vector<Bytes>& x5c, const nlohmann::json& claims) {
    nlohmann::json chain = nlohmann::json::array();
    for (const Bytes& der : x5c)
        chain.push_back(base64(der));  // RFC 7515 4.1.6: standard base64 of DER, not base64url
    return jws_compact(signer, nlohmann::json{{"typ", "JWT"}, {"x5c", chain}}, claims.dump());
}

std::string ssh_sign_body(const SshCertificateRequest& request, const std::string& token) {
    // The request's options must equal the token's (step-ca's
    // sshCertOptionsValidator), and its keyID the token's subject.
    return nlohmann::json{
        {"publicKey", base64(request.ssh_public_key)},
        {"ott", token},
        {"certType", "user"},
        {"keyID", request.key_id},
        {"principals", request.principals},
    }
        .dump();
}

SshCertificate parse_ssh_certificate(const Bytes& blob) {
    SshCertificate cert;
    cert.blob = blob;
    WireReader r(blob);
    cert.type = r.text();
    constexpr std::string_view suffix = "-cert-v01@openssh.com";
    if (!cert.type.ends_with(suffix))
        throw Error("step-ca's answer is not an SSH certificate (type " + cert.type + ")");
    const std::string key_type = cert.type.substr(0, cert.type.size() - suffix.size());
    r.string();  // nonce
    put_string(cert.public_key, key_type);
    if (key_type.starts_with("ecdsa-sha2-")) {
        put_string(cert.public_key, r.string());  // curve
        put_string(cert.public_key, r.string());  // Q
    } else if (key_type == "ssh-rsa") {
        const Bytes e = r.string(), n = r.string();  // a certificate holds e, n as the plain key does
        put_string(cert.public_key, e);
        put_string(cert.public_key, n);
    } else {
        throw Error("step-ca's SSH certificate is for a " + key_type + " key, which tpmkey keys are not");
    }
    cert.serial = r.u64();
    cert.cert_type = r.u32();
    cert.key_id = r.text();
    const Bytes principals = r.string();
    for (WireReader p(principals); !p.done();)
        cert.principals.push_back(p.text());
    cert.valid_after = r.u64();
    cert.valid_before = r.u64();
    r.string();  // critical options
    r.string();  // extensions
    r.string();  // reserved
    r.string();  // the CA's key
    r.string();  // its signature
    if (!r.done())
        throw Error("step-ca's SSH certificate has bytes after its signature");
    return cert;
}

Bytes base64_decode(std::string_view text, const char* what) {
    static constexpr std::string_view alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    if (text.size() % 4 != 0)
        throw Error(std::string(what) + " is not base64");
    Bytes out;
    out.reserve(text.size() / 4 * 3);
    for (std::size_t i = 0; i < text.size(); i += 4) {
        std::uint32_t v = 0;
        int pad = 0;
        for (std::size_t j = 0; j < 4; ++j) {
            const char c = text[i + j];
            const std::size_t d = alphabet.find(c);  // npos for '='
            if (c == '=' && i + 4 == text.size() && j >= 2 && (pad > 0 || j == 2 || text[i + 3] == '=')) {
                ++pad;
            } else if (pad > 0 || d == std::string_view::npos) {
                throw Error(std::string(what) + " is not base64");
            }
            v = v << 6 | static_cast<std::uint32_t>(c == '=' ? 0 : d);
        }
        out.push_back(static_cast<std::uint8_t>(v >> 16));
        if (pad < 2)
            out.push_back(static_cast<std::uint8_t>(v >> 8));
        if (pad < 1)
            out.push_back(static_cast<std::uint8_t>(v));
    }
    return out;
}

SshCertificate ssh_certificate_from_answer(const HttpResponse& response, const std::string& url) {
    const nlohmann::json answer = parse_answer(response.body, url);
    if (response.status != 200 && response.status != 201) {
        const std::string message = answer.is_object() && answer.contains("message") && answer["message"].is_string()
                                        ? server_text(answer["message"].get<std::string>())
                                        : std::string("no reason given");
        // step-ca answers 403 with the same words when the X5C provisioner's
        // authorizing webhook refused and when it could not be asked (down,
        // unreachable, another secret); its reason is only in the logs.
        const std::string advice =
            response.status == 403 || response.status == 500
                ? " (step-ca's log says why; most likely its X5C provisioner's authorizing webhook, tpmkey-ca webhook, "
                  "refused (its standard error says why) or could not be asked: check that it runs at the URL "
                  "step-ca has for it, with step-ca's secret)"
                : " (step-ca's log says why)";
        throw Error("step-ca refused the SSH certificate (HTTP " + std::to_string(response.status) + "): " + message +
                    advice);
    }
    if (!answer.is_object() || !answer.contains("crt") || !answer["crt"].is_string())
        throw Error(url + ": the answer has no certificate (\"crt\")");
    return parse_ssh_certificate(base64_decode(answer["crt"].get<std::string>(), "step-ca's certificate"));
}

SshCertificate request_ssh_certificate(HttpClient& http, const SshCertificateRequest& request, const std::string& token,
                                       std::chrono::milliseconds timeout) {
    const std::string url = request.ca_url + "/1.0/ssh/sign";
    return ssh_certificate_from_answer(http.post(url, "application/json", ssh_sign_body(request, token), timeout), url);
}

}  // namespace tpmkey::enroll
