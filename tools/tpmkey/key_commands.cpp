// tpmkey list, pubkey, info, passwd and drop-comment: the commands about
// one key file or all of them.

#include "cli.hpp"
#include "core/base/printable.hpp"
#include "core/files/atomic_file.hpp"
#include "core/files/config.hpp"
#include "core/keys/key_discovery.hpp"
#include "core/keys/key_file.hpp"
#include "core/pin/prompt.hpp"
#include "core/tpm/pin_object.hpp"
#include "core/tpm/tpm.hpp"
#include "core/tpm/tpm_keys.hpp"
#include "core/trust/known_parents.hpp"

#include <tss2/tss2_tpm2_types.h>

#include <iostream>
#include <memory>
#include <optional>

namespace tpmkey::cli {

namespace {

// ---- list ------------------------------------------------------------------

constexpr CommandSpec list_spec{"list",
                                "the keys the PKCS#11 module serves, in slot order",
                                "tpmkey list",
                                "Lists every key the PKCS#11 module serves, in the module's slot order:\n"
                                "its slot id, the file, the fingerprint as 'ssh-keygen -l' prints it (with\n"
                                "the key's name as comment, as 'ssh-keygen -D' shows it), its type, whether\n"
                                "it has a PIN, and its parent. Files the module skips are listed with the\n"
                                "reason. Reads files only: no TPM needed.\n"
                                "\n"
                                "Keys come from TPMKEY_KEYS (files or directories, ':'-separated), else the\n"
                                "'key' lines of ~/.config/tpmkey/config, else ~/.ssh/*.tpm.\n",
                                {nullptr},
                                {nullptr},
                                0};

// As ssh-keygen -l prints it: "256 SHA256:... comment (ECDSA)".
std::string ssh_keygen_l_line(const PublicKey& pub, const std::string& comment) {
    return std::to_string(pub.bits()) + " " + pub.ssh_fingerprint() + " " + comment + " (" + pub.algorithm().name + ")";
}

int cmd_list(const Parsed&) {
    const Config config = load_config();
    for (const std::string& w : config.warnings)
        std::cerr << "tpmkey: " << w << "\n";
    std::cout << "Keys from " << (config.searched.empty() ? "nowhere" : config.searched.front()) << ":\n";
    // Slot ids are given as the module gives them: in this order, counting
    // only the files it accepts (find_keys).
    unsigned long slot = 0;
    for (const FoundKeyFile& found : find_keys(config)) {
        if (!found.key) {
            std::cout << "skipped " << printable(found.skip_message) << "\n";
            continue;
        }
        const KeyFile& key = found.key->file;
        const PublicKey& pub = found.key->public_key;
        std::cout << "slot " << slot++ << "  " << printable(found.path.string()) << "\n"
                  << "        " << ssh_keygen_l_line(pub, printable(found.path.stem().string())) << "\n"
                  << "        " << key_type_text(pub) << ", " << (key.needs_pin() ? "PIN" : "no PIN") << ", parent "
                  << handle_text(key.parent) << "\n";
    }
    if (config.key_files.empty())
        std::cout << "(none; make one with tpmkey-keygen)\n";
    return 0;
}

// ---- pubkey ----------------------------------------------------------------

constexpr CommandSpec pubkey_spec{"pubkey",
                                  "the OpenSSH public key line of KEY (no TPM needed)",
                                  "tpmkey pubkey [-C COMMENT] KEY",
                                  "Prints the OpenSSH public key line of KEY, a TPM key file (NAME.tpm). Use it\n"
                                  "to make a lost NAME.pub again:\n"
                                  "\n"
                                  "    tpmkey pubkey -C me@laptop ~/.ssh/id_tpm.tpm > ~/.ssh/id_tpm.pub\n"
                                  "\n"
                                  "Reads the file only: no TPM needed.\n"
                                  "\n"
                                  "  -C COMMENT   the comment at the end of the line (default: the comment\n"
                                  "               an earlier tpmkey-keygen or ssh-tpm-agent kept in the key\n"
                                  "               file, else NAME; tpmkey-keygen keeps none in the file)\n",
                                  {"-C", nullptr},
                                  {nullptr},
                                  1};

int cmd_pubkey(const Parsed& p) {
    const std::filesystem::path path = p.positional[0];
    const KeyFile key = read_key_file(path);
    const std::string comment =
        p.has_value("-C") ? p.value("-C") : printable(key.description.empty() ? path.stem().string() : key.description);
    std::cout << PublicKey(key.blobs.pub.publicArea).ssh_line(comment) << "\n";
    return 0;
}

// ---- info ------------------------------------------------------------------

constexpr CommandSpec info_spec{"info",
                                "TPM attributes, parent, policy; does KEY load here?",
                                "tpmkey info KEY",
                                "Shows what the key file KEY says (type, fingerprint, the TPM object's\n"
                                "attributes, PIN, parent, policy) and asks this TPM to load the key.\n"
                                "Exit status 0 when it loads and can sign here, 1 when it cannot (the last\n"
                                "line says why: e.g. the key belongs to a different TPM, or the PCRs it is\n"
                                "bound to changed).\n",
                                {nullptr},
                                {nullptr},
                                1};

int cmd_info(const Parsed& p) {
    const std::filesystem::path path = p.positional[0];
    const KeyFile key = read_key_file(path);
    const TPMT_PUBLIC& area = key.blobs.pub.publicArea;
    const PublicKey pub(area);
    std::cout << "file:        " << printable(path.string()) << "\n"
              << "type:        " << key_type_text(pub) << "\n"
              << "fingerprint: " << pub.ssh_fingerprint() << "\n"
              << "attributes:  " << attributes_text(area.objectAttributes) << "\n"
              << "PIN:         "
              << (!key.needs_pin()               ? "no"
                  : shared_pin_name(key).empty() ? "yes, its own"
                                                 : "yes, the shared PIN (the PIN object " + pin_object_path().string() +
                                                       "; 'tpmkey passwd' changes it for every key made with it)")
              << "\n"
              << "parent:      " << handle_text(key.parent)
              << (key.parent == owner_hierarchy ? " (storage key re-created from the owner hierarchy)"
                                                : " (persistent storage key)")
              << "\n";
    if (!key.description.empty())
        std::cout << "description: " << printable(key.description) << "\n";
    std::optional<Diagnosis> problem;
    const Config config = load_config();
    std::unique_ptr<Tpm> tpm;
    try {
        tpm = std::make_unique<Tpm>(config.tpm);
    } catch (const TpmError& e) {
        problem = diagnose(e, config.tpm);
    }
    const std::optional<bool> pcrs_match = print_policy(key, tpm.get());
    try {
        if (tpm) {
            KnownParents known = KnownParents::load();
            problem = why_key_does_not_load(*tpm, key, path, known);
        }
    } catch (const TpmError& e) {
        problem = diagnose(e, config.tpm);
    }
    if (problem) {
        std::cout << "loads:       no: " << problem->problem << "\n"
                  << "             (" << problem->solution << ")\n";
        return 1;
    }
    std::cout << "loads:       yes, on this TPM\n";
    // A key that loads may still be refused by its PCR policy.
    if (pcrs_match == false) {
        std::cout << "signs:       no: the PCRs it is bound to changed since it was made\n"
                  << "             (" << pcr_changed_solution(key.has_signed_policies(), path.string()) << ")\n";
        return 1;
    }
    return 0;
}

// ---- passwd ----------------------------------------------------------------

constexpr CommandSpec passwd_spec{"passwd",
                                  "set, change or remove the PIN of KEY",
                                  "tpmkey passwd [--old-pin-file FILE] [--new-pin-file FILE] KEY",
                                  "Sets, changes or removes the PIN of KEY. The TPM wraps the key again with\n"
                                  "the new PIN (TPM2_ObjectChangeAuth; both PINs travel only inside an\n"
                                  "encrypted session) and KEY is replaced in one step. With a wrong current\n"
                                  "PIN nothing is written: it is checked before the new PIN is asked for.\n"
                                  "An empty new PIN removes the PIN. A key made without a PIN gets none:\n"
                                  "it is not under dictionary-attack protection (noDA).\n"
                                  "\n"
                                  "Asks for the PINs on the terminal unless given in files:\n"
                                  "  --old-pin-file FILE   the current PIN: the first line of FILE\n"
                                  "  --new-pin-file FILE   the new PIN: the first line of FILE (empty: no PIN)\n"
                                  "\n"
                                  "For a key with the shared PIN (tpmkey-keygen's default) it changes the\n"
                                  "shared PIN: the auth value of your PIN object (~/.config/tpmkey/pin-object),\n"
                                  "which that file then holds; every key made with it follows. The shared PIN\n"
                                  "cannot be removed.\n"
                                  "\n"
                                  "Wrong PINs count towards the TPM's dictionary-attack lockout (see\n"
                                  "'tpmkey doctor'). The public key stays the same.\n",
                                  {"--old-pin-file", "--new-pin-file", nullptr},
                                  {nullptr},
                                  1};

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
    std::filesystem::path path = rewritten_key_file(p.positional[0]);
    KeyFile key = read_key_file(path);
    check_usable(key, path.string());
    // A key with the shared PIN: the PIN is the PIN object's, and that is
    // what is wrapped again and rewritten (pin_object.hpp).
    const bool shared = !shared_pin_name(key).empty();
    const std::string key_name = path.string();
    if (shared) {
        try {
            key = pin_object_for(key);
        } catch (const Error& e) {
            throw Error(key_name + ": " + e.what() + "; nothing changed");
        }
        path = pin_object_path();
        std::cout << key_name << " has the shared PIN: changing it in " << path.string()
                  << " changes it for every key made with it.\n";
    }
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
    Tpm tpm(config.tpm);
    KnownParents known = KnownParents::load();
    TpmObject parent;
    ParentCheck parent_check;
    try {
        // The key's PIN goes under this parent: a clear is no moment for
        // it (a key made before a clear cannot load anyway), and a "clear"
        // proven by an EK trusted at its first use could be an interposer's.
        parent = load_verified_parent(tpm, key.parent, known, &parent_check,
                                      ParentPolicy{.accept_clear = false, .accept_new_tpm_ek = {}});
    } catch (const TpmError& e) {
        throw Error(path.string() + ": " + diagnose(e, tpm.address()).problem + "; the file is unchanged");
    } catch (const UnverifiedParent& e) {
        throw Error(path.string() + ": " + diagnosis_line(diagnose_untrusted_parent(e)) + "; the file is unchanged");
    } catch (const Error& e) {
        throw Error(path.string() + ": " + e.what() + "; the file is unchanged");
    }
    if (parent_check.proven_now)
        std::cout << "Parent: " << parent_check_text(key.parent, parent_check) << ".\n";
    if (!p.has_value("--old-pin-file") && key.needs_pin())
        old_pin = pin_from_terminal(shared ? std::string("Enter the current shared PIN: ")
                                           : "Enter the current PIN of " + path.stem().string() + ": ",
                                    "--old-pin-file");

    // Both PINs cross the bus only inside the salted, encrypted session.
    const bool ask_new_pin_here = !p.has_value("--new-pin-file");
    const Authorization auth =
        Authorization::for_secret(tpm, parent, !old_pin.empty() || !new_pin.empty() || ask_new_pin_here);
    TpmObject loaded;
    try {
        loaded = load_key(tpm, parent, auth, key.blobs);
    } catch (const TpmError& e) {
        throw Error(path.string() + ": " + diagnose(e, tpm.address()).problem + "; the file is unchanged");
    }
    // A key made without a PIN is noDA (signing_key_template): a PIN set on
    // it would be under no dictionary-attack protection, guessable without
    // limit. Its attributes cannot change, so it never gets one. Asked after
    // the load: a key of another TPM, or an altered one, is told so first.
    const bool no_da = (key.blobs.pub.publicArea.objectAttributes & TPMA_OBJECT_NODA) != 0;
    if (no_da && !key.needs_pin() && !(p.has_value("--new-pin-file") && new_pin.empty()))
        throw Error(path.string() +
                    " was made without a PIN and is not under dictionary-attack protection (noDA), so a PIN set on "
                    "it could be guessed without limit; the file is unchanged (for a key with a PIN, make a new "
                    "one with tpmkey-keygen)");
    const AuthValue current(tpm, loaded, old_pin);
    // The key wrapped again with `pin` (TPM2_ObjectChangeAuth, authorised
    // with the current PIN).
    const auto wrapped_with = [&](const Secret& pin) {
        try {
            return change_auth(tpm, loaded, parent, auth, pin);
        } catch (const TpmError& e) {
            const Diagnosis d = diagnose(e, tpm.address());
            throw Error(d.problem + "; " + path.string() + " is unchanged (" + d.solution + ")");
        }
    };
    // The current PIN is checked before a new one is asked for, as C_Login
    // checks a PIN: the key wrapped again with the same PIN, dropped.
    if (ask_new_pin_here && key.needs_pin())
        (void)wrapped_with(old_pin);
    if (ask_new_pin_here)
        new_pin = ask_new_pin();
    if (shared && new_pin.empty())
        throw Error("the shared PIN cannot be removed (keys made with it would need none: make keys without a PIN "
                    "with tpmkey-keygen -N ''); nothing changed");
    if (old_pin.empty() && new_pin.empty() && !key.needs_pin()) {
        std::cout << path.string() << " has no PIN; nothing changed.\n";
        return 0;
    }
    key.blobs.priv = wrapped_with(new_pin);
    // Every other field (the description, a policy, fields of later
    // versions of the format) is written back as it was read.
    key.empty_auth = new_pin.empty();
    write_file_atomically(path, format_key_file(key), 0600, Replace::yes);
    const char* what = new_pin.empty() ? "removed" : old_pin.empty() ? "set" : "changed";
    if (shared) {
        std::cout << "The shared PIN is changed (in " << path.string()
                  << "): every key made with it takes the new PIN. A copy of the old file (a backup) still opens "
                     "them with the old PIN.\n";
        return 0;
    }
    std::cout << "The PIN of " << path.string() << " is " << what << ".\n";
    // Its attributes stay those of a key with a PIN.
    if (new_pin.empty() && lockout_stops_pinless_key(key.blobs.pub.publicArea, true))
        std::cout << "Note: " << pinless_key_lockout_advice(path.string()) << ".\n";
    return 0;
}

// ---- drop-comment ----------------------------------------------------------

constexpr CommandSpec drop_comment_spec{"drop-comment",
                                        "rewrite KEY without the comment kept in it (for tpm2-openssl)",
                                        "tpmkey drop-comment KEY",
                                        "Rewrites KEY without its description field: the -C comment that\n"
                                        "an earlier tpmkey-keygen kept in the key file (ssh-tpm-agent keeps one\n"
                                        "there too). tpm2-openssl and tpm2_print refuse a key file with that field.\n"
                                        "Every other field stays as it was, the key is the same (the TPM-wrapped\n"
                                        "private part does not change) and so is its public key; the comment\n"
                                        "stays in NAME.pub. Reads and writes the file only: no TPM needed.\n",
                                        {nullptr},
                                        {nullptr},
                                        1};

int cmd_drop_comment(const Parsed& p) {
    const std::filesystem::path path = rewritten_key_file(p.positional[0]);
    KeyFile key = read_key_file(path);
    if (key.description.empty()) {
        std::cout << path.string() << " keeps no comment; nothing changed.\n";
        return 0;
    }
    const std::string comment = printable(key.description);
    key.description.clear();
    write_file_atomically(path, format_key_file(key), 0600, Replace::yes);
    std::cout << "Dropped the comment '" << comment << "' from " << path.string()
              << ": tpm2-openssl reads it now. The comment stays in the .pub ('tpmkey pubkey -C COMMENT "
              << path.string() << "' makes a lost one again).\n";
    return 0;
}

}  // namespace

const Command list_command{&list_spec, cmd_list};
const Command pubkey_command{&pubkey_spec, cmd_pubkey};
const Command info_command{&info_spec, cmd_info};
const Command passwd_command{&passwd_spec, cmd_passwd};
const Command drop_comment_command{&drop_comment_spec, cmd_drop_comment};

}  // namespace tpmkey::cli
