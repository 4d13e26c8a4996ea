// tpmkey doctor's TPM checks (doctor.hpp): the device node, the TPM
// reached, its resource manager, dictionary-attack state, storage key, EK
// and the storage keys it proves.

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
#include "doctor.hpp"
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

}  // namespace

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

}  // namespace tpmkey::cli
