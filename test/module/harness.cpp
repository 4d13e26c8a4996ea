#include "harness.hpp"

#include <dlfcn.h>

#include <iostream>

#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace mt {

namespace {

CK_FUNCTION_LIST* function_list = nullptr;

struct State {
    std::vector<TestKey> keys;
    std::filesystem::path dir;
    std::string tcti;
    std::filesystem::path fixtures;
};

State& state() {
    static State s;
    return s;
}

struct BioFree {
    void operator()(BIO* p) const noexcept { BIO_free(p); }
};
struct X509Free {
    void operator()(X509* p) const noexcept { X509_free(p); }
};
struct CtxFree {
    void operator()(EVP_PKEY_CTX* p) const noexcept { EVP_PKEY_CTX_free(p); }
};
struct MdCtxFree {
    void operator()(EVP_MD_CTX* p) const noexcept { EVP_MD_CTX_free(p); }
};
struct SigFree {
    void operator()(ECDSA_SIG* p) const noexcept { ECDSA_SIG_free(p); }
};

EvpPkey public_key_from_ssh(const std::filesystem::path& pub) {
    int status = 0;
    const std::string pem = run("ssh-keygen -e -m PKCS8 -f " + shell_quote(pub.string()), &status);
    if (status != 0)
        throw std::runtime_error("ssh-keygen -e -m PKCS8 -f " + pub.string() + " failed");
    std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
    EvpPkey key(PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr));
    if (!key)
        throw std::runtime_error("OpenSSL cannot read the key ssh-keygen converted from " + pub.string());
    return key;
}

Bytes der_of(EVP_PKEY* key) {
    const int n = i2d_PUBKEY(key, nullptr);
    Bytes out(static_cast<std::size_t>(n));
    unsigned char* p = out.data();
    i2d_PUBKEY(key, &p);
    return out;
}

// A certificate for the key, issued by a throwaway CA key: the module must
// serve it as a third object with the key's CKA_ID.
Bytes make_certificate(EVP_PKEY* subject_key, const std::string& cn, const std::filesystem::path& out) {
    EvpPkey ca(EVP_EC_gen("P-256"));
    std::unique_ptr<X509, X509Free> cert(X509_new());
    if (!ca || !cert)
        throw std::runtime_error("OpenSSL cannot make a test certificate");
    X509_set_version(cert.get(), X509_VERSION_3);
    ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 4242);
    X509_gmtime_adj(X509_getm_notBefore(cert.get()), 0);
    X509_gmtime_adj(X509_getm_notAfter(cert.get()), 3600L * 24);
    X509_NAME* name = X509_get_subject_name(cert.get());
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
    X509_NAME* issuer = X509_get_issuer_name(cert.get());
    X509_NAME_add_entry_by_txt(issuer, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("test CA"), -1, -1,
                               0);
    X509_set_pubkey(cert.get(), subject_key);
    if (X509_sign(cert.get(), ca.get(), EVP_sha256()) <= 0)
        throw std::runtime_error("OpenSSL cannot sign the test certificate");
    std::unique_ptr<BIO, BioFree> file(BIO_new_file(out.c_str(), "w"));
    if (!file || PEM_write_bio_X509(file.get(), cert.get()) != 1)
        throw std::runtime_error("cannot write " + out.string());
    unsigned char* der = nullptr;
    const int n = i2d_X509(cert.get(), &der);
    Bytes value(der, der + n);
    OPENSSL_free(der);
    return value;
}

const EVP_MD* md_of(const char* name) {
    const EVP_MD* md = EVP_get_digestbyname(name);
    if (!md)
        throw std::runtime_error(std::string("OpenSSL has no ") + name);
    return md;
}

Bytes ecdsa_der(const TestKey& k, const Bytes& raw) {
    const std::size_t half = (k.bits + 7) / 8;
    if (raw.size() != 2 * half)
        return {};
    std::unique_ptr<ECDSA_SIG, SigFree> sig(ECDSA_SIG_new());
    BIGNUM* r = BN_bin2bn(raw.data(), static_cast<int>(half), nullptr);
    BIGNUM* s = BN_bin2bn(raw.data() + half, static_cast<int>(half), nullptr);
    ECDSA_SIG_set0(sig.get(), r, s);
    unsigned char* der = nullptr;
    const int n = i2d_ECDSA_SIG(sig.get(), &der);
    Bytes out(der, der + n);
    OPENSSL_free(der);
    return out;
}

}  // namespace

CK_FUNCTION_LIST* p11() { return function_list; }
void set_p11(CK_FUNCTION_LIST* list) { function_list = list; }

bool load_module(const std::string& path, const char* program) {
    // RTLD_LOCAL: the module's symbols must not be needed by anyone.
    void* lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        std::cerr << program << ": dlopen " << path << ": " << ::dlerror() << "\n";
        return false;
    }
    auto get_function_list = reinterpret_cast<CK_C_GetFunctionList>(::dlsym(lib, "C_GetFunctionList"));
    CK_FUNCTION_LIST* list = nullptr;
    if (!get_function_list || get_function_list(&list) != CKR_OK || !list) {
        std::cerr << program << ": " << path << " has no working C_GetFunctionList\n";
        return false;
    }
    set_p11(list);
    return true;
}

std::string rv_name(CK_RV rv) {
    switch (rv) {
#define NAME(x) \
    case x: return #x;
        NAME(CKR_OK)
        NAME(CKR_CANCEL)
        NAME(CKR_HOST_MEMORY)
        NAME(CKR_SLOT_ID_INVALID)
        NAME(CKR_GENERAL_ERROR)
        NAME(CKR_FUNCTION_FAILED)
        NAME(CKR_ARGUMENTS_BAD)
        NAME(CKR_CANT_LOCK)
        NAME(CKR_ATTRIBUTE_READ_ONLY)
        NAME(CKR_ATTRIBUTE_SENSITIVE)
        NAME(CKR_ATTRIBUTE_TYPE_INVALID)
        NAME(CKR_ATTRIBUTE_VALUE_INVALID)
        NAME(CKR_DATA_INVALID)
        NAME(CKR_DATA_LEN_RANGE)
        NAME(CKR_DEVICE_ERROR)
        NAME(CKR_DEVICE_MEMORY)
        NAME(CKR_DEVICE_REMOVED)
        NAME(CKR_FUNCTION_CANCELED)
        NAME(CKR_FUNCTION_NOT_PARALLEL)
        NAME(CKR_FUNCTION_NOT_SUPPORTED)
        NAME(CKR_KEY_HANDLE_INVALID)
        NAME(CKR_KEY_TYPE_INCONSISTENT)
        NAME(CKR_KEY_FUNCTION_NOT_PERMITTED)
        NAME(CKR_MECHANISM_INVALID)
        NAME(CKR_MECHANISM_PARAM_INVALID)
        NAME(CKR_OBJECT_HANDLE_INVALID)
        NAME(CKR_OPERATION_ACTIVE)
        NAME(CKR_OPERATION_NOT_INITIALIZED)
        NAME(CKR_PIN_INCORRECT)
        NAME(CKR_PIN_LEN_RANGE)
        NAME(CKR_PIN_LOCKED)
        NAME(CKR_SESSION_CLOSED)
        NAME(CKR_SESSION_HANDLE_INVALID)
        NAME(CKR_SESSION_PARALLEL_NOT_SUPPORTED)
        NAME(CKR_SESSION_READ_ONLY)
        NAME(CKR_SIGNATURE_INVALID)
        NAME(CKR_SIGNATURE_LEN_RANGE)
        NAME(CKR_TEMPLATE_INCOMPLETE)
        NAME(CKR_TOKEN_NOT_PRESENT)
        NAME(CKR_TOKEN_WRITE_PROTECTED)
        NAME(CKR_USER_ALREADY_LOGGED_IN)
        NAME(CKR_USER_NOT_LOGGED_IN)
        NAME(CKR_USER_TYPE_INVALID)
        NAME(CKR_RANDOM_SEED_NOT_SUPPORTED)
        NAME(CKR_RANDOM_NO_RNG)
        NAME(CKR_BUFFER_TOO_SMALL)
        NAME(CKR_CRYPTOKI_NOT_INITIALIZED)
        NAME(CKR_CRYPTOKI_ALREADY_INITIALIZED)
#undef NAME
    default: {
        char buf[32];
        std::snprintf(buf, sizeof buf, "CK_RV 0x%lx", rv);
        return buf;
    }
    }
}

// ---- Keys ---------------------------------------------------------------------

std::vector<TestKey>& keys() { return state().keys; }

const TestKey& key(const std::string& name) {
    for (const TestKey& k : state().keys)
        if (k.name == name)
            return k;
    throw std::runtime_error("no test key " + name);
}

const std::filesystem::path& key_dir() { return state().dir; }
const std::string& swtpm_tcti() { return state().tcti; }
const std::filesystem::path& fixtures_dir() { return state().fixtures; }

void make_keys(const std::filesystem::path& keygen, const std::filesystem::path& dir) {
    State& s = state();
    s.dir = dir;
    const char* tcti = std::getenv("TPMKEY_TCTI");
    s.tcti = tcti ? tcti : "";
    const char* fixtures = std::getenv("TPMKEY_FIXTURES_DIR");
    s.fixtures = fixtures ? fixtures : TPMKEY_FIXTURES_DIR;
    struct Spec {
        const char* name;
        bool rsa;
        unsigned bits;
        const char* pin;
    };
    // Slot order is the sorted file names.
    const Spec specs[] = {
        {"ec256", false, 256, ""},
        {"ec384", false, 384, "pin-of-ec384"},
        {"rsa2048", true, 2048, ""},
        {"rsa3072", true, 3072, "3072-PIN"},
    };
    for (const Spec& spec : specs) {
        TestKey k;
        k.name = spec.name;
        k.rsa = spec.rsa;
        k.bits = spec.bits;
        k.pin = spec.pin;
        k.tpm = dir / (k.name + ".tpm");
        k.pub = dir / (k.name + ".pub");
        std::string command = shell_quote(keygen.string()) + " -q -t " + (k.rsa ? "rsa" : "ecdsa") + " -b " +
                              std::to_string(k.bits) + " -C module-test -f " + shell_quote(k.tpm.string()) +
                              " --tcti " + shell_quote(s.tcti) + " --no-persist-srk";
        if (k.pin.empty()) {
            command += " -N ''";
        } else {
            const std::filesystem::path pin_file = dir / (k.name + ".pin");
            std::ofstream(pin_file) << k.pin << "\n";
            // Each key a PIN of its own (the keys have different PINs); the
            // shared PIN has its tests in test/e2e/ssh/shared-pin.sh.
            command += " --pin-file " + shell_quote(pin_file.string()) + " --own-pin";
        }
        int status = 0;
        const std::string out = run(command + " 2>&1", &status);
        if (status != 0)
            throw std::runtime_error("tpmkey-keygen failed for " + k.name + ": " + out);
        k.pkey = public_key_from_ssh(k.pub);
        k.spki_der = der_of(k.pkey.get());
        if (k.name == "ec256") {
            k.certificate_der = make_certificate(k.pkey.get(), k.name, dir / "ec256.crt");
            k.has_certificate = true;
        }
        s.keys.push_back(std::move(k));
    }
}

// ---- PKCS#11 helpers --------------------------------------------------------

Initialized::Initialized(CK_VOID_PTR args) { REQUIRE_RV(p11()->C_Initialize(args), CKR_OK); }
Initialized::~Initialized() { p11()->C_Finalize(nullptr); }

Session::Session(CK_SLOT_ID slot, CK_FLAGS extra_flags) {
    REQUIRE_RV(p11()->C_OpenSession(slot, CKF_SERIAL_SESSION | extra_flags, nullptr, nullptr, &handle_), CKR_OK);
}
Session::~Session() {
    if (handle_ != CK_INVALID_HANDLE)
        p11()->C_CloseSession(handle_);
}
void Session::close() {
    CHECK_RV(p11()->C_CloseSession(handle_), CKR_OK);
    handle_ = CK_INVALID_HANDLE;
}

std::vector<CK_SLOT_ID> slot_list() {
    CK_ULONG n = 0;
    REQUIRE_RV(p11()->C_GetSlotList(CK_TRUE, nullptr, &n), CKR_OK);
    std::vector<CK_SLOT_ID> slots(n);
    REQUIRE_RV(p11()->C_GetSlotList(CK_TRUE, slots.data(), &n), CKR_OK);
    slots.resize(n);
    return slots;
}

std::string trimmed(const CK_UTF8CHAR* field, std::size_t size) {
    std::string s(reinterpret_cast<const char*>(field), size);
    while (!s.empty() && s.back() == ' ')
        s.pop_back();
    return s;
}

CK_SLOT_ID slot_of(const std::string& key_name) {
    for (CK_SLOT_ID slot : slot_list()) {
        CK_TOKEN_INFO info;
        REQUIRE_RV(p11()->C_GetTokenInfo(slot, &info), CKR_OK);
        if (trimmed(info.label, sizeof info.label) == key_name)
            return slot;
    }
    FAIL("no token labelled " << key_name);
    return 0;
}

std::vector<CK_OBJECT_HANDLE> find(CK_SESSION_HANDLE s, std::vector<CK_ATTRIBUTE> templ) {
    REQUIRE_RV(p11()->C_FindObjectsInit(s, templ.empty() ? nullptr : templ.data(), templ.size()), CKR_OK);
    std::vector<CK_OBJECT_HANDLE> found;
    while (true) {
        CK_OBJECT_HANDLE batch[2];
        CK_ULONG n = 0;
        REQUIRE_RV(p11()->C_FindObjects(s, batch, 2, &n), CKR_OK);
        REQUIRE(n <= 2);
        if (n == 0)
            break;
        found.insert(found.end(), batch, batch + n);
    }
    REQUIRE_RV(p11()->C_FindObjectsFinal(s), CKR_OK);
    return found;
}

CK_OBJECT_HANDLE find_one(CK_SESSION_HANDLE s, CK_OBJECT_CLASS cls) {
    CK_ATTRIBUTE t{CKA_CLASS, &cls, sizeof cls};
    const auto found = find(s, {t});
    REQUIRE(found.size() == 1);
    return found[0];
}

CK_RV login_with(CK_SESSION_HANDLE s, const std::string& pin, CK_USER_TYPE user) {
    return p11()->C_Login(s, user, reinterpret_cast<CK_UTF8CHAR_PTR>(const_cast<char*>(pin.data())), pin.size());
}

void login(CK_SESSION_HANDLE s, const TestKey& k) { REQUIRE_RV(login_with(s, k.pin), CKR_OK); }

CK_OBJECT_HANDLE private_key(CK_SESSION_HANDLE s, const TestKey& k) {
    if (!k.pin.empty())
        login(s, k);
    return find_one(s, CKO_PRIVATE_KEY);
}

KeySession::KeySession(const TestKey& k) : Session(slot_of(k.name)), priv(private_key(handle(), k)) {}

CK_FLAGS token_flags(CK_SLOT_ID slot) {
    CK_TOKEN_INFO info;
    REQUIRE_RV(p11()->C_GetTokenInfo(slot, &info), CKR_OK);
    return info.flags;
}

void for_each_private_key(std::initializer_list<const char*> names,
                          const std::function<void(const TestKey&, Session&, CK_OBJECT_HANDLE)>& body) {
    for (const char* name : names) {
        const TestKey& k = key(name);
        INFO(k.name);
        KeySession s(k);
        body(k, s, s.priv);
    }
}

Bytes attribute(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE o, CK_ATTRIBUTE_TYPE type) {
    CK_ATTRIBUTE a{type, nullptr, 0};
    REQUIRE_RV(p11()->C_GetAttributeValue(s, o, &a, 1), CKR_OK);
    REQUIRE(a.ulValueLen != CK_UNAVAILABLE_INFORMATION);
    Bytes value(a.ulValueLen);
    a.pValue = value.data();
    REQUIRE_RV(p11()->C_GetAttributeValue(s, o, &a, 1), CKR_OK);
    REQUIRE(a.ulValueLen == value.size());
    return value;
}

CK_ULONG ulong_attribute(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE o, CK_ATTRIBUTE_TYPE type) {
    const Bytes v = attribute(s, o, type);
    REQUIRE(v.size() == sizeof(CK_ULONG));
    CK_ULONG out;
    std::memcpy(&out, v.data(), sizeof out);
    return out;
}

bool bool_attribute(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE o, CK_ATTRIBUTE_TYPE type) {
    const Bytes v = attribute(s, o, type);
    REQUIRE(v.size() == sizeof(CK_BBOOL));
    REQUIRE((v[0] == CK_TRUE || v[0] == CK_FALSE));
    return v[0] == CK_TRUE;
}

Bytes bytes(const std::string& text) { return Bytes(text.begin(), text.end()); }

Bytes random_bytes(std::size_t n) {
    Bytes b(n);
    REQUIRE(RAND_bytes(b.data(), static_cast<int>(n)) == 1);
    return b;
}

std::string hex(const Bytes& b) {
    std::string s;
    char buf[3];
    for (std::uint8_t c : b) {
        std::snprintf(buf, sizeof buf, "%02x", c);
        s += buf;
    }
    return s;
}

Bytes sign(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE key, CK_MECHANISM mechanism, const Bytes& data) {
    REQUIRE_RV(p11()->C_SignInit(s, &mechanism, key), CKR_OK);
    CK_ULONG n = 0;
    REQUIRE_RV(p11()->C_Sign(s, const_cast<CK_BYTE_PTR>(data.data()), data.size(), nullptr, &n), CKR_OK);
    Bytes sig(n);
    REQUIRE_RV(p11()->C_Sign(s, const_cast<CK_BYTE_PTR>(data.data()), data.size(), sig.data(), &n), CKR_OK);
    REQUIRE(n <= sig.size());
    sig.resize(n);
    return sig;
}

Bytes sign_multi(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE key, CK_MECHANISM mechanism, const std::vector<Bytes>& chunks) {
    REQUIRE_RV(p11()->C_SignInit(s, &mechanism, key), CKR_OK);
    for (const Bytes& c : chunks)
        REQUIRE_RV(p11()->C_SignUpdate(s, const_cast<CK_BYTE_PTR>(c.data()), c.size()), CKR_OK);
    CK_ULONG n = 0;
    REQUIRE_RV(p11()->C_SignFinal(s, nullptr, &n), CKR_OK);
    Bytes sig(n);
    REQUIRE_RV(p11()->C_SignFinal(s, sig.data(), &n), CKR_OK);
    REQUIRE(n <= sig.size());
    sig.resize(n);
    return sig;
}

CK_RV p11_verify(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE key, CK_MECHANISM mechanism, const Bytes& data,
                 const Bytes& signature) {
    REQUIRE_RV(p11()->C_VerifyInit(s, &mechanism, key), CKR_OK);
    return p11()->C_Verify(s, const_cast<CK_BYTE_PTR>(data.data()), data.size(),
                           const_cast<CK_BYTE_PTR>(signature.data()), signature.size());
}

CK_RV p11_verify_multi(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE key, CK_MECHANISM mechanism,
                       const std::vector<Bytes>& chunks, const Bytes& signature) {
    REQUIRE_RV(p11()->C_VerifyInit(s, &mechanism, key), CKR_OK);
    for (const Bytes& c : chunks)
        REQUIRE_RV(p11()->C_VerifyUpdate(s, const_cast<CK_BYTE_PTR>(c.data()), c.size()), CKR_OK);
    return p11()->C_VerifyFinal(s, const_cast<CK_BYTE_PTR>(signature.data()), signature.size());
}

// ---- OpenSSL ------------------------------------------------------------------

Bytes digest(const char* md, const Bytes& data) {
    Bytes out(EVP_MAX_MD_SIZE);
    unsigned int n = 0;
    REQUIRE(EVP_Digest(data.data(), data.size(), out.data(), &n, md_of(md), nullptr) == 1);
    out.resize(n);
    return out;
}

Bytes digest_info(const char* md, const Bytes& d) {
    // RFC 8017, section 9.2, note 1.
    static const std::pair<const char*, Bytes> prefixes[] = {
        {"SHA1", {0x30, 0x21, 0x30, 0x09, 0x06, 0x05, 0x2b, 0x0e, 0x03, 0x02, 0x1a, 0x05, 0x00, 0x04, 0x14}},
        {"SHA256",
         {0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00, 0x04,
          0x20}},
        {"SHA384",
         {0x30, 0x41, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x02, 0x05, 0x00, 0x04,
          0x30}},
        {"SHA512",
         {0x30, 0x51, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x03, 0x05, 0x00, 0x04,
          0x40}},
    };
    for (const auto& [name, prefix] : prefixes) {
        if (std::strcmp(name, md) == 0) {
            Bytes out = prefix;
            out.insert(out.end(), d.begin(), d.end());
            return out;
        }
    }
    FAIL("no DigestInfo prefix for " << md);
    return {};
}

bool verify_rsa_digest(const TestKey& k, const char* md, bool pss, const Bytes& d, const Bytes& sig) {
    std::unique_ptr<EVP_PKEY_CTX, CtxFree> ctx(EVP_PKEY_CTX_new(k.pkey.get(), nullptr));
    bool ok = ctx && EVP_PKEY_verify_init(ctx.get()) == 1 &&
              EVP_PKEY_CTX_set_rsa_padding(ctx.get(), pss ? RSA_PKCS1_PSS_PADDING : RSA_PKCS1_PADDING) == 1 &&
              EVP_PKEY_CTX_set_signature_md(ctx.get(), md_of(md)) == 1;
    if (ok && pss)
        ok = EVP_PKEY_CTX_set_rsa_pss_saltlen(ctx.get(), RSA_PSS_SALTLEN_DIGEST) == 1 &&
             EVP_PKEY_CTX_set_rsa_mgf1_md(ctx.get(), md_of(md)) == 1;
    ok = ok && EVP_PKEY_verify(ctx.get(), sig.data(), sig.size(), d.data(), d.size()) == 1;
    ERR_clear_error();
    return ok;
}

bool verify_rsa_message(const TestKey& k, const char* md, bool pss, const Bytes& data, const Bytes& sig) {
    std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
    EVP_PKEY_CTX* pctx = nullptr;
    bool ok = ctx && EVP_DigestVerifyInit(ctx.get(), &pctx, md_of(md), nullptr, k.pkey.get()) == 1 &&
              EVP_PKEY_CTX_set_rsa_padding(pctx, pss ? RSA_PKCS1_PSS_PADDING : RSA_PKCS1_PADDING) == 1;
    if (ok && pss)
        ok = EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_DIGEST) == 1 &&
             EVP_PKEY_CTX_set_rsa_mgf1_md(pctx, md_of(md)) == 1;
    ok = ok && EVP_DigestVerify(ctx.get(), sig.data(), sig.size(), data.data(), data.size()) == 1;
    ERR_clear_error();
    return ok;
}

bool verify_ecdsa_digest(const TestKey& k, const Bytes& d, const Bytes& sig) {
    const Bytes der = ecdsa_der(k, sig);
    if (der.empty())
        return false;
    std::unique_ptr<EVP_PKEY_CTX, CtxFree> ctx(EVP_PKEY_CTX_new(k.pkey.get(), nullptr));
    // No signature digest set: OpenSSL takes the bytes as the digest, of
    // any length, and truncates to the order's bits as ECDSA defines.
    const bool ok = ctx && EVP_PKEY_verify_init(ctx.get()) == 1 &&
                    EVP_PKEY_verify(ctx.get(), der.data(), der.size(), d.data(), d.size()) == 1;
    ERR_clear_error();
    return ok;
}

bool verify_ecdsa_message(const TestKey& k, const char* md, const Bytes& data, const Bytes& sig) {
    const Bytes der = ecdsa_der(k, sig);
    if (der.empty())
        return false;
    std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
    const bool ok = ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, md_of(md), nullptr, k.pkey.get()) == 1 &&
                    EVP_DigestVerify(ctx.get(), der.data(), der.size(), data.data(), data.size()) == 1;
    ERR_clear_error();
    return ok;
}

// ---- Processes -----------------------------------------------------------------

std::string shell_quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) {
        if (c == '\'')
            out += "'\\''";
        else
            out += c;
    }
    return out + "'";
}

std::string run(const std::string& command, int* status) {
    std::fflush(nullptr);
    FILE* p = ::popen(command.c_str(), "r");
    if (!p)
        throw std::runtime_error("cannot run " + command);
    std::string out;
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0)
        out.append(buf, n);
    const int st = ::pclose(p);
    if (status)
        *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    return out;
}

namespace {
int count_handles(const char* kind) {
    int status = 0;
    const std::string out = run("tpm2_getcap -T " + shell_quote(swtpm_tcti()) + " " + kind, &status);
    REQUIRE(status == 0);
    int n = 0;
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);)
        if (line.rfind("- ", 0) == 0)
            ++n;
    return n;
}
}  // namespace

int tpm_transient_objects() { return count_handles("handles-transient"); }
int tpm_loaded_sessions() { return count_handles("handles-loaded-session"); }

ScopedEnv::ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) {
        had_ = true;
        old_ = old;
    }
    ::setenv(name, value.c_str(), 1);
}

ScopedEnv::~ScopedEnv() {
    if (had_)
        ::setenv(name_.c_str(), old_.c_str(), 1);
    else
        ::unsetenv(name_.c_str());
}

}  // namespace mt
