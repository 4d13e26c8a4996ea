// tpmkey doctor: checks the TPM, the keys and the ssh set-up, one line per
// check, and for each problem a "Likely problem" and a "Possible solution".

#include "cli.hpp"
#include "core/base/home.hpp"
#include "core/base/log.hpp"
#include "core/base/printable.hpp"
#include "core/files/config.hpp"
#include "core/files/file_read.hpp"
#include "core/keys/key_discovery.hpp"
#include "core/tpm/diagnosis.hpp"
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

// Where a maker publishes the EK certificates its TPMs keep no copy of, by
// TPM_PT_MANUFACTURER: the firmware TPMs' certificate services that
// Microsoft's Windows Autopilot networking requirements list (checked
// against tpm2-tools' tpm2_getekcertificate for Intel). Fetched by
// tpm2_getekcertificate; tpmkey never fetches anything itself.
std::string ek_cert_publisher(const std::string& manufacturer) {
    struct Publisher {
        const char* id;
        const char* maker;
        const char* url;
    };
    static constexpr Publisher publishers[] = {
        {"id:494E5443", "Intel (PTT)", "https://ekop.intel.com/ekcertservice/"},
        {"id:414D4400", "AMD (fTPM)", "https://ftpm.amd.com/pki/aia/"},
        {"id:51434F4D", "Qualcomm", "https://ekcert.spserv.microsoft.com/EKCertificate/GetEKCertificate/v1"},
    };
    for (const Publisher& p : publishers)
        if (manufacturer == p.id)
            return std::string(": ") + p.maker + " publishes it online at " + p.url +
                   " (tpm2_getekcertificate fetches it); give it once with tpmkey setup --ek-cert FILE";
    return "";
}

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

class Doctor {
public:
    // Every part is printable(): names in them come from the file system.
    void ok(const std::string& what) { std::cout << "[ok]      " << printable(what) << "\n"; }
    void warn(const std::string& what, const std::string& problem, const std::string& solution) {
        report("[warning] ", what, problem, solution);
    }
    void fail(const std::string& what, const std::string& problem, const std::string& solution) {
        ++problems_;
        report("[problem] ", what, problem, solution);
    }
    // `lines` must be printable() already.
    void info(const std::string& what, const std::vector<std::string>& lines) {
        std::cout << "[info]    " << printable(what) << "\n";
        for (const std::string& line : lines)
            std::cout << "          " << line << "\n";
    }
    int problems() const noexcept { return problems_; }

private:
    static void report(const char* tag, const std::string& what, const std::string& problem,
                       const std::string& solution) {
        std::cout << tag << printable_lines(what) << "\n"
                  << "          Likely problem:    " << printable(problem) << "\n"
                  << "          Possible solution: " << printable(solution) << "\n";
    }
    int problems_ = 0;
};

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
            d.fail(device + " is missing", "this machine shows no TPM 2.0 (switched off in the firmware, or a TPM 1.2)",
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

// The TPM the configuration names (or the first of tpm2-tss's default
// search order that answers), and the TPM properties doctor reads; nothing
// when none answers (said so).
struct ReachedTpm {
    std::unique_ptr<Tpm> tpm;
    std::map<TPM2_PT, UINT32> props;
};
ReachedTpm reach_tpm(Doctor& d, const Config& config) {
    // For the default, try what tpm2-tss tries, in its order, so we can say
    // which one answers.
    const TpmAddress& address = config.tpm;
    ReachedTpm r;
    std::string tried;
    for (const TpmAddress& candidate : address.candidates()) {
        try {
            auto t = std::make_unique<Tpm>(candidate);
            r.props = tpm_properties(*t, TPM2_PT_PERMANENT, TPM2_PT_LOCKOUT_RECOVERY - TPM2_PT_PERMANENT + 1);
            r.tpm = std::move(t);
            break;
        } catch (const TpmError& e) {
            tried += "\n            " + candidate.text() + ": " + unreachable_reason(candidate, e);
        }
    }
    if (!r.tpm) {
        d.fail("TPM not reachable; tried:" + tried,
               address.is_default_search() ? "no TPM answers where tpm2-tss looks by default"
                                           : "no TPM answers at the TCTI set in " + address.origin(),
               address.is_default_search()
                   ? "see the /dev/tpmrm0 line above; or set TPMKEY_TCTI to how your TPM is reached"
                   : "check that TCTI string (same syntax as tpm2-tools' TPM2TOOLS_TCTI), or unset it to use "
                     "/dev/tpmrm0");
        return r;
    }
    d.ok("TPM reachable through " + r.tpm->address().text() +
         (address.is_default_search() ? " (the tpm2-tss default)" : " (set in " + address.origin() + ")"));
    return r;
}

// Whether a resource manager stands between programs and the TPM, and
// what other programs left loaded in it.
void check_resource_manager(Doctor& d, Tpm& tpm, const std::map<TPM2_PT, UINT32>& props) {
    const Tcti& reached = tpm.address().tcti();
    const std::string& tcti = reached.text();
    if (reached.kind() == Tcti::Kind::tabrmd)
        d.ok("resource manager: tpm2-abrmd");
    else if (reached.kind() == Tcti::Kind::device && reached.has_resource_manager())
        d.ok("resource manager: the kernel's (" + reached.device_path() + ")");
    else if (reached.kind() == Tcti::Kind::device)
        d.warn("no resource manager (" + tcti + ")",
               "without one, TPM objects of a program that crashes stay loaded, and the TPM has room for only a few",
               "use device:/dev/tpmrm0");
    else if (reached.is_simulator())
        d.ok("resource manager: none (a TPM simulator; every process shares its few object slots)");
    else
        d.ok("resource manager: whatever " + tcti + " provides");
    try {
        const UINT32 objects = static_cast<UINT32>(tpm_handles(tpm, TPM2_TRANSIENT_FIRST).size());
        const UINT32 sessions = static_cast<UINT32>(tpm_handles(tpm, TPM2_LOADED_SESSION_FIRST).size());
        const UINT32 avail = props.count(TPM2_PT_HR_TRANSIENT_AVAIL) ? props.at(TPM2_PT_HR_TRANSIENT_AVAIL) : 1;
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
}

// The dictionary-attack state (TPM 2.0 Part 1, 19.8), in the words of the
// module's wrong-PIN lines (dictionary_attack_text), and whether its
// lockout authorization protects the counter.
void check_dictionary_attack(Doctor& d, Tpm& tpm) {
    const DictionaryAttackState da = dictionary_attack_state(tpm);
    const std::string counted = dictionary_attack_text(da);
    if (da.locked_out())
        d.fail("dictionary-attack lockout: " + counted, "too many wrong PINs were tried",
               da.lockout_auth_set ? "wait that long; or, with the TPM's lockout password: "
                                     "tpm2_dictionarylockout --clear-lockout --auth PASSWORD"
                                   : "wait that long; or now (the TPM's lockout password is empty): "
                                     "tpm2_dictionarylockout --clear-lockout");
    else if (da.max_failures > 0 && da.failures > 0 && da.failures + 1 >= da.max_failures)
        d.warn("dictionary-attack protection: " + counted, "one more wrong PIN and the TPM locks out",
               "take care with the next PIN; the count falls with time");
    else
        d.ok("dictionary-attack protection: " + counted);

    // PINs rely on the dictionary-attack counter, and whoever knows the
    // lockout authorization may reset it (TPM2_DictionaryAttackLockReset).
    if (!da.lockout_auth_set)
        d.warn("the TPM's lockout authorization is empty",
               "anyone who may use the TPM can reset its wrong-PIN counter, so a PIN can be guessed "
               "without limit (a 4-digit PIN in seconds)",
               "set one and keep it safe: tpm2_changeauth -c lockout (see docs/security.md)");
    else
        d.ok("the TPM's lockout authorization is set: the wrong-PIN counter cannot be reset without it");
}

// What 0x81000001 holds, and what new keys and logins make of it.
void check_persistent_srk(Doctor& d, Tpm& tpm, UINT32 permanent) {
    try {
        const PersistentSrk srk = inspect_persistent_srk(tpm);
        using State = PersistentSrk::State;
        if (srk.state == State::standard) {
            // Keys under 0x40000001 use it too once it is pinned with
            // 0x40000001's proven name (pinned here if not yet).
            KnownParents known = KnownParents::load();
            (void)pin_owner_srk_persisted(tpm, known);
            const OwnerSrkUse use = owner_srk_use(tpm, known);
            d.ok("storage key (SRK) at 0x81000001: the TCG standard SRK; new keys use it (the fastest parent); "
                 "a login of a key under 0x40000001 uses: " +
                 owner_srk_use_text(use) +
                 (use == OwnerSrkUse::persistent ? ""
                                                 : " until such a key is first used here (then it is proven, "
                                                   "and found the same key as 0x81000001)"));
        } else if (srk.state == State::unfit)
            d.fail("0x81000001 holds a key that must not be a parent", srk.detail,
                   "if you did not put it there, someone with the TPM's owner authorization did: find out who; "
                   "new keys use 0x40000001 (tpmkey-keygen skips it); remove it with tpm2_evictcontrol -c 0x81000001");
        else if (srk.state == State::other_storage_key)
            d.ok("0x81000001 holds " + srk.detail +
                 " (another program's, e.g. tpm2-pkcs11's): "
                 "new keys use 0x40000001 instead, so that program may evict it (tpmkey-keygen --parent "
                 "0x81000001 uses it on purpose); a login of a key under 0x40000001 uses: " +
                 owner_srk_use_text(OwnerSrkUse::recreated));
        else if (permanent & TPMA_PERMANENT_OWNERAUTHSET)
            d.fail("no storage key at 0x81000001, and the owner hierarchy has a password",
                   "tpmkey cannot re-create the storage key 0x40000001 without that password",
                   "persist the standard SRK once: tpmkey setup --owner-auth-file FILE (or it asks for the password)");
        else
            d.ok("no storage key at 0x81000001: keys use 0x40000001, a login uses: " +
                 owner_srk_use_text(OwnerSrkUse::recreated) +
                 " (slower on real TPMs; 'tpmkey setup' persists it, as does tpmkey-keygen when it next makes a "
                 "key)");
    } catch (const TpmError& e) {
        d.warn("storage key (SRK)", e.what(), "none needed unless keys fail to load below");
    }
}

// The TPM part of the doctor; returns the open connection (or nothing).
std::unique_ptr<Tpm> check_tpm(Doctor& d, const Config& config) {
    // The device node the TCTI uses, if it uses one.
    if (const std::string device = config.tpm.tcti().device_path(); !device.empty())
        check_device(d, device);

    ReachedTpm r = reach_tpm(d, config);
    if (!r.tpm)
        return nullptr;
    check_resource_manager(d, *r.tpm, r.props);
    check_dictionary_attack(d, *r.tpm);
    check_persistent_srk(d, *r.tpm, r.props[TPM2_PT_PERMANENT]);
    return std::move(r.tpm);
}

// The EK and what it proves: each storage key pinned for this TPM (or
// 0x40000001 before any) is proven afresh, so that what is shown is what
// the TPM says now, not what was written down.
void check_endorsement(Doctor& d, Tpm& tpm) {
    const KnownParents known = KnownParents::load();
    if (known.problem())
        return;  // check_keys says why
    const std::string& id = tpm.address().identity();
    const std::vector<ParentPin> pins = known.pins_of(id);
    std::vector<std::uint32_t> handles;
    for (const ParentPin& pin : pins)
        handles.push_back(pin.handle);
    if (handles.empty())
        handles.push_back(owner_hierarchy);
    bool shown = false;
    for (const std::uint32_t handle : handles) {
        const std::string parent_text = "storage key " + handle_text(handle);
        const std::optional<ParentPin> pin = known.pin(id, handle);
        try {
            const EndorsementKey ek = prove_storage_key(tpm, handle);
            if (!shown) {
                shown = true;
                const std::string where =
                    ek.algorithm +
                    (ek.supplied ? " in " + supplied_ek_certificates_path().string() + " (setup --ek-cert)"
                                 : " at NV " + handle_text(ek.nv_index)) +
                    ", issued by " + ek.issuer;
                if (ek.certified)
                    d.ok("EK certificate: " + where +
                         ": its chain is verified, and it matches the EK the TPM "
                         "re-creates");
                else if (ek.nv_index != 0 || ek.supplied)
                    d.warn("EK certificate: " + where + ": its chain is not verified: " + ek.why_not_certified,
                           "the EK is trusted on first use instead: an interposer present at the first use could "
                           "go unnoticed",
                           "put the root (and intermediate) certificates of the TPM's manufacturer in " +
                               (KnownParents::file_path().parent_path() / "ek-roots").string() +
                               " or /etc/tpmkey/ek-roots (docs/configuration.md, \"Trusted EK roots\", says where "
                               "each maker publishes them)");
                else
                    d.ok("EK certificate: none in the TPM (" + ek.algorithm +
                         " EK; swtpm without --ek-cert and "
                         "many firmware TPMs have none)" +
                         ek_cert_publisher(tpm_identity(tpm).manufacturer));
                for (const std::string& refused : ek.refused_roots)
                    d.warn("EK roots: " + refused, "a root certificate others could have put there is no root",
                           "fix the ownership or permissions as said, or remove the file");
                d.ok(ek.certified
                         ? "EK certified by " + ek.issuer
                         : "EK trusted on first use (" +
                               std::string(ek.nv_index == 0 ? "no certificate" : "no trusted root") + "): " + ek.pin +
                               (pin && same_endorsement_key(pin->ek, ek) ? ", pinned " + pin->proven
                                                                         : ", not pinned yet"));
            }
            if (pin && !pin->ek.empty() && !same_endorsement_key(pin->ek, ek))
                d.fail(parent_text + ": proven by an EK that is not the pinned one (" + ek.pin +
                           ", pinned: " + pin->ek + ")",
                       "a TPM's endorsement key never changes, not even when it is cleared: another TPM answers "
                       "at this address, or something in between (an interposer) answers for it",
                       "type no PIN until you know why; only if you replaced the TPM yourself and know this is the "
                       "new one: tpmkey forget-tpm");
            else
                d.ok(parent_text + ": proven genuine by the EK now" +
                     (pin && !pin->proven.empty() ? " (first proven " + pin->proven + ")" : ""));
        } catch (const ParentProofFailed& e) {
            d.fail(parent_text + ": fails the proof by the TPM's endorsement key: " + std::string(e.what()),
                   "something may stand between you and the TPM (an interposer), or the endorsement key cannot "
                   "be used here",
                   "type no PIN until you know why (docs/security.md, docs/troubleshooting.md)");
        } catch (const Error& e) {
            d.warn(parent_text + ": cannot be proven: " + std::string(e.what()),
                   "the storage key or the endorsement key could not be made or read",
                   "see the TPM's lines above; 'tpmkey info KEY' says whether a key loads");
        }
    }
    std::vector<std::string> lines;
    for (const ParentPin& pin : pins) {
        lines.push_back(
            printable(handle_text(pin.handle) + " " + pin.name_hex + ": " +
                      (pin.ek.empty() ? "not proven yet (pinned before tpmkey proved parents)"
                                      : std::string(pin.certified() ? "certified EK" : "EK trusted on first use") +
                                            " " + pin.ek + ", proven " + pin.proven)));
        if (!pin.cleared.empty())
            d.warn("the TPM was cleared (" + pin.cleared + "): the storage key " + handle_text(pin.handle) +
                       " is new, proven by the same endorsement key",
                   tpm_cleared_text(pin.handle),
                   "keys made before cannot load (named below): make new ones with tpmkey-keygen, and remove the "
                   "old ones");
    }
    if (!lines.empty())
        d.info(
            "pins for TPM '" + id + "' in " + KnownParents::file_path().string() + " ('tpmkey forget-tpm' drops them):",
            lines);
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
        if (!tpm) {
            d.ok(desc + " (not loaded: no TPM)");
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
