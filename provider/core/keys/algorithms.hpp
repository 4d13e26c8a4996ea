// One table of the algorithms tpmkey knows, so that each fact is written
// once: a hash's TPM id, OpenSSL digest and name, size and PKCS#1 v1.5
// DigestInfo prefix; a curve's TPM id, OpenSSL NID and group name, OpenSSH
// name, sizes and ECDSA hash. (Botan's tpm2_algo_mappings.h is the model.)
// PKCS#11 mechanism numbers are not here: the core has no PKCS#11; the
// module keys its mechanisms by the TPM hash id (module/mechanisms.cpp).
#pragma once

#include "core/base/bytes.hpp"

#include <openssl/evp.h>
#include <openssl/obj_mac.h>
#include <tss2/tss2_tpm2_types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string_view>

namespace tpmkey {

struct HashAlgorithm {
    TPMI_ALG_HASH tpm;
    const char* name;  // as tpm2-tools and OpenSSL spell it: "sha256"
    std::size_t size;  // digest bytes
    const EVP_MD* (*md)();
    int nid;  // its OID, as in a DigestInfo
    // The DER DigestInfo up to the digest itself (RFC 8017, 9.2, note 1):
    // PKCS#1 v1.5 signs prefix || digest.
    std::span<const std::uint8_t> digest_info_prefix;
};

namespace digest_info {
inline constexpr std::uint8_t sha1[] = {0x30, 0x21, 0x30, 0x09, 0x06, 0x05, 0x2b, 0x0e,
                                        0x03, 0x02, 0x1a, 0x05, 0x00, 0x04, 0x14};
inline constexpr std::uint8_t sha256[] = {0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01,
                                          0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00, 0x04, 0x20};
inline constexpr std::uint8_t sha384[] = {0x30, 0x41, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01,
                                          0x65, 0x03, 0x04, 0x02, 0x02, 0x05, 0x00, 0x04, 0x30};
inline constexpr std::uint8_t sha512[] = {0x30, 0x51, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01,
                                          0x65, 0x03, 0x04, 0x02, 0x03, 0x05, 0x00, 0x04, 0x40};
}  // namespace digest_info

// The hashes tpmkey uses: SHA-1, SHA-256, SHA-384, SHA-512. (The
// tables are in the header so that the module's constant lists can be
// made from them.)
inline constexpr HashAlgorithm hash_table[] = {
    {TPM2_ALG_SHA1, "sha1", 20, EVP_sha1, NID_sha1, digest_info::sha1},
    {TPM2_ALG_SHA256, "sha256", 32, EVP_sha256, NID_sha256, digest_info::sha256},
    {TPM2_ALG_SHA384, "sha384", 48, EVP_sha384, NID_sha384, digest_info::sha384},
    {TPM2_ALG_SHA512, "sha512", 64, EVP_sha512, NID_sha512, digest_info::sha512},
};
// Their TPM ids, in the table's order.
inline constexpr auto hash_ids = [] {
    std::array<TPMI_ALG_HASH, std::size(hash_table)> ids{};
    for (std::size_t i = 0; i < ids.size(); ++i)
        ids[i] = hash_table[i].tpm;
    return ids;
}();

// nullptr when not in the table.
const HashAlgorithm* find_hash(TPMI_ALG_HASH tpm);
const HashAlgorithm* find_hash(std::string_view name);
const HashAlgorithm* find_hash_by_nid(int nid);
// The digest size of `tpm`, 0 when it is not in the table.
std::size_t hash_size(TPMI_ALG_HASH tpm) noexcept;
// The OpenSSL digest of an object's name algorithm; throws Error
// ("unsupported name algorithm 0x...") for one not in the table.
const EVP_MD* name_algorithm_md(TPMI_ALG_HASH tpm);

struct CurveAlgorithm {
    TPMI_ECC_CURVE tpm;
    int nid;
    const char* ssh_name;    // "nistp256": OpenSSH's name, also the end of its key type
    std::size_t field_size;  // bytes of one coordinate, and of r and of s
    unsigned bits;           // the key size (keygen's -b)
    TPMI_ALG_HASH hash;      // the hash of the curve's size (RFC 5656, 6.2.1), with which the TPM signs
    int cose_alg;            // ECDSA with that hash in COSE (RFC 9053, 2.1): ES256, ES384, ES512
};

// NIST P-256, P-384, P-521, smallest first.
inline constexpr CurveAlgorithm curve_table[] = {
    {TPM2_ECC_NIST_P256, NID_X9_62_prime256v1, "nistp256", 32, 256, TPM2_ALG_SHA256, -7},
    {TPM2_ECC_NIST_P384, NID_secp384r1, "nistp384", 48, 384, TPM2_ALG_SHA384, -35},
    {TPM2_ECC_NIST_P521, NID_secp521r1, "nistp521", 66, 521, TPM2_ALG_SHA512, -36},
};

// nullptr when not in the table.
const CurveAlgorithm* find_curve(TPMI_ECC_CURVE tpm);
const CurveAlgorithm* find_curve_by_nid(int nid);
const CurveAlgorithm* find_curve_by_bits(unsigned bits);

// The kinds of key tpmkey makes and signs with. A new kind (say Ed25519)
// is one more enumerator and its row in key_kind_table; each switch on a
// KeyKind (the key's template in tpm/tpm_keys.cpp, its PKCS#11 key type in
// module/objects.cpp) then stops compiling (-Wswitch, an error) until it
// has the new kind's case. docs/hacking.md ("Where a change goes") lists
// the other files a new kind touches.
enum class KeyKind { ecdsa, rsa };

struct KeyKindAlgorithm {
    KeyKind kind;
    TPMI_ALG_PUBLIC tpm;         // the TPM object's type
    TPMI_ALG_SIG_SCHEME scheme;  // the scheme of a plain TPM2_Sign with it (ssh's, JWS's)
    const char* name;            // "RSA": as ssh-keygen -l and the CLI name it
    const char* size_prefix;     // before the size in "RSA 2048", "ECDSA P-256"
};

inline constexpr KeyKindAlgorithm key_kind_table[] = {
    {KeyKind::ecdsa, TPM2_ALG_ECC, TPM2_ALG_ECDSA, "ECDSA", "ECDSA P-"},
    {KeyKind::rsa, TPM2_ALG_RSA, TPM2_ALG_RSASSA, "RSA", "RSA "},
};

// A kind's row; throws Error for a kind without one (a row left out of
// the table).
const KeyKindAlgorithm& key_kind_algorithm(KeyKind kind);

// H(parts...) with OpenSSL; throws Error if OpenSSL fails.
Bytes digest_of(const EVP_MD* md, std::initializer_list<std::span<const std::uint8_t>> parts);

}  // namespace tpmkey
