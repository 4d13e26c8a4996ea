#include "core/tpm/diagnosis.hpp"

#include "core/tpm/tpm_keys.hpp"

#include "core/base/owned.hpp"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <tss2/tss2_rc.h>
#include <tss2/tss2_tpm2_types.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace tpmkey {

namespace {

bool is_auth_failure(const TpmError& e) { return e.is(TPM2_RC_AUTH_FAIL) || e.is(TPM2_RC_BAD_AUTH); }

// A TPM answers, but TPM2_Startup was never sent: firmware does it for a
// chip, whoever starts a simulator must (swtpm: --flags startup-clear).
constexpr const char* not_started_up = "a TPM answers there, but it was never started up (TPM2_Startup)";

std::string start_it_up(const TpmAddress& address) {
    return "run 'tpm2_startup -c -T " +
           (address.is_default_search() ? std::string("device:/dev/tpm0") : address.text()) +
           "', or start swtpm with --flags not-need-init,startup-clear (tpmkey-swtpm start does)";
}

// Why no simulator answers at `a`: its host name does not resolve, nothing
// listens there, or something does that is no TPM simulator. One TCP
// connection, bounded to 2 s.
std::string simulator_problem(const Tcti::Address& a) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (::getaddrinfo(a.host.c_str(), a.port.c_str(), &hints, &found) != 0 || !found)
        return "no host '" + a.host + "' (its name does not resolve: check the TCTI's host)";
    const std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(found, &::freeaddrinfo);
    const std::string where = a.host + " port " + a.port;
    int error = ECONNREFUSED;
    for (const addrinfo* ai = found; ai; ai = ai->ai_next) {
        const UniqueFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
        if (!fd)
            continue;
        error = 0;
        if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
            error = errno;
            if (error == EINPROGRESS) {
                pollfd p{fd.get(), POLLOUT, 0};
                socklen_t len = sizeof error;
                if (::poll(&p, 1, 2000) != 1 || ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &len) != 0)
                    error = ETIMEDOUT;
            }
        }
        if (error == 0)
            return "something listens on " + where + ", but it does not answer as a TPM simulator";
    }
    if (error == ECONNREFUSED)
        return "nothing listens on " + where +
               " (start the simulator there, e.g. eval \"$(tpmkey-swtpm start)\", or correct the port)";
    return where + ": " + std::strerror(error);
}

Diagnosis unreachable(const TpmError& e, const TpmAddress& address) {
    const std::string reason = Tss2_RC_Decode(e.rc());
    const std::string& tcti = address.text();
    if (address.source() == TpmAddress::Source::command_line)
        return {TpmProblem::unreachable, "cannot reach the TPM at TCTI '" + tcti + "' (" + reason + ")",
                "check that it is running and the --tcti option is right"};
    if (!address.is_default_search())
        return {TpmProblem::unreachable, "cannot reach the TPM at TCTI '" + tcti + "' (" + reason + ")",
                "check that it is running and the TCTI is right, or unset TPMKEY_TCTI for /dev/tpmrm0"};
    return {TpmProblem::unreachable,
            "cannot reach the TPM (tried the tpm2-tss default: /dev/tpmrm0, /dev/tpm0, tpm2-abrmd; " + reason + ")",
            "check that the machine has a TPM 2.0 and that you may use /dev/tpmrm0 (usually: join the 'tss' "
            "group and log in again), or set TPMKEY_TCTI"};
}

// tpm2-tss found the answer unreadable: its header's size beyond any
// buffer (sys: "Context not large enough"), or its parts not fitting it.
bool is_malformed_answer(const TpmError& e) {
    const TSS2_RC layer = e.rc() & TSS2_RC_LAYER_MASK;
    const TSS2_RC base = e.rc() & ~TSS2_RC_LAYER_MASK;
    if (layer == TSS2_TPM_RC_LAYER || layer == TSS2_RESMGR_TPM_RC_LAYER)
        return false;  // the TPM's own codes
    return base == TSS2_BASE_RC_MALFORMED_RESPONSE || base == TSS2_BASE_RC_INSUFFICIENT_CONTEXT ||
           base == TSS2_BASE_RC_INSUFFICIENT_RESPONSE;
}

}  // namespace

Diagnosis diagnose(const TpmError& e, const TpmAddress& address) {
    const std::string& tcti = address.text();
    if (is_malformed_answer(e))
        return {TpmProblem::malformed_answer,
                "the TPM's answer was malformed (" + std::string(Tss2_RC_Decode(e.rc())) +
                    "): the TPM is faulty, or something between it and us changed the answer",
                "restart the TPM (or the machine); if it happens again, check what stands between: TCTI '" +
                    (address.is_default_search() ? std::string("the tpm2-tss default") : tcti) + "'"};
    if (e.tpm_unreachable() || e.step() == TpmStep::connect)
        return unreachable(e, address);
    if (e.is(TPM2_RC_INITIALIZE))
        return {TpmProblem::unreachable, not_started_up, start_it_up(address)};
    if (e.is(TPM2_RC_LOCKOUT))
        return {TpmProblem::locked_out,
                "the TPM is in dictionary-attack lockout after too many wrong PINs: it refuses keys with a PIN until "
                "enough are forgiven",
                "wait; 'tpmkey doctor' says how long"};
    // Without a resource manager what a process leaves loaded stays (one
    // that was killed mid-call, ours too). We do not flush others' objects
    // ourselves: one may belong to a program at work, which would then fail,
    // or find our key under the handle its own had.
    if (e.is(TPM2_RC_OBJECT_MEMORY) || e.is(TPM2_RC_SESSION_MEMORY)) {
        const bool objects = e.is(TPM2_RC_OBJECT_MEMORY);
        return {TpmProblem::no_room,
                std::string("the TPM has no room for another ") + (objects ? "object" : "session") +
                    ": other programs, or one that was killed while using the TPM, left theirs loaded, and "
                    "nothing between us and the TPM (no resource manager) flushes them",
                std::string("when no other program is using the TPM, flush them: ") +
                    (address.is_default_search() ? "" : "TPM2TOOLS_TCTI='" + tcti + "' ") + "tpm2_flushcontext " +
                    (objects ? "-t" : "-l") +
                    "; for good, use a resource manager (TPMKEY_TCTI=device:/dev/tpmrm0, or tpm2-abrmd)"};
    }
    if (e.step() == TpmStep::parent && e.is(TPM2_RC_HANDLE))
        return {TpmProblem::parent_missing,
                "its parent key " + handle_text(e.handle()) +
                    " is not in this TPM: the key was made on another machine, or the storage key there was removed",
                "make a new key on this machine: tpmkey-keygen"};
    if (e.step() == TpmStep::parent && is_auth_failure(e))
        return {TpmProblem::owner_password,
                "the TPM's owner hierarchy has a password, so the storage key 0x40000001 cannot be re-created",
                "persist the storage key at 0x81000001 with that password ('tpmkey setup' asks for it), then make "
                "new keys with tpmkey-keygen"};
    // The parent's seed protects the private part: another TPM (or a
    // cleared one, or a changed file) fails the integrity check.
    if (e.step() == TpmStep::load && e.is(TPM2_RC_INTEGRITY))
        return {TpmProblem::foreign_key,
                "this key belongs to a different TPM (or this TPM was cleared since, or the file was altered: the "
                "TPM's integrity check failed)",
                "make a new key on this machine: tpmkey-keygen"};
    if ((e.step() == TpmStep::policy_pcr || e.step() == TpmStep::signed_policy_pcr) &&
        (e.is(TPM2_RC_VALUE) || e.is(TPM2_RC_PCR_CHANGED)))
        return {TpmProblem::pcr_changed,
                e.what() + std::string(" changed since this key was made: the machine booted differently (other "
                                       "firmware, boot loader or Secure Boot state)"),
                pcr_changed_solution(e.step() == TpmStep::signed_policy_pcr, e.key_file())};
    if (e.step() == TpmStep::use_key && is_auth_failure(e))
        return {TpmProblem::wrong_pin, e.key().empty() ? "wrong PIN" : "wrong PIN for '" + e.key() + "'",
                "the TPM counts wrong PINs and locks out after too many"};
    return {TpmProblem::other, e.what(), "the TPM's reason is in brackets; 'tpmkey doctor' checks the TPM"};
}

std::string pcr_changed_solution(bool signed_policies, const std::string& key_file) {
    const std::string file = key_file.empty() ? "KEY" : key_file;
    if (signed_policies)
        return "if you trust this boot (e.g. after a firmware update), approve it: tpmkey policy sign " + file +
               " (docs/pcr-bound-keys.md)";
    return "boot as when the key was made (the same firmware, boot loader and Secure Boot state), or make a new "
           "key: a key bound to PCRs directly cannot follow a change ('tpmkey info " +
           file + "' shows its PCRs; docs/pcr-bound-keys.md)";
}

std::string diagnosis_line(const Diagnosis& d) { return d.problem + " (" + d.solution + ")"; }

std::string duration_text(std::uint32_t seconds) {
    if (seconds >= 7200 && seconds % 3600 == 0)
        return std::to_string(seconds / 3600) + " hours";
    if (seconds >= 120 && seconds % 60 == 0)
        return std::to_string(seconds / 60) + " minutes";
    return std::to_string(seconds) + " s";
}

std::string dictionary_attack_text(const DictionaryAttackState& da) {
    const std::string counted =
        std::to_string(da.failures) + " of " + std::to_string(da.max_failures) + " wrong PINs counted by the TPM";
    if (da.locked_out())
        return counted +
               ": it is locked out now and uses no key with a PIN (nor one without a PIN that lacks noDA) for up to " +
               duration_text(da.recovery_seconds) + " (while the machine is on)";
    return counted + "; one is forgiven every " + duration_text(da.recovery_seconds) + "; at " +
           std::to_string(da.max_failures) + " it locks out";
}

std::string unreachable_reason(const TpmAddress& address, const TpmError& e) {
    const Tcti& parsed = address.tcti();
    if (parsed.kind() == Tcti::Kind::device) {
        const std::string path = parsed.device_path();
        if (::access(path.c_str(), F_OK) != 0)
            return path + " does not exist";
        if (::access(path.c_str(), R_OK | W_OK) != 0)
            return "you may not open " + path;
    }
    const TSS2_RC base = e.rc() & ~TSS2_RC_LAYER_MASK;
    if (base == TSS2_BASE_RC_NOT_SUPPORTED || base == TSS2_BASE_RC_NOT_IMPLEMENTED)
        return "not installed (" + std::string(Tss2_RC_Decode(e.rc())) + ")";
    if (e.is(TPM2_RC_INITIALIZE))
        return std::string(not_started_up) + ": " + start_it_up(address);
    if (parsed.is_simulator()) {
        if (const std::optional<Tcti::Address> simulator = parsed.simulator_address())
            return "no simulator answers there: " + simulator_problem(*simulator);
        return "no simulator answers there (" + std::string(Tss2_RC_Decode(e.rc())) + ")";
    }
    return e.tpm_unreachable() ? std::string(Tss2_RC_Decode(e.rc())) : std::string(e.what());
}

}  // namespace tpmkey
