// tpmkey-keygen: creates a signing key inside the TPM and writes the
// TPM-wrapped key file (TSS2 PRIVATE KEY PEM) and its OpenSSH .pub line.
// Flags follow ssh-keygen where they mean the same thing.

#include "core/base/error.hpp"
#include "core/base/printable.hpp"
#include "core/files/atomic_file.hpp"
#include "core/files/config.hpp"
#include "core/files/tcti.hpp"
#include "core/keys/key_file.hpp"
#include "core/keys/public_key.hpp"
#include "core/keys/tpm_policy.hpp"
#include "core/pin/prompt.hpp"
#include "core/policy/policy_signer.hpp"
#include "core/policy/tpm_policy_session.hpp"
#include "core/tpm/diagnosis.hpp"
#include "core/tpm/pin_object.hpp"
#include "core/tpm/tpm_keys.hpp"
#include "core/tpm/tpm_queries.hpp"
#include "core/trust/known_parents.hpp"
#include "core/trust/owner_srk.hpp"
#include "options.hpp"
#include "parent.hpp"

#include <tss2/tss2_tpm2_types.h>

#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <utility>

namespace {

using namespace tpmkey;
using namespace tpmkey::keygen;

volatile std::sig_atomic_t interrupted = 0;
extern "C" void on_signal(int) { interrupted = 1; }

// Ctrl-C must not leave a half-written file or a key in the TPM: the
// signal only sets a flag, which is checked between steps, and the
// normal unwinding cleans up.
constexpr int interrupt_signals[] = {SIGINT, SIGTERM, SIGHUP};

void catch_interrupts() {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: a blocked read returns EINTR
    for (int sig : interrupt_signals)
        sigaction(sig, &sa, nullptr);
}

// Holds the interrupt signals back while it lives (the files are being
// written), and gives the old mask back however its scope is left, a
// write that throws included.
class InterruptsHeld {
public:
    InterruptsHeld() {
        sigset_t block;
        sigemptyset(&block);
        for (int sig : interrupt_signals)
            sigaddset(&block, sig);
        sigprocmask(SIG_BLOCK, &block, &old_);
    }
    ~InterruptsHeld() { sigprocmask(SIG_SETMASK, &old_, nullptr); }
    InterruptsHeld(const InterruptsHeld&) = delete;
    InterruptsHeld& operator=(const InterruptsHeld&) = delete;

private:
    sigset_t old_{};
};

void check_interrupted() {
    if (interrupted)
        throw Error("interrupted; nothing was written");
}

// Throws unless `file` can be made in its directory (which need not exist
// yet when `dir_may_be_made`): checked before the TPM spends time on a key.
void check_writable(const std::filesystem::path& file, bool dir_may_be_made = false) {
    const std::filesystem::path dir = file.parent_path().empty() ? "." : file.parent_path();
    std::error_code ec;
    if (dir_may_be_made && !std::filesystem::exists(dir, ec))
        return;
    if (::access(dir.c_str(), W_OK | X_OK) != 0)
        throw Error(file.string() + ": cannot write in " + dir.string() + ": " + std::strerror(errno));
}

// The signer of --policy-signer FILE; a new one (written with the key, so
// that a failed run leaves no file) when FILE does not exist.
struct KeygenSigner {
    EvpPkey key;
    bool is_new = false;
};
KeygenSigner policy_signer_for_keygen(const std::filesystem::path& path) {
    std::error_code ec;
    if (std::filesystem::exists(std::filesystem::symlink_status(path, ec)))
        return {read_policy_signer(path), false};
    check_writable(path, true);  // write_policy_signer makes a missing directory
    return {generate_policy_signer(), true};
}

// -f NAME writes NAME.tpm (the module finds keys by that suffix, and
// ssh-tpm-agent names its keys so) unless NAME ends in .tpm already.
std::filesystem::path key_path_for(const std::string& file) {
    std::filesystem::path key = file;
    if (key.extension() != ".tpm")
        key += ".tpm";
    return key;
}

// NAME.tpm -> NAME.pub, as ssh-tpm-agent names them.
std::filesystem::path pub_path_for(const std::filesystem::path& key) {
    std::filesystem::path pub = key;
    return pub.replace_extension(".pub");
}

std::string default_comment() {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0)
        host[0] = '\0';
    // As ssh-keygen: the account's name, whatever $USER says.
    const passwd* pw = ::getpwuid(::getuid());
    const std::string user = pw && pw->pw_name ? pw->pw_name : std::to_string(::getuid());
    return user + "@" + host;
}

Secret ask_pin() {
    while (true) {
        Secret first = read_pin_from_terminal("Enter PIN for the new key (empty for no PIN): ");
        check_interrupted();
        Secret second = read_pin_from_terminal("Enter the same PIN again: ");
        check_interrupted();
        if (first == second)
            return first;
        std::cerr << "The PINs do not match; try again.\n";
    }
}

// Where the key and its .pub go, and whether each replaces a file there.
struct Destination {
    std::filesystem::path key, pub;
    bool replace_key = false, replace_pub = false;
};

// The files of -f (default ~/.ssh/id_tpm.tpm), ~/.ssh made when the key
// goes there, and the user's word before a file is replaced: all before
// the TPM spends time on a key.
Destination prepare_destination(const Options& o) {
    Destination dest;
    dest.key = o.file.empty() ? home_directory() / ".ssh" / "id_tpm.tpm" : key_path_for(o.file);
    dest.pub = pub_path_for(dest.key);
    // As ssh-keygen: ~/.ssh is made (0700) when the key goes there and it is
    // missing (a fresh account, a CI runner); no other directory is.
    const std::filesystem::path ssh_dir = home_directory() / ".ssh";
    if (std::filesystem::absolute(dest.key).lexically_normal().parent_path() == ssh_dir.lexically_normal()) {
        if (::mkdir(ssh_dir.c_str(), 0700) == 0) {
            if (!o.quiet)
                std::cout << "Created directory '" << ssh_dir.string() << "'.\n";
        } else if (errno != EEXIST) {
            throw Error(ssh_dir.string() + ": cannot create: " + std::strerror(errno));
        }
    }

    // The .pub is protected like the key: either may belong to another key.
    std::error_code ec;
    dest.replace_key = std::filesystem::exists(std::filesystem::symlink_status(dest.key, ec));
    dest.replace_pub = std::filesystem::exists(std::filesystem::symlink_status(dest.pub, ec));
    if (dest.replace_key || dest.replace_pub) {
        const std::string what = dest.replace_key && dest.replace_pub
                                     ? dest.key.string() + " and " + dest.pub.string() + " already exist"
                                 : dest.replace_key ? dest.key.string() + " already exists"
                                                    : dest.pub.string() + " already exists";
        if (!confirm_on_terminal(what + ". Overwrite?"))
            throw Error(what + "; not overwritten (remove it or choose another -f)");
    }
    check_writable(dest.key);
    return dest;
}

// The PIN of --pin-file; empty without one.
Secret pin_from_file(const Options& o) {
    if (o.pin_file.empty())
        return {};
    Secret pin = read_pin_file(o.pin_file);
    // An empty file is more likely a failed `pass show` than a wish.
    if (pin.empty())
        throw Error(o.pin_file + ": the PIN file is empty; use -N '' for a key without a PIN");
    return pin;
}

void warn_if_no_sha512(Tpm& tpm, const KeySpec& spec) {
    if (spec.algorithm == KeyAlgorithm::rsa && tpm_lacks_sha512(tpm))
        std::cerr
            << "tpmkey-keygen: warning: this TPM cannot sign SHA-512, and ssh signs RSA keys with "
               "rsa-sha2-512 by default (and does not fall back): logins with this key need\n"
               "    "
            << no_rsa_sha2_512_line
            << "\n"
               "in ~/.ssh/config ('tpmkey ssh-config --apply' adds it). An ECDSA key (-t ecdsa) has no such limit.\n";
}

// What a PCR-bound key is bound to: the PCRs' values now (read in a session
// salted with the verified parent: an interposer cannot choose them) and
// its signer; both before the PIN prompt, as either may fail.
struct PcrBinding {
    std::vector<Bytes> values;
    KeygenSigner signer;
};
PcrBinding bind_to_pcrs(Tpm& tpm, const TpmObject& parent, const Options& o) {
    PcrBinding binding;
    binding.values = read_pcrs(tpm, parent, *o.pcrs);
    if (o.policy_signer)
        binding.signer = policy_signer_for_keygen(*o.policy_signer);
    return binding;
}

// The key, made inside the TPM under `parent`, as its key file holds it.
KeyFile make_key(Tpm& tpm, const TpmObject& parent, std::uint32_t parent_handle, const Options& o, const Secret& pin,
                 const PcrBinding& binding, const KeyFile* pin_object) {
    if (!o.quiet) {
        std::cout << "Generating " << (o.spec.algorithm == KeyAlgorithm::rsa ? "an RSA " : "an ECDSA ") << o.spec.bits
                  << " key inside the TPM";
        if (o.spec.algorithm == KeyAlgorithm::rsa)
            std::cout << " (on a real TPM this can take a minute)";
        std::cout << "..." << std::endl;
    }
    KeyFile key;
    key.parent = parent_handle;
    Bytes auth_policy;
    if (o.pcrs) {
        std::optional<PolicySigning> signing;
        if (binding.signer.key)
            signing = PolicySigning{binding.signer.key.get(), new_policy_nonce(), "tpmkey-keygen"};
        PcrBoundPolicy bound = pcr_bound_policy(*o.pcrs, binding.values, !pin.empty(), signing);
        key.policy = std::move(bound.policy);
        key.signed_policies = std::move(bound.signed_policies);
        auth_policy = std::move(bound.digest);
    }
    if (pin_object) {
        // The shared PIN: an empty auth value, and the policy that asks for
        // the PIN object's (no userWithAuth: signing_key_template).
        key.policy = {policy_secret(pin_object_name(*pin_object))};
        auth_policy = policy_digest(key.policy);
        key.blobs = create_key(tpm, parent, o.spec, Secret(), auth_policy);
        key.empty_auth = false;  // a PIN is asked for: the PIN object's
        return key;
    }
    key.blobs = create_key(tpm, parent, o.spec, pin, auth_policy);
    key.empty_auth = pin.empty();
    // No description [4], whatever -C says: tpm2-openssl and tpm2_print
    // read no optional field but emptyAuth (and a policy's) and refuse a
    // file with one. The comment lives in the .pub (docs/design.md, "Key file").
    return key;
}

// Ctrl-C is held back while the files are written. A new signer first: a
// key whose signer was lost could never be re-signed. Then the key (an
// existing one is replaced only after the prompt said so); if the .pub then
// fails, a key that did not exist before is removed again.
void write_files(const Destination& dest, const Options& o, const KeyFile& key, const std::string& pub_line,
                 const KeygenSigner& signer) {
    const InterruptsHeld held;
    if (signer.is_new) {
        write_policy_signer(*o.policy_signer, signer.key.get());
        if (!o.quiet)
            std::cout << "Made a policy signer in " << o.policy_signer->string() << ": keep it (and a backup) to "
                      << "re-sign the key's PCR policy after firmware updates.\n";
    }
    write_file_atomically(dest.key, format_key_file(key), 0600, dest.replace_key ? Replace::yes : Replace::no);
    try {
        write_file_atomically(dest.pub, pub_line, 0644, dest.replace_pub ? Replace::yes : Replace::no);
    } catch (const Error& e) {
        std::error_code ec;
        if (!dest.replace_key)
            std::filesystem::remove(dest.key, ec);
        throw Error(std::string(e.what()) +
                    (dest.replace_key ? "; the key was written, run 'tpmkey pubkey -C COMMENT " + dest.key.string() +
                                            " > " + dest.pub.string() + "' to make the .pub"
                                      : "; nothing was written"));
    }
}

void print_summary(const Destination& dest, const Options& o, const KeyFile& key, const PublicKey& pub,
                   const std::string& comment, const PcrBinding& binding) {
    std::cout << "Your TPM key is in " << printable(dest.key.string()) << " (usable only with this TPM"
              << (!key.needs_pin() ? ", no PIN"
                  : o.shared_pin() ? ", PIN protected: your shared PIN"
                                   : ", PIN protected")
              << ").\n"
              << "Your public key is in " << printable(dest.pub.string()) << ".\n"
              << "The key fingerprint is: " << pub.ssh_fingerprint() << " " << comment << "\n";
    if (o.pcrs)
        std::cout << "It signs only while " << pcr_selection_text(*o.pcrs) << " hold the values they have now"
                  << (binding.signer.key ? ", or values you sign with 'tpmkey policy sign'" : "")
                  << "; compare them with the boot's event log (tpm2_eventlog):\n"
                  << pcr_values_text(*o.pcrs, binding.values);
}

// --same-pin-as KEY (docs/design.md, "PINs, keys and the TPM's lockout"):
// the key whose PIN the new key shares, read and its parent verified before
// the PIN prompt.
struct SharedPin {
    std::filesystem::path path;
    std::string name;  // the token label: the file name without .tpm
    KeyFile key;
    TpmObject parent;
};

SharedPin prepare_shared_pin(Tpm& tpm, KnownParents& known, const std::filesystem::path& path, const Destination& dest,
                             const Config& config) {
    SharedPin shared{path, path.stem().string(), read_key_file(path), {}};
    if (!shared.key.needs_pin())
        throw Error("--same-pin-as " + path.string() + ": that key has no PIN");
    if (shared.name == dest.key.stem().string())
        throw Error("--same-pin-as " + path.string() +
                    ": the new key has the same name; ssh-add -s could not "
                    "tell them apart");
    if (!config.file_problem.empty())
        throw Error("--same-pin-as: the config file cannot record it: " + config.file_problem);
    // The other key's PIN goes under its parent: no clear accepted here (as
    // in a login; a key made before a clear cannot load anyway).
    shared.parent = load_verified_parent(tpm, shared.key.parent, known, nullptr,
                                         ParentPolicy{.accept_clear = false, .accept_new_tpm_ek = {}});
    return shared;
}

// The TPM checks `pin` against the shared key once (prove_pin(), as C_Login
// does), only while a wrong PIN would leave it 2
// tries before lockout. Nothing is written when it is not that key's PIN.
void check_shared_pin(Tpm& tpm, const SharedPin& shared, const Secret& pin) {
    if (pin.empty())
        throw Error("--same-pin-as " + shared.path.string() + ": no PIN given; nothing was written");
    const DictionaryAttackState da = dictionary_attack_state(tpm);
    if (!da.locked_out() && da.max_failures > 0 && da.failures > 0 && da.failures + 3 > da.max_failures)
        throw Error("--same-pin-as: the PIN was not checked: the TPM has counted " + std::to_string(da.failures) +
                    " of " + std::to_string(da.max_failures) +
                    " wrong PINs, and one more would leave it fewer "
                    "than 2 tries before it locks out every key; try again later (it forgives one every " +
                    duration_text(da.recovery_seconds) + "); nothing was written");
    const Authorization auth = Authorization::for_secret(tpm, shared.parent, true);
    try {
        const TpmObject loaded = load_key(tpm, shared.parent, auth, shared.key.blobs);
        prove_pin(tpm, loaded, shared.parent, auth, pin);
    } catch (const TpmError& e) {
        if (!e.is(TPM2_RC_AUTH_FAIL) && !e.is(TPM2_RC_BAD_AUTH))
            throw;
        throw Error("--same-pin-as " + shared.path.string() + ": that is not its PIN (" +
                    dictionary_attack_text(dictionary_attack_state(tpm)) + "); nothing was written");
    }
}

// The shared PIN (pin_object.hpp): the user's PIN object, read and its
// parent verified before the PIN prompt; none yet before the first key
// with a PIN.
struct SharedPinObject {
    std::optional<KeyFile> file;
    TpmObject parent;  // its parent, when it is not the new key's
    bool is_new = false;
};

SharedPinObject prepare_pin_object(Tpm& tpm, KnownParents& known, std::uint32_t key_parent) {
    SharedPinObject shared;
    shared.file = read_pin_object();
    // A new PIN object must be written, or the key could never be used:
    // checked before the PIN prompt (its directory is made if missing).
    std::error_code ec;
    if (!shared.file && std::filesystem::is_directory(pin_object_path().parent_path(), ec))
        check_writable_target(pin_object_path(), Replace::no);
    if (shared.file && shared.file->parent != key_parent)
        shared.parent = load_verified_parent(tpm, shared.file->parent, known, nullptr,
                                             ParentPolicy{.accept_clear = false, .accept_new_tpm_ek = {}});
    return shared;
}

// The TPM checks `pin` against the PIN object once, under the margin
// check_shared_pin keeps. Nothing is written when it is not the PIN.
void check_pin_object_pin(Tpm& tpm, const KeyFile& file, const TpmObject& parent, const Secret& pin) {
    const std::string path = pin_object_path().string();
    const DictionaryAttackState da = dictionary_attack_state(tpm);
    if (!da.locked_out() && da.max_failures > 0 && da.failures > 0 && da.failures + 3 > da.max_failures)
        throw Error("your PIN was not checked: the TPM has counted " + std::to_string(da.failures) + " of " +
                    std::to_string(da.max_failures) +
                    " wrong PINs, and one more would leave it fewer "
                    "than 2 tries before it locks out every key; try again later (it forgives one every " +
                    duration_text(da.recovery_seconds) + "); nothing was written");
    TpmObject loaded;
    try {
        loaded = load_key(tpm, parent, Authorization::password(), file.blobs);
    } catch (const TpmError& e) {
        // Nothing secret was sent: the load carries no PIN.
        if (e.tpm_unreachable())
            throw;
        throw Error("your PIN object " + path + " does not load on this TPM (" + e.what() +
                    "): it belongs to another TPM, or this one was cleared since. Make this key with --own-pin, or "
                    "move the PIN object away so that keygen makes a new one for this TPM (keys made with the old "
                    "one need it back to be used); nothing was written");
    }
    try {
        const Authorization auth = Authorization::for_secret(tpm, parent, true);
        prove_pin(tpm, loaded, parent, auth, pin);
    } catch (const TpmError& e) {
        if (!e.is(TPM2_RC_AUTH_FAIL) && !e.is(TPM2_RC_BAD_AUTH))
            throw;
        throw Error("that is not your PIN (the PIN of your other keys, kept by the PIN object " + path + "; " +
                    dictionary_attack_text(dictionary_attack_state(tpm)) +
                    "); nothing was written. --own-pin makes a key with a PIN of its own");
    }
}

// `address` is set to the TPM in use as soon as it is known, for the
// message about a TPM failure (main).
int run(int argc, char** argv, TpmAddress& address) {
    catch_interrupts();
    const Options o = parse_options(argc, argv);
    const Destination dest = prepare_destination(o);
    Secret pin = pin_from_file(o);

    // The TPM and the parent before the PIN prompt: a PIN is asked only for
    // a run that can succeed, and never sent under a storage key that fails
    // its checks.
    const Config config = load_config();
    address = o.tcti ? config.tpm.overridden_by(*o.tcti) : config.tpm;
    Tpm tpm(address);
    check_interrupted();
    KnownParents known = load_known_parents();
    const std::uint32_t parent_handle = o.parent ? *o.parent : choose_parent(tpm, o.quiet, o.persist_srk);
    if (parent_handle == owner_hierarchy)
        refuse_owner_password(tpm);
    // Proven by the TPM's endorsement key (or matching its pin) and pinned
    // before the PIN prompt.
    ParentCheck parent_check;
    const TpmObject parent = load_verified_parent(tpm, parent_handle, known, &parent_check);
    if (parent_check.cleared)
        std::cerr << "tpmkey-keygen: " << tpm_cleared_text(parent_handle) << "\n";
    // Keys under 0x40000001 load under the same key kept at 0x81000001
    // (systemd-tpm2-setup's): pinned here, so that logins find it.
    if (parent_handle == owner_hierarchy && pin_owner_srk_persisted(tpm, known) && !o.quiet)
        std::cout << "Parent: 0x81000001 holds the same storage key, persistent: logins use it there\n";
    check_interrupted();
    warn_if_no_sha512(tpm, o.spec);
    const PcrBinding binding = o.pcrs ? bind_to_pcrs(tpm, parent, o) : PcrBinding{};
    const std::optional<SharedPin> shared =
        o.same_pin_as ? std::optional(prepare_shared_pin(tpm, known, *o.same_pin_as, dest, config)) : std::nullopt;
    SharedPinObject pin_object = o.shared_pin() ? prepare_pin_object(tpm, known, parent_handle) : SharedPinObject{};
    if (o.pin_file.empty() && !o.no_pin)
        pin = shared ? read_pin_from_terminal("Enter the PIN of " + shared->name + " (the new key's PIN too): ")
              : pin_object.file
                  ? read_pin_from_terminal("Enter your PIN (the PIN of your other keys; empty for no PIN): ")
                  : ask_pin();
    check_interrupted();
    if (shared)
        check_shared_pin(tpm, *shared, pin);
    if (o.shared_pin() && !pin.empty()) {
        if (pin_object.file) {
            check_pin_object_pin(tpm, *pin_object.file, pin_object.parent ? std::as_const(pin_object.parent) : parent,
                                 pin);
        } else {
            pin_object.file = create_pin_object(tpm, parent, parent_handle, pin);
            pin_object.is_new = true;
        }
    }
    check_interrupted();

    const KeyFile key = make_key(tpm, parent, parent_handle, o, pin, binding,
                                 o.shared_pin() && !pin.empty() ? &*pin_object.file : nullptr);
    check_interrupted();
    const PublicKey pub(key.blobs.pub.publicArea);
    const std::string comment = o.comment ? *o.comment : default_comment();
    if (pin_object.is_new) {
        // Before the key: a key whose PIN object was lost could never be used.
        const InterruptsHeld held;
        write_pin_object(*pin_object.file, false);
        if (!o.quiet)
            std::cout << "Made your PIN object in " << pin_object_path().string()
                      << ": keys you make with a PIN share its PIN (keep the file, and a backup: without it they "
                         "cannot be used).\n";
    }
    write_files(dest, o, key, pub.ssh_line(comment) + "\n", binding.signer);
    if (shared) {
        const std::string line = "same-pin " + shared->name + " " + dest.key.stem().string();
        try {
            const std::filesystem::path config_file = record_same_pin(shared->name, dest.key.stem().string());
            if (!o.quiet)
                std::cout << "It has the PIN of " << shared->name << ": recorded in " << config_file.string() << " ('"
                          << line << "'), so ssh-add -s adds both with one PIN.\n";
        } catch (const Error& e) {
            std::cerr << "tpmkey-keygen: the key was made with the PIN of " << shared->name
                      << ", but that could not be recorded: " << e.what() << "; add the line '" << line
                      << "' to the config file yourself\n";
        }
    }
    if (!o.quiet)
        std::cout << "Parent: " << parent_check_text(parent_handle, parent_check) << ".\n";
    if (parent_handle == owner_hierarchy && o.persist_srk)
        persist_owner_srk(tpm, known, o.quiet);
    if (!o.quiet)
        print_summary(dest, o, key, pub, comment, binding);
    return 0;
}

int run_reporting(int argc, char** argv) {
    TpmAddress address;
    try {
        return run(argc, argv, address);
    } catch (const Interrupted& e) {
        // At a prompt, before anything was made: unwound, the TPM's
        // objects flushed; main() then dies of the signal.
        std::cerr << "tpmkey-keygen: " << e.what() << "; nothing was written\n";
        return 1;
    } catch (const TpmError& e) {
        std::cerr << "tpmkey-keygen: " << printable(diagnosis_line(diagnose(e, address))) << "\n";
        return 1;
    } catch (const UsageError& e) {
        std::cerr << "tpmkey-keygen: " << printable(e.what()) << "\n(see tpmkey-keygen --help)\n";
        return 2;
    } catch (const UnverifiedParent& e) {
        // Before any PIN or TPM2_Create: what failed, and what to do.
        std::cerr << "tpmkey-keygen: " << printable(diagnosis_line(diagnose_untrusted_parent(e))) << "\n";
        return 1;
    } catch (const std::exception& e) {
        std::cerr << "tpmkey-keygen: " << printable(e.what()) << "\n";
        return 1;
    }
}

}  // namespace

int main(int argc, char** argv) { return exit_after_interruption(run_reporting(argc, argv)); }
