#include "parent.hpp"

#include "core/base/error.hpp"
#include "core/tpm/tpm_keys.hpp"
#include "core/tpm/tpm_queries.hpp"
#include "core/trust/owner_srk.hpp"

#include <iostream>
#include <optional>
#include <string>

namespace tpmkey::keygen {

std::uint32_t choose_parent(Tpm& tpm, bool quiet, bool persist_srk) {
    const PersistentSrk srk = inspect_persistent_srk(tpm);
    using State = PersistentSrk::State;
    if (srk.state == State::unfit)
        std::cerr << "tpmkey-keygen: warning: 0x81000001 is not used: " << srk.detail << "\n";
    if (quiet) {
    } else if (srk.state == State::standard) {
        std::cout << "Parent: the TCG standard storage key (SRK) at 0x81000001\n";
    } else if (srk.state == State::absent && persist_srk) {
        // persist_owner_srk() keeps it at 0x81000001 once the key is made.
        std::cout << "Parent: the owner hierarchy's storage key (0x40000001); as 0x81000001 is empty,\n"
                     "        tpmkey-keygen persists it there once the key is made (not with --no-persist-srk)\n";
    } else {
        std::cout << "Parent: the owner hierarchy's storage key (0x40000001, re-created on use)";
        if (srk.state == State::other_storage_key)
            std::cout << ";\n        0x81000001 holds " << srk.detail
                      << ", which is used only when chosen on purpose (--parent 0x81000001)";
        else if (srk.state == State::absent && !persist_srk)
            std::cout << ";\n        'tpmkey setup' persists it at 0x81000001, so that logins need not re-create it";
        std::cout << "\n";
    }
    return srk.state == State::standard ? standard_srk : owner_hierarchy;
}

void refuse_owner_password(Tpm& tpm) {
    if (!owner_auth_set(tpm) || inspect_persistent_srk(tpm).state != PersistentSrk::State::absent)
        return;
    throw Error("the TPM's owner hierarchy has a password, which tpmkey-keygen does not take: the storage key "
                "0x40000001 cannot be re-created without it, and the standard SRK was not persisted at "
                "0x81000001; run 'tpmkey setup' (it asks for the password and persists the SRK there), then "
                "tpmkey-keygen again: new keys then go under 0x81000001; nothing was changed");
}

void persist_owner_srk(Tpm& tpm, KnownParents& known, bool quiet) {
    constexpr const char* prefix = "tpmkey-keygen: 0x81000001: ";
    try {
        const PersistentSrk present = inspect_persistent_srk(tpm);
        if (present.state == PersistentSrk::State::standard)
            return;  // the same key: pinned already (pin_owner_srk_persisted in run)
        if (present.state != PersistentSrk::State::absent) {
            if (!quiet)
                std::cout << "Parent: 0x81000001 holds another key, so the standard SRK was not persisted there "
                             "(it is left as it is): logins of this key re-create it\n";
            return;
        }
        const std::optional<ParentPin> owner = known.pin(tpm.address().identity(), owner_hierarchy);
        if (known.problem() || !owner || owner->ek.empty()) {
            std::cerr << prefix
                      << "the standard SRK was not persisted there: 0x40000001's pin could not be "
                         "recorded, so no login would use it\n";
            return;
        }
        // Pinned under another name before: a key of this TPM that is gone
        // (a clear evicts 0x81000001), or one check_owner_srk_pin refuses.
        const std::optional<ParentPin> old_pin = known.pin(tpm.address().identity(), standard_srk);
        const bool replaces_pin = old_pin && old_pin->name_hex != owner->name_hex;
        // No owner password: refuse_owner_password() saw to that, and
        // should one be set since, TPM2_CreatePrimary fails below.
        // Its handle is closed before it is read again: ESAPI keeps one
        // object per persistent handle.
        (void)persist_standard_srk(tpm, Secret(), [&](const TpmObject& made) {
            const std::string name = loaded_name_hex(tpm, made);
            if (name != owner->name_hex)
                throw ParentMismatch("the owner hierarchy's storage key now has the name " + name +
                                     ", not that of 0x40000001's pin (" + owner->name_hex + ")");
            check_owner_srk_pin(tpm, name, known);
        });
        if (!pin_owner_srk_persisted(tpm, known)) {
            std::cerr << prefix
                      << "persisted the standard SRK there, but could not pin it: logins re-create "
                         "it until a tool pins it ('tpmkey setup')\n";
            return;
        }
        if (!quiet)
            std::cout << "Parent: made the TCG standard storage key (SRK) and persisted it at 0x81000001, as "
                         "systemd-tpm2-setup does:\n        logins of keys under 0x40000001 read it instead of "
                         "re-creating it (--no-persist-srk leaves 0x81000001 empty)\n";
        if (!quiet && replaces_pin)
            std::cout << "        Its pin replaces that of the key 0x81000001 held before (gone with the TPM's clear, "
                         "or evicted)\n";
    } catch (const UnverifiedParent& e) {
        std::cerr << prefix << "the standard SRK was not persisted there: " << e.what() << "\n";
    } catch (const Error& e) {
        // A TPM error, mostly (a full NV, an owner password set meanwhile,
        // 0x81000001 taken meanwhile): the key is made all the same.
        std::cerr << prefix << "the standard SRK could not be persisted there (" << e.what()
                  << "); the key is made and works, logins re-create its parent ('tpmkey setup' tries again)\n";
    }
}

KnownParents load_known_parents() {
    KnownParents known = KnownParents::load();
    for (const std::string& w : known.warnings())
        std::cerr << "tpmkey-keygen: " << w << "\n";
    return known;
}

}  // namespace tpmkey::keygen
