#include "cli.hpp"

#include "core/pin/prompt.hpp"
#include "core/tpm/tpm_keys.hpp"
#include "core/trust/owner_srk.hpp"

namespace tpmkey::cli {

namespace {
std::optional<TpmAddress>& recorded_tpm() {
    static std::optional<TpmAddress> address;
    return address;
}
}  // namespace

void record_tpm_in_use(const TpmAddress& address) { recorded_tpm() = address; }

const std::optional<TpmAddress>& tpm_in_use() { return recorded_tpm(); }

Secret pin_from_terminal(const std::string& prompt, const char* option) {
    try {
        return read_pin_from_terminal(prompt);
    } catch (const Interrupted&) {
        throw;
    } catch (const Error& e) {
        throw Error(std::string(e.what()) + " (no terminal? give the PIN with " + option + " FILE)");
    }
}

std::filesystem::path rewritten_key_file(const std::string& key) {
    std::error_code ec;
    if (std::filesystem::is_symlink(key, ec))
        return std::filesystem::canonical(key);
    return key;
}

TpmObject verified_parent_for_pin(Tpm& tpm, const KeyFile& key, const std::filesystem::path& file) {
    KnownParents known = KnownParents::load();
    try {
        // As the module: 0x40000001's key kept at 0x81000001 (pinned with
        // its name) is read there, not re-created (design.md, "Parent").
        if (key.parent == owner_hierarchy)
            if (std::optional<TpmObject> persisted = open_owner_srk_persisted(tpm, known))
                return std::move(*persisted);
        ParentCheck check;
        TpmObject parent = load_verified_parent(tpm, key.parent, known, &check,
                                                ParentPolicy{.accept_clear = false, .accept_new_tpm_ek = {}});
        // Proven just now: whether 0x81000001 holds the same key, for the next run.
        if (key.parent == owner_hierarchy && check.proven_now)
            (void)pin_owner_srk_persisted(tpm, known);
        return parent;
    } catch (const TpmError& e) {
        throw Error(file.string() + ": " + diagnose(e, tpm.address()).problem);
    } catch (const UnverifiedParent& e) {
        throw Error(file.string() + ": " + diagnosis_line(diagnose_untrusted_parent(e)));
    }
}

std::optional<Diagnosis> why_key_does_not_load(Tpm& tpm, const KeyFile& key, const std::filesystem::path& file,
                                               KnownParents& known, ParentCheck* check) {
    try {
        const TpmObject parent = load_verified_parent(tpm, key.parent, known, check);
        const Authorization auth = Authorization::for_secret(tpm, parent, false);
        const TpmObject loaded = load_key(tpm, parent, auth, key.blobs);
    } catch (const TpmError& e) {
        return diagnose_key_failure(e, tpm.address(), file, &known);
    } catch (const Error& e) {
        return diagnose_untrusted_parent(e);
    }
    return std::nullopt;
}

}  // namespace tpmkey::cli
