// The module tests' view of tpmkey-pkcs11.so: an independent PKCS#11
// consumer. It dlopen()s the built module, takes C_GetFunctionList and uses
// nothing but the function list; it links none of our code. Signatures are
// checked with OpenSSL against the keys' .pub files (converted by stock
// ssh-keygen), never with our own code.
#pragma once

#include <p11-kit/pkcs11.h>
#include <catch2/catch.hpp>

#include <openssl/evp.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace mt {

using Bytes = std::vector<std::uint8_t>;

// The module's function list (set by main before any test runs).
CK_FUNCTION_LIST* p11();
void set_p11(CK_FUNCTION_LIST* list);
// dlopen()s the module and installs its function list (set_p11); only
// C_GetFunctionList is looked up. False, with a message naming `program`,
// when that fails.
bool load_module(const std::string& path, const char* program);

// ---- CK_RV with a readable name in Catch's messages ------------------------

struct Rv {
    CK_RV value;
    bool operator==(const Rv& other) const { return value == other.value; }
};
std::string rv_name(CK_RV rv);

}  // namespace mt

namespace Catch {
template <>
struct StringMaker<mt::Rv> {
    static std::string convert(const mt::Rv& rv) { return mt::rv_name(rv.value); }
};
}  // namespace Catch

#define CHECK_RV(call, expected) CHECK(::mt::Rv{call} == ::mt::Rv{expected})
#define REQUIRE_RV(call, expected) REQUIRE(::mt::Rv{call} == ::mt::Rv{expected})

namespace mt {

// ---- The keys the tests made in the swtpm at start -------------------------

struct EvpPkeyFree {
    void operator()(EVP_PKEY* p) const noexcept { EVP_PKEY_free(p); }
};
using EvpPkey = std::unique_ptr<EVP_PKEY, EvpPkeyFree>;

struct TestKey {
    std::string name;  // file stem = token label = CKA_LABEL
    bool rsa;
    unsigned bits;    // modulus bits, or the curve's field bits
    std::string pin;  // empty: no PIN
    std::filesystem::path tpm;
    std::filesystem::path pub;
    EvpPkey pkey;    // from the .pub, via ssh-keygen -e -m PKCS8
    Bytes spki_der;  // i2d_PUBKEY of pkey
    bool has_certificate = false;
    Bytes certificate_der;
};

// ec256 (P-256, no PIN, with a certificate next to it), ec384 (P-384, PIN),
// rsa2048 (no PIN), rsa3072 (PIN): the four keys, in slot order.
std::vector<TestKey>& keys();
const TestKey& key(const std::string& name);
const std::filesystem::path& key_dir();
// The swtpm's TCTI string as the test was given it ("swtpm:host=...,port=N").
const std::string& swtpm_tcti();
// Where the fixture scripts live (swtpm-fixtures/), for count-tpm-commands.
const std::filesystem::path& fixtures_dir();

// Made by main before the tests run; throws std::runtime_error on failure.
void make_keys(const std::filesystem::path& keygen, const std::filesystem::path& dir);

// ---- Small PKCS#11 helpers ---------------------------------------------------

// C_Initialize in the constructor, C_Finalize in the destructor (also when a
// REQUIRE failed halfway: the TPM must be left clean).
class Initialized {
public:
    explicit Initialized(CK_VOID_PTR args = nullptr);
    ~Initialized();
    Initialized(const Initialized&) = delete;
    Initialized& operator=(const Initialized&) = delete;
};

// A session (CKF_SERIAL_SESSION, read-only unless asked) closed in the destructor.
class Session {
public:
    explicit Session(CK_SLOT_ID slot, CK_FLAGS extra_flags = 0);
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;
    CK_SESSION_HANDLE handle() const noexcept { return handle_; }
    operator CK_SESSION_HANDLE() const noexcept { return handle_; }
    // Closes now (C_CloseSession must succeed).
    void close();

private:
    CK_SESSION_HANDLE handle_ = CK_INVALID_HANDLE;
};

std::vector<CK_SLOT_ID> slot_list();
CK_SLOT_ID slot_of(const std::string& key_name);
std::string trimmed(const CK_UTF8CHAR* field, std::size_t size);

std::vector<CK_OBJECT_HANDLE> find(CK_SESSION_HANDLE s, std::vector<CK_ATTRIBUTE> templ = {});
CK_OBJECT_HANDLE find_one(CK_SESSION_HANDLE s, CK_OBJECT_CLASS cls);
// The private key, after logging in when the key has a PIN.
CK_OBJECT_HANDLE private_key(CK_SESSION_HANDLE s, const TestKey& k);
// C_Login with `pin`, its CK_RV; login() REQUIREs CKR_OK with the key's PIN.
CK_RV login_with(CK_SESSION_HANDLE s, const std::string& pin, CK_USER_TYPE user = CKU_USER);
void login(CK_SESSION_HANDLE s, const TestKey& k);
// CK_TOKEN_INFO.flags (C_GetTokenInfo must succeed).
CK_FLAGS token_flags(CK_SLOT_ID slot);

// A session on the slot of key `k`, and in `priv` that key's private key
// (after C_Login when it has a PIN).
class KeySession : public Session {
public:
    explicit KeySession(const TestKey& k);
    const CK_OBJECT_HANDLE priv;
};

// For each key named: INFO its name, a KeySession, and `body` run with the
// key, the session and the private key.
void for_each_private_key(std::initializer_list<const char*> names,
                          const std::function<void(const TestKey&, Session&, CK_OBJECT_HANDLE)>& body);

// The value of one attribute (size query first); REQUIREs CKR_OK.
Bytes attribute(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE o, CK_ATTRIBUTE_TYPE type);
CK_ULONG ulong_attribute(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE o, CK_ATTRIBUTE_TYPE type);
bool bool_attribute(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE o, CK_ATTRIBUTE_TYPE type);

Bytes bytes(const std::string& text);
Bytes random_bytes(std::size_t n);
std::string hex(const Bytes& b);

// C_SignInit + size query + C_Sign; REQUIREs success.
Bytes sign(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE key, CK_MECHANISM mechanism, const Bytes& data);
// C_SignInit + C_SignUpdate per chunk + size query + C_SignFinal.
Bytes sign_multi(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE key, CK_MECHANISM mechanism, const std::vector<Bytes>& chunks);

// C_VerifyInit (REQUIREd to succeed) + C_Verify: the CK_RV of C_Verify.
CK_RV p11_verify(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE key, CK_MECHANISM mechanism, const Bytes& data,
                 const Bytes& signature);
// C_VerifyInit + C_VerifyUpdate per chunk (REQUIREd to succeed) + C_VerifyFinal: its CK_RV.
CK_RV p11_verify_multi(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE key, CK_MECHANISM mechanism,
                       const std::vector<Bytes>& chunks, const Bytes& signature);

// ---- OpenSSL, the judge -----------------------------------------------------

// Digest of `data` with "SHA1", "SHA256", ...
Bytes digest(const char* md, const Bytes& data);
// DER DigestInfo (RFC 8017, 9.2 note 1: the fixed prefixes) + digest.
Bytes digest_info(const char* md, const Bytes& digest);

// RSASSA-PKCS1-v1_5 or RSASSA-PSS (salt = digest length) over `data`,
// hashed by OpenSSL with `md`.
bool verify_rsa_message(const TestKey& k, const char* md, bool pss, const Bytes& data, const Bytes& sig);
// The same over an already computed digest.
bool verify_rsa_digest(const TestKey& k, const char* md, bool pss, const Bytes& digest, const Bytes& sig);
// ECDSA: `sig` is raw r||s of 2 x field size. Over a digest (of any length:
// ECDSA truncates it to the group order's bits) or over a message hashed with md.
bool verify_ecdsa_digest(const TestKey& k, const Bytes& digest, const Bytes& sig);
bool verify_ecdsa_message(const TestKey& k, const char* md, const Bytes& data, const Bytes& sig);

// ---- Processes ---------------------------------------------------------------

// Runs a shell command, returns its stdout; `status` gets the exit status.
std::string run(const std::string& command, int* status = nullptr);
std::string shell_quote(const std::string& s);
// Transient objects / loaded sessions now in the swtpm (tpm2_getcap).
int tpm_transient_objects();
int tpm_loaded_sessions();

// setenv for the scope of one test, restored afterwards.
class ScopedEnv {
public:
    ScopedEnv(const char* name, const std::string& value);
    ~ScopedEnv();
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
    std::string name_;
    bool had_ = false;
    std::string old_;
};

}  // namespace mt
