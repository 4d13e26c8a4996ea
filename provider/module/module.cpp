#include "module/module.hpp"

#include "core/base/askpass.hpp"
#include "core/base/error.hpp"
#include "core/base/log.hpp"
#include "core/base/printable.hpp"
#include "core/files/file_read.hpp"
#include "core/files/pin_source.hpp"
#include "core/keys/key_discovery.hpp"
#include "core/tpm/diagnosis.hpp"
#include "core/tpm/tpm_queries.hpp"

#include <algorithm>

namespace tpmkey::pkcs11 {

namespace {

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

Module::Module(const Config& config)
    : tpm_(config.tpm), same_pin_(config.same_pin), confirm_(config.confirm), config_refused_(config.file_problem) {
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

void Module::login(Token& t, const Secret& pin) {
    if (!t.has_pin() || pin.empty()) {  // the token answers without the TPM
        t.login(tpm(), pin);
        return;
    }
    const std::optional<PinBurst::Verdicts> earlier = pin_burst_.for_another(t.slot(), pin);
    // Known to be right: the PIN a key took, for a key declared to share it.
    const bool known_right =
        earlier && earlier->accepted_by && same_pin(token(*earlier->accepted_by).label(), t.label());
    if (earlier && !known_right && earlier->refused_by) {
        const std::string refused = token(*earlier->refused_by).label();
        log_error(t.label() + ": not logged in: the PIN given for it was " +
                  (earlier->accepted_by ? "accepted for '" + token(*earlier->accepted_by).label() + "' but " : "") +
                  "refused for '" + refused +
                  "' a moment ago; tpmkey sends a PIN passed on to every key "
                  "(ssh-add -s) to the TPM until one key refuses it, so that it counts against the TPM's "
                  "dictionary-attack counter once at most (a key with a PIN of its own: "
                  "docs/ssh-agent-and-more.md)");
        login_with_own_prompt(t, CKR_PIN_INCORRECT);
        return;
    }
    if (!known_right) {
        const DictionaryAttackState da = lockout_state(t);
        // The PIN was right for another key: a guess for this one. It must
        // never cost a try the user's own PIN would need, so it leaves one
        // more than a PIN given for this key.
        if (earlier && earlier->accepted_by && !room_for_a_wrong_pin(da, guess_reserve)) {
            log_error(t.label() + ": not logged in: the PIN '" + token(*earlier->accepted_by).label() +
                      "' took was not tried for it: " + counted_text(da) +
                      ", and tpmkey tries a PIN passed on "
                      "to a further key (ssh-add -s) only while a wrong one would leave " +
                      std::to_string(guess_reserve) +
                      " tries or more (a key with a PIN of its own: "
                      "docs/ssh-agent-and-more.md)");
            login_with_own_prompt(t, CKR_PIN_INCORRECT);
            return;
        }
        require_room_for_a_wrong_pin(t, da);
    }
    if (const std::optional<TpmError> refused = send_pin(t, pin)) {
        pin_burst_.record(t.slot(), pin, false);
        if (!earlier || !earlier->accepted_by)
            throw *refused;
        log_error(t.label() + ": the PIN '" + token(*earlier->accepted_by).label() + "' took was tried for it " +
                  (known_right ? "(the config file says they share a PIN) " : "") +
                  "and refused: it has a PIN of its own (docs/ssh-agent-and-more.md)");
        login_with_own_prompt(t, CKR_PIN_INCORRECT);
        return;
    }
    pin_burst_.record(t.slot(), pin, true);
}

std::optional<TpmError> Module::send_pin(Token& t, const Secret& pin) {
    try {
        // Tried twice when the TPM was full: the PIN is lent, not given.
        with_room_in_tpm(t, [&] { t.login(tpm(), pin); });
    } catch (const TpmError& e) {
        if (!e.is(TPM2_RC_AUTH_FAIL) && !e.is(TPM2_RC_BAD_AUTH))
            throw;
        return e;
    }
    return std::nullopt;
}

void Module::require_room_for_a_wrong_pin(Token& t, const DictionaryAttackState& da) {
    if (room_for_a_wrong_pin(da, own_reserve))
        return;
    UINT32 wait = 0;
    for (DictionaryAttackState later = da; !room_for_a_wrong_pin(later, own_reserve); --later.failures)
        wait += da.recovery_seconds;
    log_error(t.label() + ": PIN not sent to the TPM: " + counted_text(da) +
              ", and one more would leave it "
              "fewer than " +
              std::to_string(own_reserve) + " tries before it locks out every key; try again in " +
              duration_text(wait) + " (the TPM forgives one wrong PIN every " + duration_text(da.recovery_seconds) +
              " while the machine is on; docs/troubleshooting.md)");
    throw Pkcs11Error(CKR_PIN_LOCKED);
}

void Module::login_with_own_prompt(Token& t, CK_RV otherwise) {
    // Once per key per ssh-add -s: a person answers each prompt.
    if (!pin_burst_.ask_once(t.slot()))
        throw Pkcs11Error(otherwise);
    const Askpass askpass = find_askpass();
    if (askpass.program.empty()) {
        log_error(t.label() + ": no PIN prompt could be shown for it: " + askpass.why_not +
                  (running_in_ssh_agent()
                       ? "; to add it, start the agent where a prompt can be shown, or run ssh-add -s with its PIN "
                         "and an agent started with TPMKEY_KEYS naming it (docs/ssh-agent-and-more.md)"
                       : "; log in to it with its own PIN (docs/ssh-agent-and-more.md)"));
        throw Pkcs11Error(otherwise);
    }
    const std::string comment = pub_comment(t.path());
    std::optional<Secret> pin =
        askpass_secret(askpass, "Enter PIN for '" + t.label() + "' (" + printable(t.path().string()) +
                                    (comment.empty() ? "" : ", " + comment) + "): ");
    pin_burst_.keep_alive();
    if (!pin || pin->empty()) {
        log_error(t.label() + ": not logged in: no PIN given at its prompt (" + askpass.program + ")");
        throw Pkcs11Error(otherwise);
    }
    require_room_for_a_wrong_pin(t, lockout_state(t));
    with_room_in_tpm(t, [&] { t.login(tpm(), *pin); });
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
    if (needs_confirmation(t))
        confirm_use(t);
    if (t.pin_source())
        login_from_source(t);
    return with_room_in_tpm(t, [&] { return t.sign(tpm(), request); });
}

void Module::login_from_source(Token& t) {
    const PinSource& source = *t.pin_source();
    Secret pin;
    try {
        pin = read_pin(source);
    } catch (const PinSourceError& e) {
        // Fails closed: the PIN read before is forgotten, no other PIN is
        // tried. An expired keyring key ends the key's use there.
        t.logout();
        log_error(t.label() + ": not signing: its PIN comes from the " + describe(source) +
                  " (config file, pin-from), and that gives none: " + e.what() + "; nothing was sent to the TPM");
        throw Pkcs11Error(CKR_USER_NOT_LOGGED_IN);
    }
    if (t.logged_in_with(pin))
        return;
    // A PIN the TPM refused is not sent again while the source holds it:
    // each use would count one more wrong PIN, with nobody there to see it.
    if (t.refused_source_pin(pin)) {
        t.logout();
        log_error(t.label() + ": not signing: the PIN in the " + describe(source) +
                  " was refused by the TPM before and is not sent again until the source holds another one "
                  "(docs/unattended-keys.md)");
        throw Pkcs11Error(CKR_PIN_INCORRECT);
    }
    t.logout();
    // The same margin as for a PIN typed for this key.
    require_room_for_a_wrong_pin(t, lockout_state(t));
    if (const std::optional<TpmError> refused = send_pin(t, pin)) {
        t.remember_refused_source_pin(pin.clone());
        log_error(t.label() + ": the PIN in the " + describe(source) +
                  " is wrong: the TPM refused it and counted it as a wrong PIN; it is not sent again until the source "
                  "holds another one (docs/unattended-keys.md)");
        throw *refused;
    }
    log_debug(t.label() + ": logged in with the PIN from the " + describe(source));
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
    const std::string comment = pub_comment(t.path());
    // The reason goes into the prompt when it is not the user's own line:
    // a question nobody asked for needs one.
    if (!askpass_confirm(askpass, "Allow use of key '" + t.label() + "' (" + printable(t.path().string()) +
                                      (comment.empty() ? "" : ", " + comment) + ")?" +
                                      (config_refused_.empty()
                                           ? ""
                                           : " (asked for every key: tpmkey's config file is not used, as others "
                                             "could have written it or it cannot be read; see tpmkey doctor)"))) {
        log_error(t.label() + ": signature refused at the confirmation prompt");
        throw Pkcs11Error(CKR_FUNCTION_REJECTED);
    }
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
