#include "module/tpm_connection.hpp"

#include "core/base/log.hpp"
#include "core/trust/owner_srk.hpp"

namespace tpmkey {

Tpm& TpmConnection::tpm() {
    if (!tpm_)
        tpm_ = std::make_unique<Tpm>(address_);
    return *tpm_;
}

const TpmObject& TpmConnection::parent(std::uint32_t handle) {
    const auto found = parents_.find(handle);
    if (found != parents_.end() && found->second.loaded)
        return found->second.loaded;
    if (found != parents_.end() && found->second.saved)
        return reload(handle, found->second);
    if (!known_parents_) {
        known_parents_ = KnownParents::load();
        for (const std::string& w : known_parents_->warnings())
            log_error(w);
    }
    // The owner hierarchy's storage key kept at 0x81000001 (systemd-tpm2-setup,
    // tpmkey setup): a TPM2_ReadPublic instead of a TPM2_CreatePrimary.
    if (handle == owner_hierarchy) {
        if (std::optional<TpmObject> persisted = open_owner_srk_persisted(tpm(), *known_parents_)) {
            log_debug("parent 0x40000001: the same key is persistent at 0x81000001 (its pinned name), used there");
            Parent& parent = parents_[handle];
            parent.persistent = true;
            parent.loaded = std::move(*persisted);
            return parent.loaded;
        }
    }
    // A login is no moment to accept a cleared TPM (ParentPolicy), and a
    // proof that could not be pinned would let whoever answers at the next
    // login be trusted on its own first use: no PIN goes under either.
    ParentCheck check;
    TpmObject loaded = load_verified_parent(tpm(), handle, *known_parents_, &check,
                                            ParentPolicy{.accept_clear = false, .accept_new_tpm_ek = {}});
    log_parent_check(handle, check);
    if (check.proven_now && !check.not_recorded.empty())
        throw PinNotRecorded("the TPM's storage key " + handle_text(handle) +
                             " was proven, but its pin could not "
                             "be written (" +
                             check.not_recorded +
                             "): without a pin every login would be a "
                             "first use, so none goes on; nothing secret was sent");
    // Proven just now: note whether 0x81000001 holds the same key, for
    // the next process (one TPM2_ReadPublic, on this rare path only).
    if (handle == owner_hierarchy && check.proven_now)
        (void)pin_owner_srk_persisted(tpm(), *known_parents_);
    Parent& parent = parents_[handle];
    // Saved once, so that no later call pays a TPM2_CreatePrimary (on a real
    // TPM a key generation, tens of milliseconds to seconds).
    if (!has_resource_manager_ && handle == owner_hierarchy)
        parent.saved = SavedContext::save(tpm(), loaded);
    parent.loaded = std::move(loaded);
    return parent.loaded;
}

const TpmObject& TpmConnection::reload(std::uint32_t handle, Parent& parent) {
    try {
        TpmObject loaded = parent.saved->load(tpm());
        // ESAPI takes the parent's name and public area from the saved
        // context, which never left this process: sessions are salted with
        // the verified public area whatever the TPM's answer to
        // TPM2_ContextLoad; a handle swapped on the way gets salts it cannot
        // read, and the commands fail their HMACs.
        parent.loaded = std::move(loaded);
        return parent.loaded;
    } catch (const TpmError& e) {
        if (!saved_context_is_stale(e))
            throw;
        log_debug("the saved parent " + handle_text(handle) + " no longer loads (" + e.what() +
                  "): made again and verified");
        parents_.erase(handle);
        return this->parent(handle);
    }
}

void TpmConnection::flush_parents() noexcept {
    for (auto& [handle, parent] : parents_)
        if (handle == owner_hierarchy && !parent.persistent)
            parent.loaded = TpmObject();
    std::erase_if(parents_, [](const auto& entry) { return !entry.second.loaded && !entry.second.saved; });
}

void TpmConnection::close() noexcept {
    parents_.clear();
    tpm_.reset();
}

bool saved_context_is_stale(const TpmError& e) noexcept {
    // Anything the TPM refused about the blob itself. Not: an unreachable
    // TPM, or one without room for the object, which making it anew would
    // not cure.
    return !e.tpm_unreachable() && !e.is(TPM2_RC_OBJECT_MEMORY) && !e.is(TPM2_RC_SESSION_MEMORY) &&
           !e.is(TPM2_RC_MEMORY);
}

}  // namespace tpmkey
