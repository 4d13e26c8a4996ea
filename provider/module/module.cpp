#include "module/module.hpp"

#include "core/base/error.hpp"
#include "core/base/log.hpp"
#include "core/base/printable.hpp"
#include "core/keys/key_discovery.hpp"
#include "core/pin/askpass.hpp"
#include "core/tpm/diagnosis.hpp"
#include "core/tpm/tpm_queries.hpp"

#include <algorithm>

namespace tpmkey::pkcs11 {

Module::Module(const Config& config)
    : tpm_(config.tpm), login_(config, tokens_, tpm_), confirm_(config.confirm), config_refused_(config.file_problem) {
    for (const std::string& warning : config.warnings)
        log_error(warning);
    if (!config_refused_.empty())
        log_error("the config file is not used (" + config_refused_ +
                  "), so its confirm lines are unknown: until it is fixed, every key signs only after a yes at a "
                  "confirmation prompt (docs/configuration.md)");
    for (FoundKeyFile& found : find_keys(config)) {
        if (!found.key) {
            log_error(found.skip_message + " (key skipped)");
            continue;
        }
        try {
            std::optional<PinSource> source;
            const std::string name = printable(found.path.stem().string());
            for (const auto& [key_name, from] : config.pin_from)
                if (key_name == name) {
                    if (found.key->file.needs_pin())
                        source = from;
                    else
                        log_error(name + ": the key has no PIN; the config file's pin-from line for it is ignored");
                }
            auto token = std::make_unique<Token>(tokens_.size(), found.path, std::move(*found.key), std::move(source));
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

Bytes Module::sign(CK_SLOT_ID slot, const TpmSignRequest& request) {
    Token& t = token(slot);
    if (needs_confirmation(t))
        confirm_use(t);
    if (t.pin_source())
        login_.from_source(t);
    return with_room_in_tpm(tokens_, t, [&] { return t.sign(tpm(), request); });
}

bool Module::needs_confirmation(const Token& t) const {
    return !config_refused_.empty() || std::find(confirm_.begin(), confirm_.end(), t.label()) != confirm_.end();
}

void Module::confirm_use(Token& t) {
    // As ssh-add -c: the askpass program asks, SSH_ASKPASS_PROMPT=confirm;
    // no program, or any answer but yes, denies.
    const Askpass askpass = find_askpass();
    if (askpass.program.empty()) {
        log_error(t.label() + ": signature refused: " +
                  (config_refused_.empty() ? "the config file asks to confirm each use of this key"
                                           : "each use of every key is confirmed while the config file is not "
                                             "used (" +
                                                 config_refused_ + ")") +
                  ", and no prompt could be shown: " + askpass.why_not + " (docs/configuration.md)");
        throw Pkcs11Error(CKR_FUNCTION_REJECTED);
    }
    // The reason goes into the prompt when it is not the user's own line:
    // a question nobody asked for needs one.
    if (!askpass_confirm(askpass, "Allow use of key " + prompt_name(t) + "?" +
                                      (config_refused_.empty()
                                           ? ""
                                           : " (asked for every key: tpmkey's config file is not used, as others "
                                             "could have written it or it cannot be read; see tpmkey doctor)"))) {
        log_error(t.label() + ": signature refused at the confirmation prompt");
        throw Pkcs11Error(CKR_FUNCTION_REJECTED);
    }
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

void Module::drop_tpm() noexcept {
    for (auto& t : tokens_) {
        t->drop_tpm_objects();
        t->drop_saved_context();
    }
    tpm_.close();
}

}  // namespace tpmkey::pkcs11
