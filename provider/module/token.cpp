#include "module/token.hpp"

#include "core/base/error.hpp"
#include "core/base/owned.hpp"
#include "core/base/printable.hpp"
#include "core/files/file_read.hpp"
#include "core/base/log.hpp"
#include "core/policy/tpm_policy_session.hpp"
#include "core/tpm/tpm_queries.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>


namespace tpmkey::pkcs11 {

namespace {

// Atomic, so it needs no constructor at load time; starts above 0 because
// 0 means "no handle" (CK_INVALID_HANDLE).
std::atomic<CK_ULONG> handle_counter{0};

constexpr std::size_t max_certificate_size = 64 * 1024;

// NAME.crt or NAME-cert.pem next to NAME.tpm, as DER bytes.
std::optional<Bytes> read_certificate_next_to(const std::filesystem::path& key_path) {
    const std::filesystem::path stem = key_path.parent_path() / key_path.stem();
    for (const std::string suffix : {".crt", "-cert.pem"}) {
        std::filesystem::path cert_path = stem;
        cert_path += suffix;
        std::optional<FileRead> file;
        try {
            file = read_regular_file_if_present(cert_path, max_certificate_size);
        } catch (const Error& e) {
            log_error(std::string(e.what()) + "; certificate ignored");
            continue;
        }
        if (!file)
            continue;
        const std::string data(file->data.begin(), file->data.end());
        if (data.find("-----BEGIN CERTIFICATE-----") == std::string::npos)
            return Bytes(data.begin(), data.end());  // DER
        const Bio bio(BIO_new_mem_buf(data.data(), static_cast<int>(data.size())));
        const X509Cert cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
        ERR_clear_error();
        if (!cert) {
            log_error(cert_path.string() + ": ignored: not a readable PEM certificate");
            continue;
        }
        Bytes der = to_der(i2d_X509, cert.get());
        if (!der.empty())
            return der;
    }
    return std::nullopt;
}

}  // namespace

CK_ULONG new_handle() noexcept { return ++handle_counter; }

Token::Token(CK_SLOT_ID slot, std::filesystem::path path, UsableKey key)
    : slot_(slot), path_(std::move(path)), key_(std::move(key.file)), pub_(std::move(key.public_key)),
      label_(printable(path_.stem().string())), id_(key_id_of(pub_)) {
    const KeyFacts facts{label_, id_, &pub_, key_.blobs.pub.publicArea.objectAttributes, needs_pin(),
                         mechanisms_for(pub_, all_hashes)};
    public_handle_ = new_handle();
    objects_.push_back(make_public_key_object(public_handle_, facts));
    private_handle_ = new_handle();
    objects_.push_back(make_private_key_object(private_handle_, facts));
    if (const std::optional<Bytes> cert = read_certificate_next_to(path_)) {
        try {
            objects_.push_back(make_certificate_object(new_handle(), facts, *cert));
        } catch (const Error& e) {
            log_error(path_.string() + ": certificate next to the key ignored: " + e.what());
        }
    }
}

const P11Object* Token::object(CK_OBJECT_HANDLE handle) const noexcept {
    for (const P11Object& o : objects_)
        if (o.handle() == handle)
            return &o;
    return nullptr;
}

Token::Loaded& Token::load(TpmConnection& tpm) {
    if (!loaded_) {
        const tpmkey::TpmObject& parent = tpm.parent(key_.parent);
        Authorization auth = Authorization::for_secret(tpm.tpm(), parent, needs_pin() || !pin_.empty());
        tpmkey::TpmObject key;
        try {
            key = load_key(tpm.tpm(), parent, auth, key_.blobs);
        } catch (const TpmError& e) {
            throw e.about(label_, path_.string());  // a key made before a clear is told by its file's age
        }
        loaded_.emplace(Loaded{std::move(auth), std::move(key)});
        log_debug(label_ + ": key loaded into the TPM");
    }
    return *loaded_;
}

CK_FLAGS Token::flags(TpmConnection& tpm) const {
    CK_FLAGS flags = CKF_TOKEN_INITIALIZED | CKF_WRITE_PROTECTED | CKF_USER_PIN_INITIALIZED;
    if (!needs_pin())
        return flags;
    flags |= CKF_LOGIN_REQUIRED;
    if (wrong_pin_since_login_)
        flags |= CKF_USER_PIN_COUNT_LOW;
    if (tpm.is_open()) {
        try {
            // The counter is the TPM's, shared by all keys.
            const DictionaryAttackState da = dictionary_attack_state(tpm.tpm());
            if (da.max_failures > 0 && da.failures + 1 == da.max_failures)
                flags |= CKF_USER_PIN_FINAL_TRY;
            if (da.in_lockout)
                flags |= CKF_USER_PIN_LOCKED;
        } catch (const TpmError&) {
            // The counters are extra information; the TPM's trouble is
            // reported by the next operation that needs it.
        }
    }
    return flags;
}

void Token::login(TpmConnection& tpm, Secret pin) {
    if (!needs_pin()) {
        // The key file promises an empty auth value: there is nothing to
        // prove, and a PIN sent to the TPM anyway would only count as a
        // failed try against its dictionary-attack counter.
        logged_in_ = true;
        return;
    }
    // A key that needs a login has a PIN: an empty one (Enter at a prompt,
    // OpenSSH's regress tests) is wrong without asking the TPM, where it
    // would count as a failed try.
    if (pin.empty()) {
        log_error(label_ + ": no PIN given (the key has a PIN; nothing was sent to the TPM)");
        throw Pkcs11Error(CKR_PIN_LEN_RANGE);
    }
    // A key loaded without a session (no PIN so far) must be reloaded with one.
    if (loaded_ && !loaded_->auth.encrypted())
        loaded_.reset();
    // A failed login of any kind (also CKU_CONTEXT_SPECIFIC while logged in)
    // leaves the login state as it was: the PIN that worked stays. It
    // flushes what it loaded: ssh exits through _exit() after a wrong PIN,
    // without C_Finalize, and a TPM without a resource manager would keep
    // the objects.
    try {
        Loaded& loaded = load(tpm);
        const AuthValue auth_value(tpm.tpm(), loaded.key, pin);
        (void)change_auth(tpm.tpm(), loaded.key, tpm.parent(key_.parent), loaded.auth, pin);
    } catch (const TpmError& e) {
        loaded_.reset();
        if (!e.is(TPM2_RC_AUTH_FAIL) && !e.is(TPM2_RC_BAD_AUTH))
            throw;
        wrong_pin_since_login_ = true;
        // Named, for the one line a user of ssh-agent may get to see.
        throw e.about(label_);
    } catch (...) {
        loaded_.reset();
        throw;
    }
    pin_ = std::move(pin);
    logged_in_ = true;
    wrong_pin_since_login_ = false;
}

void Token::logout() noexcept {
    logged_in_ = false;
    pin_ = Secret();
    loaded_.reset();
    // PKCS#11 2.40, 5.6.4 (C_Logout): handles to private objects become
    // invalid, even after a new login.
    if (needs_pin())
        for (P11Object& o : objects_)
            if (o.handle() == private_handle_)
                o.renumber(private_handle_ = new_handle());
}

Bytes Token::sign(TpmConnection& tpm, const TpmSignRequest& request) {
    require(may_sign(), CKR_USER_NOT_LOGGED_IN);  // e.g. C_Logout during an operation
    Loaded& loaded = load(tpm);
    const AuthValue auth_value(tpm.tpm(), loaded.key, pin_);
    // A key with a policy signs in a fresh policy session: its use
    // consumes the policy.
    std::optional<Authorization> policy;
    if (key_.has_policy()) {
        try {
            policy = satisfy_policy(tpm.tpm(), tpm.parent(key_.parent), key_);
        } catch (const TpmError& e) {
            throw e.about(label_, path_.string());  // what to do names the file
        }
    }
    return sign_digest(tpm.tpm(), loaded.key, policy ? *policy : loaded.auth, request.scheme, request.hash,
                       request.digest, pub_.ec_field_size());
}

}  // namespace tpmkey::pkcs11
