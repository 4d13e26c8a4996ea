#include "core/trust/endorsement.hpp"

#include "core/base/error.hpp"
#include "core/base/home.hpp"
#include "core/base/owned.hpp"
#include "core/files/atomic_file.hpp"
#include "core/files/config.hpp"
#include "core/files/file_read.hpp"
#include "core/keys/key_parts.hpp"
#include "core/keys/public_key.hpp"
#include "core/tpm/tpm_queries.hpp"

#include <openssl/crypto.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace tpmkey {

namespace {

// An EK certificate is a few hundred bytes to 2 KiB; an NV index claiming
// more is not one (and is not read).
constexpr std::size_t max_certificate_size = 8192;

// The NV indices of EK certificates in the TCG EK Credential Profile: the
// low range (0x01C00002, 0x01C0000A) and the high range (0x01C00012 on).
constexpr std::uint32_t first_cert_index = 0x01C00002;
constexpr std::uint32_t last_cert_index = 0x01C0001C;

struct NvCertificate {
    const EkTemplate* ek_template = nullptr;  // the template of its index
    Bytes der;                                // exactly the certificate, without the index's padding
    X509Cert cert;
};

// The NV indices the TPM holds in the EK certificate range (one
// TPM2_GetCapability): certificates, and the low range's EK nonce and
// template indices.
std::vector<std::uint32_t> ek_nv_indices(Tpm& tpm) {
    const auto data = get_capability(tpm, TPM2_CAP_HANDLES, first_cert_index, last_cert_index - first_cert_index + 1);
    return {data->data.handles.handle, data->data.handles.handle + data->data.handles.count};
}

bool holds(const std::vector<std::uint32_t>& indices, std::uint32_t index) {
    return std::find(indices.begin(), indices.end(), index) != indices.end();
}

// TPM2_NV_ReadPublic, then TPM2_NV_Read in pieces of at most
// TPM_PT_NV_BUFFER_MAX, authorised by the index itself (TPMA_NV_AUTHREAD,
// empty auth value, as the profile defines EK certificate indices).
// nullopt, with the index and why in `ignored`, for an index the platform
// did not create or never wrote: the profile's EK certificate indices are
// TPMA_NV_PLATFORMCREATE (the manufacturer's, defined with platform
// authorization), while anyone with owner authorization may define an
// index anywhere in the range (TPM2_NV_DefineSpace), and one it chose must
// neither stand for the TPM's certificate nor stop the proof.
std::optional<NvCertificate> read_certificate(Tpm& tpm, const EkTemplate& ek_template,
                                              std::vector<std::string>& ignored) {
    const std::uint32_t index = ek_template.cert_index;
    const std::string where = "the EK certificate at NV index " + handle_text(index);
    ESYS_TR handle = ESYS_TR_NONE;
    check_rc(Esys_TR_FromTPMPublic(tpm.esys(), index, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &handle),
             "TPM2_NV_ReadPublic of the EK certificate");
    const TpmObject nv(tpm, handle, TpmObject::Kind::persistent);
    EsysPtr<TPM2B_NV_PUBLIC> nv_public;
    check_rc(Esys_NV_ReadPublic(tpm.esys(), nv.handle(), ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, out_ptr(nv_public),
                                nullptr),
             "TPM2_NV_ReadPublic of the EK certificate");
    const TPMA_NV attributes = nv_public->nvPublic.attributes;
    if (!(attributes & TPMA_NV_PLATFORMCREATE)) {
        ignored.push_back("NV index " + handle_text(index) + ", which the platform did not create");
        return std::nullopt;
    }
    if (!(attributes & TPMA_NV_WRITTEN)) {
        ignored.push_back("NV index " + handle_text(index) + ", which was never written");
        return std::nullopt;
    }
    const std::size_t size = nv_public->nvPublic.dataSize;
    if (size == 0 || size > max_certificate_size)
        throw ParentProofFailed(where + " claims " + std::to_string(size) + " bytes; refusing to read it");
    if (!(attributes & TPMA_NV_AUTHREAD))
        throw ParentProofFailed(where + " cannot be read with its own (empty) auth value");
    const auto props = tpm_properties(tpm, TPM2_PT_NV_BUFFER_MAX, 1);
    const auto max = props.find(TPM2_PT_NV_BUFFER_MAX);
    const std::size_t chunk = std::min<std::size_t>(max == props.end() || max->second == 0 ? 512 : max->second,
                                                    sizeof(TPM2B_MAX_NV_BUFFER::buffer));
    Bytes data;
    while (data.size() < size) {
        const auto piece = static_cast<UINT16>(std::min(chunk, size - data.size()));
        EsysPtr<TPM2B_MAX_NV_BUFFER> out;
        check_rc(Esys_NV_Read(tpm.esys(), nv.handle(), nv.handle(), ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, piece,
                              static_cast<UINT16>(data.size()), out_ptr(out)),
                 "TPM2_NV_Read of the EK certificate");
        if (out->size != piece)
            throw ParentProofFailed(where + ": the TPM answered TPM2_NV_Read with the wrong size");
        data.insert(data.end(), out->buffer, out->buffer + out->size);
    }
    // Some TPMs pad the index after the DER; the certificate is what d2i takes.
    const unsigned char* p = data.data();
    X509Cert cert(d2i_X509(nullptr, &p, static_cast<long>(data.size())));
    if (!cert)
        throw ParentProofFailed(where + " is not an X.509 certificate");
    data.resize(static_cast<std::size_t>(p - data.data()));
    return NvCertificate{&ek_template, std::move(data), std::move(cert)};
}

std::string sha256_hex(const Bytes& data) { return hex(digest_of(EVP_sha256(), {data})); }

TpmObject start_policy_session(Tpm& tpm, TPMI_ALG_HASH hash) {
    const TPMT_SYM_DEF symmetric{.algorithm = TPM2_ALG_NULL, .keyBits = {}, .mode = {}};
    ESYS_TR session = ESYS_TR_NONE;
    // Unsalted and unbound: nothing secret goes in (the EK's policy asks
    // only that the endorsement hierarchy's empty auth value is known), and
    // the answer is checked against the secret we chose.
    check_rc(Esys_StartAuthSession(tpm.esys(), ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                   nullptr, TPM2_SE_POLICY, &symmetric, hash, &session),
             "TPM2_StartAuthSession for the EK");
    TpmObject owned(tpm, session, TpmObject::Kind::transient);
    check_rc(Esys_TRSess_SetAttributes(tpm.esys(), session, TPMA_SESSION_CONTINUESESSION, 0xff),
             "Esys_TRSess_SetAttributes");
    return owned;
}

// check_rc for a command authorised with the endorsement hierarchy's
// (empty) auth value: TPM_RC_BAD_AUTH there means it has a password
// (hierarchy auth values are not subject to dictionary-attack protection,
// so the TPM answers BAD_AUTH, not AUTH_FAIL). Not a TpmError: nothing
// about it is a key's PIN, nor an impostor.
void check_endorsement_auth(TSS2_RC rc, const char* call) {
    try {
        check_rc(rc, call);
    } catch (const TpmError& e) {
        if (!e.is(TPM2_RC_BAD_AUTH) && !e.is(TPM2_RC_AUTH_FAIL))
            throw;
        throw Error("the endorsement hierarchy has a password (" + std::string(e.what()) +
                    "), which tpmkey does not support: the endorsement key cannot be used, so the TPM's storage "
                    "key cannot be proven");
    }
}

// Whether TPM2_ActivateCredential's error says that this credential does
// not open for this object under this EK (TPM 2.0 Part 3,
// ActivateCredential): the outer HMAC over the object's name fails
// (TPM_RC_INTEGRITY), or the seed does not decrypt with the EK's private
// key (TPM_RC_VALUE for RSA; TPM_RC_ECC_POINT, TPM_RC_INSUFFICIENT,
// TPM_RC_NO_RESULT for ECC; TPM_RC_SIZE). Anything else (a full TPM,
// TPM_RC_RETRY, lockout, a refused session) proves nothing either way.
bool wrong_credential(const TpmError& e) {
    for (const TSS2_RC rc :
         {TPM2_RC_INTEGRITY, TPM2_RC_VALUE, TPM2_RC_ECC_POINT, TPM2_RC_INSUFFICIENT, TPM2_RC_NO_RESULT, TPM2_RC_SIZE})
        if (e.is(rc))
            return true;
    return false;
}

}  // namespace

std::optional<EkCertificate> read_ek_certificate(Tpm& tpm) {
    const std::vector<std::uint32_t> indices = ek_nv_indices(tpm);
    std::vector<std::string> ignored;
    for (const EkTemplate& t : ek_templates())
        if (holds(indices, t.cert_index))
            if (std::optional<NvCertificate> certificate = read_certificate(tpm, t, ignored))
                return EkCertificate{t.cert_index, std::move(certificate->der), &t};
    return std::nullopt;
}

TpmObject create_endorsement_primary(Tpm& tpm, const TPM2B_PUBLIC& in_public, TPMT_PUBLIC& out, const char* step) {
    const TPM2B_SENSITIVE_CREATE sensitive{};
    const TPM2B_DATA outside_info{};
    const TPML_PCR_SELECTION pcrs{};
    ESYS_TR handle = ESYS_TR_NONE;
    EsysPtr<TPM2B_PUBLIC> pub;
    // The endorsement hierarchy's auth value is empty (as for the owner
    // hierarchy, we support no other): the password session carries nothing.
    check_endorsement_auth(
        Esys_CreatePrimary(tpm.esys(), ESYS_TR_RH_ENDORSEMENT, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &sensitive,
                           &in_public, &outside_info, &pcrs, &handle, out_ptr(pub), nullptr, nullptr, nullptr),
        step);
    TpmObject key(tpm, handle, TpmObject::Kind::transient);
    out = pub->publicArea;
    return key;
}

TpmObject create_ek(Tpm& tpm, const EkTemplate& ek_template, TPMT_PUBLIC& out) {
    return create_endorsement_primary(tpm, ek_public_template(ek_template), out,
                                      "TPM2_CreatePrimary of the endorsement key");
}

SecretBytes activate_credential(Tpm& tpm, const TpmObject& object, const TpmObject& ek, const EkTemplate& ek_template,
                                const Credential& credential) {
    TPM2B_ID_OBJECT blob{};
    TPM2B_ENCRYPTED_SECRET seed{};
    if (credential.blob.size() > sizeof blob.credential || credential.encrypted_seed.size() > sizeof seed.secret)
        throw Error("the credential is too large for TPM2_ActivateCredential");
    blob.size = static_cast<UINT16>(credential.blob.size());
    std::memcpy(blob.credential, credential.blob.data(), credential.blob.size());
    seed.size = static_cast<UINT16>(credential.encrypted_seed.size());
    std::memcpy(seed.secret, credential.encrypted_seed.data(), credential.encrypted_seed.size());

    const TpmObject session = start_policy_session(tpm, ek_template.name_alg);
    EsysPtr<TPM2B_TIMEOUT> timeout;
    EsysPtr<TPMT_TK_AUTH> ticket;
    check_endorsement_auth(
        Esys_PolicySecret(tpm.esys(), ESYS_TR_RH_ENDORSEMENT, session.handle(), ESYS_TR_PASSWORD, ESYS_TR_NONE,
                          ESYS_TR_NONE, nullptr, nullptr, nullptr, 0, out_ptr(timeout), out_ptr(ticket)),
        "TPM2_PolicySecret(TPM_RH_ENDORSEMENT)");
    if (ek_template.high_range) {
        const HashAlgorithm* hash = find_hash(ek_template.name_alg);
        TPML_DIGEST digests{};
        for (const Bytes& d : {ek_policy_a(*hash), ek_policy_c(*hash)}) {
            TPM2B_DIGEST& slot = digests.digests[digests.count++];
            slot.size = static_cast<UINT16>(d.size());
            std::memcpy(slot.buffer, d.data(), d.size());
        }
        check_rc(Esys_PolicyOR(tpm.esys(), session.handle(), ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &digests),
                 "TPM2_PolicyOR of the EK's policy");
    }
    // activateHandle: the object (ADMIN role; its auth value is empty, so
    // the password session carries nothing); keyHandle: the EK (USER
    // role), in the policy session.
    EsysPtr<TPM2B_DIGEST> secret;
    try {
        check_rc(Esys_ActivateCredential(tpm.esys(), object.handle(), ek.handle(), ESYS_TR_PASSWORD, session.handle(),
                                         ESYS_TR_NONE, &blob, &seed, out_ptr(secret)),
                 "TPM2_ActivateCredential");
    } catch (const TpmError& e) {
        if (wrong_credential(e))
            throw CredentialRefused(e);
        throw;
    }
    SecretBytes out(secret->buffer, secret->buffer + secret->size);
    OPENSSL_cleanse(secret->buffer, sizeof secret->buffer);
    return out;
}

namespace {

constexpr std::size_t max_supplied_size = 64 * 1024;

struct SuppliedCertificate {
    const EkTemplate* ek_template = nullptr;
    Bytes der;
    X509Cert cert;
    TpmObject ek;
    TPMT_PUBLIC ek_public{};
};

Bytes der_of(X509* cert) {
    unsigned char* out = nullptr;
    const int n = i2d_X509(cert, &out);
    if (n <= 0)
        throw Error("cannot encode a certificate (OpenSSL)");
    Bytes der(out, out + n);
    OPENSSL_free(out);
    return der;
}

std::string pem_of(X509* cert) {
    const std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), &BIO_free);
    if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1)
        throw Error("cannot encode a certificate (OpenSSL)");
    char* data = nullptr;
    const long n = BIO_get_mem_data(bio.get(), &data);
    return std::string(data, static_cast<std::size_t>(n));
}

// The EK `cert` is for, re-created from each template that makes a key
// like its own; nullopt when the TPM re-creates none with its key.
std::optional<SuppliedCertificate> match_ek(Tpm& tpm, X509Cert cert) {
    for (const EkTemplate& t : ek_templates()) {
        try {
            ek_public_of(cert.get(), t);
        } catch (const Error&) {
            continue;  // a key this template does not make
        }
        TPMT_PUBLIC made_public{};
        TpmObject made = create_ek(tpm, t, made_public);
        if (EVP_PKEY_eq(X509_get0_pubkey(cert.get()), PublicKey(made_public).to_evp().get()) == 1) {
            Bytes der = der_of(cert.get());
            return SuppliedCertificate{&t, std::move(der), std::move(cert), std::move(made), made_public};
        }
    }
    return std::nullopt;
}

// The certificates in supplied_ek_certificates_path(), read only under
// StrictModes (whoever may replace them could certify an EK of theirs).
std::vector<X509Cert> supplied_certificates() {
    const std::filesystem::path path = supplied_ek_certificates_path();
    if (path.empty())
        return {};
    const std::optional<FileRead> file = read_regular_file_if_present(path, max_supplied_size);
    if (!file)
        return {};
    check_not_replaceable(path, *file, "EK certificate file", "the EK certificates");
    return certificates_in(file->data);
}

std::optional<SuppliedCertificate> find_supplied_certificate(Tpm& tpm) {
    for (X509Cert& cert : supplied_certificates())
        if (std::optional<SuppliedCertificate> found = match_ek(tpm, std::move(cert)))
            return found;
    return std::nullopt;
}

}  // namespace

std::filesystem::path supplied_ek_certificates_path() {
    const std::filesystem::path config = config_file_path();
    return config.empty() ? config : config.parent_path() / "ek-certificates";
}

SuppliedEk supply_ek_certificate(Tpm& tpm, const Bytes& data, const EkRoots& roots) {
    std::vector<X509Cert> certs = certificates_in(data);
    if (certs.size() != 1)
        throw Error("expected one X.509 certificate (PEM or DER), found " + std::to_string(certs.size()));
    const Bytes der = der_of(certs[0].get());
    if (const std::string problem = ek_chain_problem(der, roots); !problem.empty())
        throw Error("not a trusted EK certificate: " + problem);
    const std::optional<SuppliedCertificate> found = match_ek(tpm, std::move(certs[0]));
    if (!found)
        throw Error("not this TPM's EK certificate: its key is not the endorsement key the TPM re-creates from "
                    "the TCG template of that key");
    const std::filesystem::path path = supplied_ek_certificates_path();
    if (path.empty())
        throw Error("no home directory to keep the EK certificate in");
    std::string text;
    for (const X509Cert& c : supplied_certificates())
        if (der_of(c.get()) != der)
            text += pem_of(c.get());
    text += pem_of(found->cert.get());
    for (const std::filesystem::path& dir : {path.parent_path().parent_path(), path.parent_path()})
        if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
            throw Error(dir.string() + ": cannot create: " + std::strerror(errno));
    write_file_atomically(path, text, 0600, Replace::yes);
    return {"cert:" + sha256_hex(der), found->ek_template->algorithm,
            name_line(X509_get_issuer_name(found->cert.get()))};
}

namespace {

// The steps of prove_parent, in its order; each refuses with
// ParentProofFailed what it checks.

// The rule the proof rests on (docs/security.md, "A parent proven by the
// endorsement key"): no TPM loads an object whose private part came from
// outside with fixedTPM or fixedParent SET (LoadExternal, Import), so a
// parent without them proves nothing even though the TPM activates a
// credential for it.
void check_parent_bound_to_tpm(const TPMT_PUBLIC& area) {
    constexpr TPMA_OBJECT bound = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN;
    if ((area.objectAttributes & bound) != bound)
        throw ParentProofFailed("the parent's proof failed: it lacks fixedTPM, fixedParent or sensitiveDataOrigin, "
                                "so its private part may be known outside the TPM");
}

// Nor may it be usable by policy in the ADMIN role (adminWithPolicy), the
// role TPM2_ActivateCredential asks of it: an object loaded with its public
// area only (TPM2_LoadExternal) may carry any attributes and has no auth
// value, but may have a policy. Without adminWithPolicy the ADMIN role
// needs the auth value, which only an object with its private part has (a
// storage key never has it: check_storage_key).
void check_parent_not_admin_by_policy(const TPMT_PUBLIC& area) {
    if (area.objectAttributes & TPMA_OBJECT_ADMINWITHPOLICY)
        throw ParentProofFailed("the parent's proof failed: it may be used by a policy in the ADMIN role "
                                "(adminWithPolicy), as an object the TPM holds without its private part could");
}

// The endorsement key the proof uses, and the certificate about it if any.
struct ProofEk {
    std::optional<NvCertificate> certificate;
    bool supplied = false;  // the certificate is the user's (tpmkey setup --ek-cert), not from the TPM's NV
    const EkTemplate* ek_template = nullptr;
    TpmObject ek;
    TPMT_PUBLIC ek_public{};
    std::vector<std::string> ignored;  // why certificates in NV were not read
};

// The certificate is about the EK the TPM re-creates from its template,
// or about nothing we can use: the first certificate in NV (in
// ek_templates()' order) whose EK the TPM re-creates is the TPM's. A
// certificate in NV whose EK the TPM does not re-create refuses the proof.
void find_ek_certified_in_nv(Tpm& tpm, ProofEk& proof) {
    std::string mismatch;  // about the first certificate that is not its EK's
    const std::vector<std::uint32_t> indices = ek_nv_indices(tpm);
    for (const EkTemplate& t : ek_templates()) {
        if (!holds(indices, t.cert_index))
            continue;
        std::optional<NvCertificate> found = read_certificate(tpm, t, proof.ignored);
        if (!found)
            continue;
        TPMT_PUBLIC made_public{};
        TpmObject made = create_ek(tpm, t, made_public);
        const EvpPkey ek_key = PublicKey(made_public).to_evp();
        if (EVP_PKEY_eq(X509_get0_pubkey(found->cert.get()), ek_key.get()) == 1) {
            proof.certificate = std::move(found);
            proof.ek = std::move(made);
            proof.ek_public = made_public;
            return;
        }
        if (mismatch.empty()) {
            // The low range lets a manufacturer put an EK nonce or template
            // in NV (index + 1, + 2) that the EK was made with; tpmkey
            // re-creates the EK from the profile's template only.
            const bool own_template =
                !t.high_range && (holds(indices, t.cert_index + 1) || holds(indices, t.cert_index + 2));
            mismatch =
                "the parent's proof failed: the endorsement key the TPM re-created from template " +
                std::string(t.label) + " is not the key of its certificate at " + handle_text(t.cert_index) +
                (own_template ? " (the TPM keeps an EK nonce or template in NV, which tpmkey does not use)" : "");
        }
    }
    if (!mismatch.empty())
        throw ParentProofFailed(mismatch);
}

// Without one in NV: the certificate the user gave (tpmkey setup
// --ek-cert) whose EK the TPM re-creates; without that, the EK of the
// uncertified template, to be trusted on first use.
void find_ek_otherwise(Tpm& tpm, ProofEk& proof) {
    if (!proof.certificate) {
        if (std::optional<SuppliedCertificate> found = find_supplied_certificate(tpm)) {
            proof.certificate = NvCertificate{found->ek_template, std::move(found->der), std::move(found->cert)};
            proof.ek = std::move(found->ek);
            proof.ek_public = found->ek_public;
            proof.supplied = true;
        }
    }
    proof.ek_template = proof.certificate ? proof.certificate->ek_template : &uncertified_ek_template();
    if (!proof.certificate)
        proof.ek = create_ek(tpm, *proof.ek_template, proof.ek_public);
}

// Whether a trusted root certifies the EK, and if not, why.
EndorsementKey judge_ek_certificate(const ProofEk& proof, const EkRoots& roots) {
    EndorsementKey result;
    result.algorithm = proof.ek_template->algorithm;
    if (proof.certificate) {
        result.nv_index = proof.supplied ? 0 : proof.ek_template->cert_index;
        result.supplied = proof.supplied;
        result.issuer = name_line(X509_get_issuer_name(proof.certificate->cert.get()));
        result.why_not_certified = ek_chain_problem(proof.certificate->der, roots);
        if (!result.why_not_certified.empty())
            result.why_not_certified = "no trusted root: " + result.why_not_certified;
    } else {
        result.why_not_certified = "no EK certificate in the TPM";
        for (std::size_t i = 0; i < proof.ignored.size(); ++i)
            result.why_not_certified += (i == 0 ? " (ignored: " : "; ") + proof.ignored[i];
        if (!proof.ignored.empty())
            result.why_not_certified += ")";
    }
    // A root the user put where others may write is no root, and not
    // silently: the EK is trusted on first use instead, and they must know.
    if (!result.why_not_certified.empty()) {
        result.refused_roots = refused_ek_roots(roots);
        for (std::size_t i = 0; i < result.refused_roots.size(); ++i)
            result.why_not_certified += (i == 0 ? "; EK roots not used: " : "; ") + result.refused_roots[i];
    }
    return result;
}

// Trusted roots installed, and none certifies this EK: its certificate may
// be hidden or replaced, so no first use.
void check_certified_when_roots_trusted(const EndorsementKey& result, const EkRoots& roots) {
    if (!result.why_not_certified.empty() && has_trusted_ek_root(roots))
        throw ParentProofFailed("the parent's proof failed: trusted EK roots are installed (" + dirs_text(roots) +
                                "), but this TPM's endorsement key is not certified by one (" +
                                result.why_not_certified +
                                "): something between you and the TPM may hide or replace its certificate. If this "
                                "TPM's EK certificate comes from another root, add that root; if the TPM keeps none "
                                "(its maker publishes it: tpmkey doctor says where), give it once with tpmkey setup "
                                "--ek-cert FILE; if it has none, point the config file's ek-roots at an empty "
                                "directory to trust its EK on first "
                                "use (docs/configuration.md)");
}

// The TPM that holds the EK activates a credential made for the parent's
// name, and gives back its secret: the parent is in that TPM.
void check_parent_activates_credential(Tpm& tpm, const TpmObject& parent, const TPMT_PUBLIC& area,
                                       const ProofEk& proof) {
    // The secret and the TPM's answer are wiped on every way out (a
    // refusal included): SecretBytes.
    SecretBytes secret(32);
    if (RAND_bytes(secret.data(), static_cast<int>(secret.size())) != 1)
        throw Error("cannot get random bytes (OpenSSL)");
    const Credential credential = make_credential(proof.ek_public, tpm_name(area), secret);
    SecretBytes answer;
    try {
        answer = activate_credential(tpm, parent, proof.ek, *proof.ek_template, credential);
    } catch (const CredentialRefused& e) {
        throw ParentProofFailed("the parent's proof failed: the TPM that holds the endorsement key did not activate "
                                "a credential for the parent's name (" +
                                std::string(e.what()) + "); it is not the storage key it claims to be");
    } catch (const TpmError& e) {
        if (e.tpm_unreachable())
            throw;
        const std::string text = "the TPM did not complete the parent's proof (" + std::string(e.what()) +
                                 "): this says nothing against the storage key, but it is not proven";
        // A refused authorisation is no key's PIN (the module counts a
        // TpmError with BAD_AUTH at a login as a wrong one).
        if (e.is(TPM2_RC_BAD_AUTH) || e.is(TPM2_RC_AUTH_FAIL))
            throw Error(text);
        // Otherwise the same code, so that diagnose() and the module (a
        // full TPM is made room in, then asked again) read it as before.
        throw TpmError(e.step(), e.rc(), text, e.handle());
    }
    if (answer.size() != secret.size() || CRYPTO_memcmp(answer.data(), secret.data(), secret.size()) != 0)
        throw ParentProofFailed("the parent's proof failed: the TPM returned a different secret from the credential");
}

}  // namespace

EndorsementKey prove_parent(Tpm& tpm, const TpmObject& parent, const TPM2B_PUBLIC& parent_public,
                            const EkRoots& roots) {
    const TPMT_PUBLIC& area = parent_public.publicArea;
    check_parent_bound_to_tpm(area);
    check_parent_not_admin_by_policy(area);
    ProofEk proof;
    find_ek_certified_in_nv(tpm, proof);
    find_ek_otherwise(tpm, proof);
    EndorsementKey result = judge_ek_certificate(proof, roots);
    check_certified_when_roots_trusted(result, roots);
    check_parent_activates_credential(tpm, parent, area, proof);

    result.certified = result.why_not_certified.empty();
    result.name_pin = "ek:" + hex(tpm_name(proof.ek_public));
    result.pin = result.certified ? "cert:" + sha256_hex(proof.certificate->der) : result.name_pin;
    return result;
}

bool same_endorsement_key(const std::string& pinned, const EndorsementKey& ek) {
    return !pinned.empty() && (pinned == ek.pin || (ek.certified && pinned == ek.name_pin));
}

}  // namespace tpmkey
