// tpmkey doctor: checks the TPM, the keys and the ssh set-up, one line per
// check, and for each problem a "Likely problem" and a "Possible solution".

#include "doctor.hpp"
#include "core/base/home.hpp"
#include "core/base/log.hpp"
#include "core/base/printable.hpp"
#include "core/files/config.hpp"
#include "core/files/file_read.hpp"
#include "core/keys/key_discovery.hpp"
#include "core/pin/source.hpp"
#include "core/tpm/diagnosis.hpp"
#include "core/tpm/pin_object.hpp"
#include "core/tpm/tpm.hpp"
#include "core/tpm/tpm_keys.hpp"
#include "core/tpm/tpm_queries.hpp"
#include "core/trust/endorsement.hpp"
#include "core/trust/known_parents.hpp"
#include "core/trust/owner_srk.hpp"
#include "ssh_config.hpp"

#include <tss2/tss2_tpm2_types.h>

#include <fnmatch.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tpmkey::cli {

namespace {

constexpr CommandSpec doctor_spec{"doctor",
                                  "check the TPM, the keys and the ssh set-up",
                                  "tpmkey doctor",
                                  "Checks everything SSH keys in the TPM need, one line per check, and for\n"
                                  "each problem a 'Likely problem' and a 'Possible solution' line:\n"
                                  "  - the TPM: which TCTI reaches it, /dev/tpmrm0 and the 'tss' group,\n"
                                  "    the resource manager, the storage key (SRK), dictionary-attack state\n"
                                  "  - its endorsement key (EK): its certificate (where, which algorithm, the\n"
                                  "    issuer, whether it chains to a trusted root), the storage keys it\n"
                                  "    proves genuine, the pins\n"
                                  "  - the keys: found where, readable, loadable on this TPM\n"
                                  "  - ssh: the PKCS11Provider line in ~/.ssh/config, the module path against\n"
                                  "    ssh-agent's allow-list, the OpenSSH version\n"
                                  "Exit status 0 when all is well (warnings allowed), 1 when a problem was found.\n",
                                  {nullptr},
                                  {nullptr},
                                  0};

// printable() line by line: a check may span lines (what was tried),
// a name in it may not.
std::string printable_lines(std::string_view text) {
    std::string out;
    for (std::size_t at = 0;;) {
        const std::size_t eol = text.find('\n', at);
        out += printable(text.substr(at, eol == std::string_view::npos ? std::string_view::npos : eol - at));
        if (eol == std::string_view::npos)
            return out;
        out += '\n';
        at = eol + 1;
    }
}

}  // namespace

void Doctor::report(const char* tag, const std::string& what, const std::string& problem, const std::string& solution) {
    std::cout << tag << printable_lines(what) << "\n"
              << "          Likely problem:    " << printable(problem) << "\n"
              << "          Possible solution: " << printable(solution) << "\n";
}

namespace {

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

// Which config file tpmkey reads, and whether the environment moved it
// from ~/.config/tpmkey/config (XDG_CONFIG_HOME: tpmkey-swtpm start sets
// it, for one): the lines of that file (pin-from, confirm, tcti...) are then
// not used, and nothing else says so.
void check_config_file(Doctor& d) {
    const std::filesystem::path file = config_file_path();
    const std::filesystem::path home = home_directory();
    if (file.empty() || home.empty())
        return;
    std::error_code ec;
    const std::filesystem::path usual = home / ".config" / "tpmkey" / "config";
    const char* xdg = std::getenv("XDG_CONFIG_HOME");
    const std::string moved =
        file == usual ? std::string()
                      : " (XDG_CONFIG_HOME=" + std::string(xdg ? xdg : "") + ", not " + usual.string() + ")";
    d.ok("config file: " + file.string() + (std::filesystem::exists(file, ec) ? "" : ", none there: the defaults") +
         moved);
    if (!moved.empty() && std::filesystem::exists(usual, ec))
        d.warn("config file: " + usual.string() + " is not read: XDG_CONFIG_HOME moves tpmkey's config file to " +
                   file.string(),
               "the lines of " + usual.string() +
                   " (pin-from, confirm, tcti...) are not used where XDG_CONFIG_HOME is set so (as tpmkey-swtpm "
                   "start sets it)",
               "put the lines you need in " + file.string() + " too, or unset XDG_CONFIG_HOME");
}

void check_keys(Doctor& d, const Config& config, Tpm* tpm) {
    KnownParents known = KnownParents::load();
    if (known.problem())
        d.fail("pinned parents: " + *known.problem(),
               "tpmkey cannot trust the pins, so it uses no storage key and no key loads (nothing secret is sent)",
               "make it a regular file of yours that no one else may write to, in directories no one else may "
               "write to, as said above");
    for (const std::string& w : known.warnings())
        d.warn("pinned parents: " + w, "a line tpmkey does not understand", "fix or remove that line");
    if (!config.file_problem.empty())
        d.fail("configuration: " + config.file_problem + "; ignored",
               "tpmkey does not use a config file that someone else could have written (its tcti line could send "
               "your PINs elsewhere), nor one it cannot read; as its confirm lines are unknown, the module asks to "
               "confirm every use of every key until it is fixed",
               "make it a regular file of yours that no one else may write to, in directories no one else may "
               "write to (chmod 600 " +
                   config_file_path().string() + ")");
    for (const std::string& w : config.warnings)
        if (w != config.file_problem + "; ignored")
            d.warn("configuration: " + w, "a line tpmkey does not understand", "fix or remove that line");
    const std::string where = config.searched.empty() ? std::string("any place") : config.searched.front();
    if (config.key_files.empty()) {
        d.fail("no key found in " + where, "no key has been made yet, or it is elsewhere",
               "make one: tpmkey-keygen (or point TPMKEY_KEYS at your keys)");
        return;
    }
    d.ok(std::to_string(config.key_files.size()) + " key file(s) in " + where);
    for (const FoundKeyFile& found : find_keys(config)) {
        const std::string name = found.path.string();
        if (!found.key) {
            d.fail(name + ": the module skips this file", found.skip_reason,
                   found.replaceable ? "check that it is your key ('tpmkey info " + name +
                                           "' shows its fingerprint), then fix the ownership or permissions as said"
                                     : "move it out of " + where + " (or restore it from a backup)");
            continue;
        }
        const KeyFile& key = found.key->file;
        const PublicKey& pub = found.key->public_key;
        const std::string desc = name + ": " + key_type_text(pub) + ", " + (key.needs_pin() ? "PIN" : "no PIN") +
                                 ", parent " + handle_text(key.parent);
        if (!shared_pin_name(key).empty()) {
            try {
                (void)pin_object_for(key);
                d.ok(name + ": its PIN is the shared PIN (the PIN object " + pin_object_path().string() + ")");
            } catch (const Error& e) {
                d.fail(name + ": its PIN object cannot be used", e.what(),
                       "put back the PIN object the key was made with (~/.config/tpmkey/pin-object)");
            }
        }
        // Read from the file alone: a lockout later would stop the key.
        const auto warn_if_lockout_stops_it = [&] {
            if (lockout_stops_pinless_key(key.blobs.pub.publicArea, !key.needs_pin()))
                d.warn(name + ": no PIN, but under dictionary-attack protection: a TPM in lockout refuses it",
                       "it was made by an earlier tpmkey-keygen, or its PIN was removed by tpmkey passwd",
                       "make a new key without a PIN with tpmkey-keygen (it makes such keys noDA: no lockout stops "
                       "them) and use it in this one's place");
        };
        if (!tpm) {
            d.ok(desc + " (not loaded: no TPM)");
            warn_if_lockout_stops_it();
            continue;
        }
        ParentCheck check;
        if (const auto why = why_key_does_not_load(*tpm, key, found.path, known, &check))
            d.fail(desc + ": does not load", why->problem, why->solution);
        else if (check.proven_now)
            d.ok(desc + ": loads on this TPM; " + parent_check_text(key.parent, check));
        else
            d.ok(desc + ": loads on this TPM, under its pinned and proven parent");
        try {
            if (policy_pcrs_match(*tpm, key) == false)
                d.fail(name + ": bound to PCRs that changed since the key was made: it does not sign in this boot "
                              "state",
                       "the machine booted differently (other firmware, boot loader or Secure Boot state)",
                       pcr_changed_solution(key.has_signed_policies(), name));
        } catch (const Error& e) {
            d.warn(name + ": cannot read the PCRs it is bound to", e.what(), "see 'tpmkey info " + name + "'");
        }
        warn_if_lockout_stops_it();
        if (pub.kind() == KeyKind::rsa && tpm_lacks_sha512(*tpm))
            d.warn(name + ": an RSA key, and this TPM cannot sign SHA-512",
                   "ssh signs RSA keys with rsa-sha2-512 where the server allows it, and does not try "
                   "rsa-sha2-256 after that fails: the login fails",
                   "tpmkey ssh-config --apply adds '" + std::string(no_rsa_sha2_512_line) +
                       "' to ~/.ssh/config; or make an ECDSA key (tpmkey-keygen), which has no such limit");
    }
}

// The config file's pin-from lines (docs/unattended-keys.md): is the source
// there and private, in doctor's own environment? Whether the PIN is right
// is not asked: a wrong one would count against the TPM's lockout.
void check_pin_sources(Doctor& d, const Config& config) {
    if (config.pin_from.empty())
        return;
    const std::vector<FoundKeyFile> found = find_keys(config);
    for (const auto& [name, source] : config.pin_from) {
        const auto key = std::find_if(found.begin(), found.end(), [&name](const FoundKeyFile& f) {
            return printable(f.path.stem().string()) == name;
        });
        const std::string what = name + ": PIN from the " + describe(source);
        if (key == found.end() || !key->key) {
            d.warn(what + ": no such key", "the config file's pin-from line names a key the module does not serve",
                   "name the key by its file name without .tpm, or remove the line");
            continue;
        }
        if (!key->key->file.needs_pin()) {
            d.warn(what + ": the key has no PIN", "the line is ignored", "remove the line");
            continue;
        }
        if (source.kind == PinSource::Kind::credential && !std::getenv("CREDENTIALS_DIRECTORY")) {
            d.info(what +
                       ": not checked here: $CREDENTIALS_DIRECTORY is not set (it is, in the service whose unit "
                       "has LoadCredentialEncrypted=" +
                       source.name + ":FILE)",
                   {});
            continue;
        }
        try {
            (void)read_pin(source);
            d.ok(what + ": there, and no one else may read it (whether the TPM takes it is not tried here)");
        } catch (const PinSourceError& e) {
            d.fail(what + ": " + e.what(),
                   "the key signs only while its source gives a PIN; without one it fails closed and nothing "
                   "goes to the TPM",
                   "as said above; the module's own word on it is in its state log (below)");
        }
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
    const std::string cfg = "~/.ssh/config";
    std::vector<ConfigLine> lines;
    try {
        lines = config_lines(read_ssh_config(file), "pkcs11provider");
    } catch (const Error& e) {
        d.fail(cfg + " cannot be read", e.what(),
               "make " + file.string() + " a regular file (ssh reads nothing else), of at most " +
                   std::to_string(max_ssh_config_size / 1024) + " KiB");
        return;
    }
    std::string module;
    const auto first_global = std::find_if(lines.begin(), lines.end(), [](const ConfigLine& l) { return l.all_hosts; });
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
        const auto ours =
            std::find_if(lines.begin(), lines.end(), [](const ConfigLine& l) { return is_tpmkey_module(l.value); });
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

// What the module said where nobody saw its stderr (ssh-agent in the
// background: why `ssh-add -s` added fewer keys, a wrong PIN, a lockout).
void show_module_log(Doctor& d) {
    constexpr std::size_t max_lines = 5;
    const std::filesystem::path path = state_log_path();
    std::optional<FileRead> file;
    try {
        if (!path.empty())
            file = read_regular_file_if_present(path, 256 * 1024);
    } catch (const Error& e) {
        d.warn("the module's log " + path.string(), e.what(), "remove it; the module makes a new one");
        return;
    }
    if (!file)
        return;
    const std::string_view text(reinterpret_cast<const char*>(file->data.data()), file->data.size());
    std::vector<std::string> lines;
    for (std::size_t at = 0; at < text.size();) {
        const std::size_t eol = std::min(text.find('\n', at), text.size());
        if (eol > at)
            lines.push_back(printable(text.substr(at, eol - at)));
        at = eol + 1;
    }
    // The keys whose PIN the latest burst of logins refused or did not send,
    // their lines grouped by key: ssh-add -s gives one PIN to every key, and the line that
    // says which key refused it is soon more than max_lines back
    // (docs/ssh-agent-and-more.md). A burst is the lines at most 1 s apart
    // (the log has whole seconds; ssh-add -s logs in to every key at once).
    const auto seconds_of = [](const std::string& line) -> std::optional<std::time_t> {
        std::tm tm{};
        if (line.size() < 19 || !::strptime(line.substr(0, 19).c_str(), "%Y-%m-%d %H:%M:%S", &tm))
            return std::nullopt;
        return ::timegm(&tm);
    };
    std::vector<std::pair<std::string, std::string>> pin_lines;  // key, line
    std::optional<std::time_t> burst_end;
    for (const std::string& line : lines) {
        const std::string_view l(line);
        const std::size_t at = l.find("tpmkey: ");
        if (at == std::string_view::npos || l.find("PIN") == std::string_view::npos)
            continue;
        std::string_view rest = l.substr(at + 8);
        std::string key;
        if (rest.starts_with("wrong PIN for '")) {
            rest.remove_prefix(15);
            key = std::string(rest.substr(0, rest.find('\'')));
        } else if (const std::size_t colon = rest.find(": ");
                   colon != std::string_view::npos && rest.substr(0, colon).find(' ') == std::string_view::npos) {
            key = std::string(rest.substr(0, colon));
        }
        const std::optional<std::time_t> when = seconds_of(line);
        if (key.empty() || !when)
            continue;
        if (!burst_end || *when > *burst_end + 1)
            pin_lines.clear();
        burst_end = *when;
        pin_lines.emplace_back(key, line);
    }
    if (lines.size() > max_lines)
        lines.erase(lines.begin(), lines.end() - static_cast<std::ptrdiff_t>(max_lines));
    if (!lines.empty())
        d.info("the module's last messages where nobody saw them (ssh-agent; " + path.string() + "):", lines);
    if (pin_lines.size() > 1 ||
        (pin_lines.size() == 1 && std::find(lines.begin(), lines.end(), pin_lines.front().second) == lines.end())) {
        // Grouped by key, in the order the keys first appear; 20 lines at most.
        std::vector<std::string> per_key;
        for (std::size_t i = 0; i < pin_lines.size(); ++i) {
            bool seen = false;
            for (std::size_t j = 0; j < i; ++j)
                seen = seen || pin_lines[j].first == pin_lines[i].first;
            if (seen)
                continue;
            for (std::size_t j = i; j < pin_lines.size() && per_key.size() < 20; ++j)
                if (pin_lines[j].first == pin_lines[i].first)
                    per_key.push_back(pin_lines[j].second);
        }
        d.info("keys whose PIN the latest ssh-add -s (or login) did not get through, and why:", per_key);
    }
}

int cmd_doctor(const Parsed&) {
    Doctor d;
    const Config config = load_config();
    const std::unique_ptr<Tpm> tpm = check_tpm(d, config);
    if (tpm)
        check_endorsement(d, *tpm);
    check_config_file(d);
    check_keys(d, config, tpm.get());
    check_pin_sources(d, config);
    check_ssh(d);
    show_module_log(d);
    std::cout << (d.problems() == 0 ? "All is well.\n" : std::to_string(d.problems()) + " problem(s) found.\n");
    return d.problems() == 0 ? 0 : 1;
}

}  // namespace

const Command doctor_command{&doctor_spec, cmd_doctor};

}  // namespace tpmkey::cli
