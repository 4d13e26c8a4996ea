// Everything that lives between C_Initialize and C_Finalize: the tokens
// found at start-up, the open sessions, and the lazily opened TPM.
#pragma once

#include "config.hpp"
#include "mechanisms.hpp"
#include "token.hpp"
#include "tpm_connection.hpp"

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
    bool finding = false;
    std::vector<CK_OBJECT_HANDLE> found;
    std::size_t found_next = 0;
    // C_SignInit .. C_Sign / C_SignFinal
    std::optional<SignOperation> sign;
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

    TpmConnection& tpm() noexcept { return tpm_; }
    // The hash algorithms the TPM implements; asked once, when first needed.
    std::span<const TPM2_ALG_ID> tpm_hashes();
    // After the TPM failed or went away: forget everything loaded in it, so
    // that the next operation starts on a fresh connection.
    void drop_tpm() noexcept;

private:
    TpmConnection tpm_;
    std::vector<std::unique_ptr<Token>> tokens_;
    std::map<CK_SESSION_HANDLE, Session> sessions_;
    std::optional<std::vector<TPM2_ALG_ID>> tpm_hashes_;
};

}  // namespace tpmkey::pkcs11
