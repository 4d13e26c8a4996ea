// Everything that lives between C_Initialize and C_Finalize: the tokens
// found at start-up, the open sessions, and the lazily opened TPM.
#pragma once

#include "core/base/error.hpp"
#include "core/files/config.hpp"
#include "core/tpm/tpm_queries.hpp"
#include "module/mechanisms.hpp"
#include "module/objects.hpp"
#include "module/pin_burst.hpp"
#include "module/token.hpp"
#include "module/tpm_connection.hpp"

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace tpmkey::pkcs11 {

struct Session {
    CK_SLOT_ID slot;
    CK_FLAGS flags;
    // C_FindObjectsInit .. C_FindObjectsFinal
    std::optional<FindOperation> find;
    // C_SignInit .. C_Sign / C_SignFinal
    std::optional<SignatureOperation> sign;
    // C_VerifyInit .. C_Verify / C_VerifyFinal: with the public key, in
    // software; needs no login, so C_Logout leaves it.
    std::optional<SignatureOperation> verify;
};

class Module {
public:
    // Reads the configuration and the key files; sends no TPM command.
    explicit Module(const Config& config);
    ~Module();
    Module(const Module&) = delete;
    Module& operator=(const Module&) = delete;

    // Throw Pkcs11Error (CKR_SLOT_ID_INVALID, CKR_SESSION_HANDLE_INVALID).
    Token& token(CK_SLOT_ID slot);
    Session& session(CK_SESSION_HANDLE handle);
    const std::vector<std::unique_ptr<Token>>& tokens() const noexcept { return tokens_; }

    CK_SESSION_HANDLE open_session(CK_SLOT_ID slot, CK_FLAGS flags);
    // Closing the last session of a token logs it out (PKCS#11 2.40, 5.6).
    void close_session(CK_SESSION_HANDLE handle);
    void close_all_sessions(CK_SLOT_ID slot);
    CK_ULONG session_count(CK_SLOT_ID slot, bool read_write_only) const;
    // Logs the token out and ends its sessions' signing operations, whose
    // key needs the login.
    void logout(CK_SLOT_ID slot);
    // C_Login as CKU_USER (docs/design.md, "PINs, keys and the TPM's
    // lockout"). A PIN not known to be right goes to the TPM only while a
    // wrong one would leave it 2 tries before lockout (else CKR_PIN_LOCKED
    // without a TPM command). A PIN passed on to further tokens (PinBurst)
    // goes to the TPM until one token refuses it, so that it counts once at
    // most, and a PIN another token took only while a wrong one would leave
    // 3; for keys the configuration says share a PIN (same-pin) the PIN one
    // of them took is known to be right.
    void login(Token& token, const Secret& pin);

    TpmConnection& tpm() noexcept { return tpm_; }
    // The hash algorithms the TPM implements; asked once, when first needed.
    std::span<const TPM2_ALG_ID> tpm_hashes();
    // After the TPM failed or went away: forget everything loaded in it and
    // every saved context, so that the next operation starts on a fresh
    // connection with a parent made and verified anew.
    void drop_tpm() noexcept;
    // Flushes the parents when no token holds a key: after a failed login
    // nothing of ours stays in the TPM. The connection stays open.
    void flush_parents_if_idle() noexcept;
    // The end of every call: without a resource manager nothing of ours
    // stays in the TPM between calls (TpmConnection::may_hold_objects); what
    // was saved with TPM2_ContextSave stays in the process.
    void end_call() noexcept;

    // The key of the token in `slot` signs `request` (TPM2_Sign), with room
    // made in the TPM (with_room_in_tpm); for a key on a `confirm` line, only
    // after a yes at an askpass confirmation; for a key on a `pin-from`
    // line, with the PIN its source holds now (login_from_source).
    Bytes sign(CK_SLOT_ID slot, const TpmSignRequest& request);

    // Runs a TPM operation of `token`; when the TPM has no room for another
    // object or session (TPMs without a resource manager have 3 object
    // slots), releases the other tokens' keys and tries once more.
    template <class Operation>
    auto with_room_in_tpm(Token& token, Operation operation) {
        try {
            return operation();
        } catch (const TpmError& e) {
            if (!e.is(TPM2_RC_OBJECT_MEMORY) && !e.is(TPM2_RC_SESSION_MEMORY))
                throw;
            release_other_keys(token);
            return operation();
        }
    }

private:
    void release_other_keys(const Token& keep) noexcept;
    // Tries a wrong PIN must leave before the TPM locks out: a PIN given for
    // this key, and a PIN that was right for another key (a guess, which must
    // never cost a try the key's own PIN would need).
    static constexpr UINT32 own_reserve = 2;
    static constexpr UINT32 guess_reserve = 3;
    // The TPM's dictionary-attack state (one TPM2_GetCapability).
    DictionaryAttackState lockout_state(Token& token);
    static bool room_for_a_wrong_pin(const DictionaryAttackState& da, UINT32 reserve) noexcept;
    // Throws Pkcs11Error(CKR_PIN_LOCKED), logged, when a wrong PIN would
    // leave the TPM fewer than own_reserve tries.
    void require_room_for_a_wrong_pin(Token& token, const DictionaryAttackState& da);
    // Sends `pin` to the TPM, the login's PIN proof (Token::login). A wrong
    // PIN, which the TPM refused and counted, comes back as that refusal,
    // for the caller to record before it throws it; nullopt when the TPM
    // took the PIN. Any other failure throws.
    std::optional<TpmError> send_pin(Token& token, const Secret& pin);
    // A key the PIN passed on is not for: its own PIN through the askpass
    // program (core/base/askpass.hpp), once per key per burst; throws
    // Pkcs11Error(otherwise) when no prompt is shown or nothing is typed.
    void login_with_own_prompt(Token& token, CK_RV otherwise);
    static std::string counted_text(const DictionaryAttackState& da);

    TpmConnection tpm_;
    std::vector<std::unique_ptr<Token>> tokens_;
    std::map<CK_SESSION_HANDLE, Session> sessions_;
    std::optional<std::vector<TPM2_ALG_ID>> tpm_hashes_;
    PinBurst pin_burst_;
    std::vector<std::vector<std::string>> same_pin_;  // Config::same_pin
    std::vector<std::string> confirm_;                // Config::confirm
    // Config::file_problem: the config file exists but is not used, so its
    // confirm lines are unknown; every key is confirmed at each use rather
    // than none (a refused file must make the module more careful).
    std::string config_refused_;
    // A key whose PIN comes from a source (Config::pin_from): read it now,
    // and log in with it unless logged in with that very PIN. Fails closed,
    // logged: no source, or a PIN the TPM refused before and still the
    // same, sends nothing; a PIN not yet proven goes to the TPM only under
    // the same lockout margin as a typed one (require_room_for_a_wrong_pin).
    void login_from_source(Token& token);
    // Whether each use of the key needs a yes: a confirm line names it, or
    // the config file is refused (config_refused_).
    bool needs_confirmation(const Token& token) const;
    // Throws Pkcs11Error(CKR_FUNCTION_REJECTED), logged, unless the user says
    // yes at an askpass confirmation (core/base/askpass.hpp).
    void confirm_use(Token& token);
    bool same_pin(const std::string& a, const std::string& b) const;
};

}  // namespace tpmkey::pkcs11
