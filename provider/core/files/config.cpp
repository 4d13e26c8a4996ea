#include "core/files/config.hpp"

#include "core/files/atomic_file.hpp"

#include "core/base/error.hpp"
#include "core/base/home.hpp"
#include "core/base/printable.hpp"
#include "core/files/file_read.hpp"

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <set>
#include <system_error>

namespace tpmkey {

namespace {

std::string getenv_string(const char* name) {
    const char* value = std::getenv(name);
    return value ? value : "";
}

std::string_view trim(std::string_view s) {
    const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
    while (!s.empty() && space(s.front()))
        s.remove_prefix(1);
    while (!s.empty() && space(s.back()))
        s.remove_suffix(1);
    return s;
}

std::filesystem::path expand_home(std::string_view path) {
    if (path == "~" || path.starts_with("~/"))
        return home_directory() / std::filesystem::path(path.substr(path.size() > 1 ? 2 : 1));
    return std::filesystem::path(path);
}

// A key path names a file, or a directory whose *.tpm files are keys
// (sorted, so slots come in a stable order).
void add_keys(const std::filesystem::path& path, Config& config, std::set<std::filesystem::path>& seen) {
    std::error_code ec;
    std::vector<std::filesystem::path> found;
    if (std::filesystem::is_directory(path, ec)) {
        for (const auto& entry : std::filesystem::directory_iterator(path, ec))
            if (entry.path().extension() == ".tpm")
                found.push_back(entry.path());
        std::sort(found.begin(), found.end());
    } else {
        found.push_back(path);
    }
    for (const auto& p : found)
        if (seen.insert(p.lexically_normal()).second)
            config.key_files.push_back(p);
}

// A TPM command timeout: whole seconds, 1 s to a day.
std::optional<std::chrono::seconds> parse_seconds(std::string_view text) {
    unsigned long value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || value < 1 || value > 86400)
        return std::nullopt;
    return std::chrono::seconds(value);
}

// The group `gid` is the user's own, as Debian's OpenSSH judges a
// group-writable ~/.ssh/config or authorized_keys (its user-group-modes
// patch, secure_permissions() in misc.c; upstream OpenSSH refuses any group
// write): every account whose primary group it is is `owner`, there is at
// least one, and its list of further members is empty or `owner` alone.
// A group without members (as setgid programs' groups are) is not. This is
// the per-user group that Debian, Fedora and RHEL give each account, where
// the default umask 002 makes every file an editor writes group-writable.
bool personal_group(gid_t gid, uid_t owner) {
    std::vector<char> buf(16 * 1024);
    group gr{};
    group* found_gr = nullptr;
    if (::getgrgid_r(gid, &gr, buf.data(), buf.size(), &found_gr) != 0 || found_gr == nullptr)
        return false;
    std::vector<char> pw_buf(16 * 1024);
    passwd pw{};
    passwd* found_pw = nullptr;
    if (::getpwuid_r(owner, &pw, pw_buf.data(), pw_buf.size(), &found_pw) != 0 || found_pw == nullptr)
        return false;
    const std::string owner_name = pw.pw_name;
    int members = 0;
    if (gr.gr_mem != nullptr && gr.gr_mem[0] != nullptr) {
        if (owner_name != gr.gr_mem[0] || gr.gr_mem[1] != nullptr)
            return false;
        ++members;
    }
    // Every account (through NSS, as Debian's getpwent() loop): one with
    // this primary group that is not the owner makes it shared.
    bool shared = false;
    std::vector<char> ent_buf(16 * 1024);
    ::setpwent();
    for (;;) {
        passwd ent{};
        passwd* next = nullptr;
        if (::getpwent_r(&ent, ent_buf.data(), ent_buf.size(), &next) != 0 || next == nullptr)
            break;
        if (ent.pw_gid == gid) {
            ++members;
            if (ent.pw_uid != owner)
                shared = true;
        }
    }
    ::endpwent();
    return !shared && members > 0;
}

// check_not_replaceable() for the config file, which may also be writable
// by its owner's own group (personal_group()): an editor under umask 002
// writes it 0664. The group is read with stat() after the read; the file
// then must still be the one read (same owner and mode), and it cannot have
// been swapped in between: its directories are checked to be writable by no
// one else.
void check_config_file(const std::filesystem::path& file, const FileRead& read) {
    FileRead judged;
    judged.owner = read.owner;
    judged.mode = read.mode;
    struct stat st {};
    if ((read.mode & S_IWGRP) && !(read.mode & S_IWOTH) && ::stat(file.c_str(), &st) == 0 && st.st_uid == read.owner &&
        st.st_mode == read.mode && personal_group(st.st_gid, read.owner))
        judged.mode &= ~static_cast<mode_t>(S_IWGRP);
    check_not_replaceable(file, judged, "config file", "the settings");
}

// The label of a key file, as the module names its token (module/token.hpp):
// the file name without .tpm.
std::string key_label_of(const std::filesystem::path& key_file) { return printable(key_file.stem().string()); }

// The key a word of a confirm, same-pin or pin-from line names, by its
// label (`labels[i]` is key_label_of(key_files[i])): the word as the label
// ("k0"), the file name ("k0.tpm"), or a path to the file ("~/.ssh/k0.tpm",
// "/home/me/.ssh/k0.tpm"). Case counts, as in file names: "K0" is not "k0".
// Empty when no key found matches.
std::string key_label(std::string_view word, const std::vector<std::filesystem::path>& key_files,
                      const std::vector<std::string>& labels) {
    if (word.find('/') != std::string_view::npos) {
        std::error_code ec;
        const std::filesystem::path named = std::filesystem::weakly_canonical(expand_home(word), ec);
        if (ec)
            return "";
        for (std::size_t i = 0; i < key_files.size(); ++i) {
            const std::filesystem::path key = std::filesystem::weakly_canonical(key_files[i], ec);
            if (!ec && key == named)
                return labels[i];
        }
        return "";
    }
    // The label as written first: a key file may be named k0.tpm.tpm.
    for (const std::string_view name : {word, word.ends_with(".tpm") ? word.substr(0, word.size() - 4) : word})
        for (const std::string& label : labels)
            if (!name.empty() && label == name)
                return label;
    return "";
}

// Rewrites each name of the confirm, same-pin and pin-from lines to the
// label of the key it names (key_label()), so that the module compares
// labels only; a name that matches no key found stays as written (it then
// matches nothing) and is warned about: a confirm line that silently
// confirmed nothing let the key sign without a question.
void resolve_key_names(Config& config, const std::string& file) {
    if (config.key_files.empty())
        return;  // no key at all: said once, elsewhere
    std::vector<std::string> labels;
    for (const auto& p : config.key_files)
        labels.push_back(key_label_of(p));
    const auto resolve = [&](std::string& name, std::string_view keyword) {
        const std::string found = key_label(name, config.key_files, labels);
        if (!found.empty()) {
            name = found;
            return;
        }
        std::string known;
        std::string same_but_case;
        for (std::size_t i = 0; i < labels.size(); ++i) {
            if (i < 8)
                known += (i ? ", " : "") + labels[i];
            if (labels[i].size() == name.size() &&
                std::equal(labels[i].begin(), labels[i].end(), name.begin(), [](char a, char b) {
                    return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
                }))
                same_but_case = labels[i];
        }
        if (labels.size() > 8)
            known += ", ...";
        config.warnings.push_back(
            file + ": '" + std::string(keyword) + " " + printable(name) + "': '" + printable(name) +
            "' names none of the keys found in " + config.searched.front() + " (" + known +
            "): the line does nothing for any key; name a key by its file name, with or without .tpm, or its path" +
            (same_but_case.empty() ? std::string()
                                   : " (names are case-sensitive, as file names are: '" + same_but_case + "'?)"));
    };
    for (std::string& name : config.confirm)
        resolve(name, "confirm");
    for (std::vector<std::string>& group : config.same_pin)
        for (std::string& name : group)
            resolve(name, "same-pin");
    std::vector<std::pair<std::string, PinSource>> pin_from;
    for (auto& entry : config.pin_from) {
        resolve(entry.first, "pin-from");
        if (std::any_of(pin_from.begin(), pin_from.end(), [&](const auto& e) { return e.first == entry.first; }))
            config.warnings.push_back(file + ": 'pin-from " + entry.first +
                                      "': ignored: a second source for that key (named another way)");
        else
            pin_from.push_back(std::move(entry));
    }
    config.pin_from = std::move(pin_from);
}

}  // namespace

std::filesystem::path config_file_path() {
    const std::string xdg = getenv_string("XDG_CONFIG_HOME");
    if (!xdg.empty() && xdg.front() == '/')
        return std::filesystem::path(xdg) / "tpmkey" / "config";
    const std::filesystem::path home = home_directory();
    return home.empty() ? home : home / ".config" / "tpmkey" / "config";
}

ConfigFile parse_config(std::string_view text, const std::string& name) {
    ConfigFile out;
    std::size_t line_no = 0;
    while (!text.empty()) {
        const std::size_t eol = text.find('\n');
        std::string_view line = text.substr(0, eol);
        text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
        ++line_no;
        // A '#' at the start of a line or after a blank starts a comment.
        for (std::size_t hash = line.find('#'); hash != std::string_view::npos; hash = line.find('#', hash + 1))
            if (hash == 0 || line[hash - 1] == ' ' || line[hash - 1] == '\t') {
                line = line.substr(0, hash);
                break;
            }
        line = trim(line);
        if (line.empty())
            continue;
        const std::size_t space = line.find_first_of(" \t");
        const std::string_view keyword = line.substr(0, space);
        const std::string_view value = space == std::string_view::npos ? std::string_view() : trim(line.substr(space));
        const std::string where = name + ":" + std::to_string(line_no) + ": ";
        if (line.find('\0') != std::string_view::npos) {
            out.warnings.push_back(where + "ignored: contains a NUL byte");
        } else if (value.empty()) {
            out.warnings.push_back(where + "ignored: '" + std::string(keyword) + "' needs a value");
        } else if (keyword == "key") {
            out.keys.push_back(expand_home(value));
        } else if (keyword == "tcti") {
            out.tcti = std::string(value);
        } else if (keyword == "confirm") {
            for (std::string_view rest = value; !rest.empty();) {
                const std::size_t blank = rest.find_first_of(" \t");
                if (blank != 0)
                    out.confirm.emplace_back(rest.substr(0, blank));
                rest = blank == std::string_view::npos ? std::string_view() : rest.substr(blank + 1);
            }
        } else if (keyword == "same-pin") {
            std::vector<std::string> names;
            for (std::string_view rest = value; !rest.empty();) {
                const std::size_t blank = rest.find_first_of(" \t");
                if (blank != 0)
                    names.emplace_back(rest.substr(0, blank));
                rest = blank == std::string_view::npos ? std::string_view() : rest.substr(blank + 1);
            }
            if (names.size() < 2)
                out.warnings.push_back(where + "ignored: 'same-pin' needs two key names or more");
            else
                out.same_pin.push_back(std::move(names));
        } else if (keyword == "pin-from") {
            std::vector<std::string_view> words;
            for (std::string_view rest = value; !rest.empty();) {
                const std::size_t blank = rest.find_first_of(" \t");
                if (blank != 0)
                    words.push_back(rest.substr(0, blank));
                rest = blank == std::string_view::npos ? std::string_view() : rest.substr(blank + 1);
            }
            const bool credential = words.size() == 3 && words[1] == "credential";
            // A credential is a file name in $CREDENTIALS_DIRECTORY, never a path.
            if (words.size() != 3 || (!credential && words[1] != "keyring"))
                out.warnings.push_back(where + "ignored: 'pin-from' needs a key name, 'credential' or 'keyring', "
                                               "and the credential's name or the keyring key's description");
            else if (credential &&
                     (words[2].find('/') != std::string_view::npos || words[2] == "." || words[2] == ".."))
                out.warnings.push_back(where + "ignored: 'pin-from': a credential's name is a file name, not a path");
            else if (std::any_of(out.pin_from.begin(), out.pin_from.end(),
                                 [&](const auto& entry) { return entry.first == words[0]; }))
                out.warnings.push_back(where + "ignored: 'pin-from': a second source for '" + std::string(words[0]) +
                                       "'");
            else
                out.pin_from.emplace_back(std::string(words[0]),
                                          PinSource{credential ? PinSource::Kind::credential : PinSource::Kind::keyring,
                                                    std::string(words[2])});
        } else if (keyword == "ek-roots") {
            out.ek_roots.push_back(expand_home(value));
        } else if (keyword == "timeout") {
            if (const auto seconds = parse_seconds(value))
                out.timeout = seconds;
            else
                out.warnings.push_back(where + "ignored: 'timeout' needs whole seconds from 1 to 86400");
        } else {
            out.warnings.push_back(where + "ignored: unknown keyword '" + std::string(keyword) +
                                   "' (expected 'key', 'tcti', 'timeout', 'same-pin', 'confirm', 'pin-from' or "
                                   "'ek-roots')");
        }
    }
    return out;
}

Config load_config() {
    Config config;
    const std::filesystem::path file = config_file_path();
    ConfigFile from_file;
    try {
        const std::optional<FileRead> read =
            file.empty() ? std::nullopt : read_regular_file_if_present(file, max_config_file_size);
        if (read) {
            check_config_file(file, *read);
            from_file = parse_config(
                std::string_view(reinterpret_cast<const char*>(read->data.data()), read->data.size()), file.string());
        }
    } catch (const Error& e) {
        config.file_problem = e.what();
        config.warnings.push_back(config.file_problem + "; ignored");
    }
    config.warnings.insert(config.warnings.end(), from_file.warnings.begin(), from_file.warnings.end());

    std::set<std::filesystem::path> seen;
    const std::string env_keys = getenv_string("TPMKEY_KEYS");
    if (!env_keys.empty()) {
        config.searched.push_back("TPMKEY_KEYS");
        std::string_view rest = env_keys;
        while (!rest.empty()) {
            const std::size_t colon = rest.find(':');
            const std::string_view item = trim(rest.substr(0, colon));
            rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
            if (!item.empty())
                add_keys(expand_home(item), config, seen);
        }
    } else if (!from_file.keys.empty()) {
        config.searched.push_back(file.string());
        for (const auto& p : from_file.keys)
            add_keys(p, config, seen);
    } else {
        const std::filesystem::path ssh_dir = home_directory() / ".ssh";
        config.searched.push_back(ssh_dir.string() + "/*.tpm");
        std::error_code ec;
        if (std::filesystem::is_directory(ssh_dir, ec))
            add_keys(ssh_dir, config, seen);
    }

    config.same_pin = from_file.same_pin;
    config.confirm = from_file.confirm;
    config.pin_from = from_file.pin_from;
    config.ek_roots = from_file.ek_roots;
    resolve_key_names(config, file.string());
    const std::string env_timeout = getenv_string("TPMKEY_TPM_TIMEOUT");
    std::optional<std::chrono::seconds> timeout = from_file.timeout;
    if (!env_timeout.empty()) {
        if (const auto seconds = parse_seconds(env_timeout))
            timeout = seconds;
        else
            config.warnings.push_back("TPMKEY_TPM_TIMEOUT: ignored: needs whole seconds from 1 to 86400");
    }
    const std::string env_tcti = getenv_string("TPMKEY_TCTI");
    if (!env_tcti.empty())
        config.tpm = TpmAddress(env_tcti, TpmAddress::Source::environment, "TPMKEY_TCTI", timeout);
    else if (!from_file.tcti.empty())
        config.tpm = TpmAddress(from_file.tcti, TpmAddress::Source::config_file, file.string(), timeout);
    else
        config.tpm = TpmAddress({}, TpmAddress::Source::tpm2_tss_default, {}, timeout);
    if (config.tpm.refusal())
        config.warnings.push_back(*config.tpm.refusal());
    return config;
}

std::filesystem::path record_same_pin(const std::string& a, const std::string& b) {
    const std::filesystem::path file = config_file_path();
    if (file.empty())
        throw Error("no home directory for the config file");
    std::string text;
    const std::optional<FileRead> read = read_regular_file_if_present(file, max_config_file_size);
    if (read) {
        check_config_file(file, *read);
        text.assign(reinterpret_cast<const char*>(read->data.data()), read->data.size());
        if (!text.empty() && text.back() != '\n')
            text += '\n';
    } else {
        std::error_code ec;
        if (std::filesystem::create_directories(file.parent_path(), ec))
            std::filesystem::permissions(file.parent_path(), std::filesystem::perms::owner_all, ec);
        if (ec)
            throw Error(file.parent_path().string() + ": cannot create it: " + ec.message());
    }
    text += "# tpmkey-keygen: the TPM accepted one PIN for both keys\nsame-pin " + a + " " + b + "\n";
    if (text.size() > max_config_file_size)
        throw Error(file.string() + ": too large to add a line to");
    write_file_atomically(file, text, 0600, read ? Replace::yes : Replace::no);
    return file;
}

}  // namespace tpmkey
