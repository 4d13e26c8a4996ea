#include "core/trust/endorsement.hpp"

#include "core/base/error.hpp"
#include "core/base/home.hpp"
#include "core/base/owned.hpp"
#include "core/files/config.hpp"
#include "core/files/file_read.hpp"
#include "core/keys/key_parts.hpp"
#include "core/keys/public_key.hpp"
#include "core/tpm/tpm_queries.hpp"

#include <openssl/crypto.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace tpmkey {

namespace {

using X509Store = Owned<X509_STORE, X509_STORE_free>;
using X509StoreCtx = Owned<X509_STORE_CTX, X509_STORE_CTX_free>;
void free_x509_stack(STACK_OF(X509) * stack) noexcept { sk_X509_pop_free(stack, X509_free); }
using X509Stack = Owned<STACK_OF(X509), free_x509_stack>;

// An EK certificate is a few hundred bytes to 2 KiB; an NV index claiming
// more is not one (and is not read).
constexpr std::size_t max_certificate_size = 8192;
// A root or intermediate certificate file (PEM, may hold several).
constexpr std::size_t max_root_file_size = 1024 * 1024;

// The NV indices of EK certificates in the TCG EK Credential Profile: the
// low range (0x01C00002, 0x01C0000A) and the high range (0x01C00012 on).
constexpr std::uint32_t first_cert_index = 0x01C00002;
constexpr std::uint32_t last_cert_index = 0x01C0001C;

// The certificates in one file: PEM (one or more) or a single DER.
std::vector<X509Cert> certificates_in(const Bytes& data) {
    std::vector<X509Cert> out;
    const Bio bio(BIO_new_mem_buf(data.data(), static_cast<int>(data.size())));
    while (bio) {
        X509Cert cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
        if (!cert)
            break;
        out.push_back(std::move(cert));
    }
    if (out.empty()) {
        const unsigned char* p = data.data();
        X509Cert cert(d2i_X509(nullptr, &p, static_cast<long>(data.size())));
        if (cert)
            out.push_back(std::move(cert));
    }
    return out;
}

bool self_signed(X509* cert) { return X509_check_issued(cert, cert) == X509_V_OK; }

// EK certificates (TCG EK Credential Profile) may carry critical
// extensions a general X.509 library does not handle: their subjectAltName
// is a directoryName with the TPM's manufacturer, model and version, and is
// critical when the subject is empty; subjectDirectoryAttributes (2.5.29.9:
// TPM specification, security assertions) may be critical too. Verifiers
// of TPM certificates built on Go's crypto/x509 (go-webauthn's TPM
// attestation, EK chain checks like go-attestation's) take the SAN's OID
// out of the certificate's UnhandledCriticalExtensions and verify the rest
// as usual. OpenSSL parses the SAN itself, so here that leaves
// subjectDirectoryAttributes; the verify callback forgives
// X509_V_ERR_UNHANDLED_CRITICAL_EXTENSION for the EK certificate itself
// (depth 0) only, and only when every critical extension OpenSSL does not
// support is one of these two. Any other error, and any such extension on
// a CA certificate, still fails (test/tpm/ek-cross-check.sh).
int forgive_tcg_extensions(int ok, X509_STORE_CTX* ctx) {
    if (ok || X509_STORE_CTX_get_error(ctx) != X509_V_ERR_UNHANDLED_CRITICAL_EXTENSION ||
        X509_STORE_CTX_get_error_depth(ctx) != 0)
        return ok;
    X509* cert = X509_STORE_CTX_get_current_cert(ctx);
    for (int i = 0; i < X509_get_ext_count(cert); ++i) {
        X509_EXTENSION* ext = X509_get_ext(cert, i);
        if (!X509_EXTENSION_get_critical(ext) || X509_supported_extension(ext))
            continue;
        const int nid = OBJ_obj2nid(X509_EXTENSION_get_object(ext));
        if (nid != NID_subject_directory_attributes && nid != NID_subject_alt_name)
            return 0;
    }
    X509_STORE_CTX_set_error(ctx, X509_V_OK);
    return 1;
}

struct NvCertificate {
    std::uint32_t index = 0;
    Bytes der;  // exactly the certificate, without the index's padding
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

// The first certificate in ek_templates()' order, if any.
const EkTemplate* certified_template(const std::vector<std::uint32_t>& indices) {
    for (const EkTemplate& t : ek_templates())
        if (holds(indices, t.cert_index))
            return &t;
    return nullptr;
}

// TPM2_NV_ReadPublic, then TPM2_NV_Read in pieces of at most
// TPM_PT_NV_BUFFER_MAX, authorised by the index itself (TPMA_NV_AUTHREAD,
// empty auth value, as the profile defines EK certificate indices).
NvCertificate read_certificate(Tpm& tpm, std::uint32_t index) {
    const std::string where = "the EK certificate at NV index " + handle_text(index);
    ESYS_TR handle = ESYS_TR_NONE;
    check_rc(Esys_TR_FromTPMPublic(tpm.esys(), index, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &handle),
             "TPM2_NV_ReadPublic of the EK certificate");
    const TpmObject nv(tpm, handle, TpmObject::Kind::persistent);
    EsysPtr<TPM2B_NV_PUBLIC> nv_public;
    check_rc(Esys_NV_ReadPublic(tpm.esys(), nv.handle(), ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, out_ptr(nv_public),
                                nullptr),
             "TPM2_NV_ReadPublic of the EK certificate");
    const std::size_t size = nv_public->nvPublic.dataSize;
    if (size == 0 || size > max_certificate_size)
        throw ParentProofFailed(where + " claims " + std::to_string(size) + " bytes; refusing to read it");
    if (!(nv_public->nvPublic.attributes & TPMA_NV_AUTHREAD))
        throw ParentProofFailed(where + " cannot be read with its own (empty) auth value");
    const auto props = tpm_properties(tpm, TPM2_PT_NV_BUFFER_MAX, 1);
    const auto max = props.find(TPM2_PT_NV_BUFFER_MAX);
    const std::size_t chunk = std::min<std::size_t>(max == props.end() || max->second == 0 ? 512 : max->second,
                                                    sizeof(TPM2B_MAX_NV_BUFFER::buffer));
    Bytes data;
    while (data.size() < size) {
        const auto piece = static_cast<UINT16>(std::min(chunk, size - data.size()));
        EsysPtr<TPM2B_MAX_NV_BUFFER> out;
        check_rc(Esys_NV_Read(tpm.esys(), nv.handle(), nv.handle(), ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE,
                              piece, static_cast<UINT16>(data.size()), out_ptr(out)),
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
    return {index, std::move(data), std::move(cert)};
}

std::string one_line(const X509_NAME* name) {
    const Bio bio(BIO_new(BIO_s_mem()));
    if (!bio || X509_NAME_print_ex(bio.get(), name, 0, XN_FLAG_ONELINE & ~ASN1_STRFLGS_ESC_MSB) < 0)
        return "?";
    char* text = nullptr;
    const long size = BIO_get_mem_data(bio.get(), &text);
    return std::string(text, static_cast<std::size_t>(size));
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

}  // namespace

EkRoots default_ek_roots() {
    const Config config = load_config();
    if (!config.ek_roots.empty())
        return {config.ek_roots};
    EkRoots roots{{"/etc/tpmkey/ek-roots"}};
    const std::filesystem::path config_file = config_file_path();
    if (!config_file.empty())
        roots.dirs.push_back(config_file.parent_path() / "ek-roots");
    return roots;
}

namespace {

// Adds the certificates of the root directories: self-signed ones to
// `store` as trusted roots, the others to `untrusted` as intermediates.
// Returns how many roots were added.
int add_ek_roots(const EkRoots& roots, X509_STORE* store, STACK_OF(X509)* untrusted) {
    int trusted = 0;
    for (const std::filesystem::path& dir : roots.dirs) {
        std::error_code ec;
        std::vector<std::filesystem::path> files;
        for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
            files.push_back(entry.path());
        std::sort(files.begin(), files.end());
        for (const std::filesystem::path& file : files) {
            try {
                const FileRead read = read_regular_file(file, max_root_file_size);
                // A root someone else could have put there is no root.
                check_not_replaceable(file, read, "EK root certificate", "the trusted EK roots");
                for (X509Cert& cert : certificates_in(read.data)) {
                    if (self_signed(cert.get())) {
                        if (X509_STORE_add_cert(store, cert.get()) == 1)
                            ++trusted;
                    } else if (sk_X509_push(untrusted, cert.get()) > 0) {
                        (void)cert.release();
                    }
                }
            } catch (const Error&) {
                // Not a certificate file we can use: skipped, as `openssl
                // rehash` skips what it cannot read.
            }
        }
    }
    return trusted;
}

std::string dirs_text(const EkRoots& roots) {
    std::string dirs;
    for (const auto& dir : roots.dirs)
        dirs += (dirs.empty() ? "" : ", ") + dir.string();
    return dirs.empty() ? std::string("(no directory)") : dirs;
}

// Whether a trusted EK root is installed at all: then an EK that is not
// certified by one is refused, not trusted on first use (an interposer
// could hide the certificate, or show one that does not chain).
bool has_trusted_ek_root(const EkRoots& roots) {
    const X509Store store(X509_STORE_new());
    const X509Stack untrusted(sk_X509_new_null());
    if (!store || !untrusted)
        throw Error("cannot verify a certificate chain (OpenSSL)");
    return add_ek_roots(roots, store.get(), untrusted.get()) > 0;
}

}  // namespace

std::string ek_chain_problem(std::span<const std::uint8_t> certificate, const EkRoots& roots) {
    const unsigned char* p = certificate.data();
    const X509Cert leaf(d2i_X509(nullptr, &p, static_cast<long>(certificate.size())));
    if (!leaf)
        return "not an X.509 certificate";
    const X509Store store(X509_STORE_new());
    const X509Stack untrusted(sk_X509_new_null());
    if (!store || !untrusted)
        throw Error("cannot verify a certificate chain (OpenSSL)");
    if (add_ek_roots(roots, store.get(), untrusted.get()) == 0)
        return "no trusted EK root certificate in " + dirs_text(roots);
    X509_STORE_set_verify_cb(store.get(), forgive_tcg_extensions);
    const X509StoreCtx ctx(X509_STORE_CTX_new());
    if (!ctx || X509_STORE_CTX_init(ctx.get(), store.get(), leaf.get(), untrusted.get()) != 1)
        throw Error("cannot verify a certificate chain (OpenSSL)");
    if (X509_verify_cert(ctx.get()) == 1)
        return {};
    return X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get()));
}

TpmObject create_ek(Tpm& tpm, const EkTemplate& ek_template, TPMT_PUBLIC& out) {
    const TPM2B_PUBLIC in_public = ek_public_template(ek_template);
    const TPM2B_SENSITIVE_CREATE sensitive{};
    const TPM2B_DATA outside_info{};
    const TPML_PCR_SELECTION pcrs{};
    ESYS_TR handle = ESYS_TR_NONE;
    EsysPtr<TPM2B_PUBLIC> pub;
    // The endorsement hierarchy's auth value is empty (as for the owner
    // hierarchy, we support no other): the password session carries nothing.
    check_rc(Esys_CreatePrimary(tpm.esys(), ESYS_TR_RH_ENDORSEMENT, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE,
                                &sensitive, &in_public, &outside_info, &pcrs, &handle, out_ptr(pub), nullptr, nullptr,
                                nullptr),
             "TPM2_CreatePrimary of the endorsement key");
    TpmObject ek(tpm, handle, TpmObject::Kind::transient);
    out = pub->publicArea;
    return ek;
}

Bytes activate_credential(Tpm& tpm, const TpmObject& object, const TpmObject& ek, const EkTemplate& ek_template,
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
    check_rc(Esys_PolicySecret(tpm.esys(), ESYS_TR_RH_ENDORSEMENT, session.handle(), ESYS_TR_PASSWORD, ESYS_TR_NONE,
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
    check_rc(Esys_ActivateCredential(tpm.esys(), object.handle(), ek.handle(), ESYS_TR_PASSWORD, session.handle(),
                                     ESYS_TR_NONE, &blob, &seed, out_ptr(secret)),
             "TPM2_ActivateCredential");
    Bytes out(secret->buffer, secret->buffer + secret->size);
    OPENSSL_cleanse(secret->buffer, sizeof secret->buffer);
    return out;
}

EndorsementKey prove_parent(Tpm& tpm, const TpmObject& parent, const TPM2B_PUBLIC& parent_public,
                            const EkRoots& roots) {
    // The rule the proof rests on (docs/security.md, "A parent proven by
    // the endorsement key"): no TPM loads an object whose private part
    // came from outside with fixedTPM or fixedParent SET (LoadExternal,
    // Import), so a parent without them proves nothing even though the
    // TPM activates a credential for it.
    const TPMT_PUBLIC& area = parent_public.publicArea;
    constexpr TPMA_OBJECT bound = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN;
    if ((area.objectAttributes & bound) != bound)
        throw ParentProofFailed("the parent's proof failed: it lacks fixedTPM, fixedParent or sensitiveDataOrigin, "
                                "so its private part may be known outside the TPM");
    // Nor may it be usable by policy in the ADMIN role (adminWithPolicy),
    // the role TPM2_ActivateCredential asks of it: an object loaded with
    // its public area only (TPM2_LoadExternal) may carry any attributes and
    // has no auth value, but may have a policy. Without adminWithPolicy the
    // ADMIN role needs the auth value, which only an object with its
    // private part has (a storage key never has it: check_storage_key).
    if (area.objectAttributes & TPMA_OBJECT_ADMINWITHPOLICY)
        throw ParentProofFailed("the parent's proof failed: it may be used by a policy in the ADMIN role "
                                "(adminWithPolicy), as an object the TPM holds without its private part could");

    EndorsementKey result;
    std::optional<NvCertificate> certificate;
    const EkTemplate* ek_template = &uncertified_ek_template();
    const std::vector<std::uint32_t> indices = ek_nv_indices(tpm);
    if (const EkTemplate* t = certified_template(indices)) {
        certificate = read_certificate(tpm, t->cert_index);
        ek_template = t;
    }
    TPMT_PUBLIC ek_public{};
    const TpmObject ek = create_ek(tpm, *ek_template, ek_public);
    result.algorithm = ek_template->algorithm;
    if (certificate) {
        result.nv_index = certificate->index;
        result.issuer = one_line(X509_get_issuer_name(certificate->cert.get()));
        // The certificate is about the EK the TPM re-creates from its
        // template, or about nothing we can use.
        const EvpPkey ek_key = PublicKey(ek_public).to_evp();
        if (EVP_PKEY_eq(X509_get0_pubkey(certificate->cert.get()), ek_key.get()) != 1) {
            // The low range lets a manufacturer put an EK nonce or template
            // in NV (index + 1, + 2) that the EK was made with; tpmkey
            // re-creates the EK from the profile's template only.
            const bool own_template = !ek_template->high_range && (holds(indices, ek_template->cert_index + 1) ||
                                                                   holds(indices, ek_template->cert_index + 2));
            throw ParentProofFailed("the parent's proof failed: the endorsement key the TPM re-created from template " +
                                    std::string(ek_template->label) + " is not the key of its certificate at " +
                                    handle_text(certificate->index) +
                                    (own_template ? " (the TPM keeps an EK nonce or template in NV, which tpmkey does "
                                                    "not use)"
                                                  : ""));
        }
        result.why_not_certified = ek_chain_problem(certificate->der, roots);
        if (!result.why_not_certified.empty())
            result.why_not_certified = "no trusted root: " + result.why_not_certified;
    } else {
        result.why_not_certified = "no EK certificate in the TPM";
    }
    if (!result.why_not_certified.empty() && has_trusted_ek_root(roots))
        throw ParentProofFailed("the parent's proof failed: trusted EK roots are installed (" + dirs_text(roots) +
                                "), but this TPM's endorsement key is not certified by one (" +
                                result.why_not_certified +
                                "): something between you and the TPM may hide or replace its certificate. If this "
                                "TPM's EK certificate comes from another root, add that root; if it has none, "
                                "point the config file's ek-roots at an empty directory to trust its EK on first "
                                "use (docs/configuration.md)");

    Bytes secret(32);
    if (RAND_bytes(secret.data(), static_cast<int>(secret.size())) != 1)
        throw Error("cannot get random bytes (OpenSSL)");
    const Credential credential = make_credential(ek_public, tpm_name(area), secret);
    Bytes answer;
    try {
        answer = activate_credential(tpm, parent, ek, *ek_template, credential);
    } catch (const TpmError& e) {
        if (e.tpm_unreachable())
            throw;
        throw ParentProofFailed("the parent's proof failed: the TPM that holds the endorsement key did not activate "
                                "a credential for the parent's name (" + std::string(e.what()) +
                                "); it is not the storage key it claims to be");
    }
    const bool same = answer.size() == secret.size() && CRYPTO_memcmp(answer.data(), secret.data(), secret.size()) == 0;
    OPENSSL_cleanse(answer.data(), answer.size());
    if (!same)
        throw ParentProofFailed("the parent's proof failed: the TPM returned a different secret from the credential");

    result.certified = result.why_not_certified.empty();
    result.pin = result.certified ? "cert:" + sha256_hex(certificate->der) : "ek:" + hex(tpm_name(ek_public));
    return result;
}

}  // namespace tpmkey
