#include "module/module.hpp"

#include "core/base/error.hpp"
#include "core/keys/key_discovery.hpp"
#include "core/base/log.hpp"
#include "core/tpm/diagnosis.hpp"
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
    if (!t.needs_pin() || pin.empty()) {  // the token answers without the TPM
        t.login(tpm(), std::move(pin));
        return;
    }
    const std::optional<PinBurst::Verdicts> earlier = pin_burst_.for_another(t.slot(), pin);
    // Known to be right: the PIN a key took, for a key declared to share it.
    const bool known_right = earlier && earlier->accepted_by && same_pin(token(*earlier->accepted_by).label(), t.label());
    if (earlier && !known_right && earlier->refused_by) {
        const std::string refused = token(*earlier->refused_by).label();
        log_error(t.label() + ": not logged in: the PIN given for it was " +
                  (earlier->accepted_by ? "accepted for '" + token(*earlier->accepted_by).label() + "' but " : "") +
                  "refused for '" + refused + "' a moment ago; tpmkey sends a PIN passed on to every key "
                  "(ssh-add -s) to the TPM until one key refuses it, so that it counts against the TPM's "
                  "dictionary-attack counter once at most (a key with a PIN of its own: "
                  "docs/ssh-agent-and-more.md)");
        throw Pkcs11Error(CKR_PIN_INCORRECT);
    }
    if (!known_right) {
        const DictionaryAttackState da = lockout_state(t);
        // The PIN was right for another key: a guess for this one. It must
        // never cost a try the user's own PIN would need, so it leaves one
        // more than a PIN given for this key.
        if (earlier && earlier->accepted_by && !room_for_a_wrong_pin(da, guess_reserve)) {
            log_error(t.label() + ": not logged in: the PIN '" + token(*earlier->accepted_by).label() +
                      "' took was not tried for it: " + counted_text(da) + ", and tpmkey tries a PIN passed on "
                      "to a further key (ssh-add -s) only while a wrong one would leave " +
                      std::to_string(guess_reserve) + " tries or more (a key with a PIN of its own: "
                      "docs/ssh-agent-and-more.md)");
            throw Pkcs11Error(CKR_PIN_INCORRECT);
        }
        if (!room_for_a_wrong_pin(da, own_reserve)) {
            UINT32 wait = 0;
            for (DictionaryAttackState later = da; !room_for_a_wrong_pin(later, own_reserve); --later.failures)
                wait += da.recovery_seconds;
            log_error(t.label() + ": PIN not sent to the TPM: " + counted_text(da) + ", and one more would leave "
                      "it fewer than " + std::to_string(own_reserve) + " tries before it locks out every key; "
                      "try again in " + duration_text(wait) + " (the TPM forgives one wrong PIN every " +
                      duration_text(da.recovery_seconds) + " while the machine is on; docs/troubleshooting.md)");
            throw Pkcs11Error(CKR_PIN_LOCKED);
        }
    }
    const Secret tried = pin.clone();
    try {
        with_room_in_tpm(t, [&] { t.login(tpm(), std::move(pin)); });
    } catch (const TpmError& e) {
        if (e.is(TPM2_RC_AUTH_FAIL) || e.is(TPM2_RC_BAD_AUTH)) {
            pin_burst_.record(t.slot(), tried, false);
            if (earlier && earlier->accepted_by)
                log_error(t.label() + ": the PIN '" + token(*earlier->accepted_by).label() + "' took was tried for it " +
                          (known_right ? "(the config file says they share a PIN) " : "") +
                          "and refused: it has a PIN of its own (docs/ssh-agent-and-more.md)");
        }
        throw;
    }
    pin_burst_.record(t.slot(), tried, true);
}

DictionaryAttackState Module::lockout_state(Token& t) {
    try {
        return dictionary_attack_state(tpm().tpm());
    } catch (const TpmError& e) {
        throw e.about(t.label());
    }
}

bool Module::room_for_a_wrong_pin(const DictionaryAttackState& da, UINT32 reserve) noexcept {
    if (da.max_failures == 0 || da.locked_out())
        return true;  // the TPM answers for itself: no lockout, or a lockout the login reports
    // A PIN given for a key goes to a TPM that counted nothing, or a TPM
    // that locks after 1 or 2 would take no PIN at all; a guess does not.
    return (reserve == own_reserve && da.failures == 0) || da.failures + 1 + reserve <= da.max_failures;
}

std::string Module::counted_text(const DictionaryAttackState& da) {
    return "the TPM has counted " + std::to_string(da.failures) + " of " + std::to_string(da.max_failures) +
           " wrong PINs";
}

Bytes Module::sign(CK_SLOT_ID slot, const TpmSignRequest& request) {
    Token& t = token(slot);
    return with_room_in_tpm(t, [&] { return t.sign(tpm(), request); });
}

bool Module::same_pin(const std::string& a, const std::string& b) const {
    // The groups are joined where they share a key: "same-pin a b" and
    // "same-pin a c" (two keys made with --same-pin-as a) make b and c one PIN.
    std::vector<std::string> reached{a};
    for (std::size_t i = 0; i < reached.size(); ++i)
        for (const std::vector<std::string>& group : same_pin_)
            if (std::find(group.begin(), group.end(), reached[i]) != group.end())
                for (const std::string& name : group)
                    if (std::find(reached.begin(), reached.end(), name) == reached.end())
                        reached.push_back(name);
    return a != b && std::find(reached.begin(), reached.end(), b) != reached.end();
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
