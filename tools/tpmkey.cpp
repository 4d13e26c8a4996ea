// tpmkey: look after TPM keys. Subcommands: list, pubkey, info, passwd,
// doctor, ssh-config. Usage errors exit 2; failures exit 1.

#include "atomic_file.hpp"
#include "config.hpp"
#include "diagnosis.hpp"
#include "error.hpp"
#include "file_read.hpp"
#include "key_file.hpp"
#include "tpm_keys.hpp"
#include "known_parents.hpp"
#include "log.hpp"
#include "prompt.hpp"
#include "public_key.hpp"
#include "tpm.hpp"
#include "tpm_queries.hpp"

#include <tss2/tss2_rc.h>
#include <tss2/tss2_tpm2_types.h>

#include <fnmatch.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace tpmkey;

// The module that belongs to this tpmkey: the one installed next to it
// (TPMKEY_MODULE_FROM_BINDIR, set by CMake, is the module's path relative to
// the bin directory), wherever the installation was put (cmake --install
// --prefix, DESTDIR); else where the build's prefix would put it.
struct ModuleLocation {
    std::string path;
    std::string how;  // for the user: how it was found
};

ModuleLocation find_module() {
    std::error_code ec;
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        const std::filesystem::path next_to = exe.parent_path() / TPMKEY_MODULE_FROM_BINDIR;
        const std::filesystem::path found = std::filesystem::canonical(next_to, ec);
        if (!ec && std::filesystem::is_regular_file(found, ec))
            return {found.string(), "installed next to " + exe.string()};
    }
    return {TPMKEY_MODULE_PATH, "not found next to this tpmkey: where 'cmake --install' puts it"};
}

const char* const usage_text =
    "usage: tpmkey COMMAND [ARGS]\n"
    "\n"
    "  list                     the keys the PKCS#11 module serves, in slot order\n"
    "  pubkey [-C COMMENT] KEY  the OpenSSH public key line of KEY (no TPM needed)\n"
    "  info KEY                 TPM attributes, parent, policy; does KEY load here?\n"
    "  passwd KEY               set, change or remove the PIN of KEY\n"
    "  doctor                   check the TPM, the keys and the ssh set-up\n"
    "  ssh-config [--apply]     the ~/.ssh/config lines for the module (--apply adds them)\n"
    "\n"
    "Run 'tpmkey COMMAND --help' for more.\n";

// ---- command line ----------------------------------------------------------

// A mistake on the command line: main() prints it with the command's usage
// line and exits 2.
class UsageError : public Error {
public:
    UsageError(const std::string& message, std::string usage) : Error(message), usage_(std::move(usage)) {}
    const std::string& usage() const noexcept { return usage_; }

private:
    std::string usage_;
};

// Plain constants (no constructors run at start-up).
struct CommandSpec {
    const char* name;
    const char* usage;                  // "tpmkey pubkey [-C COMMENT] KEY"
    const char* help;                   // what --help prints after the usage line
    const char* value_options[3];       // take a value: "-C", "--old-pin-file"; null-terminated
    const char* flag_options[2];        // take none: "--apply"; null-terminated
    std::size_t positional;             // exact number of other arguments
};

struct Parsed {
    bool help = false;
    std::map<std::string, std::string> values;
    std::vector<std::string> flags;
    std::vector<std::string> positional;

    bool has_flag(const std::string& f) const { return std::find(flags.begin(), flags.end(), f) != flags.end(); }
    std::string value(const std::string& option) const {
        const auto it = values.find(option);
        return it == values.end() ? std::string() : it->second;
    }
    bool has_value(const std::string& option) const { return values.count(option) != 0; }
};

// Options may come in any order; "--" ends them (for a file named "-x").
Parsed parse_args(const CommandSpec& spec, const std::vector<std::string>& args) {
    const auto contains = [](const char* const* names, const std::string& s) {
        for (; *names; ++names)
            if (s == *names)
                return true;
        return false;
    };
    const std::string cmd = std::string("tpmkey ") + spec.name;
    Parsed p;
    bool options_done = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (!options_done && (a == "--help" || a == "-h")) {
            p.help = true;
            return p;
        }
        if (!options_done && a == "--") {
            options_done = true;
        } else if (!options_done && contains(spec.value_options, a)) {
            if (i + 1 >= args.size())
                throw UsageError(cmd + ": " + a + " needs a value", spec.usage);
            if (p.values.count(a))
                throw UsageError(cmd + ": " + a + " given twice", spec.usage);
            p.values[a] = args[++i];
        } else if (!options_done && contains(spec.flag_options, a)) {
            p.flags.push_back(a);
        } else if (!options_done && a.size() > 1 && a[0] == '-') {
            throw UsageError(cmd + ": unknown option '" + a + "'", spec.usage);
        } else {
            p.positional.push_back(a);
        }
    }
    if (p.positional.size() > spec.positional)
        throw UsageError(cmd + ": unexpected argument '" + p.positional[spec.positional] + "'", spec.usage);
    if (p.positional.size() < spec.positional)
        throw UsageError(cmd + ": the key file is missing", spec.usage);
    return p;
}

// ---- shared helpers --------------------------------------------------------


std::string key_type_text(const PublicKey& pub) {
    return (pub.is_rsa() ? "RSA " : "ECDSA P-") + std::to_string(pub.bits());
}

// As ssh-keygen -l prints it: "256 SHA256:... comment (ECDSA)".
std::string ssh_keygen_l_line(const PublicKey& pub, const std::string& comment) {
    return std::to_string(pub.bits()) + " " + pub.ssh_fingerprint() + " " + comment +
           (pub.is_rsa() ? " (RSA)" : " (ECDSA)");
}

// True when one of the user's keys is RSA and the TPM cannot sign SHA-512
// (false when the TPM cannot be asked: nothing to say then).
bool rsa_keys_need_sha256(const Config& config) {
    bool rsa = false;
    for (const auto& path : config.key_files) {
        try {
            rsa = rsa || PublicKey(read_key_file(path).blobs.pub.publicArea).is_rsa();
        } catch (const Error&) {
        }
    }
    if (!rsa)
        return false;
    try {
        Tpm tpm(config.tcti, config.tpm_timeout);
        return tpm_lacks_sha512(tpm);
    } catch (const Error&) {
        return false;
    }
}

// Loads `key` (parent first, verified): nothing when it loads, else why not.
// `pinned` says whether the parent's name was checked against a pin.
std::optional<Diagnosis> why_key_does_not_load(Tpm& tpm, const KeyFile& key, const KnownParents& known,
                                               bool* pinned = nullptr) {
    try {
        const TpmObject parent = load_verified_parent(tpm, key.parent, known, pinned);
        const Authorization auth = Authorization::for_secret(tpm, parent, false);
        const TpmObject loaded = load_key(tpm, parent, auth, key.blobs);
    } catch (const TpmError& e) {
        return diagnose(e, tpm.tcti());
    } catch (const Error& e) {
        return diagnose_untrusted_parent(e);
    }
    return std::nullopt;
}

// A PIN from the terminal; without one, say how else to give it.
Secret pin_from_terminal(const std::string& prompt, const char* option) {
    try {
        return read_pin_from_terminal(prompt);
    } catch (const Error& e) {
        throw Error(std::string(e.what()) + " (no terminal? give the PIN with " + option + " FILE)");
    }
}

std::string read_text(const std::filesystem::path& p) {
    std::ifstream in(p);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

std::string command_output(const std::string& command) {
    std::string out;
    if (FILE* pipe = ::popen(command.c_str(), "r")) {
        char buf[256];
        while (std::fgets(buf, sizeof buf, pipe))
            out += buf;
        ::pclose(pipe);
    }
    return out;
}

// ---- ~/.ssh/config ---------------------------------------------------------

std::filesystem::path ssh_config_path() { return home_directory() / ".ssh" / "config"; }

struct ConfigLine {
    int line_no;
    std::string value;   // unquoted
    std::string block;   // "" at the top, else the "Host ..."/"Match ..." line it is under
    bool all_hosts;      // at the top, or under "Host *" / "Match all"
};

// The lines of an ssh_config with `wanted` (lower case) as keyword
// (ssh_config(5): keyword and value separated by blanks or one '=', keywords
// case-insensitive, values may be quoted; Host and Match start a block that
// lasts to the next one).
std::vector<ConfigLine> config_lines(const std::string& text, const std::string& wanted) {
    std::vector<ConfigLine> out;
    std::istringstream in(text);
    std::string line, block;
    bool all_hosts = true;
    int line_no = 0;
    while (std::getline(in, line)) {
        ++line_no;
        std::size_t i = line.find_first_not_of(" \t\r");
        if (i == std::string::npos || line[i] == '#')
            continue;
        const std::size_t key_end = line.find_first_of(" \t\r=", i);
        std::string keyword = line.substr(i, key_end == std::string::npos ? std::string::npos : key_end - i);
        std::transform(keyword.begin(), keyword.end(), keyword.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        std::string value;
        if (key_end != std::string::npos) {
            std::size_t v = line.find_first_not_of(" \t", key_end);
            if (v != std::string::npos && line[v] == '=')
                v = line.find_first_not_of(" \t", v + 1);
            if (v != std::string::npos)
                value = line.substr(v);
        }
        while (!value.empty() && (value.back() == ' ' || value.back() == '\t' || value.back() == '\r'))
            value.pop_back();
        if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
            value = value.substr(1, value.size() - 2);
        if (keyword == "host" || keyword == "match") {
            block = line.substr(i);
            all_hosts = (keyword == "host" && value == "*") || (keyword == "match" && value == "all");
        } else if (keyword == wanted) {
            out.push_back({line_no, value, block, all_hosts});
        }
    }
    return out;
}

bool is_tpmkey_module(const std::string& path) {
    return std::filesystem::path(path).filename() == "tpmkey-pkcs11.so";
}

// ---- list ------------------------------------------------------------------

constexpr CommandSpec list_spec{
    "list", "tpmkey list",
    "Lists every key the PKCS#11 module serves, in the module's slot order:\n"
    "its slot id, the file, the fingerprint as 'ssh-keygen -l' prints it (with\n"
    "the key's name as comment, as 'ssh-keygen -D' shows it), its type, whether\n"
    "it has a PIN, and its parent. Files the module skips are listed with the\n"
    "reason. Reads files only: no TPM needed.\n"
    "\n"
    "Keys come from TPMKEY_KEYS (files or directories, ':'-separated), else the\n"
    "'key' lines of ~/.config/tpmkey/config, else ~/.ssh/*.tpm.\n",
    {nullptr}, {nullptr}, 0};

int cmd_list(const Parsed&) {
    const Config config = load_config();
    for (const std::string& w : config.warnings)
        std::cerr << "tpmkey: " << w << "\n";
    std::cout << "Keys from " << (config.searched.empty() ? "nowhere" : config.searched.front()) << ":\n";
    // Slot ids are given as the module gives them: in this order, counting
    // only the files it accepts (provider/module/module.cpp).
    unsigned long slot = 0;
    for (const auto& path : config.key_files) {
        try {
            const KeyFile key = read_key_file(path);
            check_usable(key, path.string());
            const PublicKey pub(key.blobs.pub.publicArea);
            std::cout << "slot " << slot++ << "  " << path.string() << "\n"
                      << "        " << ssh_keygen_l_line(pub, path.stem().string()) << "\n"
                      << "        " << key_type_text(pub) << ", " << (key.needs_pin() ? "PIN" : "no PIN")
                      << ", parent " << handle_text(key.parent) << "\n";
        } catch (const Error& e) {
            const std::string what = e.what();
            std::cout << "skipped " << (what.starts_with(path.string()) ? what : path.string() + ": " + what)
                      << "\n";
        }
    }
    if (config.key_files.empty())
        std::cout << "(none; make one with tpmkey-keygen)\n";
    return 0;
}

// ---- pubkey ----------------------------------------------------------------

constexpr CommandSpec pubkey_spec{
    "pubkey", "tpmkey pubkey [-C COMMENT] KEY",
    "Prints the OpenSSH public key line of KEY, a TPM key file (NAME.tpm). Use it\n"
    "to make a lost NAME.pub again:\n"
    "\n"
    "    tpmkey pubkey -C me@laptop ~/.ssh/id_tpm.tpm > ~/.ssh/id_tpm.pub\n"
    "\n"
    "Reads the file only: no TPM needed.\n"
    "\n"
    "  -C COMMENT   the comment at the end of the line (default: the key file's\n"
    "               description if it has one, else NAME)\n",
    {"-C", nullptr}, {nullptr}, 1};

int cmd_pubkey(const Parsed& p) {
    const std::filesystem::path path = p.positional[0];
    const KeyFile key = read_key_file(path);
    const std::string comment =
        p.has_value("-C") ? p.value("-C") : (key.description.empty() ? path.stem().string() : key.description);
    std::cout << PublicKey(key.blobs.pub.publicArea).ssh_line(comment) << "\n";
    return 0;
}

// ---- info ------------------------------------------------------------------

constexpr CommandSpec info_spec{
    "info", "tpmkey info KEY",
    "Shows what the key file KEY says (type, fingerprint, the TPM object's\n"
    "attributes, PIN, parent, policy) and asks this TPM to load the key.\n"
    "Exit status 0 when it loads, 1 when it does not (the last line says why:\n"
    "e.g. the key belongs to a different TPM).\n",
    {nullptr}, {nullptr}, 1};

int cmd_info(const Parsed& p) {
    const std::filesystem::path path = p.positional[0];
    const KeyFile key = read_key_file(path);
    const TPMT_PUBLIC& area = key.blobs.pub.publicArea;
    const PublicKey pub(area);
    const bool user_with_auth = area.objectAttributes & TPMA_OBJECT_USERWITHAUTH;
    std::string policy = "none";
    if (key.has_policy || area.authPolicy.size)
        policy = user_with_auth ? "yes (the PIN works too; tpmkey uses the PIN)"
                                : "yes, required (tpmkey cannot use this key)";
    std::cout << "file:        " << path.string() << "\n"
              << "type:        " << key_type_text(pub) << "\n"
              << "fingerprint: " << pub.ssh_fingerprint() << "\n"
              << "attributes:  " << attributes_text(area.objectAttributes) << "\n"
              << "PIN:         " << (key.needs_pin() ? "yes" : "no") << "\n"
              << "parent:      " << handle_text(key.parent)
              << (key.parent == owner_hierarchy ? " (storage key re-created from the owner hierarchy)"
                                                : " (persistent storage key)")
              << "\n"
              << "policy:      " << policy << "\n";
    if (!key.description.empty())
        std::cout << "description: " << key.description << "\n";
    std::optional<Diagnosis> problem;
    const Config config = load_config();
    try {
        Tpm tpm(config.tcti, config.tpm_timeout);
        problem = why_key_does_not_load(tpm, key, KnownParents::load());
    } catch (const TpmError& e) {
        problem = diagnose(e, config.tcti);
    }
    if (problem) {
        std::cout << "loads:       no: " << problem->problem << "\n"
                  << "             (" << problem->solution << ")\n";
        return 1;
    }
    std::cout << "loads:       yes, on this TPM\n";
    return 0;
}

// ---- passwd ----------------------------------------------------------------

constexpr CommandSpec passwd_spec{
    "passwd", "tpmkey passwd [--old-pin-file FILE] [--new-pin-file FILE] KEY",
    "Sets, changes or removes the PIN of KEY. The TPM wraps the key again with\n"
    "the new PIN (TPM2_ObjectChangeAuth; both PINs travel only inside an\n"
    "encrypted session) and KEY is replaced in one step. With a wrong current\n"
    "PIN nothing is written. An empty new PIN removes the PIN.\n"
    "\n"
    "Asks for the PINs on the terminal unless given in files:\n"
    "  --old-pin-file FILE   the current PIN: the first line of FILE\n"
    "  --new-pin-file FILE   the new PIN: the first line of FILE (empty: no PIN)\n"
    "\n"
    "Wrong PINs count towards the TPM's dictionary-attack lockout (see\n"
    "'tpmkey doctor'). The public key stays the same.\n",
    {"--old-pin-file", "--new-pin-file", nullptr}, {nullptr}, 1};

Secret ask_new_pin() {
    while (true) {
        Secret first = pin_from_terminal("Enter the new PIN (empty for no PIN): ", "--new-pin-file");
        Secret second = pin_from_terminal("Enter the same PIN again: ", "--new-pin-file");
        if (first == second)
            return first;
        std::cerr << "The PINs do not match; try again.\n";
    }
}

int cmd_passwd(const Parsed& p) {
    std::filesystem::path path = p.positional[0];
    // A key file that is a link (dotfile managers) stays a link: the new
    // file replaces the link's target.
    std::error_code ec;
    if (std::filesystem::is_symlink(path, ec))
        path = std::filesystem::canonical(path);
    KeyFile key = read_key_file(path);
    check_usable(key, path.string());
    Secret old_pin;
    if (p.has_value("--old-pin-file"))
        old_pin = read_pin_file(p.value("--old-pin-file"));
    Secret new_pin;
    if (p.has_value("--new-pin-file"))
        new_pin = read_pin_file(p.value("--new-pin-file"));

    // The TPM, the parent and the key before any PIN is asked for: no PIN
    // is typed for a run that was going to fail, and none is sent under a
    // storage key that fails its checks.
    const Config config = load_config();
    Tpm tpm(config.tcti, config.tpm_timeout);
    KnownParents known = KnownParents::load();
    TpmObject parent;
    try {
        parent = load_verified_parent(tpm, key.parent, known);
    } catch (const TpmError& e) {
        throw Error(path.string() + ": " + diagnose(e, tpm.tcti()).problem + "; the file is unchanged");
    } catch (const Error& e) {
        throw Error(path.string() + ": " + e.what() + "; the file is unchanged");
    }
    // Trust on first use, as keygen does: from now on this parent must meet this name.
    if (pin_parent_on_first_use(tpm, key.parent, parent, known))
        std::cout << "Pinned the TPM's storage key " << handle_text(key.parent) << " in "
                  << KnownParents::file_path().string() << ".\n";
    if (!p.has_value("--old-pin-file") && key.needs_pin())
        old_pin = pin_from_terminal("Enter the current PIN of " + path.stem().string() + ": ", "--old-pin-file");
    if (!p.has_value("--new-pin-file"))
        new_pin = ask_new_pin();
    if (old_pin.empty() && new_pin.empty() && !key.needs_pin()) {
        std::cout << path.string() << " has no PIN; nothing changed.\n";
        return 0;
    }

    // Both PINs cross the bus only inside the salted, encrypted session.
    const Authorization auth = Authorization::for_secret(tpm, parent, !old_pin.empty() || !new_pin.empty());
    TpmObject loaded;
    try {
        loaded = load_key(tpm, parent, auth, key.blobs);
    } catch (const TpmError& e) {
        throw Error(path.string() + ": " + diagnose(e, tpm.tcti()).problem + "; the file is unchanged");
    }
    {
        const AuthValue current(tpm, loaded, old_pin);
        try {
            key.blobs.priv = change_auth(tpm, loaded, parent, auth, new_pin);
        } catch (const TpmError& e) {
            const Diagnosis d = diagnose(e, tpm.tcti());
            throw Error(d.problem + "; " + path.string() + " is unchanged (" + d.solution + ")");
        }
    }
    // Every other field (the description, a policy, fields of later
    // versions of the format) is written back as it was read.
    key.empty_auth = new_pin.empty();
    write_file_atomically(path, format_key_file(key), 0600, Replace::yes);
    const char* what = new_pin.empty() ? "removed" : old_pin.empty() ? "set" : "changed";
    std::cout << "The PIN of " << path.string() << " is " << what << ".\n";
    return 0;
}

// ---- doctor ----------------------------------------------------------------

constexpr CommandSpec doctor_spec{
    "doctor", "tpmkey doctor",
    "Checks everything SSH keys in the TPM need, one line per check, and for\n"
    "each problem a 'Likely problem' and a 'Possible solution' line:\n"
    "  - the TPM: which TCTI reaches it, /dev/tpmrm0 and the 'tss' group,\n"
    "    the resource manager, the storage key (SRK), dictionary-attack state\n"
    "  - the keys: found where, readable, loadable on this TPM\n"
    "  - ssh: the PKCS11Provider line in ~/.ssh/config, the module path against\n"
    "    ssh-agent's allow-list, the OpenSSH version\n"
    "Exit status 0 when all is well (warnings allowed), 1 when a problem was found.\n",
    {nullptr}, {nullptr}, 0};

class Doctor {
public:
    void ok(const std::string& what) { std::cout << "[ok]      " << what << "\n"; }
    void warn(const std::string& what, const std::string& problem, const std::string& solution) {
        report("[warning] ", what, problem, solution);
    }
    void fail(const std::string& what, const std::string& problem, const std::string& solution) {
        ++problems_;
        report("[problem] ", what, problem, solution);
    }
    int problems() const noexcept { return problems_; }

private:
    static void report(const char* tag, const std::string& what, const std::string& problem,
                       const std::string& solution) {
        std::cout << tag << what << "\n"
                  << "          Likely problem:    " << problem << "\n"
                  << "          Possible solution: " << solution << "\n";
    }
    int problems_ = 0;
};

std::string seconds_text(UINT32 s) {
    if (s >= 7200 && s % 3600 == 0)
        return std::to_string(s / 3600) + " hours";
    if (s >= 120 && s % 60 == 0)
        return std::to_string(s / 60) + " minutes";
    return std::to_string(s) + " s";
}

// The TPM device node: there, and may this user open it?
void check_device(Doctor& d, const std::string& device) {
    struct stat st {};
    if (::stat(device.c_str(), &st) != 0 && errno != ENOENT) {
        d.fail(device + ": cannot look at it (" + std::strerror(errno) + ")",
               "a directory on the way to it is closed to you", "check the TCTI setting, or the permissions");
        return;
    }
    if (::stat(device.c_str(), &st) != 0) {
        if (device == "/dev/tpmrm0" && ::access("/dev/tpm0", F_OK) == 0)
            d.warn(device + " is missing, /dev/tpm0 is there",
                   "the kernel offers no TPM resource manager (Linux before 4.12?)",
                   "use a newer kernel, or run tpm2-abrmd (Debian package tpm2-abrmd)");
        else if (device != "/dev/tpmrm0" && device != "/dev/tpm0")
            d.fail(device + " is missing", "the TCTI set in TPMKEY_TCTI or the config file names no device",
                   "correct it (e.g. device:/dev/tpmrm0), or unset it");
        else
            d.fail(device + " is missing",
                   "this machine shows no TPM 2.0 (switched off in the firmware, or a TPM 1.2)",
                   "enable the TPM in the firmware settings (often 'Security Chip', 'fTPM' or 'PTT'), "
                   "or set TPMKEY_TCTI if you reach the TPM another way");
        return;
    }
    const group* g = ::getgrgid(st.st_gid);
    const std::string group_name = g ? g->gr_name : std::to_string(st.st_gid);
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    const std::string desc = device + " (mode " + mode + ", group " + group_name + ")";
    if (::access(device.c_str(), R_OK | W_OK) == 0) {
        d.ok(desc + ": you may use it");
        return;
    }
    // In the group database but not in this login session's groups?
    bool in_database = false;
    if (const passwd* pw = ::getpwuid(::getuid())) {
        int n = 64;
        std::vector<gid_t> groups(static_cast<std::size_t>(n));
        if (::getgrouplist(pw->pw_name, pw->pw_gid, groups.data(), &n) < 0) {
            groups.resize(static_cast<std::size_t>(n));
            ::getgrouplist(pw->pw_name, pw->pw_gid, groups.data(), &n);
        }
        groups.resize(static_cast<std::size_t>(std::max(n, 0)));
        in_database = std::find(groups.begin(), groups.end(), st.st_gid) != groups.end();
    }
    if (in_database)
        d.fail(desc + ": you may not use it yet",
               "you joined the '" + group_name + "' group after this login session started",
               "log out and in again (or start a shell with: newgrp " + group_name + ")");
    else
        d.fail(desc + ": you may not use it", "only root and the '" + group_name + "' group may use the TPM",
               "sudo usermod -aG " + group_name + " $USER, then log out and in again");
}

// The TPM part of the doctor; returns the open connection (or nothing).
std::unique_ptr<Tpm> check_tpm(Doctor& d, const Config& config) {
    // The device node the TCTI uses: /dev/tpmrm0 for the default, else the
    // one a "device:PATH" TCTI names (tpm2-tss: plain "device" is /dev/tpm0).
    if (config.tcti.empty())
        check_device(d, "/dev/tpmrm0");
    else if (config.tcti == "device")
        check_device(d, "/dev/tpm0");
    else if (config.tcti.starts_with("device:"))
        check_device(d, config.tcti.substr(7));

    // Reach it. For the default, try what tpm2-tss tries, in its order
    // (tctildr: tabrmd, /dev/tpmrm0, /dev/tpm0, swtpm, mssim), so we can say
    // which one answers.
    std::vector<std::string> candidates;
    if (config.tcti.empty())
        candidates = {"tabrmd", "device:/dev/tpmrm0", "device:/dev/tpm0", "swtpm", "mssim"};
    else
        candidates = {config.tcti};
    std::unique_ptr<Tpm> tpm;
    std::string tcti, tried;
    std::map<TPM2_PT, UINT32> props;
    for (const std::string& candidate : candidates) {
        try {
            auto t = std::make_unique<Tpm>(candidate, config.tpm_timeout);
            props = tpm_properties(*t, TPM2_PT_PERMANENT, TPM2_PT_LOCKOUT_RECOVERY - TPM2_PT_PERMANENT + 1);
            tpm = std::move(t);
            tcti = candidate;
            break;
        } catch (const TpmError& e) {
            tried += "\n            " + candidate + ": " + unreachable_reason(candidate, e);
        }
    }
    if (!tpm) {
        d.fail("TPM not reachable; tried:" + tried,
               config.tcti.empty() ? "no TPM answers where tpm2-tss looks by default"
                                   : "no TPM answers at the TCTI set in " + config.tcti_source,
               config.tcti.empty() ? "see the /dev/tpmrm0 line above; or set TPMKEY_TCTI to how your TPM is reached"
                                   : "check that TCTI string (same syntax as tpm2-tools' TPM2TOOLS_TCTI), "
                                     "or unset it to use /dev/tpmrm0");
        return nullptr;
    }
    d.ok("TPM reachable through " + tcti +
         (config.tcti.empty() ? " (the tpm2-tss default)" : " (set in " + config.tcti_source + ")"));

    // Resource manager.
    if (tcti.starts_with("tabrmd"))
        d.ok("resource manager: tpm2-abrmd");
    else if (tcti.find("tpmrm") != std::string::npos)
        d.ok("resource manager: the kernel's (/dev/tpmrm0)");
    else if (tcti.starts_with("device"))
        d.warn("no resource manager (" + tcti + ")",
               "without one, TPM objects of a program that crashes stay loaded, and the TPM has room for only a few",
               "use device:/dev/tpmrm0");
    else if (tcti.starts_with("swtpm") || tcti.starts_with("mssim"))
        d.ok("resource manager: none (a TPM simulator; every process shares its few object slots)");
    else
        d.ok("resource manager: whatever " + tcti + " provides");
    try {
        const UINT32 objects = static_cast<UINT32>(tpm_handles(*tpm, TPM2_TRANSIENT_FIRST).size());
        const UINT32 sessions = static_cast<UINT32>(tpm_handles(*tpm, TPM2_LOADED_SESSION_FIRST).size());
        const UINT32 avail = props.count(TPM2_PT_HR_TRANSIENT_AVAIL) ? props[TPM2_PT_HR_TRANSIENT_AVAIL] : 1;
        const std::string what = "the TPM holds " + std::to_string(objects) + " object(s) and " +
                                 std::to_string(sessions) + " session(s) of other programs";
        if (objects + sessions > 0 && avail == 0)
            d.fail(what + ", and has no room left", "programs without a resource manager left them behind",
                   "use /dev/tpmrm0 (TPMKEY_TCTI=device:/dev/tpmrm0), or flush them: tpm2_flushcontext -t; "
                   "tpm2_flushcontext -s");
        else if (objects + sessions > 0)
            d.warn(what, "there is no resource manager between those programs and the TPM",
                   "use /dev/tpmrm0; tpm2_flushcontext -t and -s remove them");
    } catch (const TpmError& e) {
        d.warn("objects in the TPM", e.what(), "none needed: informational");
    }

    // Dictionary-attack state (TPM 2.0 Part 1, 19.8).
    const UINT32 permanent = props[TPM2_PT_PERMANENT];
    const UINT32 counter = props[TPM2_PT_LOCKOUT_COUNTER];
    const UINT32 max_tries = props[TPM2_PT_MAX_AUTH_FAIL];
    const UINT32 interval = props[TPM2_PT_LOCKOUT_INTERVAL];
    const std::string da_numbers = std::to_string(counter) + " of " + std::to_string(max_tries) +
                                   " wrong PINs counted; one is forgiven every " + seconds_text(interval);
    if (permanent & TPMA_PERMANENT_INLOCKOUT)
        // Every object without 'noda' is refused, also one with an empty
        // auth value: tpmkey's keys with and without a PIN alike.
        d.fail("dictionary-attack lockout: the TPM refuses to use keys (" + da_numbers + ")",
               "too many wrong PINs were tried",
               "wait: within " + seconds_text(interval) +
                   " the TPM uses keys again (with or without PIN). Or, with the TPM's lockout "
                   "password: tpm2_dictionarylockout --clear-lockout --auth PASSWORD");
    else if (max_tries > 0 && counter + 1 >= max_tries && counter > 0)
        d.warn("dictionary-attack protection: " + da_numbers,
               "one more wrong PIN and the TPM locks out", "take care with the next PIN; the count falls with time");
    else
        d.ok("dictionary-attack protection: not in lockout (" + da_numbers + ")");

    // PINs rely on the dictionary-attack counter, and whoever knows the
    // lockout authorization may reset it (TPM2_DictionaryAttackLockReset).
    if (!(permanent & TPMA_PERMANENT_LOCKOUTAUTHSET))
        d.warn("the TPM's lockout authorization is empty",
               "anyone who may use the TPM can reset its wrong-PIN counter, so a PIN can be guessed "
               "without limit (a 4-digit PIN in seconds)",
               "set one and keep it safe: tpm2_changeauth -c lockout (see docs/security.md)");
    else
        d.ok("the TPM's lockout authorization is set: the wrong-PIN counter cannot be reset without it");

    // The storage keys: what 0x81000001 holds, and whether the parents match their pins.
    try {
        const PersistentSrk srk = inspect_persistent_srk(*tpm);
        using State = PersistentSrk::State;
        if (srk.state == State::standard)
            d.ok("storage key (SRK) at 0x81000001: the TCG standard SRK; new keys use it (the fastest parent)");
        else if (srk.state == State::unfit)
            d.fail("0x81000001 holds a key that must not be a parent", srk.detail,
                   "if you did not put it there, someone with the TPM's owner authorization did: find out who; "
                   "new keys use 0x40000001 (tpmkey-keygen skips it); remove it with tpm2_evictcontrol -c 0x81000001");
        else if (srk.state == State::other_storage_key)
            d.ok("0x81000001 holds " + srk.detail + " (another program's, e.g. tpm2-pkcs11's): "
                 "new keys use 0x40000001 instead, so that program may evict it");
        else if (permanent & TPMA_PERMANENT_OWNERAUTHSET)
            d.fail("no storage key at 0x81000001, and the owner hierarchy has a password",
                   "tpmkey cannot re-create the storage key 0x40000001 without that password",
                   "make a persistent SRK once: tpm2_createprimary -C o -P OWNERPW -c srk.ctx && "
                   "tpm2_evictcontrol -C o -P OWNERPW -c srk.ctx 0x81000001");
        else
            d.ok("no storage key at 0x81000001: keys use 0x40000001, re-created on use (slower on real TPMs; "
                 "tpm2_createprimary -c srk.ctx && tpm2_evictcontrol -c srk.ctx 0x81000001 makes one)");
    } catch (const TpmError& e) {
        d.warn("storage key (SRK)", e.what(), "none needed unless keys fail to load below");
    }
    return tpm;
}

void check_keys(Doctor& d, const Config& config, Tpm* tpm) {
    const KnownParents known = KnownParents::load();
    for (const std::string& w : known.warnings())
        d.warn("pinned parents: " + w, "a line tpmkey does not understand", "fix or remove that line");
    for (const std::string& w : config.warnings)
        d.warn("configuration: " + w, "a line tpmkey does not understand", "fix or remove that line");
    const std::string where = config.searched.empty() ? std::string("any place") : config.searched.front();
    if (config.key_files.empty()) {
        d.fail("no key found in " + where, "no key has been made yet, or it is elsewhere",
               "make one: tpmkey-keygen (or point TPMKEY_KEYS at your keys)");
        return;
    }
    d.ok(std::to_string(config.key_files.size()) + " key file(s) in " + where);
    for (const auto& path : config.key_files) {
        const std::string name = path.string();
        KeyFile key;
        try {
            key = read_key_file(path);
            check_usable(key, name);
            (void)PublicKey(key.blobs.pub.publicArea);
        } catch (const ReplaceableFile& e) {
            const std::string what = e.what();
            d.fail(name + ": the module skips this file", what.starts_with(name) ? what.substr(name.size() + 2) : what,
                   "check that it is your key ('tpmkey info " + name + "' shows its fingerprint), then fix the "
                   "ownership or permissions as said");
            continue;
        } catch (const Error& e) {
            const std::string what = e.what();
            d.fail(name + ": the module skips this file", what.starts_with(name) ? what.substr(name.size() + 2) : what,
                   "move it out of " + where + " (or restore it from a backup)");
            continue;
        }
        const std::string desc = name + ": " + key_type_text(PublicKey(key.blobs.pub.publicArea)) + ", " +
                                 (key.needs_pin() ? "PIN" : "no PIN") + ", parent " + handle_text(key.parent);
        if (!tpm) {
            d.ok(desc + " (not loaded: no TPM)");
            continue;
        }
        bool pinned = false;
        if (const auto why = why_key_does_not_load(*tpm, key, known, &pinned))
            d.fail(desc + ": does not load", why->problem, why->solution);
        else if (!pinned)
            d.warn(desc + ": loads on this TPM, but its parent is not pinned",
                   "its storage key is checked by its attributes only, not by name (the key was made by another "
                   "tool or an older tpmkey)",
                   "on a machine you trust, run 'tpmkey passwd " + name + "' once: it pins the parent in " +
                       KnownParents::file_path().string());
        else
            d.ok(desc + ": loads on this TPM, under its pinned parent");
        if (PublicKey(key.blobs.pub.publicArea).is_rsa() && tpm_lacks_sha512(*tpm))
            d.warn(name + ": an RSA key, and this TPM cannot sign SHA-512",
                   "ssh signs RSA keys with rsa-sha2-512 where the server allows it, and does not try "
                   "rsa-sha2-256 after that fails: the login fails",
                   "tpmkey ssh-config --apply adds '" + std::string(no_rsa_sha2_512_line) +
                       "' to ~/.ssh/config; or make an ECDSA key (tpmkey-keygen), which has no such limit");
    }
}

// ssh-agent loads PKCS#11 modules only from these (ssh-agent(1), -P).
bool in_agent_allow_list(const std::string& path) {
    std::error_code ec;
    const std::filesystem::path real = std::filesystem::canonical(path, ec);
    const std::string p = ec ? path : real.string();
    return ::fnmatch("/usr/lib*/*", p.c_str(), 0) == 0 || ::fnmatch("/usr/local/lib*/*", p.c_str(), 0) == 0;
}

void check_ssh(Doctor& d) {
    const std::filesystem::path file = ssh_config_path();
    const std::vector<ConfigLine> lines = config_lines(read_text(file), "pkcs11provider");
    const std::string cfg = "~/.ssh/config";
    std::string module;
    const auto first_global =
        std::find_if(lines.begin(), lines.end(), [](const ConfigLine& l) { return l.all_hosts; });
    if (first_global != lines.end() && is_tpmkey_module(first_global->value)) {
        module = first_global->value;
        std::error_code ec;
        if (!std::filesystem::exists(module, ec))
            d.fail(cfg + " line " + std::to_string(first_global->line_no) + ": PKCS11Provider " + module,
                   "that file does not exist; ssh will fail to load it",
                   "install tpmkey (sudo cmake --install build) or correct the path");
        else
            d.ok(cfg + " line " + std::to_string(first_global->line_no) + ": PKCS11Provider " + module);
    } else if (first_global != lines.end()) {
        d.fail(cfg + " line " + std::to_string(first_global->line_no) + ": PKCS11Provider " + first_global->value,
               "ssh uses only the first PKCS11Provider it reads, and this one is not tpmkey's",
               "remove that line, then run 'tpmkey ssh-config --apply'");
    } else {
        const auto ours = std::find_if(lines.begin(), lines.end(),
                                       [](const ConfigLine& l) { return is_tpmkey_module(l.value); });
        if (ours != lines.end()) {
            module = ours->value;
            d.warn(cfg + " line " + std::to_string(ours->line_no) + ": PKCS11Provider under '" + ours->block + "'",
                   "ssh uses the TPM keys only for the hosts that block matches",
                   "fine if you meant it; else run 'tpmkey ssh-config --apply' to use them for every host");
        } else {
            d.fail(cfg + " has no PKCS11Provider line", "ssh is not told to use the module",
                   "run 'tpmkey ssh-config --apply' (adds: PKCS11Provider " + find_module().path + ")");
        }
    }

    const std::string agent_path = module.empty() ? find_module().path : module;
    if (in_agent_allow_list(agent_path))
        d.ok("module path " + agent_path + " is inside ssh-agent's default allow-list");
    else
        d.warn("module path " + agent_path + " is outside ssh-agent's default allow-list",
               "ssh-agent refuses modules outside /usr/lib*/ and /usr/local/lib*/ ('ssh-add -s' fails)",
               "install it (sudo cmake --install build), or start ssh-agent with -P '" + agent_path + "'");

    const std::string version = command_output("ssh -V 2>&1");
    int major = 0, minor = 0;
    const std::size_t at = version.find("OpenSSH_");
    if (at == std::string::npos) {
        d.fail("OpenSSH client not found", "ssh is not installed", "sudo apt-get install openssh-client");
        return;
    }
    std::sscanf(version.c_str() + at, "OpenSSH_%d.%d", &major, &minor);
    const std::string first_line = version.substr(at, version.find_first_of(",\n", at) - at);
    if (major < 8)
        d.fail(first_line, "ssh before 8.0 cannot use ECDSA keys through PKCS#11",
               "upgrade OpenSSH, or make an RSA key: tpmkey-keygen -t rsa");
    else
        d.ok(first_line);
}

int cmd_doctor(const Parsed&) {
    Doctor d;
    const Config config = load_config();
    const std::unique_ptr<Tpm> tpm = check_tpm(d, config);
    check_keys(d, config, tpm.get());
    check_ssh(d);
    std::cout << (d.problems() == 0 ? "All is well.\n" : std::to_string(d.problems()) + " problem(s) found.\n");
    return d.problems() == 0 ? 0 : 1;
}

// ---- ssh-config ------------------------------------------------------------

constexpr CommandSpec ssh_config_spec{
    "ssh-config", "tpmkey ssh-config [--apply]",
    "Prints the lines ~/.ssh/config needs so that ssh uses your TPM keys.\n"
    "\n"
    "  --apply   also add them to ~/.ssh/config, after showing them: at the top\n"
    "            of the file (ssh uses the first PKCS11Provider it reads, and\n"
    "            lines below a 'Host' line apply to that host only). The rest\n"
    "            of the file is kept; run twice, it adds them once.\n",
    {nullptr}, {"--apply", nullptr}, 0};

int cmd_ssh_config(const Parsed& p) {
    const ModuleLocation module = find_module();
    const Config config = load_config();
    const bool sha256_only = rsa_keys_need_sha256(config);
    const std::string provider_lines = "# SSH keys held in the TPM (tpmkey; the module " + module.how + ")\n" +
                                       "PKCS11Provider " + module.path + "\n";
    const std::string rsa_lines = sha256_only ? "# This TPM cannot sign SHA-512: RSA keys sign with rsa-sha2-256\n" +
                                                    std::string(no_rsa_sha2_512_line) + "\n"
                                              : "";
    if (!p.has_flag("--apply")) {
        std::cout << provider_lines << rsa_lines;
        return 0;
    }
    const std::filesystem::path dir = home_directory() / ".ssh";
    std::filesystem::path file = dir / "config";
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
        throw Error(dir.string() + ": cannot create: " + std::strerror(errno));
    // A ~/.ssh/config that is a link (dotfile managers) stays a link.
    std::error_code ec;
    if (std::filesystem::is_symlink(file, ec))
        file = std::filesystem::canonical(file);
    const std::string text = read_text(file);
    const std::vector<ConfigLine> existing = config_lines(text, "pkcs11provider");
    const auto first_global =
        std::find_if(existing.begin(), existing.end(), [](const ConfigLine& l) { return l.all_hosts; });
    const bool have_provider = first_global != existing.end() && is_tpmkey_module(first_global->value);
    const std::vector<ConfigLine> algorithms = config_lines(text, "pubkeyacceptedalgorithms");
    const bool have_rsa_line = !algorithms.empty() && algorithms.front().all_hosts &&
                               algorithms.front().value.find("-rsa-sha2-512") == 0;
    const std::string lines = (have_provider ? "" : provider_lines) + (have_rsa_line ? "" : rsa_lines);
    if (lines.empty()) {
        std::cout << file.string() << " already has, on line " << first_global->line_no << ":\n"
                  << "PKCS11Provider " << first_global->value << "\nNothing changed.\n";
        return 0;
    }
    std::cout << "Adding these lines to the top of " << file.string() << ":\n" << lines;
    struct stat st {};
    const mode_t mode = ::stat(file.c_str(), &st) == 0 ? (st.st_mode & 0777) : 0600;
    write_file_atomically(file, lines + (text.empty() ? "" : "\n" + text), mode, Replace::yes);
    std::cout << "Done.\n";
    if (!have_provider && first_global != existing.end())
        std::cout << "Note: ssh now uses this module instead of " << first_global->value << " (line "
                  << first_global->line_no + std::count(lines.begin(), lines.end(), '\n') + 1
                  << "): it reads only the first PKCS11Provider.\n";
    return 0;
}

// ---- main ------------------------------------------------------------------

struct Command {
    const CommandSpec* spec;
    int (*run)(const Parsed&);
};

constexpr Command commands[] = {
    {&list_spec, cmd_list},     {&pubkey_spec, cmd_pubkey}, {&info_spec, cmd_info},
    {&passwd_spec, cmd_passwd}, {&doctor_spec, cmd_doctor}, {&ssh_config_spec, cmd_ssh_config},
};

int run(int argc, char** argv) {
    configure_logging();
    if (argc < 2)
        throw UsageError("tpmkey: a command is needed", "");
    const std::string name = argv[1];
    if (name == "--help" || name == "-h" || name == "help") {
        std::cout << usage_text;
        return 0;
    }
    const std::vector<std::string> args(argv + 2, argv + argc);
    for (const Command& c : commands) {
        if (name != c.spec->name)
            continue;
        const Parsed parsed = parse_args(*c.spec, args);
        if (parsed.help) {
            std::cout << "usage: " << c.spec->usage << "\n\n" << c.spec->help;
            return 0;
        }
        return c.run(parsed);
    }
    throw UsageError("tpmkey: unknown command '" + name + "'", "");
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const UsageError& e) {
        std::cerr << e.what() << "\n";
        if (e.usage().empty())
            std::cerr << usage_text;
        else
            std::cerr << "usage: " << e.usage() << "\n(see 'tpmkey " << std::string(argv[1]) << " --help')\n";
        return 2;
    } catch (const TpmError& e) {
        // The commands reach the TPM through the configured TCTI.
        std::string tcti;
        try {
            tcti = load_config().tcti;
        } catch (const std::exception&) {
        }
        std::cerr << "tpmkey: " << diagnosis_line(diagnose(e, tcti)) << "\n";
        return 1;
    } catch (const std::exception& e) {
        std::cerr << "tpmkey: " << e.what() << "\n";
        return 1;
    }
}
