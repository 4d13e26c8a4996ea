#include "module/login.hpp"

#include "core/base/log.hpp"
#include "core/pin/askpass.hpp"
#include "core/pin/source.hpp"
#include "core/tpm/diagnosis.hpp"
#include "core/tpm/pin_record.hpp"

#include <algorithm>

#include <openssl/crypto.h>

namespace tpmkey::pkcs11 {

Login::Login(const Config& config, const Tokens& tokens, TpmConnection& tpm)
    : tokens_(tokens), tpm_(tpm), same_pin_(config.same_pin) {}

void Login::with_pin(Token& t, const Secret& pin) {
    if (!t.has_pin() || pin.empty()) {  // the token answers without the TPM
        t.login(tpm_, pin);
        return;
    }
    if (t.shares_pin()) {
        with_shared_pin(t, pin);
        return;
    }
    const std::optional<PinBurst::Verdicts> earlier = burst_.for_another(t.slot(), pin);
    // Known to be right: the PIN a key took, for a key declared to share it.
    const bool known_right = earlier && earlier->accepted_by && same_pin(label(*earlier->accepted_by), t.label());
    if (earlier && !known_right && earlier->refused_by) {
        const std::string refused = label(*earlier->refused_by);
        log_error(t.label() + ": not logged in: the PIN given for it was " +
                  (earlier->accepted_by ? "accepted for '" + label(*earlier->accepted_by) + "' but " : "") +
                  "refused for '" + refused +
                  "' a moment ago; tpmkey sends a PIN passed on to every key "
                  "(ssh-add -s) to the TPM until one key refuses it, so that it counts against the TPM's "
                  "dictionary-attack counter once at most (a key with a PIN of its own: "
                  "docs/ssh-agent-and-more.md); it was not sent to the TPM for this key");
        with_own_prompt(t, not_sent);
        return;
    }
    if (!known_right) {
        const DictionaryAttackState da = lockout_state(t);
        // The PIN was right for another key: a guess for this one. It must
        // never cost a try the user's own PIN would need, so it leaves one
        // more than a PIN given for this key.
        if (earlier && earlier->accepted_by && !room_for_a_wrong_pin(da, guess_reserve)) {
            log_error(t.label() + ": not logged in: the PIN '" + label(*earlier->accepted_by) +
                      "' took was not tried for it: " + counted_text(da) +
                      ", and tpmkey tries a PIN passed on "
                      "to a further key (ssh-add -s) only while a wrong one would leave " +
                      std::to_string(guess_reserve) +
                      " tries or more (a key with a PIN of its own: "
                      "docs/ssh-agent-and-more.md)");
            with_own_prompt(t, not_sent);
            return;
        }
        require_room_for_a_wrong_pin(t, da);
    }
    if (const std::optional<TpmError> refused = send_pin(t, pin)) {
        burst_.record(t.slot(), pin, false);
        if (!earlier || !earlier->accepted_by)
            throw *refused;
        log_error(t.label() + ": the PIN '" + label(*earlier->accepted_by) + "' took was tried for it " +
                  (known_right ? "(the config file says they share a PIN) " : "") +
                  "and refused: it has a PIN of its own (docs/ssh-agent-and-more.md)");
        with_own_prompt(t, CKR_PIN_INCORRECT);
        return;
    }
    burst_.record(t.slot(), pin, true);
}

std::optional<TpmError> Login::send_pin(Token& t, const Secret& pin) {
    try {
        // Tried twice when the TPM was full: the PIN is lent, not given.
        with_room_in_tpm(tokens_, t, [&] { t.login(tpm_, pin); });
    } catch (const TpmError& e) {
        if (!e.is(TPM2_RC_AUTH_FAIL) && !e.is(TPM2_RC_BAD_AUTH))
            throw;
        return e;
    }
    return std::nullopt;
}

void Login::require_room_for_a_wrong_pin(Token& t, const DictionaryAttackState& da) {
    if (room_for_a_wrong_pin(da, own_reserve))
        return;
    UINT32 wait = 0;
    for (DictionaryAttackState later = da; !room_for_a_wrong_pin(later, own_reserve); --later.failures)
        wait += da.recovery_seconds;
    log_error(t.label() + ": PIN not sent to the TPM: " + counted_text(da) +
              ", and one more would leave it no try before it locks out every key; try again in " +
              duration_text(wait) + " (the TPM forgives one wrong PIN every " + duration_text(da.recovery_seconds) +
              " while the machine is on; docs/troubleshooting.md)");
    throw Pkcs11Error(CKR_PIN_LOCKED);
}

void Login::with_own_prompt(Token& t, CK_RV otherwise) {
    // Once per key per ssh-add -s: a person answers each prompt.
    if (!burst_.ask_once(t.slot()))
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
    std::optional<Secret> pin = askpass_secret(askpass, "Enter PIN for " + prompt_name(t) + ": ");
    burst_.keep_alive();
    if (!pin || pin->empty()) {
        log_error(t.label() + ": not logged in: no PIN given at its prompt (" + askpass.program + ")");
        throw Pkcs11Error(otherwise);
    }
    require_room_for_a_wrong_pin(t, lockout_state(t));
    with_room_in_tpm(tokens_, t, [&] { t.login(tpm_, *pin); });
}

DictionaryAttackState Login::lockout_state(Token& t) {
    try {
        return dictionary_attack_state(tpm_.tpm());
    } catch (const TpmError& e) {
        throw e.about(t.label());
    }
}

bool Login::room_for_a_wrong_pin(const DictionaryAttackState& da, UINT32 reserve) noexcept {
    if (da.max_failures == 0 || da.locked_out())
        return true;  // the TPM answers for itself: no lockout, or a lockout the login reports
    // A PIN given for a key goes to a TPM that counted nothing, or a TPM
    // that locks after 1 would take no PIN at all; a guess does not.
    return (reserve == own_reserve && da.failures == 0) || da.failures + 1 + reserve <= da.max_failures;
}

std::string Login::counted_text(const DictionaryAttackState& da) {
    return "the TPM has counted " + std::to_string(da.failures) + " of " + std::to_string(da.max_failures) +
           " wrong PINs";
}

void Login::from_source(Token& t) {
    const std::string source = describe(*t.pin_source());
    Secret pin;
    try {
        pin = read_pin(*t.pin_source());
    } catch (const PinSourceError& e) {
        // Fails closed: the PIN read before is forgotten, no other PIN is
        // tried. An expired keyring key ends the key's use there.
        t.logout();
        log_error(t.label() + ": not signing: its PIN comes from the " + source +
                  " (config file, pin-from), and that gives none: " + e.what() + "; nothing was sent to the TPM");
        throw Pkcs11Error(CKR_USER_NOT_LOGGED_IN);
    }
    if (t.logged_in_with(pin))
        return;
    // Another PIN than the one logged in with, if any: that one is forgotten.
    t.logout();
    // A PIN the TPM refused is not sent again while the source holds it:
    // each use would count one more wrong PIN, with nobody there to see it.
    // Known in this process, or from the record an earlier process left
    // (whose check costs TPM commands only when there is one).
    const RefusedPinRecords::Digest source_id = RefusedPinRecords::source_id(t.label(), source);
    bool refused_before = refused_source_pins_.refused(t.slot(), pin);
    if (!refused_before) {
        if (const std::optional<RefusedPinRecords::Digest> record = records_.find(source_id)) {
            const std::optional<RefusedPinRecords::Digest> now = pin_record(t, pin);
            refused_before = now && CRYPTO_memcmp(now->data(), record->data(), now->size()) == 0;
            if (refused_before)
                refused_source_pins_.remember(t.slot(), pin.clone());
            else if (now)
                store_record(source_id, std::nullopt);  // the source changed: the record is dropped
        }
    }
    if (refused_before) {
        log_error(t.label() + ": not signing: the PIN in the " + source +
                  " was refused by the TPM before and is not sent again until the source holds another one "
                  "(docs/unattended-keys.md)");
        // Not sent now, so not PIN_INCORRECT (and C_Sign has no such answer):
        // the key has no PIN to sign with, as when the source gives none.
        throw Pkcs11Error(CKR_USER_NOT_LOGGED_IN);
    }
    // The same margin as for a PIN typed for this key.
    require_room_for_a_wrong_pin(t, lockout_state(t));
    if (const std::optional<TpmError> refused = send_pin(t, pin)) {
        refused_source_pins_.remember(t.slot(), pin.clone());
        if (const std::optional<RefusedPinRecords::Digest> record = pin_record(t, pin))
            store_record(source_id, record);
        log_error(t.label() + ": the PIN in the " + source +
                  " is wrong: the TPM refused it and counted it as a wrong PIN; it is not sent again until the source "
                  "holds another one (docs/unattended-keys.md)");
        throw *refused;
    }
    log_debug(t.label() + ": logged in with the PIN from the " + source);
}

std::optional<RefusedPinRecords::Digest> Login::pin_record(Token& t, const Secret& pin) {
    try {
        return with_room_in_tpm(tokens_, t, [&] {
            return refused_pin_record(tpm_.tpm(), tpm_.parent(t.key_file().parent), t.key_file().blobs, pin);
        });
    } catch (const Error& e) {
        log_error(t.label() + ": no record of the refused PIN of its source could be made: " + e.what());
    }
    return std::nullopt;
}

void Login::store_record(const RefusedPinRecords::Digest& source,
                         const std::optional<RefusedPinRecords::Digest>& record) {
    try {
        records_.store(source, record);
    } catch (const Error& e) {
        log_error(std::string("the record of a refused source PIN was not written: ") + e.what() +
                  "; a process that starts afresh may send that PIN once more");
    }
}

bool Login::same_pin(const std::string& a, const std::string& b) const {
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

const std::string& Login::label(PinBurst::Slot slot) const { return tokens_.at(slot)->label(); }

}  // namespace tpmkey::pkcs11
