// What tpmkey-ca webhook reads in step-ca's requests beyond JSON and
// base64 (core/base/base64.hpp: strict, padded, as Go's encoding/json
// writes []byte): the X5C leaf certificate's step provisioner extension,
// and public keys in the SSH wire format, compared with the leaf's key as
// keys.
#pragma once

#include "core/base/bytes.hpp"

#include <openssl/evp.h>
#include <openssl/x509.h>

#include <optional>
#include <string>

namespace tpmkey {

// The OpenSSH wire-format blob (RFC 4253 6.6, RFC 5656 3.1) of an RSA or
// ECDSA (P-256, P-384, P-521) public key, in its one canonical encoding
// (minimal mpints, uncompressed point): two keys are the same key exactly
// when their blobs are equal. nullopt for another kind of key.
std::optional<Bytes> ssh_blob_of(EVP_PKEY* key);

// step-ca's provisioner extension (OID 1.3.6.1.4.1.37476.9000.64.1, its
// authority/provisioner/extension.go): SEQUENCE { type INTEGER, name
// OCTET STRING, credentialID OCTET STRING, ... }. step-ca adds it to each
// certificate a provisioner issues; type 6 is ACME.
struct StepProvisioner {
    long type = 0;
    std::string name;
};
inline constexpr long step_provisioner_acme = 6;
// The extension of `certificate`, nullopt when it has none or one that
// does not parse as above.
std::optional<StepProvisioner> step_provisioner_of(X509* certificate);

}  // namespace tpmkey
