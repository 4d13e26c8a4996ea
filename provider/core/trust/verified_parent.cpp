// Loading a storage key as a parent only once it is proven to be the TPM's
// (docs/design.md, "Parent"): load_verified_parent() as named steps over one
// ParentLoad, check_parent_name(), and what is logged and said of a check.
// The pins it reads and records are known_parents.cpp's.
#include "core/base/error.hpp"
#include "core/base/log.hpp"
#include "core/files/tcti.hpp"
#include "core/tpm/tpm_keys.hpp"
#include "core/trust/endorsement.hpp"
#include "core/trust/known_parents.hpp"

#include <tss2/tss2_mu.h>

#include <string>

namespace tpmkey {
std::string loaded_name_hex(Tpm& tpm, const TpmObject& object) {
    EsysPtr<TPM2B_NAME> name;
    check_rc(Esys_TR_GetName(tpm.esys(), object.handle(), out_ptr(name)), "Esys_TR_GetName");
    return hex(std::span(name->name, name->size));
}

namespace {

// The parent's public area for the proof: what TPM2_ReadPublic answers
// now, and only if it is the area ESAPI holds for the loaded parent (the
// one every session is salted with, whose name is pinned). Otherwise
// something between us and the TPM shows one key to the proof and salts
// secrets with another.
TPM2B_PUBLIC parent_public(Tpm& tpm, const TpmObject& parent, std::uint32_t handle) {
    const std::string held = loaded_name_hex(tpm, parent);
    const TPM2B_PUBLIC pub = read_public(tpm, parent, handle);
    if (hex(tpm_name(pub.publicArea)) != held || loaded_name_hex(tpm, parent) != held)
        throw ParentProofFailed("the parent's proof failed: the TPM's storage key " + handle_text(handle) +
                                " showed another public area to TPM2_ReadPublic than when it was loaded (name " +
                                hex(tpm_name(pub.publicArea)) + ", loaded as " + held +
                                "): possible TPM interposer; nothing secret was sent to it");
    return pub;
}

std::string ek_trust_text(const EndorsementKey& ek) {
    return ek.certified ? "EK certified by " + ek.issuer
                        : "EK trusted on first use (" + ek.why_not_certified + "), " + ek.pin;
}

}  // namespace

EndorsementKey prove_storage_key(Tpm& tpm, std::uint32_t handle) {
    const TpmObject parent = load_parent(tpm, handle);
    return prove_parent(tpm, parent, parent_public(tpm, parent, handle), default_ek_roots());
}

namespace {

// The steps of load_verified_parent, in its order, on what it knows of
// the parent so far.
struct ParentLoad {
    Tpm& tpm;
    std::uint32_t handle;
    KnownParents& known;
    const ParentPolicy& policy;
    std::string file;               // the pin file, for the messages
    std::string id;                 // the TPM's identity, as its pins name it
    std::string name;               // the loaded parent's name
    std::optional<ParentPin> pin;   // this TPM's pin of the handle
    std::vector<ParentPin> others;  // pins of the handle for other TPMs, when this one has no proven pin
    ParentCheck found;
};

void check_pin_file_usable(const KnownParents& known) {
    if (known.problem())
        throw UnusablePinFile(*known.problem() + ": the pinned storage keys cannot be trusted, so none is used "
                                                 "until the file is fixed; nothing secret was sent to the TPM");
}

std::string mismatch_text(const ParentLoad& p) {
    return "the TPM's storage key " + handle_text(p.handle) +
           " is not the one this key was made under: possible TPM interposer or replaced SRK";
}

// Proven before and unchanged: no TPM command more (the login budgets).
// The name is the hash of the public area that passed check_storage_key
// and the proof, so a persistent parent's attributes need no second
// TPM2_ReadPublic.
bool proven_before(ParentLoad& p) {
    if (!p.pin || p.pin->name_hex != p.name || p.pin->ek.empty())
        return false;
    p.found.pin = *p.pin;
    return true;
}

// A pin from before the proof by the EK, of another name: a cleared TPM
// cannot be told from an interposer.
void check_no_new_name_under_unproven_pin(const ParentLoad& p) {
    if (p.pin && p.pin->name_hex != p.name && p.pin->ek.empty())
        throw ParentMismatch(mismatch_text(p) + " (its name is " + p.name + ", the one pinned for TPM '" + p.id +
                             "' in " + p.file + " is " + p.pin->name_hex +
                             ", pinned before tpmkey proved storage keys by the TPM's "
                             "endorsement key, so a cleared TPM cannot be told from an interposer here); keys made "
                             "under the pinned one cannot be used; nothing secret was sent to it");
}

// No pin for this TPM, but for others: the same name is the same storage
// key (a session salted to it can be read only inside the TPM that holds
// it), whatever the road to it. A pin of this road not proven yet (an old
// line, systemd's) whose name another road has proven is that proven key
// too: no first use of an EK here, which an interposer on this road could
// answer for.
bool proven_on_another_road(ParentLoad& p) {
    if (!p.pin || p.pin->ek.empty())
        p.others = p.known.pinned_elsewhere(p.id, p.handle);
    const auto same = std::find_if(p.others.begin(), p.others.end(),
                                   [&](const ParentPin& o) { return o.name_hex == p.name && !o.ek.empty(); });
    if (same == p.others.end())
        return false;
    p.found.same_as = same->tpm;
    p.found.pin = ParentPin{p.handle, p.name, p.id, same->ek, same->proven, same->cleared};
    try {
        p.known.record(p.found.pin);
    } catch (const Error& e) {
        p.found.not_recorded = e.what();  // matched all the same: the next use compares again
    }
    return true;
}

// It must be a storage key bound to the TPM, and the endorsement key
// proves it.
EndorsementKey prove_loaded_parent(ParentLoad& p, const TpmObject& parent) {
    const TPM2B_PUBLIC parent_area = parent_public(p.tpm, parent, p.handle);
    check_storage_key(parent_area.publicArea, p.handle);
    return prove_parent(p.tpm, parent, parent_area, default_ek_roots());
}

// A new name under this TPM's pin: only the pinned EK may prove it (a
// cleared TPM).
void check_new_name_by_pinned_ek(ParentLoad& p, const EndorsementKey& ek) {
    if (!p.pin || p.pin->name_hex == p.name)
        return;
    if (!same_endorsement_key(p.pin->ek, ek))
        throw ParentMismatch(mismatch_text(p) + ", and not a cleared TPM: its endorsement key is not the pinned one (" +
                             ek.pin + "; pinned for TPM '" + p.id + "' in " + p.file + ": " + p.pin->ek +
                             "). A TPM's endorsement key never changes, not even when the TPM is cleared: "
                             "another TPM answers at this address, or something in between answers for it; "
                             "nothing secret was sent to it");
    p.found.cleared = true;
}

// A TPM not seen before, whose handle is pinned for others under other
// names (another road to a pinned TPM, or another TPM): the EK decides.
void check_new_tpm(ParentLoad& p, const EndorsementKey& ek) {
    const bool unproven_same_name =
        std::any_of(p.others.begin(), p.others.end(), [&](const ParentPin& o) { return o.name_hex == p.name; });
    if (p.pin || p.others.empty() || unproven_same_name)
        return;
    const auto same_ek = std::find_if(p.others.begin(), p.others.end(),
                                      [&](const ParentPin& o) { return same_endorsement_key(o.ek, ek); });
    if (same_ek != p.others.end()) {
        p.found.cleared = true;  // the EK of a pinned TPM proves it: that TPM, with a new storage key
        p.found.same_as = same_ek->tpm;
        return;
    }
    if (ek.certified || (!p.policy.accept_new_tpm_ek.empty() && p.policy.accept_new_tpm_ek == ek.pin)) {
        p.found.new_tpm = true;
        return;
    }
    std::string pinned_for;
    for (const ParentPin& o : p.others)
        pinned_for += (pinned_for.empty() ? "" : ", ") + ("'" + o.tpm + "' (name " + o.name_hex + ")");
    throw NewTpmRefused("the TPM's storage key " + handle_text(p.handle) + " (name " + p.name +
                        ") has no pin for TPM '" + p.id + "' but is pinned for " + pinned_for + " in " + p.file +
                        ": this may be a pinned TPM reached through "
                        "something in between (an interposer), or another TPM; its endorsement key (" +
                        ek.pin +
                        ") is not certified by a trusted root, so tpmkey cannot tell; nothing secret was sent to it. "
                        "If '" +
                        p.id +
                        "' is another TPM indeed (a second simulator, a new machine's TPM), accept it on purpose: "
                        "tpmkey trust-tpm --tcti '" +
                        p.id + "'" +
                        (p.handle == owner_hierarchy ? std::string() : " --parent " + handle_text(p.handle)));
}

void check_clear_accepted(const ParentLoad& p) {
    if (p.found.cleared && !p.policy.accept_clear)
        throw ClearNotAccepted(
            "the TPM's storage key " + handle_text(p.handle) + " is not the one pinned for TPM '" + p.id + "' in " +
            p.file + " but is proven by its pinned endorsement key: " + tpm_cleared_text(p.handle) +
            "; a login does not accept a new storage key on its own, and keys made before cannot load anyway; "
            "nothing secret was sent. 'tpmkey doctor' accepts it, says which keys are gone, and pins it");
}

// The proven parent, pinned for this TPM.
void record_proven(ParentLoad& p, const EndorsementKey& ek) {
    p.found.proven_now = true;
    p.found.ek_text = ek_trust_text(ek);
    const bool ek_known = (p.pin && same_endorsement_key(p.pin->ek, ek)) || p.found.cleared;
    p.found.ek_first_use = !ek.certified && !ek_known;
    const std::string now = utc_now();
    const ParentPin proven{p.handle, p.name, p.id,
                           ek.pin,   now,    p.found.cleared ? now : p.pin ? p.pin->cleared : std::string()};
    try {
        p.known.record(proven);
        p.found.pin = proven;
    } catch (const Error& e) {
        // Proven for this run; the next one proves it again (the module
        // does not go on: log_parent_check).
        p.found.not_recorded = e.what();
    }
}

// Not proven yet, or a new name: the endorsement key decides.
void prove_and_record(ParentLoad& p, const TpmObject& parent) {
    const EndorsementKey ek = prove_loaded_parent(p, parent);
    check_new_name_by_pinned_ek(p, ek);
    check_new_tpm(p, ek);
    check_clear_accepted(p);
    record_proven(p, ek);
}

}  // namespace

TpmObject load_verified_parent(Tpm& tpm, std::uint32_t handle, KnownParents& known, ParentCheck* check,
                               const ParentPolicy& policy) {
    const std::string file = KnownParents::file_path().string();
    check_pin_file_usable(known);
    const std::string& id = tpm.address().identity();
    TpmObject parent = open_parent(tpm, handle);
    const std::string name = loaded_name_hex(tpm, parent);
    ParentLoad p{tpm, handle, known, policy, file, id, name, known.pin(id, handle), {}, {}};
    p.found.pinned = p.pin.has_value();
    p.found.name_hex = name;
    if (!proven_before(p)) {
        check_no_new_name_under_unproven_pin(p);
        if (!proven_on_another_road(p))
            prove_and_record(p, parent);
    }
    if (check)
        *check = p.found;
    return parent;
}

void check_parent_name(Tpm& tpm, std::uint32_t handle, const std::string& name, const KnownParents& known) {
    const std::string file = KnownParents::file_path().string();
    const std::string& id = tpm.address().identity();
    const std::optional<std::string> expected = known.expected(id, handle);
    if (expected && name != *expected)
        throw ParentMismatch("the TPM's storage key " + handle_text(handle) +
                             " is not the one this key was made under: possible TPM interposer or replaced SRK "
                             "(its name is " +
                             name + ", the one pinned for TPM '" + id + "' in " + file + " is " + *expected + ")");
}

std::string tpm_cleared_text(std::uint32_t handle) {
    if (handle == owner_hierarchy)
        return "the TPM was cleared (same TPM, new storage key): keys made before are gone; new keys can be made";
    return "the storage key at " + handle_text(handle) +
           " was replaced by another of the same TPM (the TPM was "
           "cleared, or the key evicted and made anew): keys made under the old one are gone; new keys can be made";
}

std::string parent_check_text(std::uint32_t handle, const ParentCheck& check) {
    const std::string parent = "the TPM's storage key " + handle_text(handle);
    const std::string file = KnownParents::file_path().string();
    const std::string not_written =
        check.not_recorded.empty() ? std::string() : "; its pin could not be written (" + check.not_recorded + ")";
    if (!check.proven_now && !check.same_as.empty())
        return parent + " matches its pin for TPM '" + check.same_as + "' in " + file +
               " (the same storage key, reached another way)" +
               (not_written.empty() ? "; pinned for TPM '" + check.pin.tpm + "' too" : not_written);
    if (!check.proven_now)
        return parent + " matches its pin in " + file + " (proven " + check.pin.proven + " by its " +
               (check.pin.certified() ? "certified EK" : "EK trusted on first use") + ")";
    std::string text = parent;
    if (check.cleared && !check.same_as.empty())
        text += " is new, and proven by the endorsement key pinned for TPM '" + check.same_as + "': ";
    else if (check.cleared)
        text += " is new, and proven by the same endorsement key as before: ";
    else
        text += " is proven genuine by the TPM's endorsement key: ";
    text += check.ek_text;
    if (check.new_tpm)
        text += "; a TPM not seen before (its storage key " + handle_text(handle) + " is pinned for other TPMs)";
    if (check.ek_first_use)
        text += "; from now on only this EK proves this TPM's storage keys";
    if (!not_written.empty())
        return text + not_written + ": the proof runs again next time";
    return text + "; pinned in " + file + " (its name is " + check.name_hex + ")";
}

void log_parent_check(std::uint32_t handle, const ParentCheck& check) {
    // An EK trusted from now on is information here (ssh prints the
    // module's errors at every login): keygen says so, and doctor names it.
    if (check.cleared)
        log_error(tpm_cleared_text(handle) + ": " + parent_check_text(handle, check));
    else if (!check.not_recorded.empty())
        log_error(parent_check_text(handle, check));
    else if (check.proven_now || !check.same_as.empty())
        log_info(parent_check_text(handle, check));
}

}  // namespace tpmkey
