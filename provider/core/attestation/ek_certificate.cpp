#include "core/attestation/ek_certificate.hpp"

#include "core/base/error.hpp"
#include "core/files/config.hpp"
#include "core/files/file_read.hpp"
#include "core/keys/public_key.hpp"

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cstring>

namespace tpmkey {

namespace {

// A root or intermediate certificate file (PEM, may hold several).
constexpr std::size_t max_root_file_size = 1024 * 1024;

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

bool self_signed(X509* cert) { return X509_check_issued(cert, cert) == X509_V_OK; }

}  // namespace

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

std::string name_line(const X509_NAME* name) {
    const Bio bio(BIO_new(BIO_s_mem()));
    if (!bio || X509_NAME_print_ex(bio.get(), name, 0, XN_FLAG_ONELINE & ~ASN1_STRFLGS_ESC_MSB) < 0)
        return "?";
    char* text = nullptr;
    const long size = BIO_get_mem_data(bio.get(), &text);
    return std::string(text, static_cast<std::size_t>(size));
}

EkRoots default_ek_roots() {
    const Config config = load_config();
    if (!config.ek_roots.empty())
        return {config.ek_roots, {}};
    EkRoots roots{{"/etc/tpmkey/ek-roots"}, {TPMKEY_EK_ROOTS_DIR}};
    const std::filesystem::path config_file = config_file_path();
    if (!config_file.empty())
        roots.dirs.push_back(config_file.parent_path() / "ek-roots");
    return roots;
}

namespace {

// Adds the certificates of the root directories: self-signed ones to
// `store` as trusted roots, the others to `untrusted` as intermediates.
// Returns how many roots were added.
int add_ek_roots(const std::vector<std::filesystem::path>& dirs, X509_STORE* store, STACK_OF(X509)* untrusted,
                 std::vector<std::string>* refused = nullptr) {
    int trusted = 0;
    for (const std::filesystem::path& dir : dirs) {
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
            } catch (const ReplaceableFile& e) {
                // Not silently: whoever put a root there meant it to count.
                if (refused)
                    refused->push_back(e.what());
            } catch (const Error&) {
                // Not a certificate file we can use: skipped, as `openssl
                // rehash` skips what it cannot read.
            }
        }
    }
    return trusted;
}

}  // namespace

std::string dirs_text(const EkRoots& roots) {
    std::string dirs;
    for (const auto& dir : roots.dirs)
        dirs += (dirs.empty() ? "" : ", ") + dir.string();
    for (const auto& dir : roots.shipped)
        dirs += (dirs.empty() ? "" : ", ") + dir.string();
    return dirs.empty() ? std::string("(no directory)") : dirs;
}

std::vector<std::string> refused_ek_roots(const EkRoots& roots) {
    const X509Store store(X509_STORE_new());
    const X509Stack untrusted(sk_X509_new_null());
    if (!store || !untrusted)
        throw Error("cannot verify a certificate chain (OpenSSL)");
    std::vector<std::string> refused;
    (void)add_ek_roots(roots.dirs, store.get(), untrusted.get(), &refused);
    (void)add_ek_roots(roots.shipped, store.get(), untrusted.get(), &refused);
    return refused;
}

bool has_trusted_ek_root(const EkRoots& roots) {
    const X509Store store(X509_STORE_new());
    const X509Stack untrusted(sk_X509_new_null());
    if (!store || !untrusted)
        throw Error("cannot verify a certificate chain (OpenSSL)");
    return add_ek_roots(roots.dirs, store.get(), untrusted.get()) > 0;
}

std::string ek_chain_problem(std::span<const std::uint8_t> certificate, const EkRoots& roots,
                             std::optional<std::time_t> at) {
    const unsigned char* p = certificate.data();
    const X509Cert leaf(d2i_X509(nullptr, &p, static_cast<long>(certificate.size())));
    if (!leaf || p != certificate.data() + certificate.size())
        return "not an X.509 certificate";
    const std::string not_ek = ek_profile_problem(leaf.get());
    if (!not_ek.empty())
        return "not an EK certificate (TCG EK Credential Profile): " + not_ek;
    const X509Store store(X509_STORE_new());
    const X509Stack untrusted(sk_X509_new_null());
    if (!store || !untrusted)
        throw Error("cannot verify a certificate chain (OpenSSL)");
    if (add_ek_roots(roots.dirs, store.get(), untrusted.get()) +
            add_ek_roots(roots.shipped, store.get(), untrusted.get()) ==
        0)
        return "no trusted EK root certificate in " + dirs_text(roots);
    X509_STORE_set_verify_cb(store.get(), forgive_tcg_extensions);
    const X509StoreCtx ctx(X509_STORE_CTX_new());
    if (!ctx || X509_STORE_CTX_init(ctx.get(), store.get(), leaf.get(), untrusted.get()) != 1)
        throw Error("cannot verify a certificate chain (OpenSSL)");
    if (at)
        X509_STORE_CTX_set_time(ctx.get(), 0, *at);
    if (X509_verify_cert(ctx.get()) == 1)
        return {};
    return X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get()));
}

namespace {

std::string dotted(const ASN1_OBJECT* object) {
    char text[128];
    const int n = OBJ_obj2txt(text, sizeof text, object, 1);
    return n > 0 && static_cast<std::size_t>(n) < sizeof text ? std::string(text) : std::string();
}

std::string string_of(const ASN1_STRING* value) {
    unsigned char* utf8 = nullptr;
    const int n = ASN1_STRING_to_UTF8(&utf8, value);
    if (n < 0)
        return {};
    std::string out(reinterpret_cast<char*>(utf8), static_cast<std::size_t>(n));
    OPENSSL_free(utf8);
    return out;
}

using GeneralNames = Owned<GENERAL_NAMES, GENERAL_NAMES_free>;
using KeyPurposes = Owned<EXTENDED_KEY_USAGE, EXTENDED_KEY_USAGE_free>;

constexpr const char* tcg_kp_ek_certificate = "2.23.133.8.1";

}  // namespace

CertifiedTpm tpm_identity_of(X509* certificate) {
    CertifiedTpm id;
    const GeneralNames names(
        static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(certificate, NID_subject_alt_name, nullptr, nullptr)));
    ERR_clear_error();
    if (!names)
        return id;
    // Makers put the three attributes in one directoryName, as one
    // multi-valued RDN (a SET, in whatever order) or as three RDNs: each
    // attribute is looked up by its OID wherever it is.
    for (int i = 0; i < sk_GENERAL_NAME_num(names.get()); ++i) {
        const GENERAL_NAME* name = sk_GENERAL_NAME_value(names.get(), i);
        if (name->type != GEN_DIRNAME)
            continue;
        for (int j = 0; j < X509_NAME_entry_count(name->d.directoryName); ++j) {
            const X509_NAME_ENTRY* entry = X509_NAME_get_entry(name->d.directoryName, j);
            const std::string oid = dotted(X509_NAME_ENTRY_get_object(entry));
            std::string* field = oid == "2.23.133.2.1"   ? &id.manufacturer
                                 : oid == "2.23.133.2.2" ? &id.model
                                 : oid == "2.23.133.2.3" ? &id.version
                                                         : nullptr;
            if (field && field->empty())
                *field = string_of(X509_NAME_ENTRY_get_data(entry));
        }
    }
    return id;
}

std::string ek_profile_problem(X509* certificate) {
    // A CA (or a key that may sign certificates) is no TPM's EK.
    const std::uint32_t flags = X509_get_extension_flags(certificate);
    if (flags & EXFLAG_INVALID)
        return "its extensions cannot be read";
    if (flags & EXFLAG_CA)
        return "it is a CA certificate (basicConstraints cA)";
    const std::uint32_t usage = X509_get_key_usage(certificate);  // UINT32_MAX: no keyUsage
    if (usage != UINT32_MAX && (usage & (KU_KEY_CERT_SIGN | KU_CRL_SIGN)))
        return "its key usage lets it sign certificates";

    // The profile makes extendedKeyUsage optional and, where present,
    // asks for the EK key purpose; every real EK certificate collected
    // (test/data/ek-certs) has it. So one that is present must name it (a
    // TLS or platform certificate names serverAuth or
    // tcg-kp-PlatformCertificate), and one without it passes on the other
    // rules.
    if (X509_get_ext_by_NID(certificate, NID_ext_key_usage, -1) >= 0) {
        const KeyPurposes purposes(
            static_cast<EXTENDED_KEY_USAGE*>(X509_get_ext_d2i(certificate, NID_ext_key_usage, nullptr, nullptr)));
        ERR_clear_error();
        if (!purposes)
            return "its extended key usage cannot be read";
        bool ek = false;
        for (int i = 0; i < sk_ASN1_OBJECT_num(purposes.get()); ++i)
            ek = ek || dotted(sk_ASN1_OBJECT_value(purposes.get(), i)) == tcg_kp_ek_certificate;
        if (!ek)
            return "its extended key usage does not name the EK certificate purpose 2.23.133.8.1";
    }

    const CertifiedTpm id = tpm_identity_of(certificate);
    if (id.manufacturer.empty() || id.model.empty() || id.version.empty())
        return "its subjectAltName does not name the TPM's manufacturer, model and version (2.23.133.2.1-3)";

    // An EK decrypts (RSA) or agrees a key (ECC): TPM2_ActivateCredential.
    EVP_PKEY* key = X509_get0_pubkey(certificate);
    ERR_clear_error();
    const int type = key ? EVP_PKEY_get_base_id(key) : EVP_PKEY_NONE;
    if (type != EVP_PKEY_RSA && type != EVP_PKEY_EC)
        return "its key is neither RSA nor ECC";
    const std::uint32_t needed = type == EVP_PKEY_RSA ? KU_KEY_ENCIPHERMENT : KU_KEY_AGREEMENT;
    if (usage == UINT32_MAX || !(usage & needed))
        return std::string("its key usage lacks ") +
               (type == EVP_PKEY_RSA ? "keyEncipherment (RSA)" : "keyAgreement (ECC)");
    return {};
}

TPMT_PUBLIC ek_public_of(X509* certificate, const EkTemplate& ek_template) {
    TPMT_PUBLIC area = ek_public_template(ek_template).publicArea;
    EVP_PKEY* key = X509_get0_pubkey(certificate);
    const std::string wrong = std::string("the EK certificate's key is not one of template ") + ek_template.label +
                              " (" + ek_template.algorithm + ")";
    if (!key)
        throw Error(wrong);
    if (area.type == TPM2_ALG_ECC) {
        // The uncompressed point 04||X||Y, X and Y of the curve's size.
        std::uint8_t point[1 + 2 * sizeof area.unique.ecc.x.buffer];
        std::size_t size = 0;
        if (EVP_PKEY_get_octet_string_param(key, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, point, sizeof point, &size) != 1 ||
            size < 3 || size % 2 == 0 || point[0] != 0x04)
            throw Error(wrong);
        const std::size_t half = (size - 1) / 2;
        set_tpm2b(area.unique.ecc.x, std::span(point + 1, half), "the EK's point");
        set_tpm2b(area.unique.ecc.y, std::span(point + 1 + half, half), "the EK's point");
    } else {
        BIGNUM* n = nullptr;
        if (EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_RSA_N, &n) != 1)
            throw Error(wrong);
        const Owned<BIGNUM, BN_free> modulus(n);
        Bytes bytes(static_cast<std::size_t>(BN_num_bytes(n)));
        BN_bn2bin(n, bytes.data());
        set_tpm2b(area.unique.rsa, bytes, "the EK's modulus");
    }
    // The area must describe exactly the certificate's key (curve, size,
    // exponent): what the TPM re-creates from the template, or nothing.
    try {
        if (EVP_PKEY_eq(PublicKey(area).to_evp().get(), key) == 1)
            return area;
    } catch (const Error&) {
    }
    ERR_clear_error();
    throw Error(wrong);
}

}  // namespace tpmkey
