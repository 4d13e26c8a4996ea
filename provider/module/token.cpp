#include "module/token.hpp"

#include "core/base/error.hpp"
#include "core/base/log.hpp"
#include "core/base/owned.hpp"
#include "core/base/printable.hpp"
#include "core/files/file_read.hpp"
#include "core/keys/certificate.hpp"
#include "core/policy/tpm_policy_session.hpp"
#include "core/tpm/pin_object.hpp"
#include "core/tpm/tpm_queries.hpp"

namespace tpmkey::pkcs11 {

namespace {

// Atomic, so it needs no constructor at load time; starts above 0 because
// 0 means "no handle" (CK_INVALID_HANDLE).
std::atomic<CK_ULONG> handle_counter{0};

// The comment of the key's .pub (its third field on), for the prompt; empty
// when there is none.
std::string pub_comment(const std::filesystem::path& key_path) {
    std::filesystem::path pub = key_path;
    pub.replace_extension(".pub");
    try {
        const std::optional<FileRead> read = read_regular_file_if_present(pub, 16 * 1024);
        if (!read)
            return "";
        std::string_view line(reinterpret_cast<const char*>(read->data.data()), read->data.size());
        line = line.substr(0, line.find('\n'));
        // TYPE BASE64 COMMENT
        const std::size_t type_end = line.find(' ');
        const std::size_t blob_end =
            type_end == std::string_view::npos ? type_end : line.find(' ', line.find_first_not_of(' ', type_end));
        const std::size_t start = blob_end == std::string_view::npos ? blob_end : line.find_first_not_of(' ', blob_end);
        return start == std::string_view::npos ? "" : printable(line.substr(start));
    } catch (const Error&) {
        return "";
    }
}

}  // namespace

CK_ULONG new_handle() noexcept { return ++handle_counter; }

Token::Token(CK_SLOT_ID slot, std::filesystem::path path, UsableKey key, std::optional<PinSource> pin_source)
    : slot_(slot),
      path_(std::move(path)),
      pin_source_(std::move(pin_source)),
      key_(std::move(key.file)),
      pub_(std::move(key.public_key)),
      label_(printable(path_.stem().string())),
      id_(key_id_of(pub_)) {
    // check_usable() let PolicySecret through only well formed.
    for (const PolicyCommand& command : key_.policy)
        if (command.code == TPM2_CC_PolicySecret)
            pin_object_name_ = policy_secret_name(command);
    const KeyFacts facts{
        label_, id_, &pub_, key_.blobs.pub.publicArea.objectAttributes, needs_pin(), mechanisms_for(pub_, all_hashes)};
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
        loaded_.emplace(Loaded{load_key_object(tpm), std::nullopt, PolicySession(), std::nullopt});
        log_debug(label_ + ": key loaded into the TPM");
    }
    return *loaded_;
}

tpmkey::TpmObject Token::load_key_object(TpmConnection& tpm) {
    if (saved_key_) {
        try {
            return saved_key_->load(tpm.tpm());
        } catch (const TpmError& e) {
            if (!saved_context_is_stale(e))
                throw;
            log_debug(label_ + ": the key's saved context no longer loads (" + e.what() + "): loaded from its file");
            saved_key_.reset();
        }
    }
    // TPM2_Load carries nothing secret (the private part is wrapped by the
    // parent, whose auth value is empty): the password session.
    tpmkey::TpmObject key;
    try {
        key = load_key(tpm.tpm(), tpm.parent(key_.parent), Authorization::password(), key_.blobs);
    } catch (const TpmError& e) {
        throw e.about(label_, path_.string());  // a key made before a clear is told by its file's age
    }
    // Saved where that spares the next call its parent: a key that signs in
    // the password session. A PIN or a policy needs a session salted with
    // the parent anyway, and TPM2_Load under it costs what TPM2_ContextLoad does.
    if (!tpm.may_hold_objects() && !has_pin() && !key_.has_policy())
        saved_key_ = SavedContext::save(tpm.tpm(), key);
    return key;
}

const Authorization& Token::authorization(TpmConnection& tpm, Loaded& loaded) {
    if (!loaded.secret)
        loaded.secret =
            has_pin() ? Authorization::for_secret(tpm.tpm(), tpm.parent(key_.parent), true) : Authorization::password();
    return *loaded.secret;
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

void Token::login(TpmConnection& tpm, const Secret& pin) {
    if (!has_pin()) {
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
    // A failed login of any kind (also CKU_CONTEXT_SPECIFIC while logged in)
    // leaves the login state as it was: the PIN that worked stays. It
    // flushes what it loaded: ssh exits through _exit() after a wrong PIN,
    // without C_Finalize, and a TPM without a resource manager would keep
    // the objects.
    try {
        if (shares_pin()) {
            prove_shared_pin(tpm, pin);
        } else {
            Loaded& loaded = load(tpm);
            const Authorization& auth = authorization(tpm, loaded);
            prove_pin(tpm.tpm(), loaded.key, tpm.parent(key_.parent), auth, pin);
        }
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
    pin_ = pin.clone();
    logged_in_ = true;
    wrong_pin_since_login_ = false;
}

KeyFile Token::read_pin_object_file() const {
    const std::filesystem::path path = pin_object_path();
    std::optional<KeyFile> file;
    try {
        file = read_pin_object();
    } catch (const Error& e) {
        log_error(label_ + ": its PIN is the PIN object's, and that file cannot be used: " + e.what());
        throw Pkcs11Error(CKR_DEVICE_ERROR);
    }
    if (!file) {
        log_error(label_ + ": its PIN is the PIN object's, and " + path.string() +
                  " is missing (restore it from a backup: no other file opens the key; nothing was sent to the TPM)");
        throw Pkcs11Error(CKR_DEVICE_ERROR);
    }
    if (tpmkey::pin_object_name(*file) != pin_object_name_) {
        log_error(label_ + ": its PIN is the PIN object's, and " + path.string() +
                  " holds another PIN object than the one the key was made with (restore that one; nothing was sent "
                  "to the TPM)");
        throw Pkcs11Error(CKR_DEVICE_ERROR);
    }
    return *std::move(file);
}

void Token::prove_shared_pin(TpmConnection& tpm, const Secret& pin) {
    // The key's parent first, verified as for a key with its own PIN: what
    // is wrong with it (its pins, an interposer) is told the same way.
    (void)tpm.parent(key_.parent);
    const KeyFile file = read_pin_object_file();
    const TpmObject& parent = tpm.parent(file.parent);
    // Loaded, proven and flushed: nothing stays in the TPM.
    const tpmkey::TpmObject object = load_key(tpm.tpm(), parent, Authorization::password(), file.blobs);
    const Authorization auth = Authorization::for_secret(tpm.tpm(), parent, true);
    prove_pin(tpm.tpm(), object, parent, auth, pin);
}

void Token::login_with_proven_pin(const Secret& pin) {
    pin_ = pin.clone();
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
    // A key with the shared PIN has an empty auth value of its own: its
    // PIN goes with the PIN object (ESAPI would else mix it into the
    // parameter encryption of TPM2_Sign, and the TPM would sign garbage).
    const Secret none;
    const AuthValue auth_value(tpm.tpm(), loaded.key, shares_pin() ? none : pin_);
    if (!key_.has_policy()) {
        try {
            return sign_digest(tpm.tpm(), loaded.key, authorization(tpm, loaded), request.scheme, request.hash,
                               request.digest, pub_.ec_field_size());
        } catch (const TpmError& e) {
            // A lockout that stops a key with nothing to guess: the user
            // learns which file and how to make one that no lockout stops.
            if (e.is(TPM2_RC_LOCKOUT) && lockout_stops_pinless_key(key_.blobs.pub.publicArea, !has_pin()))
                log_error(label_ + ": " + pinless_key_lockout_advice(path_.string()));
            throw;
        }
    }
    const Authorization* policy = nullptr;
    try {
        if (shares_pin()) {
            const KeyFile file = read_pin_object_file();
            const TpmObject& parent = tpm.parent(file.parent);
            if (!loaded.pin_object)
                loaded.pin_object = load_key(tpm.tpm(), parent, Authorization::password(), file.blobs);
            const AuthValue pin_value(tpm.tpm(), *loaded.pin_object, pin_);
            const PinObjectAuth secret{*loaded.pin_object, pin_object_name_, authorization(tpm, loaded)};
            policy = &loaded.policy.satisfy(tpm.tpm(), tpm.parent(key_.parent), key_, &secret);
        } else {
            policy = &loaded.policy.satisfy(tpm.tpm(), tpm.parent(key_.parent), key_);
        }
    } catch (const TpmError& e) {
        throw e.about(label_, path_.string());  // what to do names the file
    }
    return sign_digest(tpm.tpm(), loaded.key, *policy, request.scheme, request.hash, request.digest,
                       pub_.ec_field_size());
}

std::string prompt_name(const Token& t) {
    const std::string comment = pub_comment(t.path());
    return "'" + t.label() + "' (" + printable(t.path().string()) + (comment.empty() ? "" : ", " + comment) + ")";
}

void release_other_keys(const Tokens& tokens, const Token& keep) noexcept {
    for (const auto& t : tokens)
        if (t.get() != &keep)
            t->drop_tpm_objects();
    log_debug("the TPM is full: released the other keys to make room");
}

}  // namespace tpmkey::pkcs11
