#include "core/trust/owner_srk.hpp"

#include "core/base/log.hpp"
#include "core/keys/key_parts.hpp"
#include "core/tpm/tpm_keys.hpp"

namespace tpmkey {

namespace {

// 0x81000001 as the TPM answers now, with its name; nullopt where the
// handle is empty or ESAPI cannot read it (then the caller re-creates the
// key as before).
std::optional<std::pair<TpmObject, std::string>> read_srk(Tpm& tpm) {
    try {
        TpmObject srk = open_parent(tpm, standard_srk);
        std::string name = loaded_name_hex(tpm, srk);
        return std::make_pair(std::move(srk), std::move(name));
    } catch (const TpmError& e) {
        if (e.tpm_unreachable())
            throw;
        log_debug("0x81000001 does not answer as a storage key (" + std::string(e.what()) +
                  "): 0x40000001 is re-created");
        return std::nullopt;
    }
}

std::optional<ParentPin> proven_owner_pin(const std::string& id, const KnownParents& known) {
    std::optional<ParentPin> owner = known.pin(id, owner_hierarchy);
    if (!owner || owner->ek.empty())
        return std::nullopt;
    return owner;
}

// A pin of 0x81000001 that names another key than `owner` (0x40000001's
// proven pin) under the EK that proved `owner`: a key of this TPM that is
// gone (TPM2_Clear evicts 0x81000001, and so does tpm2_evictcontrol), as
// load_verified_parent judges a persistent parent whose new name the pinned
// EK proves (tpm_cleared_text). Any other pin of another name (another EK,
// none, systemd's) is left for load_verified_parent to judge.
bool replaced_by_same_tpm(const ParentPin& srk_pin, const ParentPin& owner) {
    return srk_pin.name_hex != owner.name_hex && !srk_pin.ek.empty() && srk_pin.ek == owner.ek;
}

}  // namespace

void check_owner_srk_pin(Tpm& tpm, const std::string& name, const KnownParents& known) {
    const std::string& id = tpm.address().identity();
    const std::optional<ParentPin> owner = proven_owner_pin(id, known);
    const std::optional<ParentPin> srk_pin = known.pin(id, standard_srk);
    if (srk_pin && owner && owner->name_hex == name && replaced_by_same_tpm(*srk_pin, *owner))
        return;
    check_parent_name(tpm, standard_srk, name, known);
}

std::optional<TpmObject> open_owner_srk_persisted(Tpm& tpm, const KnownParents& known) {
    if (known.problem())
        return std::nullopt;  // load_verified_parent says why
    const std::string& id = tpm.address().identity();
    const std::optional<ParentPin> owner = proven_owner_pin(id, known);
    const std::optional<ParentPin> srk_pin = known.pin(id, standard_srk);
    if (!owner || !srk_pin || srk_pin->name_hex != owner->name_hex)
        return std::nullopt;
    std::optional<std::pair<TpmObject, std::string>> srk = read_srk(tpm);
    if (!srk)
        return std::nullopt;
    if (srk->second != owner->name_hex) {
        log_debug("0x81000001 now holds another key than 0x40000001's (name " + srk->second +
                  "): 0x40000001 is re-created");
        return std::nullopt;
    }
    return std::move(srk->first);
}

bool pin_owner_srk_persisted(Tpm& tpm, KnownParents& known) {
    if (known.problem())
        return false;
    const std::string& id = tpm.address().identity();
    const std::optional<ParentPin> owner = proven_owner_pin(id, known);
    if (!owner)
        return false;
    const std::optional<std::pair<TpmObject, std::string>> srk = read_srk(tpm);
    if (!srk || srk->second != owner->name_hex)
        return false;
    const std::optional<ParentPin> srk_pin = known.pin(id, standard_srk);
    if (srk_pin && srk_pin->name_hex == owner->name_hex)
        return true;
    if (srk_pin && !replaced_by_same_tpm(*srk_pin, *owner))
        return false;  // pinned to another key: load_verified_parent decides about that one
    ParentPin pin = *owner;
    pin.handle = standard_srk;
    if (srk_pin) {
        // Keys made under the old one are gone: made_before_clear() says so from this time.
        pin.cleared = utc_now();
        log_info(tpm_cleared_text(standard_srk) + ": 0x81000001 holds 0x40000001's proven key now, pinned");
    }
    try {
        known.record(pin);
    } catch (const Error& e) {
        log_debug("0x81000001's pin could not be written (" + std::string(e.what()) + ")");
        return false;
    }
    return true;
}

OwnerSrkUse owner_srk_use(Tpm& tpm, const KnownParents& known) {
    return open_owner_srk_persisted(tpm, known) ? OwnerSrkUse::persistent : OwnerSrkUse::recreated;
}

std::string owner_srk_use_text(OwnerSrkUse use) {
    return use == OwnerSrkUse::persistent ? "the persistent SRK at 0x81000001 (the same key, pinned)"
                                          : "re-created in each process (TPM2_CreatePrimary)";
}

}  // namespace tpmkey
