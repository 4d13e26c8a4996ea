#include "core/tpm/tpm_keys.hpp"

#include "core/base/error.hpp"
#include "core/keys/algorithms.hpp"
#include "core/tpm/tpm_queries.hpp"

#include <tss2/tss2_mu.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace tpmkey {

void check_key_spec(const KeySpec& spec) {
    switch (spec.algorithm) {
    case KeyKind::ecdsa:
        if (!find_curve_by_bits(spec.bits))
            throw Error("ECDSA keys are 256, 384 or 521 bits (NIST P-256, P-384, P-521)");
        break;
    case KeyKind::rsa:
        if (spec.bits != 2048 && spec.bits != 3072)
            throw Error("RSA keys are 2048 or 3072 bits");
        break;
    }
}

TPM2B_PUBLIC signing_key_template(const KeySpec& spec, std::span<const std::uint8_t> auth_policy, bool with_pin) {
    check_key_spec(spec);
    TPM2B_PUBLIC pub{};
    TPMT_PUBLIC& area = pub.publicArea;
    area.nameAlg = TPM2_ALG_SHA256;
    area.objectAttributes = signing_key_attributes;
    // An empty auth value has nothing to guess: DA protection would only
    // let anyone who locks the TPM out (a few wrong tries at anything of
    // theirs) stop the key. A key with a PIN keeps it: its PIN is what the
    // counter protects. (A PIN is never set on a noDA key later: passwd.)
    if (!with_pin)
        area.objectAttributes |= TPMA_OBJECT_NODA;
    area.type = key_kind_algorithm(spec.algorithm).tpm;
    switch (spec.algorithm) {
    case KeyKind::ecdsa:
        area.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_NULL;
        area.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
        area.parameters.eccDetail.curveID = find_curve_by_bits(spec.bits)->tpm;  // check_key_spec: in the table
        area.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
        break;
    case KeyKind::rsa:
        area.parameters.rsaDetail.symmetric.algorithm = TPM2_ALG_NULL;
        area.parameters.rsaDetail.scheme.scheme = TPM2_ALG_NULL;
        area.parameters.rsaDetail.keyBits = static_cast<TPMI_RSA_KEY_BITS>(spec.bits);
        area.parameters.rsaDetail.exponent = 0;  // the default, 65537
        break;
    }
    if (!auth_policy.empty()) {
        if (auth_policy.size() != 32)
            throw Error("a policy digest must be a SHA-256 digest");
        area.authPolicy.size = 32;
        std::copy(auth_policy.begin(), auth_policy.end(), area.authPolicy.buffer);
        // Else the PIN alone (an HMAC or password session) would bypass
        // the policy (TPM 2.0 Part 1, 19.7.4).
        area.objectAttributes &= ~TPMA_OBJECT_USERWITHAUTH;
    }
    return pub;
}

TPM2B_PUBLIC storage_key_template(TPMI_ALG_PUBLIC type) {
    TPM2B_PUBLIC pub{};
    TPMT_PUBLIC& area = pub.publicArea;
    area.type = type;
    area.nameAlg = TPM2_ALG_SHA256;
    area.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN |
                            TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA | TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT;
    const TPMT_SYM_DEF_OBJECT aes128cfb{
        .algorithm = TPM2_ALG_AES, .keyBits = {.aes = 128}, .mode = {.aes = TPM2_ALG_CFB}};
    if (type == TPM2_ALG_RSA) {
        area.parameters.rsaDetail.symmetric = aes128cfb;
        area.parameters.rsaDetail.scheme.scheme = TPM2_ALG_NULL;
        area.parameters.rsaDetail.keyBits = 2048;
        area.parameters.rsaDetail.exponent = 0;
    } else {
        area.parameters.eccDetail.symmetric = aes128cfb;
        area.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
        area.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
        area.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
    }
    return pub;  // unique stays empty
}

std::string attributes_text(TPMA_OBJECT attributes) {
    static const std::pair<TPMA_OBJECT, const char*> names[] = {
        {TPMA_OBJECT_FIXEDTPM, "fixedtpm"},
        {TPMA_OBJECT_STCLEAR, "stclear"},
        {TPMA_OBJECT_FIXEDPARENT, "fixedparent"},
        {TPMA_OBJECT_SENSITIVEDATAORIGIN, "sensitivedataorigin"},
        {TPMA_OBJECT_USERWITHAUTH, "userwithauth"},
        {TPMA_OBJECT_ADMINWITHPOLICY, "adminwithpolicy"},
        {TPMA_OBJECT_NODA, "noda"},
        {TPMA_OBJECT_ENCRYPTEDDUPLICATION, "encryptedduplication"},
        {TPMA_OBJECT_RESTRICTED, "restricted"},
        {TPMA_OBJECT_DECRYPT, "decrypt"},
        {TPMA_OBJECT_SIGN_ENCRYPT, "sign"},
    };
    std::string out;
    TPMA_OBJECT named = 0;
    for (const auto& [bit, name] : names) {
        named |= bit;
        if (attributes & bit)
            out += (out.empty() ? "" : "|") + std::string(name);
    }
    if (attributes & ~named) {
        char other[16];
        std::snprintf(other, sizeof other, "0x%x", static_cast<unsigned>(attributes & ~named));
        out += (out.empty() ? "" : "|") + std::string(other);
    }
    return out;
}

void check_storage_key(const TPMT_PUBLIC& area, std::uint32_t handle) {
    constexpr TPMA_OBJECT required = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN |
                                     TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT;
    constexpr TPMA_OBJECT allowed = required | TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA;
    const std::string what = "the parent " + handle_text(handle) + " (attributes " +
                             attributes_text(area.objectAttributes) + ") is not a storage key bound to this TPM: ";
    if (area.type != TPM2_ALG_ECC && area.type != TPM2_ALG_RSA)
        throw Error(what + "it is neither an ECC nor an RSA key; refusing to use it");
    if (const TPMA_OBJECT missing = required & ~area.objectAttributes)
        throw Error(what + "it lacks " + attributes_text(missing) + "; refusing to send anything secret under it");
    if (const TPMA_OBJECT extra = area.objectAttributes & ~allowed)
        throw Error(what + "it also has " + attributes_text(extra) + "; refusing to send anything secret under it");
}

namespace {

// TPM2_CreatePrimary in `hierarchy`, authorised by `session`; `out` gets
// the public area. By default in the owner hierarchy with the password
// session: its auth value is empty when a key is used (else there is no
// 0x40000001, docs/design.md, "Parent"), so the session carries nothing secret.
TpmObject create_primary(Tpm& tpm, const TPM2B_PUBLIC& in_public, TPMT_PUBLIC& out,
                         ESYS_TR hierarchy = ESYS_TR_RH_OWNER, ESYS_TR session = ESYS_TR_PASSWORD) {
    const TPM2B_SENSITIVE_CREATE sensitive{};
    const TPM2B_DATA outside_info{};
    const TPML_PCR_SELECTION pcrs{};
    ESYS_TR handle = ESYS_TR_NONE;
    EsysPtr<TPM2B_PUBLIC> pub;
    check_rc(Esys_CreatePrimary(tpm.esys(), hierarchy, session, ESYS_TR_NONE, ESYS_TR_NONE, &sensitive, &in_public,
                                &outside_info, &pcrs, &handle, out_ptr(pub), nullptr, nullptr, nullptr),
             "TPM2_CreatePrimary of the storage key", TpmStep::parent,
             hierarchy == ESYS_TR_RH_NULL ? TPM2_RH_NULL : owner_hierarchy);
    TpmObject primary(tpm, handle, TpmObject::Kind::transient);
    out = pub->publicArea;
    return primary;
}

bool same_public(const TPMT_PUBLIC& a, const TPMT_PUBLIC& b) {
    std::uint8_t ma[sizeof(TPMT_PUBLIC)], mb[sizeof(TPMT_PUBLIC)];
    size_t sa = 0, sb = 0;
    check_rc(Tss2_MU_TPMT_PUBLIC_Marshal(&a, ma, sizeof ma, &sa), "marshalling a public area");
    check_rc(Tss2_MU_TPMT_PUBLIC_Marshal(&b, mb, sizeof mb, &sb), "marshalling a public area");
    return sa == sb && std::memcmp(ma, mb, sa) == 0;
}

}  // namespace

TPM2B_PUBLIC read_public(Tpm& tpm, const TpmObject& object, std::uint32_t handle) {
    EsysPtr<TPM2B_PUBLIC> pub;
    check_rc(Esys_ReadPublic(tpm.esys(), object.handle(), ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, out_ptr(pub),
                             nullptr, nullptr),
             "TPM2_ReadPublic", TpmStep::parent, handle);
    return *pub;
}

TpmObject open_parent(Tpm& tpm, std::uint32_t parent) {
    if (parent == owner_hierarchy) {
        TPMT_PUBLIC area{};
        TpmObject primary = create_primary(tpm, storage_key_template(), area);
        check_storage_key(area, parent);
        return primary;
    }
    if ((parent >> 24) != TPM2_HT_PERSISTENT)
        throw Error("parent handle " + handle_text(parent) +
                    " is neither the owner hierarchy (0x40000001) nor a persistent handle (0x81xxxxxx)");
    ESYS_TR handle = ESYS_TR_NONE;
    check_rc(Esys_TR_FromTPMPublic(tpm.esys(), parent, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &handle),
             "reading the persistent parent key", TpmStep::parent, parent);
    return TpmObject(tpm, handle, TpmObject::Kind::persistent);
}

TpmObject load_parent(Tpm& tpm, std::uint32_t parent) {
    TpmObject object = open_parent(tpm, parent);
    if (parent != owner_hierarchy)
        check_storage_key(read_public(tpm, object, parent).publicArea, parent);
    return object;
}

PersistentSrk inspect_persistent_srk(Tpm& tpm) {
    const auto data = get_capability(tpm, TPM2_CAP_HANDLES, standard_srk, 1);
    if (data->data.handles.count == 0 || data->data.handles.handle[0] != standard_srk)
        return {};
    ESYS_TR handle = ESYS_TR_NONE;
    check_rc(Esys_TR_FromTPMPublic(tpm.esys(), standard_srk, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &handle),
             "reading the persistent key 0x81000001", TpmStep::parent, standard_srk);
    const TpmObject object(tpm, handle, TpmObject::Kind::persistent);
    const TPMT_PUBLIC area = read_public(tpm, object, standard_srk).publicArea;
    try {
        check_storage_key(area, standard_srk);
    } catch (const Error& e) {
        return {PersistentSrk::State::unfit, e.what()};
    }
    // The standard SRK is the key TPM2_CreatePrimary makes from the TCG
    // template: then keys under it also load under 0x40000001, and no other
    // program's set-up (tpm2-pkcs11's own primary, say) owns it.
    const TPM2B_PUBLIC tmpl = storage_key_template(area.type);
    try {
        TPMT_PUBLIC created{};
        const TpmObject primary = create_primary(tpm, tmpl, created);
        if (same_public(created, area))
            return {PersistentSrk::State::standard, {}};
    } catch (const TpmError& e) {
        // An owner password keeps us from re-creating it: judge by the template.
        if (!e.is(TPM2_RC_AUTH_FAIL) && !e.is(TPM2_RC_BAD_AUTH))
            throw;
        TPMT_PUBLIC without_unique = area;
        without_unique.unique = {};
        if (same_public(without_unique, tmpl.publicArea))
            return {PersistentSrk::State::standard, {}};
    }
    return {PersistentSrk::State::other_storage_key,
            "a storage key made from another template than the TCG standard SRK (attributes " +
                attributes_text(area.objectAttributes) + ")"};
}

TpmObject persist_standard_srk(Tpm& tpm, const Secret& owner_auth,
                               const std::function<void(const TpmObject& srk)>& check_before_persisting) {
    // A password of the owner hierarchy is a secret like a PIN: it goes
    // into an HMAC session salted with a key of the TPM (docs/design.md,
    // "Sessions"). The SRK does not exist yet and every other owner key
    // needs the password to be made, so the salt key is the same template's
    // primary in the null hierarchy, which needs no authorisation (its
    // auth value is always empty) and goes away with the next TPM reset.
    // Nothing can pin it: whoever answers in the TPM's place may hand us a
    // key of their own, and so learns the session key but never the
    // password itself (an HMAC session sends only HMACs keyed with it):
    // they get the HMAC to guess the password offline, and no way to forge
    // the TPM's answers, whose HMACs ESAPI checks with that password
    // (docs/security.md, "tpmkey setup").
    TpmObject salt_key;
    if (!owner_auth.empty()) {
        TPMT_PUBLIC area{};
        salt_key = create_primary(tpm, storage_key_template(), area, ESYS_TR_RH_NULL);
        check_storage_key(area, TPM2_RH_NULL);
    }
    const Authorization auth = Authorization::for_secret(tpm, salt_key, !owner_auth.empty());
    salt_key = TpmObject();  // the session has what it needs: flushed, one slot less
    const AuthValue owner(tpm, ESYS_TR_RH_OWNER, owner_auth);

    TPMT_PUBLIC area{};
    const TpmObject srk = create_primary(tpm, storage_key_template(), area, ESYS_TR_RH_OWNER, auth.session());
    check_storage_key(area, standard_srk);
    check_before_persisting(srk);
    ESYS_TR persistent = ESYS_TR_NONE;
    check_rc(Esys_EvictControl(tpm.esys(), ESYS_TR_RH_OWNER, srk.handle(), auth.session(), ESYS_TR_NONE, ESYS_TR_NONE,
                               standard_srk, &persistent),
             "TPM2_EvictControl of the storage key to 0x81000001", TpmStep::other, owner_hierarchy);
    return TpmObject(tpm, persistent, TpmObject::Kind::persistent);
}

KeyBlobs create_key(Tpm& tpm, const TpmObject& parent, const KeySpec& spec, const Secret& pin,
                    std::span<const std::uint8_t> auth_policy) {
    const TPM2B_PUBLIC in_public = signing_key_template(spec, auth_policy, !pin.empty());
    TPM2B_SENSITIVE_CREATE sensitive{};
    fill_auth(sensitive.sensitive.userAuth, pin);
    const TPM2B_DATA outside_info{};
    const TPML_PCR_SELECTION pcrs{};
    const Authorization auth = Authorization::for_secret(tpm, parent, !pin.empty());
    EsysPtr<TPM2B_PRIVATE> priv;
    EsysPtr<TPM2B_PUBLIC> pub;
    const TSS2_RC rc =
        Esys_Create(tpm.esys(), parent.handle(), auth.session(), ESYS_TR_NONE, ESYS_TR_NONE, &sensitive, &in_public,
                    &outside_info, &pcrs, out_ptr(priv), out_ptr(pub), nullptr, nullptr, nullptr);
    OPENSSL_cleanse(&sensitive, sizeof sensitive);
    check_rc(rc, "TPM2_Create of the key");
    return KeyBlobs{*pub, *priv};
}

TpmObject load_key(Tpm& tpm, const TpmObject& parent, const Authorization& auth, const KeyBlobs& blobs) {
    ESYS_TR handle = ESYS_TR_NONE;
    check_rc(Esys_Load(tpm.esys(), parent.handle(), auth.session(), ESYS_TR_NONE, ESYS_TR_NONE, &blobs.priv, &blobs.pub,
                       &handle),
             "TPM2_Load of the key", TpmStep::load);
    return TpmObject(tpm, handle, TpmObject::Kind::transient);
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

std::vector<std::uint8_t> sign_digest(Tpm& tpm, const TpmObject& key, const Authorization& auth, TPM2_ALG_ID scheme,
                                      TPM2_ALG_ID hash, std::span<const std::uint8_t> digest,
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
    EsysPtr<TPMT_SIGNATURE> signature;
    check_rc(Esys_Sign(tpm.esys(), key.handle(), auth.session(), ESYS_TR_NONE, ESYS_TR_NONE, &in_digest, &in_scheme,
                       &validation, out_ptr(signature)),
             "TPM2_Sign", TpmStep::use_key);
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
    default: throw Error("the TPM returned a signature of an unexpected kind");
    }
    return out;
}

TPM2B_PRIVATE change_auth(Tpm& tpm, const TpmObject& key, const TpmObject& parent, const Authorization& auth,
                          const Secret& new_pin) {
    TPM2B_AUTH new_auth;
    fill_auth(new_auth, new_pin);
    EsysPtr<TPM2B_PRIVATE> priv;
    const TSS2_RC rc = Esys_ObjectChangeAuth(tpm.esys(), key.handle(), parent.handle(), auth.session(), ESYS_TR_NONE,
                                             ESYS_TR_NONE, &new_auth, out_ptr(priv));
    OPENSSL_cleanse(&new_auth, sizeof new_auth);
    check_rc(rc, "TPM2_ObjectChangeAuth", TpmStep::use_key);
    return *priv;
}

bool lockout_stops_pinless_key(const TPMT_PUBLIC& area, bool empty_auth) {
    // Without userWithAuth the key signs only through its policy, which for
    // a key without a PIN sends no auth value: a lockout does not stop
    // such a policy session (TPM 2.0 Part 1, 19.8.3).
    return empty_auth && !(area.objectAttributes & TPMA_OBJECT_NODA) &&
           (area.objectAttributes & TPMA_OBJECT_USERWITHAUTH);
}

std::string pinless_key_lockout_advice(const std::string& key_file) {
    return key_file +
           " has no PIN but is under dictionary-attack protection (made by an earlier tpmkey-keygen, or its PIN "
           "removed by tpmkey passwd), so a TPM in lockout refuses it; make a new key without a PIN with "
           "tpmkey-keygen (it makes such keys noDA: no lockout stops them) and use it in this one's place";
}

void prove_pin(Tpm& tpm, const TpmObject& key, const TpmObject& parent, const Authorization& auth, const Secret& pin) {
    const AuthValue current(tpm, key, pin);
    (void)change_auth(tpm, key, parent, auth, pin);
}

}  // namespace tpmkey
