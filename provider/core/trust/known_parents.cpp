#include "core/trust/known_parents.hpp"


#include "core/files/atomic_file.hpp"
#include "core/files/config.hpp"
#include "core/base/error.hpp"
#include "core/files/file_read.hpp"
#include "core/tpm/tpm_keys.hpp"
#include "core/base/log.hpp"
#include "core/tpm/tcti.hpp"

#include <tss2/tss2_mu.h>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace tpmkey {

namespace {

constexpr const char* systemd_srk_path = "/run/systemd/tpm2-srk-public-key.tpm2b_public";
constexpr std::size_t max_pins_file_size = 64 * 1024;

// systemd's SRK is the TCG template's key (ECC P-256 "H-2", empty unique):
// the same key that 0x40000001 re-creates when its public area says so.
bool is_standard_ecc_srk(const TPM2B_PUBLIC& pub) {
    TPM2B_PUBLIC without_unique = pub;
    without_unique.publicArea.unique = {};
    const TPM2B_PUBLIC tmpl = storage_key_template();
    return name_hex_of(without_unique) == name_hex_of(tmpl);
}

std::optional<TPM2B_PUBLIC> read_systemd_srk() {
    std::optional<FileRead> file;
    try {
        file = read_regular_file_if_present(systemd_srk_path, sizeof(TPM2B_PUBLIC));
    } catch (const Error&) {
    }
    if (!file)
        return std::nullopt;
    TPM2B_PUBLIC pub{};
    size_t offset = 0;
    if (file->owner != 0 ||
        Tss2_MU_TPM2B_PUBLIC_Unmarshal(file->data.data(), file->data.size(), &offset, &pub) != TSS2_RC_SUCCESS ||
        offset != file->data.size()) {
        log_error(std::string(systemd_srk_path) + ": ignored: not a TPM2B_PUBLIC written by root");
        return std::nullopt;
    }
    return pub;
}

}  // namespace

std::string name_hex_of(const TPM2B_PUBLIC& pub) {
    // The standard storage keys (and systemd's SRK) are named with SHA-256.
    if (pub.publicArea.nameAlg != TPM2_ALG_SHA256)
        throw Error("only SHA-256 names are computed here");
    return hex(tpm_name(pub.publicArea));
}

std::filesystem::path KnownParents::file_path() {
    const std::filesystem::path config = config_file_path();
    return config.empty() ? config : config.parent_path() / "known_parents";
}

KnownParents KnownParents::load() {
    const std::filesystem::path path = file_path();
    std::optional<FileRead> file;
    std::optional<std::string> problem;
    try {
        if (!path.empty())
            file = read_regular_file_if_present(path, max_pins_file_size);
        // Whoever may replace the pins may pin their own storage key.
        if (file)
            check_not_replaceable(path, *file, "pin file", "the pins");
    } catch (const Error& e) {
        problem = e.what();
    }
    KnownParents known = parse(file && !problem ? std::string(file->data.begin(), file->data.end()) : std::string(),
                               read_systemd_srk());
    known.problem_ = problem;
    return known;
}

KnownParents KnownParents::parse(std::string_view text, std::optional<TPM2B_PUBLIC> systemd_srk) {
    KnownParents known;
    known.systemd_srk_ = systemd_srk;
    std::istringstream in{std::string(text)};
    std::string line;
    int line_no = 0;
    while (std::getline(in, line)) {
        ++line_no;
        if (line.empty() || line[0] == '#')
            continue;
        std::istringstream fields(line);
        std::string handle_text_field, name, tpm;
        fields >> handle_text_field >> name >> tpm;
        std::string rest;
        fields >> rest;
        char* end = nullptr;
        const unsigned long handle = std::strtoul(handle_text_field.c_str(), &end, 16);
        // nameAlg (2 bytes) and a digest of up to 64 bytes, in lower-case hex.
        const bool name_ok = name.size() >= 6 && name.size() <= 132 && name.size() % 2 == 0 &&
                             std::all_of(name.begin(), name.end(), [](char c) {
                                 return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                             });
        if (!handle_text_field.starts_with("0x") || *end != '\0' || handle > 0xffffffffUL || !name_ok ||
            tpm.empty() || !rest.empty()) {
            known.warnings_.push_back(file_path().string() + ":" + std::to_string(line_no) +
                                      ": ignored: expected 'HANDLE NAME TPM'");
            continue;
        }
        try {
            // Lines written before the identity was canonical ("device:/dev/tpmrm0") are read as it is now.
            known.pins_.push_back({static_cast<std::uint32_t>(handle), name, Tcti(tpm).identity()});
        } catch (const Error& e) {
            known.warnings_.push_back(file_path().string() + ":" + std::to_string(line_no) + ": ignored: " + e.what());
        }
    }
    return known;
}

std::optional<std::string> KnownParents::expected(const std::string& tpm, std::uint32_t handle) const {
    for (const ParentPin& pin : pins_)
        if (pin.tpm == tpm && pin.handle == handle)
            return pin.name_hex;
    // systemd pins the SRK of the machine's own TPM.
    if (systemd_srk_ && tpm == "default" &&
        (handle == standard_srk || (handle == owner_hierarchy && is_standard_ecc_srk(*systemd_srk_))))
        return name_hex_of(*systemd_srk_);
    return std::nullopt;
}

std::vector<ParentPin> KnownParents::pinned_elsewhere(const std::string& tpm, std::uint32_t handle) const {
    std::vector<ParentPin> out;
    for (const ParentPin& pin : pins_)
        if (pin.tpm != tpm && pin.handle == handle)
            out.push_back(pin);
    return out;
}

void KnownParents::add(const std::string& tpm, std::uint32_t handle, const std::string& name_hex) {
    if (problem_)
        throw UnusablePinFile(*problem_);
    const std::filesystem::path path = file_path();
    if (path.empty())
        throw Error("no home directory to keep the pins in");
    // An existing file that cannot be read is not replaced: its pins would be lost.
    const std::optional<FileRead> file = read_regular_file_if_present(path, max_pins_file_size);
    std::string text = file ? std::string(file->data.begin(), file->data.end()) : std::string();
    if (text.empty())
        text = "# The storage keys (TPM parents) your tpmkey keys were made under, like ssh's known_hosts.\n"
               "# A different name means another TPM, a replaced SRK, or something between you and the TPM.\n"
               "# HANDLE NAME TPM\n";
    else if (text.back() != '\n')
        text += '\n';
    text += handle_text(handle) + " " + name_hex + " " + tpm + "\n";
    // Private whatever the umask: write_file_atomically refuses a
    // directory that others may write to.
    for (const std::filesystem::path& dir : {path.parent_path().parent_path(), path.parent_path()})
        if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
            throw Error(dir.string() + ": cannot create: " + std::strerror(errno));
    write_file_atomically(path, text, 0600, Replace::yes);
    pins_.push_back({handle, name_hex, tpm});
}

std::string loaded_name_hex(Tpm& tpm, const TpmObject& object) {
    EsysPtr<TPM2B_NAME> name;
    check_rc(Esys_TR_GetName(tpm.esys(), object.handle(), out_ptr(name)), "Esys_TR_GetName");
    return hex(std::span(name->name, name->size));
}

TpmObject load_verified_parent(Tpm& tpm, std::uint32_t handle, const KnownParents& known, bool* pinned) {
    if (known.problem())
        throw UnusablePinFile(*known.problem() + ": the pinned storage keys cannot be trusted, so none is used "
                              "until the file is fixed; nothing secret was sent to the TPM");
    TpmObject parent = load_parent(tpm, handle);
    const bool was_pinned = check_parent_name(tpm, handle, loaded_name_hex(tpm, parent), known);
    if (pinned)
        *pinned = was_pinned;
    return parent;
}

bool check_parent_name(Tpm& tpm, std::uint32_t handle, const std::string& name, const KnownParents& known) {
    const std::string file = KnownParents::file_path().string();
    const std::string id = Tcti(tpm.tcti()).identity();
    const std::optional<std::string> expected = known.expected(id, handle);
    if (expected && name != *expected)
        throw ParentMismatch("the TPM's storage key " + handle_text(handle) +
                             " is not the one this key was made under: possible TPM interposer or replaced SRK "
                             "(its name is " + name + ", the one pinned for TPM '" + id + "' in " + file + " is " +
                             *expected + "), or the pin was taken through an interposer when the key was made: "
                             "keys made then cannot be used; nothing secret was sent to it");
    // Another spelling of a pinned TPM (or a relay on another port) must
    // not be a first use: that is the interposer's way around a pin.
    const std::vector<ParentPin> others = expected ? std::vector<ParentPin>() : known.pinned_elsewhere(id, handle);
    if (!others.empty()) {
        std::string pinned_for;
        for (const ParentPin& pin : others)
            pinned_for += (pinned_for.empty() ? "" : ", ") + ("'" + pin.tpm + "' (name " + pin.name_hex + ")");
        throw ParentMismatch("the TPM's storage key " + handle_text(handle) + " (name " + name +
                             ") has no pin for TPM '" + id + "' but is pinned for " + pinned_for + " in " + file +
                             ": this may be a pinned TPM reached through something in between; nothing secret was "
                             "sent to it. If '" + id + "' is another TPM indeed, compare " + name +
                             " with a trusted source, then add the line '" + handle_text(handle) + " " + name + " " +
                             id + "' to " + file);
    }
    return expected.has_value();
}

bool pin_parent_on_first_use(Tpm& tpm, std::uint32_t handle, const TpmObject& parent, KnownParents& known) {
    const std::string id = Tcti(tpm.tcti()).identity();
    if (known.expected(id, handle))
        return false;
    known.add(id, handle, loaded_name_hex(tpm, parent));
    return true;
}

Diagnosis diagnose_untrusted_parent(const Error& e) {
    if (dynamic_cast<const UnusablePinFile*>(&e))
        return {TpmProblem::untrusted_parent, e.what(),
                "make it a regular file of yours that no one else may write to, in directories no one else may "
                "write to (chmod 600 " + KnownParents::file_path().string() + "; see docs/configuration.md)"};
    return {TpmProblem::untrusted_parent, e.what(),
            "type no PIN for this key until you know why: if you replaced the TPM's storage key yourself, remove "
            "its line from " + KnownParents::file_path().string() + "; see docs/security.md"};
}

}  // namespace tpmkey
