#include "module/module.hpp"

#include "core/base/error.hpp"
#include "core/keys/key_discovery.hpp"
#include "core/base/log.hpp"
#include "core/tpm/tpm_queries.hpp"

#include <algorithm>

namespace tpmkey::pkcs11 {

Module::Module(const Config& config) : tpm_(config.tcti, config.tpm_timeout), same_pin_(config.same_pin) {
    for (const std::string& warning : config.warnings)
        log_error(warning);
    for (FoundKeyFile& found : find_keys(config)) {
        if (!found.key) {
            log_error(found.skip_message() + " (key skipped)");
            continue;
        }
        try {
            auto token = std::make_unique<Token>(tokens_.size(), found.path, std::move(*found.key));
            log_debug("slot " + std::to_string(tokens_.size()) + ": " + found.path.string());
            tokens_.push_back(std::move(token));
        } catch (const Error& e) {
            // One key that cannot be served must not hide the user's others.
            log_error(found.path.string() + ": " + e.what() + " (key skipped)");
        }
    }
    if (tokens_.empty())
        log_info("no TPM keys found (looked in " +
                 (config.searched.empty() ? std::string("nowhere") : config.searched.front()) + ")");
}

Module::~Module() { drop_tpm(); }

Token& Module::token(CK_SLOT_ID slot) {
    require(slot < tokens_.size(), CKR_SLOT_ID_INVALID);
    return *tokens_[slot];
}

Session& Module::session(CK_SESSION_HANDLE handle) {
    const auto it = sessions_.find(handle);
    require(it != sessions_.end(), CKR_SESSION_HANDLE_INVALID);
    return it->second;
}

CK_SESSION_HANDLE Module::open_session(CK_SLOT_ID slot, CK_FLAGS flags) {
    (void)token(slot);
    const CK_SESSION_HANDLE handle = new_handle();
    sessions_.emplace(handle, Session{slot, flags, std::nullopt, std::nullopt, std::nullopt});
    return handle;
}

void Module::close_session(CK_SESSION_HANDLE handle) {
    const CK_SLOT_ID slot = session(handle).slot;
    sessions_.erase(handle);
    if (session_count(slot, false) == 0)
        logout(slot);
}

void Module::close_all_sessions(CK_SLOT_ID slot) {
    (void)token(slot);
    std::erase_if(sessions_, [slot](const auto& entry) { return entry.second.slot == slot; });
    logout(slot);
}

void Module::logout(CK_SLOT_ID slot) {
    Token& t = token(slot);
    if (t.needs_pin())
        for (auto& [handle, s] : sessions_)
            if (s.slot == slot)
                s.sign.reset();
    t.logout();
}

void Module::login(Token& t, Secret pin) {
    const std::optional<PinBurst::Verdict> earlier =
        t.needs_pin() ? pin_burst_.verdict_for_another(t.slot(), pin) : std::nullopt;
    if (earlier && !(earlier->accepted && same_pin(token(earlier->slot).label(), t.label()))) {
        const std::string other = token(earlier->slot).label();
        log_error(t.label() + ": not logged in: the PIN given for it was " +
                  (earlier->accepted ? "accepted for '" + other + "' a moment ago, so it is that key's PIN"
                                     : "refused for '" + other + "' a moment ago") +
                  "; tpmkey sends one PIN to the TPM for one key only, so that a PIN passed on to every key "
                  "(ssh-add -s) never counts against the TPM's dictionary-attack counter more than once "
                  "(keys that have one PIN: a line 'same-pin " + other + " " + t.label() +
                  "' in the config file; docs/ssh-agent-and-more.md)");
        throw Pkcs11Error(CKR_PIN_INCORRECT);
    }
    const Secret tried = pin.clone();
    try {
        with_room_in_tpm(t, [&] { t.login(tpm(), std::move(pin)); });
    } catch (const TpmError& e) {
        if (e.is(TPM2_RC_AUTH_FAIL) || e.is(TPM2_RC_BAD_AUTH))
            pin_burst_.record(t.slot(), tried, false);
        throw;
    }
    if (t.needs_pin())
        pin_burst_.record(t.slot(), tried, true);
}

Bytes Module::sign(CK_SLOT_ID slot, const TpmSignRequest& request) {
    Token& t = token(slot);
    return with_room_in_tpm(t, [&] { return t.sign(tpm(), request); });
}

bool Module::same_pin(const std::string& a, const std::string& b) const {
    for (const std::vector<std::string>& group : same_pin_)
        if (std::find(group.begin(), group.end(), a) != group.end() &&
            std::find(group.begin(), group.end(), b) != group.end())
            return true;
    return false;
}

CK_ULONG Module::session_count(CK_SLOT_ID slot, bool read_write_only) const {
    CK_ULONG n = 0;
    for (const auto& [handle, s] : sessions_)
        if (s.slot == slot && (!read_write_only || (s.flags & CKF_RW_SESSION)))
            ++n;
    return n;
}

std::span<const TPM2_ALG_ID> Module::tpm_hashes() {
    if (!tpm_hashes_)
        tpm_hashes_ = implemented_hashes(tpm_.tpm());
    return *tpm_hashes_;
}

void Module::flush_parents_if_idle() noexcept {
    for (const auto& t : tokens_)
        if (t->holds_tpm_objects())
            return;
    tpm_.flush_parents();
}

void Module::end_call() noexcept {
    if (tpm_.may_hold_objects())
        return;
    // Saved contexts stay: they occupy nothing in the TPM.
    for (auto& t : tokens_)
        t->drop_tpm_objects();
    tpm_.flush_parents();
}

void Module::release_other_keys(const Token& keep) noexcept {
    for (auto& t : tokens_)
        if (t.get() != &keep)
            t->drop_tpm_objects();
    log_debug("the TPM is full: released the other keys to make room");
}

void Module::drop_tpm() noexcept {
    for (auto& t : tokens_) {
        t->drop_tpm_objects();
        t->drop_saved_context();
    }
    tpm_.close();
}

}  // namespace tpmkey::pkcs11
