#include "cli.hpp"
#include "core/tpm/pin_object.hpp"

#include "core/files/config.hpp"
#include "core/pin/prompt.hpp"
#include "core/tpm/tpm_keys.hpp"
#include "core/trust/attestation_key.hpp"
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

OpenedKey::OpenedKey(const KeyFile& key, const std::filesystem::path& file, const Parsed& args,
                     const Bytes* ak_certificate, const std::string& ak_file)
    : key_(key),
      file_(file),
      pin_(args.has_value("--pin-file") ? read_pin_file(args.value("--pin-file")) : Secret()),
      tpm_(load_config().tpm) {
    if (ak_certificate) {
        TPMT_PUBLIC ak_area{};
        try {
            ak_ = create_ak_of_certificate(tpm_, *ak_certificate, ak_area);
        } catch (const TpmError&) {
            throw;  // main() says what the TPM's code means
        } catch (const Error& e) {
            throw Error(ak_file + ": " + e.what());
        }
    }
    // (a key made before a clear cannot load anyway)
    parent_ = verified_parent_for_pin(tpm_, key_, file_);
    // A key with the shared PIN has an empty auth value of its own, which
    // is what its ADMIN role (TPM2_Certify) takes: no PIN is asked or sent.
    if (!shared_pin_name(key_).empty())
        pin_ = Secret();
    else if (!args.has_value("--pin-file") && key_.needs_pin())
        pin_ = pin_from_terminal("Enter the PIN of " + file_.stem().string() + ": ", "--pin-file");
}

void OpenedKey::use(const std::function<void(const TpmObject& loaded, const Authorization& auth)>& use) {
    const Authorization auth = Authorization::for_secret(tpm_, parent_, !pin_.empty());
    try {
        const TpmObject loaded = load_key(tpm_, parent_, auth, key_.blobs);
        const AuthValue pin_set(tpm_, loaded, pin_);
        use(loaded, auth);
    } catch (const TpmError& e) {
        const Diagnosis d = diagnose(e, tpm_.address());
        throw Error(file_.string() + ": " + d.problem + " (" + d.solution + ")");
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
