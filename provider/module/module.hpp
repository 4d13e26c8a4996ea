// Everything that lives between C_Initialize and C_Finalize: the tokens
// found at start-up, the open sessions, and the lazily opened TPM.
#pragma once

#include "core/base/error.hpp"
#include "core/files/config.hpp"
#include "core/tpm/tpm_queries.hpp"
#include "module/login.hpp"
#include "module/mechanisms.hpp"
#include "module/objects.hpp"
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
    // C_Login as CKU_USER, and a pin-from key's login before it signs.
    Login& login() noexcept { return login_; }

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
    // line, with the PIN its source holds now (Login::from_source).
    Bytes sign(CK_SLOT_ID slot, const TpmSignRequest& request);

private:
    TpmConnection tpm_;
    std::vector<std::unique_ptr<Token>> tokens_;
    std::map<CK_SESSION_HANDLE, Session> sessions_;
    std::optional<std::vector<TPM2_ALG_ID>> tpm_hashes_;
    Login login_;
    std::vector<std::string> confirm_;  // Config::confirm
    // Config::file_problem: the config file exists but is not used, so its
    // confirm lines are unknown; every key is confirmed at each use rather
    // than none (a refused file must make the module more careful).
    std::string config_refused_;
    // Whether each use of the key needs a yes: a confirm line names it, or
    // the config file is refused (config_refused_).
    bool needs_confirmation(const Token& token) const;
    // Throws Pkcs11Error(CKR_FUNCTION_REJECTED), logged, unless the user says
    // yes at an askpass confirmation (core/pin/askpass.hpp).
    void confirm_use(Token& token);
};

}  // namespace tpmkey::pkcs11
