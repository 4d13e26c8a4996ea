#include "core/trust/known_parents.hpp"

#include "core/base/error.hpp"
#include "core/base/home.hpp"
#include "core/base/log.hpp"
#include "core/files/atomic_file.hpp"
#include "core/files/config.hpp"
#include "core/files/file_read.hpp"
#include "core/files/tcti.hpp"
#include "core/tpm/tpm_keys.hpp"
#include "core/trust/endorsement.hpp"

#include <tss2/tss2_mu.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
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

bool is_lower_hex(std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// "cert:" + a SHA-256 or "ek:" + a name (nameAlg and a digest of up to 64 bytes), in lower-case hex.
bool is_ek_pin(std::string_view s) {
    const std::string_view hex_part = s.starts_with("cert:") ? s.substr(5) : s.starts_with("ek:") ? s.substr(3) : "";
    return hex_part.size() >= 6 && hex_part.size() <= 132 && hex_part.size() % 2 == 0 && is_lower_hex(hex_part);
}

// 2026-11-25T19:40:00Z, the one spelling of a time in the file.
std::optional<std::time_t> parse_utc(const std::string& s) {
    std::tm tm{};
    const char* end = ::strptime(s.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (s.size() != 20 || !end || *end != '\0')
        return std::nullopt;
    return ::timegm(&tm);
}

std::string pin_line(const ParentPin& pin) {
    std::string line = handle_text(pin.handle) + " " + pin.name_hex + " " + pin.tpm;
    if (!pin.ek.empty())
        line += " " + pin.ek + " " + pin.proven + (pin.cleared.empty() ? "" : " " + pin.cleared);
    return line;
}

// A line of the file as a pin (nullopt: a comment, or a line that is no pin; `why` says which).
std::optional<ParentPin> parse_pin_line(const std::string& line, std::string& why) {
    why.clear();
    if (line.empty() || line[0] == '#')
        return std::nullopt;
    std::istringstream fields(line);
    std::string handle_field, name, tpm, ek, proven, cleared, rest;
    fields >> handle_field >> name >> tpm >> ek >> proven >> cleared >> rest;
    char* end = nullptr;
    const unsigned long handle = std::strtoul(handle_field.c_str(), &end, 16);
    // nameAlg (2 bytes) and a digest of up to 64 bytes, in lower-case hex.
    const bool name_ok = name.size() >= 6 && name.size() <= 132 && name.size() % 2 == 0 && is_lower_hex(name);
    const bool proof_ok = ek.empty() || (is_ek_pin(ek) && parse_utc(proven) && (cleared.empty() || parse_utc(cleared)));
    if (!handle_field.starts_with("0x") || *end != '\0' || handle > 0xffffffffUL || !name_ok || tpm.empty() ||
        !proof_ok || !rest.empty()) {
        why = "expected 'HANDLE NAME TPM [EK PROVEN [CLEARED]]'";
        return std::nullopt;
    }
    try {
        // Lines written before the identity was canonical ("device:/dev/tpmrm0") are read as it is now.
        return ParentPin{static_cast<std::uint32_t>(handle), name, Tcti(tpm).identity(), ek, proven, cleared};
    } catch (const Error& e) {
        why = e.what();
        return std::nullopt;
    }
}

const char* const file_header =
    "# The storage keys (TPM parents) your tpmkey keys were made under, like ssh's known_hosts,\n"
    "# each with the endorsement key (EK) that proved it genuine: cert:SHA-256 of its certificate,\n"
    "# or ek:its name where it is trusted on first use. 'tpmkey forget-tpm' drops a TPM's pins.\n"
    "# HANDLE NAME TPM [EK PROVEN [CLEARED]]\n";

// With no pin file, the directories it would be in, as check_not_replaceable
// checks those of a file that exists: whoever may write to one of them may
// delete the pins (every use a first use) or put their own there.
void check_pin_directories(const std::filesystem::path& path) {
    std::error_code ec;
    std::filesystem::path dir = path.parent_path();
    while (dir.has_relative_path() && !std::filesystem::exists(dir, ec))
        dir = dir.parent_path();
    dir = std::filesystem::canonical(dir, ec);
    if (ec)
        throw Error(path.string() + ": cannot check its directories: " + ec.message());
    const std::filesystem::path home = std::filesystem::weakly_canonical(home_directory(), ec);
    const bool under_home = !ec && !home.empty() && dir.string().starts_with(home.string());
    const uid_t me = ::getuid();
    for (;;) {
        struct stat st {};
        if (::stat(dir.c_str(), &st) != 0)
            throw Error(path.string() + ": cannot check its directory " + dir.string() + ": " + std::strerror(errno));
        if (st.st_uid != me && st.st_uid != 0)
            throw ReplaceableFile(path.string(), "its directory " + dir.string() + " belongs to another user (uid " +
                                                     std::to_string(st.st_uid) +
                                                     "), who could remove the pins or put theirs there; "
                                                     "refusing it");
        if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
            throw ReplaceableFile(path.string(),
                                  "its directory " + dir.string() +
                                      " is writable by others, who could remove the pins or put theirs there; refusing "
                                      "it (chmod go-w " +
                                      dir.string() + ")");
        if ((under_home && dir == home) || dir == dir.root_path())
            return;
        dir = dir.parent_path();
    }
}

}  // namespace

std::string utc_now() {
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    ::gmtime_r(&now, &tm);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return text;
}

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
        // Whoever may replace the pins may pin their own storage key; whoever
        // may remove them makes every use a first use.
        if (file)
            check_not_replaceable(path, *file, "pin file", "the pins");
        else if (!path.empty())
            check_pin_directories(path);
    } catch (const Error& e) {
        problem = e.what();
    }
    KnownParents known =
        parse(file && !problem ? std::string(file->data.begin(), file->data.end()) : std::string(), read_systemd_srk());
    known.problem_ = problem;
    return known;
}

KnownParents KnownParents::parse(std::string_view text, std::optional<TPM2B_PUBLIC> systemd_srk) {
    KnownParents known;
    known.systemd_srk_ = systemd_srk;
    std::istringstream in{std::string(text)};
    std::string line, why;
    int line_no = 0;
    while (std::getline(in, line)) {
        ++line_no;
        if (std::optional<ParentPin> pin = parse_pin_line(line, why))
            known.pins_.push_back(std::move(*pin));
        else if (!why.empty())
            known.warnings_.push_back(file_path().string() + ":" + std::to_string(line_no) + ": ignored: " + why);
    }
    return known;
}

std::optional<ParentPin> KnownParents::pin(const std::string& tpm, std::uint32_t handle) const {
    for (const ParentPin& pin : pins_)
        if (pin.tpm == tpm && pin.handle == handle)
            return pin;
    // systemd pins the SRK of the machine's own TPM.
    if (systemd_srk_ && tpm == "default" &&
        (handle == standard_srk || (handle == owner_hierarchy && is_standard_ecc_srk(*systemd_srk_))))
        return ParentPin{handle, name_hex_of(*systemd_srk_), tpm, {}, {}, {}};
    return std::nullopt;
}

std::optional<std::string> KnownParents::expected(const std::string& tpm, std::uint32_t handle) const {
    const std::optional<ParentPin> p = pin(tpm, handle);
    return p ? std::optional<std::string>(p->name_hex) : std::nullopt;
}

std::vector<ParentPin> KnownParents::pins_of(const std::string& tpm) const {
    std::vector<ParentPin> out;
    for (const ParentPin& pin : pins_)
        if (pin.tpm == tpm)
            out.push_back(pin);
    return out;
}

std::vector<ParentPin> KnownParents::pinned_elsewhere(const std::string& tpm, std::uint32_t handle) const {
    std::vector<ParentPin> out;
    for (const ParentPin& pin : pins_)
        if (pin.tpm != tpm && pin.handle == handle)
            out.push_back(pin);
    return out;
}

namespace {

// Rewrites the pin file: each line goes through `keep` (a pin, or nullopt
// for a comment or a line that is no pin), which may change it or drop it
// (nullopt); then `added()` (if not empty) is appended. Atomic; the file is made
// private where it does not exist.
template <class Keep, class Added>
void rewrite_pins(const std::optional<std::string>& problem, Keep keep, Added added) {
    if (problem)
        throw UnusablePinFile(*problem);
    const std::filesystem::path path = KnownParents::file_path();
    if (path.empty())
        throw Error("no home directory to keep the pins in");
    // An existing file that cannot be read is not replaced: its pins would be lost.
    const std::optional<FileRead> file = read_regular_file_if_present(path, max_pins_file_size);
    std::istringstream in(file ? std::string(file->data.begin(), file->data.end()) : std::string(file_header));
    std::string text, line, why;
    while (std::getline(in, line)) {
        std::optional<ParentPin> pin = parse_pin_line(line, why);
        if (!pin) {
            text += line + "\n";
        } else if (const std::optional<std::string> kept = keep(*pin, line)) {
            text += *kept + "\n";
        }
    }
    if (const std::string last = added(); !last.empty())
        text += last + "\n";
    // Private whatever the umask: write_file_atomically refuses a
    // directory that others may write to.
    for (const std::filesystem::path& dir : {path.parent_path().parent_path(), path.parent_path()})
        if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
            throw Error(dir.string() + ": cannot create: " + std::strerror(errno));
    write_file_atomically(path, text, 0600, Replace::yes);
}

}  // namespace

void KnownParents::record(const ParentPin& pin) {
    bool replaced = false;
    rewrite_pins(
        problem_,
        [&](const ParentPin& old, const std::string& line) -> std::optional<std::string> {
            if (old.tpm != pin.tpm || old.handle != pin.handle)
                return line;
            if (replaced)
                return std::nullopt;  // one pin per TPM and handle
            replaced = true;
            return pin_line(pin);
        },
        [&] { return replaced ? std::string() : pin_line(pin); });
    std::erase_if(pins_, [&](const ParentPin& p) { return p.tpm == pin.tpm && p.handle == pin.handle; });
    pins_.push_back(pin);
}

std::vector<std::string> KnownParents::forget(const std::string& tpm) {
    std::vector<std::string> removed;
    if (problem_)
        throw UnusablePinFile(*problem_);
    if (pins_of(tpm).empty())
        return removed;
    rewrite_pins(
        problem_,
        [&](const ParentPin& old, const std::string& line) -> std::optional<std::string> {
            if (old.tpm != tpm)
                return line;
            removed.push_back(line);
            return std::nullopt;
        },
        [] { return std::string(); });
    std::erase_if(pins_, [&](const ParentPin& p) { return p.tpm == tpm; });
    return removed;
}

std::optional<std::string> made_before_clear(const KnownParents& known, const std::string& tpm,
                                             const std::filesystem::path& key_file) {
    struct stat st {};
    if (key_file.empty() || ::stat(key_file.c_str(), &st) != 0)
        return std::nullopt;
    for (const ParentPin& pin : known.pins_of(tpm))
        if (const std::optional<std::time_t> cleared = parse_utc(pin.cleared); cleared && st.st_mtime < *cleared)
            return "this key was made before the TPM was cleared (" + pin.cleared +
                   (pin.handle == owner_hierarchy
                        ? std::string()
                        : "; or before its storage key " + handle_text(pin.handle) + " was replaced") +
                   "): the storage key it was made under is gone, and the key with it";
    return std::nullopt;
}

Diagnosis diagnose_key_failure(const TpmError& e, const TpmAddress& address, const std::filesystem::path& key_file,
                               const KnownParents* known) {
    Diagnosis d = diagnose(e, address);
    if (d.kind != TpmProblem::foreign_key)
        return d;
    const std::string& tpm = address.identity();
    const std::optional<std::string> why =
        known ? made_before_clear(*known, tpm, key_file) : made_before_clear(KnownParents::load(), tpm, key_file);
    if (why)
        d.problem = *why;
    return d;
}

Diagnosis diagnose_untrusted_parent(const Error& e) {
    if (dynamic_cast<const UnusablePinFile*>(&e))
        return {TpmProblem::untrusted_parent, e.what(),
                "make it a regular file of yours that no one else may write to, in directories no one else may "
                "write to, as the message says (see docs/configuration.md)"};
    if (dynamic_cast<const PinNotRecorded*>(&e))
        return {TpmProblem::untrusted_parent, e.what(),
                "make " + KnownParents::file_path().parent_path().string() +
                    " a directory you (and no one else) "
                    "may write to, then run 'tpmkey doctor', which proves and pins the storage key"};
    if (dynamic_cast<const ClearNotAccepted*>(&e))
        return {TpmProblem::untrusted_parent, e.what(),
                "run 'tpmkey doctor': it accepts the cleared TPM's new storage key and names the keys that are gone; "
                "then make new keys with tpmkey-keygen"};
    if (dynamic_cast<const NewTpmRefused*>(&e))
        return {TpmProblem::untrusted_parent, e.what(),
                "type no PIN for this key until you know why (docs/security.md); accept another TPM only on purpose, "
                "with tpmkey trust-tpm as said"};
    if (dynamic_cast<const ParentProofFailed*>(&e))
        return {TpmProblem::untrusted_parent, e.what(),
                "type no PIN for this key until you know why: the TPM's storage key could not be proven to live in "
                "the TPM that owns its endorsement key, so something may stand between you and the TPM "
                "(docs/security.md, docs/troubleshooting.md); 'tpmkey forget-tpm' does not help against that, it "
                "only drops pins"};
    return {TpmProblem::untrusted_parent, e.what(),
            "type no PIN for this key until you know why (docs/security.md, docs/troubleshooting.md). tpmkey "
            "recognises a cleared TPM by its endorsement key, which a clear never changes; 'tpmkey forget-tpm' is "
            "only for a TPM you replaced yourself, once you know that the one answering now is the new one"};
}

}  // namespace tpmkey
