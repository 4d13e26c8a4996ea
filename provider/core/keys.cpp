#include "keys.hpp"

#include "error.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace tpmkey {

std::string handle_text(std::uint32_t handle) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%08x", handle);
    return buf;
}

void check_key_spec(const KeySpec& spec) {
    if (spec.algorithm == KeyAlgorithm::ecdsa && spec.bits != 256 && spec.bits != 384)
        throw Error("ECDSA keys are 256 or 384 bits (NIST P-256, P-384)");
    if (spec.algorithm == KeyAlgorithm::rsa && spec.bits != 2048 && spec.bits != 3072)
        throw Error("RSA keys are 2048 or 3072 bits");
}

TPM2B_PUBLIC signing_key_template(const KeySpec& spec) {
    check_key_spec(spec);
    TPM2B_PUBLIC pub{};
    TPMT_PUBLIC& area = pub.publicArea;
    area.nameAlg = TPM2_ALG_SHA256;
    area.objectAttributes = signing_key_attributes;
    if (spec.algorithm == KeyAlgorithm::ecdsa) {
        area.type = TPM2_ALG_ECC;
        area.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_NULL;
        area.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
        area.parameters.eccDetail.curveID = spec.bits == 256 ? TPM2_ECC_NIST_P256 : TPM2_ECC_NIST_P384;
        area.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
    } else {
        area.type = TPM2_ALG_RSA;
        area.parameters.rsaDetail.symmetric.algorithm = TPM2_ALG_NULL;
        area.parameters.rsaDetail.scheme.scheme = TPM2_ALG_NULL;
        area.parameters.rsaDetail.keyBits = static_cast<TPMI_RSA_KEY_BITS>(spec.bits);
        area.parameters.rsaDetail.exponent = 0;  // the default, 65537
    }
    return pub;
}

TPM2B_PUBLIC storage_key_template() {
    TPM2B_PUBLIC pub{};
    TPMT_PUBLIC& area = pub.publicArea;
    area.type = TPM2_ALG_ECC;
    area.nameAlg = TPM2_ALG_SHA256;
    area.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT |
                            TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH |
                            TPMA_OBJECT_NODA | TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT;
    area.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_AES;
    area.parameters.eccDetail.symmetric.keyBits.aes = 128;
    area.parameters.eccDetail.symmetric.mode.aes = TPM2_ALG_CFB;
    area.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
    area.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
    area.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
    return pub;  // unique.ecc.x and .y stay empty
}

Object load_parent(Tpm& tpm, std::uint32_t parent) {
    if (parent == owner_hierarchy) {
        const TPM2B_SENSITIVE_CREATE sensitive{};
        const TPM2B_PUBLIC in_public = storage_key_template();
        const TPM2B_DATA outside_info{};
        const TPML_PCR_SELECTION pcrs{};
        ESYS_TR handle = ESYS_TR_NONE;
        // The owner hierarchy's auth value is empty (we support no other),
        // so the password session carries nothing secret.
        check_rc(Esys_CreatePrimary(tpm.esys(), ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, ESYS_TR_NONE,
                                    ESYS_TR_NONE, &sensitive, &in_public, &outside_info, &pcrs,
                                    &handle, nullptr, nullptr, nullptr, nullptr),
                 "TPM2_CreatePrimary of the storage key");
        return Object(tpm, handle, Object::Kind::transient);
    }
    if ((parent >> 24) != TPM2_HT_PERSISTENT)
        throw Error("parent handle " + handle_text(parent) +
                    " is neither the owner hierarchy (0x40000001) nor a persistent handle (0x81xxxxxx)");
    ESYS_TR handle = ESYS_TR_NONE;
    const TSS2_RC rc = Esys_TR_FromTPMPublic(tpm.esys(), parent, ESYS_TR_NONE, ESYS_TR_NONE,
                                             ESYS_TR_NONE, &handle);
    if (tpm_rc_base(rc) == TPM2_RC_HANDLE)
        throw TpmError("the parent key " + handle_text(parent) +
                           " is not in this TPM (the key was made on another machine, or its storage key was removed)",
                       rc);
    check_rc(rc, "reading the persistent parent key");
    return Object(tpm, handle, Object::Kind::persistent);
}

bool persistent_storage_key_exists(Tpm& tpm, std::uint32_t handle) {
    TPMI_YES_NO more = TPM2_NO;
    TPMS_CAPABILITY_DATA* raw = nullptr;
    check_rc(Esys_GetCapability(tpm.esys(), ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                TPM2_CAP_HANDLES, handle, 1, &more, &raw),
             "TPM2_GetCapability");
    const EsysPtr<TPMS_CAPABILITY_DATA> data(raw);
    if (data->data.handles.count == 0 || data->data.handles.handle[0] != handle)
        return false;
    // Something is there; a parent must be a storage key: restricted, decrypt.
    const Object object = load_parent(tpm, handle);
    TPM2B_PUBLIC* pub_raw = nullptr;
    check_rc(Esys_ReadPublic(tpm.esys(), object.handle(), ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                             &pub_raw, nullptr, nullptr),
             "TPM2_ReadPublic");
    const EsysPtr<TPM2B_PUBLIC> pub(pub_raw);
    const TPMA_OBJECT storage = TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT;
    return (pub->publicArea.objectAttributes & (storage | TPMA_OBJECT_SIGN_ENCRYPT)) == storage;
}

KeyBlobs create_key(Tpm& tpm, const Object& parent, const KeySpec& spec, const Secret& pin) {
    const TPM2B_PUBLIC in_public = signing_key_template(spec);
    TPM2B_SENSITIVE_CREATE sensitive{};
    fill_auth(sensitive.sensitive.userAuth, pin);
    const TPM2B_DATA outside_info{};
    const TPML_PCR_SELECTION pcrs{};
    const Authorization auth = Authorization::for_secret(tpm, parent, !pin.empty());
    TPM2B_PRIVATE* out_private = nullptr;
    TPM2B_PUBLIC* out_public = nullptr;
    const TSS2_RC rc = Esys_Create(tpm.esys(), parent.handle(), auth.session(), ESYS_TR_NONE,
                                   ESYS_TR_NONE, &sensitive, &in_public, &outside_info, &pcrs,
                                   &out_private, &out_public, nullptr, nullptr, nullptr);
    OPENSSL_cleanse(&sensitive, sizeof sensitive);
    const EsysPtr<TPM2B_PRIVATE> priv(out_private);
    const EsysPtr<TPM2B_PUBLIC> pub(out_public);
    check_rc(rc, "TPM2_Create of the key");
    return KeyBlobs{*pub, *priv};
}

Object load_key(Tpm& tpm, const Object& parent, const Authorization& auth, const KeyBlobs& blobs) {
    ESYS_TR handle = ESYS_TR_NONE;
    const TSS2_RC rc = Esys_Load(tpm.esys(), parent.handle(), auth.session(), ESYS_TR_NONE,
                                 ESYS_TR_NONE, &blobs.priv, &blobs.pub, &handle);
    // The parent's seed protects the private part: another TPM (or a
    // cleared one, or a changed file) fails the integrity check.
    if (tpm_rc_base(rc) == TPM2_RC_INTEGRITY)
        throw TpmError("this key belongs to a different TPM, or its file was altered "
                       "(the TPM's integrity check failed)",
                       rc);
    check_rc(rc, "TPM2_Load of the key");
    return Object(tpm, handle, Object::Kind::transient);
}

namespace {

// Appends a big-endian integer left-padded with zeros to `size` bytes.
void append_padded(std::vector<std::uint8_t>& out, const TPM2B_ECC_PARAMETER& value, std::size_t size) {
    if (value.size > size)
        throw Error("the TPM returned an ECDSA signature larger than the curve");
    out.insert(out.end(), size - value.size, 0);
    out.insert(out.end(), value.buffer, value.buffer + value.size);
}

}  // namespace

std::vector<std::uint8_t> sign_digest(Tpm& tpm, const Object& key, const Authorization& auth,
                                      TPM2_ALG_ID scheme, TPM2_ALG_ID hash,
                                      std::span<const std::uint8_t> digest,
                                      std::size_t ec_half_size) {
    TPM2B_DIGEST in_digest{};
    if (digest.size() > sizeof in_digest.buffer)
        throw Error("digest too long for the TPM");
    in_digest.size = static_cast<UINT16>(digest.size());
    std::copy(digest.begin(), digest.end(), in_digest.buffer);
    TPMT_SIG_SCHEME in_scheme{};
    in_scheme.scheme = scheme;
    in_scheme.details.any.hashAlg = hash;
    // No ticket: the key is not restricted, so the TPM signs any digest.
    const TPMT_TK_HASHCHECK validation{.tag = TPM2_ST_HASHCHECK, .hierarchy = TPM2_RH_NULL, .digest = {}};
    TPMT_SIGNATURE* raw = nullptr;
    check_rc(Esys_Sign(tpm.esys(), key.handle(), auth.session(), ESYS_TR_NONE, ESYS_TR_NONE,
                       &in_digest, &in_scheme, &validation, &raw),
             "TPM2_Sign");
    const EsysPtr<TPMT_SIGNATURE> signature(raw);
    std::vector<std::uint8_t> out;
    switch (signature->sigAlg) {
    case TPM2_ALG_ECDSA:
        append_padded(out, signature->signature.ecdsa.signatureR, ec_half_size);
        append_padded(out, signature->signature.ecdsa.signatureS, ec_half_size);
        break;
    case TPM2_ALG_RSASSA:
    case TPM2_ALG_RSAPSS: {
        const TPM2B_PUBLIC_KEY_RSA& sig = signature->signature.rsassa.sig;
        out.assign(sig.buffer, sig.buffer + sig.size);
        break;
    }
    default:
        throw Error("the TPM returned a signature of an unexpected kind");
    }
    return out;
}

std::map<TPM2_PT, UINT32> tpm_properties(Tpm& tpm, TPM2_PT first, UINT32 count) {
    std::map<TPM2_PT, UINT32> out;
    TPMI_YES_NO more = TPM2_YES;
    TPM2_PT next = first;
    while (more == TPM2_YES && next < first + count) {
        TPMS_CAPABILITY_DATA* raw = nullptr;
        check_rc(Esys_GetCapability(tpm.esys(), ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, TPM2_CAP_TPM_PROPERTIES,
                                    next, first + count - next, &more, &raw),
                 "TPM2_GetCapability");
        const EsysPtr<TPMS_CAPABILITY_DATA> data(raw);
        const TPML_TAGGED_TPM_PROPERTY& list = data->data.tpmProperties;
        if (list.count == 0)
            break;
        for (UINT32 i = 0; i < list.count; ++i)
            out[list.tpmProperty[i].property] = list.tpmProperty[i].value;
        next = list.tpmProperty[list.count - 1].property + 1;
    }
    return out;
}

DictionaryAttackState dictionary_attack_state(Tpm& tpm) {
    // TPM2_PT_PERMANENT .. TPM2_PT_LOCKOUT_INTERVAL are one run: one command.
    auto props = tpm_properties(tpm, TPM2_PT_PERMANENT, TPM2_PT_LOCKOUT_INTERVAL - TPM2_PT_PERMANENT + 1);
    return DictionaryAttackState{props[TPM2_PT_LOCKOUT_COUNTER], props[TPM2_PT_MAX_AUTH_FAIL],
                                 props[TPM2_PT_LOCKOUT_INTERVAL],
                                 (props[TPM2_PT_PERMANENT] & TPMA_PERMANENT_INLOCKOUT) != 0};
}

TPM2B_PRIVATE change_auth(Tpm& tpm, const Object& key, const Object& parent,
                          const Authorization& auth, const Secret& new_pin) {
    TPM2B_AUTH new_auth;
    fill_auth(new_auth, new_pin);
    TPM2B_PRIVATE* raw = nullptr;
    const TSS2_RC rc = Esys_ObjectChangeAuth(tpm.esys(), key.handle(), parent.handle(), auth.session(),
                                             ESYS_TR_NONE, ESYS_TR_NONE, &new_auth, &raw);
    OPENSSL_cleanse(&new_auth, sizeof new_auth);
    const EsysPtr<TPM2B_PRIVATE> priv(raw);
    check_rc(rc, "TPM2_ObjectChangeAuth");
    return *priv;
}

}  // namespace tpmkey
