#include "core/tpm/pin_record.hpp"

#include "core/base/error.hpp"
#include "core/tpm/tpm_queries.hpp"

#include <cstring>
#include <string>
#include <vector>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <tss2/tss2_mu.h>

namespace tpmkey {

namespace {

// What the TPM's HMAC covers, before the key's blobs and the PIN: a record
// of another kind or version can never match.
constexpr const char* domain = "tpmkey refused source PIN v1";

RefusedPinRecords::Digest sha256(const std::vector<std::uint8_t>& data) {
    RefusedPinRecords::Digest out{};
    unsigned int n = 0;
    if (!EVP_Digest(data.data(), data.size(), out.data(), &n, EVP_sha256(), nullptr) || n != out.size())
        throw Error("SHA-256 failed (OpenSSL)");
    return out;
}

}  // namespace

RefusedPinRecords::Digest refused_pin_record(Tpm& tpm, const TpmObject& salt_key, const KeyBlobs& blobs,
                                             const Secret& pin) {
    // A wrong owner password would count against the lockout: never guessed.
    if (owner_auth_set(tpm))
        throw Error("the TPM's owner hierarchy has a password, so tpmkey cannot make the key that records a "
                    "refused PIN; it is remembered only while the process runs");

    // The record key: an HMAC key the TPM derives from its owner seed and
    // this template, the same at every call (TPM 2.0 Part 1, 27.3, primary
    // keys); `unique` sets it apart from any other HMAC primary.
    TPM2B_PUBLIC in_public{};
    TPMT_PUBLIC& area = in_public.publicArea;
    area.type = TPM2_ALG_KEYEDHASH;
    area.nameAlg = TPM2_ALG_SHA256;
    area.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN |
                            TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA | TPMA_OBJECT_SIGN_ENCRYPT;
    area.parameters.keyedHashDetail.scheme.scheme = TPM2_ALG_HMAC;
    area.parameters.keyedHashDetail.scheme.details.hmac.hashAlg = TPM2_ALG_SHA256;
    const std::string label = "tpmkey refused source PIN records";
    const RefusedPinRecords::Digest unique = sha256(std::vector<std::uint8_t>(label.begin(), label.end()));
    area.unique.keyedHash.size = static_cast<UINT16>(unique.size());
    std::memcpy(area.unique.keyedHash.buffer, unique.data(), unique.size());

    const TPM2B_SENSITIVE_CREATE sensitive{};
    const TPM2B_DATA outside_info{};
    const TPML_PCR_SELECTION pcrs{};
    ESYS_TR handle = ESYS_TR_NONE;
    check_rc(Esys_CreatePrimary(tpm.esys(), ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &sensitive,
                                &in_public, &outside_info, &pcrs, &handle, nullptr, nullptr, nullptr, nullptr),
             "TPM2_CreatePrimary of the key that records refused PINs");
    const TpmObject key(tpm, handle, TpmObject::Kind::transient);

    // What is MACed: the domain, a digest of the key's blobs (a new PIN set
    // with tpmkey passwd makes new blobs, so an old record no longer
    // matches), and the PIN.
    std::vector<std::uint8_t> blob_bytes(sizeof(TPM2B_PUBLIC) + sizeof(TPM2B_PRIVATE));
    std::size_t offset = 0;
    check_rc(Tss2_MU_TPM2B_PUBLIC_Marshal(&blobs.pub, blob_bytes.data(), blob_bytes.size(), &offset),
             "marshalling a public area");
    check_rc(Tss2_MU_TPM2B_PRIVATE_Marshal(&blobs.priv, blob_bytes.data(), blob_bytes.size(), &offset),
             "marshalling a private area");
    blob_bytes.resize(offset);
    const RefusedPinRecords::Digest blob_digest = sha256(blob_bytes);

    TPM2B_MAX_BUFFER data{};
    const std::size_t domain_size = std::strlen(domain) + 1;
    if (domain_size + blob_digest.size() + pin.size() > sizeof data.buffer)
        throw Error("a PIN too long to record");
    std::memcpy(data.buffer, domain, domain_size);
    std::memcpy(data.buffer + domain_size, blob_digest.data(), blob_digest.size());
    if (!pin.empty())
        std::memcpy(data.buffer + domain_size + blob_digest.size(), pin.data(), pin.size());
    data.size = static_cast<UINT16>(domain_size + blob_digest.size() + pin.size());

    // The PIN travels only encrypted, in a session salted with the parent.
    const Authorization auth = Authorization::for_secret(tpm, salt_key, true);
    EsysPtr<TPM2B_DIGEST> out;
    const TSS2_RC rc = Esys_HMAC(tpm.esys(), key.handle(), auth.session(), ESYS_TR_NONE, ESYS_TR_NONE, &data,
                                 TPM2_ALG_SHA256, out_ptr(out));
    OPENSSL_cleanse(&data, sizeof data);
    check_rc(rc, "TPM2_HMAC of a refused PIN");
    RefusedPinRecords::Digest record{};
    if (out->size != record.size())
        throw Error("TPM2_HMAC: a digest of " + std::to_string(out->size) + " bytes, not 32");
    std::memcpy(record.data(), out->buffer, record.size());
    return record;
}

}  // namespace tpmkey
