#include "core/attestation/sk_attestation.hpp"

#include "core/base/base64.hpp"
#include "core/base/error.hpp"
#include "core/keys/algorithms.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <optional>

namespace tpmkey {

namespace {

constexpr std::string_view sk_ecdsa_type = "sk-ecdsa-sha2-nistp256@openssh.com";
constexpr std::size_t max_application_size = 1024;

Bytes sha256(std::span<const std::uint8_t> bytes) { return digest_of(EVP_sha256(), {bytes}); }

// SSH wire format (RFC 4251): uint32 and string, each bounded by what is left.
class Reader {
public:
    Reader(std::span<const std::uint8_t> bytes, std::string what) : rest_(bytes), what_(std::move(what)) {}
    std::uint32_t u32(const char* field) {
        if (rest_.size() < 4)
            throw Error(what_ + ": it ends before its " + field);
        const std::uint32_t value = (std::uint32_t{rest_[0]} << 24) | (std::uint32_t{rest_[1]} << 16) |
                                    (std::uint32_t{rest_[2]} << 8) | std::uint32_t{rest_[3]};
        rest_ = rest_.subspan(4);
        return value;
    }
    Bytes string(const char* field) {
        const std::uint32_t length = u32(field);
        if (length > rest_.size())
            throw Error(what_ + ": its " + field + " claims " + std::to_string(length) + " bytes, more than the " +
                        std::to_string(rest_.size()) + " left");
        Bytes out(rest_.begin(), rest_.begin() + length);
        rest_ = rest_.subspan(length);
        return out;
    }
    void end() const {
        if (!rest_.empty())
            throw Error(what_ + ": " + std::to_string(rest_.size()) + " bytes after its last field");
    }

private:
    std::span<const std::uint8_t> rest_;
    std::string what_;
};

bool equals(const Bytes& bytes, std::string_view text) {
    return bytes.size() == text.size() && std::equal(bytes.begin(), bytes.end(), text.begin());
}

}  // namespace

Bytes sk_certify_challenge(std::span<const std::uint8_t> challenge, std::string_view application) {
    Bytes out = sha256(challenge);
    const Bytes app = sha256({reinterpret_cast<const std::uint8_t*>(application.data()), application.size()});
    out.insert(out.end(), app.begin(), app.end());
    return out;
}

SkAttestation parse_sk_attestation(std::span<const std::uint8_t> file) {
    if (file.size() > max_sk_attestation_size)
        throw Error("not an OpenSSH security key attestation: larger than " + std::to_string(max_sk_attestation_size) +
                    " bytes");
    Reader in(file, "not an OpenSSH security key attestation");
    if (!equals(in.string("magic"), sk_attestation_magic))
        throw Error(std::string("not an OpenSSH security key attestation: it does not begin with \"") +
                    sk_attestation_magic + "\"");
    SkAttestation out;
    out.attestation_cert = in.string("attestation certificate");
    out.signature = in.string("enrollment signature");
    out.authdata = in.string("authenticator data");
    (void)in.u32("reserved flags");
    (void)in.string("reserved extensions");
    in.end();
    if (out.attestation_cert.empty() && out.signature.empty() && out.authdata.empty())
        throw Error("the attestation holds no TPM statement: the key was enrolled without an AK certificate "
                    "(TPMKEY_AK_CERT; enrol this TPM's AK: tpmkey attest enroll)");
    if (out.attestation_cert.empty() || out.signature.empty() || out.authdata.empty())
        throw Error("the attestation lacks its attestation certificate, signature or authenticator data");
    return out;
}

SkPublicKey parse_sk_public_key(std::string_view line) {
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r'))
        line.remove_suffix(1);
    const std::size_t space = line.find(' ');
    if (space == std::string_view::npos || line.substr(0, space) != sk_ecdsa_type)
        throw Error(std::string("not an ") + std::string(sk_ecdsa_type) +
                    " public key (ssh-keygen -t ecdsa-sk writes one in KEY.pub)");
    std::string_view encoded = line.substr(space + 1);
    encoded = encoded.substr(0, encoded.find(' '));
    const std::optional<Bytes> blob = base64_decode(encoded);
    if (!blob)
        throw Error("the public key is not valid base64");
    Reader in(*blob, "not a valid security key public key");
    if (!equals(in.string("type"), sk_ecdsa_type))
        throw Error("the public key's type inside is not the one of its line");
    if (!equals(in.string("curve"), "nistp256"))
        throw Error("the public key's curve is not nistp256");
    SkPublicKey out;
    out.blob = *blob;
    out.point = in.string("point");
    if (out.point.size() != 65 || out.point[0] != 0x04)
        throw Error("the public key's point is not an uncompressed P-256 point (65 bytes)");
    const Bytes application = in.string("application");
    in.end();
    if (application.size() > max_application_size)
        throw Error("the public key's application is longer than " + std::to_string(max_application_size) + " bytes");
    out.application.assign(application.begin(), application.end());
    return out;
}

}  // namespace tpmkey
