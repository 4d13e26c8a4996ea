// One key file = one slot with one token (docs/design.md, "Slots and tokens"):
// its objects, its login state, and the key loaded in the TPM while in use.
#pragma once

#include "core/base/error.hpp"
#include "core/base/secret.hpp"
#include "core/files/config.hpp"
#include "core/keys/key_discovery.hpp"
#include "core/keys/key_file.hpp"
#include "core/keys/public_key.hpp"
#include "core/policy/tpm_policy_session.hpp"
#include "module/mechanisms.hpp"
#include "module/objects.hpp"
#include "module/tpm_connection.hpp"

#include <atomic>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tpmkey::pkcs11 {

// Session and object handles come from one counter that is never reset,
// not even by C_Finalize: a handle is never reused in a process.
CK_ULONG new_handle() noexcept;

class Token {
public:
    // Reads nothing: the key file is already parsed. A certificate next to
    // the key (NAME.crt, NAME-cert.pem; PEM or DER) is read if present. A
    // key with a PIN source (the config file's pin-from) needs no login:
    // the module reads its PIN when it signs (Module::sign, Login::from_source).
    Token(CK_SLOT_ID slot, std::filesystem::path path, UsableKey key, std::optional<PinSource> pin_source = {});
    Token(const Token&) = delete;
    Token& operator=(const Token&) = delete;
    ~Token() = default;

    CK_SLOT_ID slot() const noexcept { return slot_; }
    const std::string& label() const noexcept { return label_; }
    const std::filesystem::path& path() const noexcept { return path_; }
    const PublicKey& public_key() const noexcept { return pub_; }
    // The key has a PIN (its auth value is not empty).
    bool has_pin() const noexcept { return key_.needs_pin(); }
    // The key's PIN is the user's PIN object's (core/tpm/pin_object.hpp):
    // the name its policy's TPM2_PolicySecret holds; empty for a key with a
    // PIN of its own or none.
    const Bytes& pin_object_name() const noexcept { return pin_object_name_; }
    bool shares_pin() const noexcept { return !pin_object_name_.empty(); }
    // The caller must log in (C_Login) before the key signs: it has a PIN
    // and the module has no source to read it from.
    bool needs_pin() const noexcept { return has_pin() && !pin_source_; }
    const std::optional<PinSource>& pin_source() const noexcept { return pin_source_; }
    // The key file as read (its parent, its blobs).
    const KeyFile& key_file() const noexcept { return key_; }
    // Logged in with exactly `pin` (compared in constant time).
    bool logged_in_with(const Secret& pin) const noexcept { return logged_in_ && pin_ == pin; }
    const Bytes& id() const noexcept { return id_; }

    const std::vector<P11Object>& objects() const noexcept { return objects_; }
    const P11Object* object(CK_OBJECT_HANDLE handle) const noexcept;
    bool is_private_key_object(CK_OBJECT_HANDLE handle) const noexcept { return handle == private_handle_; }
    bool is_public_key_object(CK_OBJECT_HANDLE handle) const noexcept { return handle == public_handle_; }

    bool logged_in() const noexcept { return logged_in_; }
    // CK_TOKEN_INFO's flags, the PIN flags (PKCS#11 2.40, 3.2) included:
    // COUNT_LOW after a wrong PIN since the last successful login (in this
    // process); FINAL_TRY and LOCKED from the TPM's dictionary-attack
    // counter, asked only when `tpm` is open already: listing tokens sends
    // no TPM command (ssh-keygen -D, ssh before it signs).
    CK_FLAGS flags(TpmConnection& tpm) const;
    // Checks the PIN with the TPM (prove_pin(): TPM2_ObjectChangeAuth to the
    // same value, the cheapest command that proves it without signing
    // anything). The PIN is only read: a caller that retries (the module,
    // after making room in the TPM) still holds it; a copy is kept on
    // success.
    // A key with the shared PIN: the PIN is proven on the PIN object (the
    // same TPM2_ObjectChangeAuth to itself), which is flushed again.
    void login(TpmConnection& tpm, const Secret& pin);
    // A key with the shared PIN whose PIN object took `pin` moments ago for
    // another key (module/login.cpp): logged in without a TPM command.
    void login_with_proven_pin(const Secret& pin);
    // Forgets the PIN and flushes what this token loaded.
    void logout() noexcept;
    // The key may be used now: it has no PIN, or the user logged in.
    bool may_sign() const noexcept { return !has_pin() || logged_in_; }
    // C_SignInit: the key may sign now, or the module can log in itself.
    bool may_start_signing() const noexcept { return !needs_pin() || logged_in_; }

    Bytes sign(TpmConnection& tpm, const TpmSignRequest& request);

    // Flushes (or, when the connection is gone, forgets) its TPM objects;
    // the key's saved context stays in the process.
    void drop_tpm_objects() noexcept { loaded_.reset(); }
    bool holds_tpm_objects() const noexcept { return loaded_.has_value(); }
    // Forgets the key's saved context too: the TPM went away.
    void drop_saved_context() noexcept { saved_key_.reset(); }

private:
    // What this token holds in the TPM while in use.
    struct Loaded {
        tpmkey::TpmObject key;
        // The salted HMAC session that carries the PIN (a key with one);
        // started at its first use.
        std::optional<Authorization> secret;
        // A PCR-bound key's policy session, kept for its next signature.
        PolicySession policy;
        // A key with the shared PIN: its PIN object, loaded at the first
        // signature, flushed with the key.
        std::optional<tpmkey::TpmObject> pin_object;
    };
    // The PIN object's file (pin_object_path()), read and checked against
    // the key's policy; throws Pkcs11Error, logged, when it is missing or
    // another one.
    KeyFile read_pin_object_file() const;
    void prove_shared_pin(TpmConnection& tpm, const Secret& pin);
    Loaded& load(TpmConnection& tpm);
    tpmkey::TpmObject load_key_object(TpmConnection& tpm);
    const Authorization& authorization(TpmConnection& tpm, Loaded& loaded);

    CK_SLOT_ID slot_;
    std::filesystem::path path_;
    std::optional<PinSource> pin_source_;
    KeyFile key_;
    PublicKey pub_;
    std::string label_;
    Bytes id_;
    Bytes pin_object_name_;
    std::vector<P11Object> objects_;
    CK_OBJECT_HANDLE public_handle_ = 0;
    CK_OBJECT_HANDLE private_handle_ = 0;

    bool logged_in_ = false;
    bool wrong_pin_since_login_ = false;
    Secret pin_;  // held while logged in: each TPM2_Sign's HMAC needs it
    std::optional<Loaded> loaded_;
    // Without a resource manager, a key without PIN or policy: its context
    // between calls, so that a call reloads it with TPM2_ContextLoad alone.
    std::optional<SavedContext> saved_key_;
};

// The module's tokens, one per slot.
using Tokens = std::vector<std::unique_ptr<Token>>;

// The key as a prompt names it: "'LABEL' (PATH, COMMENT)", the comment from
// its .pub (its third field on), read now; without one, "'LABEL' (PATH)".
std::string prompt_name(const Token& token);

// Flushes the TPM objects of every token but `keep`.
void release_other_keys(const Tokens& tokens, const Token& keep) noexcept;

// Runs a TPM operation of `token`; when the TPM has no room for another
// object or session (TPMs without a resource manager have 3 object slots),
// releases the other tokens' keys and tries once more.
template <class Operation>
auto with_room_in_tpm(const Tokens& tokens, Token& token, Operation operation) {
    try {
        return operation();
    } catch (const TpmError& e) {
        if (!e.is(TPM2_RC_OBJECT_MEMORY) && !e.is(TPM2_RC_SESSION_MEMORY))
            throw;
        release_other_keys(tokens, token);
        return operation();
    }
}

}  // namespace tpmkey::pkcs11
