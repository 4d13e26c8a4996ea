// The public half of a TPM key in the encodings its users need: OpenSSH
// (.pub lines, fingerprints), OpenSSL (EVP_PKEY, to verify), and the DER
// pieces PKCS#11 attributes carry.
#pragma once

#include "core/base/bytes.hpp"
#include "core/base/error.hpp"
#include "core/base/owned.hpp"
#include "core/keys/algorithms.hpp"

#include <openssl/evp.h>
#include <tss2/tss2_tpm2_types.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace tpmkey {

class PublicKey {
public:
    // Throws Error for key types and curves we do not handle.
    explicit PublicKey(const TPMT_PUBLIC& area);

    KeyKind kind() const noexcept { return kind_; }
    // Its row of key_kind_table: the scheme the TPM signs with, its name.
    const KeyKindAlgorithm& algorithm() const { return key_kind_algorithm(kind_); }
    unsigned bits() const noexcept { return bits_; }
    // ECDSA: size of one coordinate (and of r and of s) in bytes.
    std::size_t ec_field_size() const noexcept { return field_size_; }

    // "ecdsa-sha2-nistp256", "ssh-rsa", ...
    std::string ssh_type() const;
    // The OpenSSH wire-format key blob (RFC 4253 6.6, RFC 5656 3.1).
    Bytes ssh_blob() const;
    // One authorized_keys line: "TYPE BASE64[ COMMENT]".
    std::string ssh_line(const std::string& comment) const;
    // "SHA256:..." as ssh-keygen -l prints it.
    std::string ssh_fingerprint() const;

    // RSA: big-endian modulus and public exponent, no leading zeros.
    const Bytes& rsa_modulus() const noexcept { return n_; }
    const Bytes& rsa_exponent() const noexcept { return e_; }
    // ECDSA: DER of the curve OID (CKA_EC_PARAMS), and the uncompressed
    // point 04||X||Y (wrapped in an OCTET STRING for CKA_EC_POINT).
    Bytes ec_params_der() const;
    Bytes ec_point() const { return point_; }
    Bytes ec_point_der() const;

    // The contents of the SubjectPublicKeyInfo BIT STRING: 04||X||Y, or the
    // DER RSAPublicKey. Its SHA-1 is the X.509 subject key identifier.
    Bytes subject_public_key() const;
    // DER SubjectPublicKeyInfo (X.509), as in CKA_PUBLIC_KEY_INFO.
    Bytes spki_der() const;
    // Decoded from the SPKI, not built from parameters: an ENGINE that an
    // application made the default for RSA or EC (the openssl CLI's
    // -engine does) breaks EVP_PKEY_fromdata, but not the decoders.
    EvpPkey to_evp() const;

private:
    KeyKind kind_ = KeyKind::ecdsa;
    unsigned bits_ = 0;
    std::size_t field_size_ = 0;
    int curve_nid_ = 0;
    std::string ssh_curve_;  // "nistp256": the curve's name in OpenSSH
    Bytes n_, e_;            // RSA
    Bytes point_;            // ECDSA: 04||X||Y
};

// The policy signer's public key as the TPM loads it (TPM2_LoadExternal):
// the template openssl_tpm2_engine uses (sign|decrypt|userWithAuth,
// nameAlg SHA-256, NULL scheme), so the name, and thus the key's
// authPolicy, is the same for both. ECC P-256/P-384 and RSA; throws Error.
TPM2B_PUBLIC signer_public(EVP_PKEY* signer);

// `bytes` into a sized buffer of the TPM's types (TPM2B_ECC_PARAMETER,
// TPM2B_PUBLIC_KEY_RSA, ...); throws Error naming `what` if they do not fit.
template <class T2B>
void set_tpm2b(T2B& out, std::span<const std::uint8_t> bytes, const char* what) {
    if (bytes.size() > sizeof out.buffer)
        throw Error(std::string(what) + " is too large for the TPM");
    out.size = static_cast<UINT16>(bytes.size());
    std::copy(bytes.begin(), bytes.end(), out.buffer);
}

// "SHA256:" and the base64 of SHA-256 of an SSH key blob without its '=',
// as ssh-keygen -l prints it.
std::string ssh_fingerprint(std::span<const std::uint8_t> blob);
// Lower-case hex, as tpm2-tools prints digests and names.
std::string hex(std::span<const std::uint8_t> data);

}  // namespace tpmkey
