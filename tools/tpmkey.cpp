// tpmkey: look after TPM keys. Subcommands: list, pubkey, info, passwd,
// doctor, ssh-config. Usage errors exit 2; failures exit 1.

#include "atomic_file.hpp"
#include "config.hpp"
#include "error.hpp"
#include "key_file.hpp"
#include "keys.hpp"
#include "log.hpp"
#include "prompt.hpp"
#include "public_key.hpp"
#include "tpm.hpp"

#include <tss2/tss2_tpm2_types.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace tpmkey;

class UsageError : public Error {
public:
    using Error::Error;
};

// Where `cmake --install` puts the module (TPMKEY_MODULE_PATH is set by CMake).
constexpr const char* installed_module = TPMKEY_MODULE_PATH;

const char* const usage_text =
    "usage: tpmkey COMMAND [ARGS]\n"
    "\n"
    "  list               the keys the PKCS#11 module serves, and where they were found\n"
    "  pubkey KEY         the OpenSSH public key line of KEY (no TPM needed)\n"
    "  info KEY           TPM attributes, parent, PIN, and whether KEY loads on this TPM\n"
    "  passwd KEY         set, change or remove the PIN of KEY\n"
    "  doctor             check the TPM, the keys and the ssh set-up\n"
    "  ssh-config [--apply]  the ~/.ssh/config line for the module (--apply adds it)\n"
    "\n"
    "Run 'tpmkey COMMAND --help' for more.\n";

std::string tcti_for_tools() { return load_config().tcti; }

std::string key_type_text(const PublicKey& pub) {
    return (pub.is_rsa() ? "RSA " : "ECDSA P-") + std::to_string(pub.bits());
}

std::string attributes_text(TPMA_OBJECT a) {
    static const std::pair<TPMA_OBJECT, const char*> names[] = {
        {TPMA_OBJECT_FIXEDTPM, "fixedtpm"},
        {TPMA_OBJECT_STCLEAR, "stclear"},
        {TPMA_OBJECT_FIXEDPARENT, "fixedparent"},
        {TPMA_OBJECT_SENSITIVEDATAORIGIN, "sensitivedataorigin"},
        {TPMA_OBJECT_USERWITHAUTH, "userwithauth"},
        {TPMA_OBJECT_ADMINWITHPOLICY, "adminwithpolicy"},
        {TPMA_OBJECT_NODA, "noda"},
        {TPMA_OBJECT_ENCRYPTEDDUPLICATION, "encryptedduplication"},
        {TPMA_OBJECT_RESTRICTED, "restricted"},
        {TPMA_OBJECT_DECRYPT, "decrypt"},
        {TPMA_OBJECT_SIGN_ENCRYPT, "sign"},
    };
    std::string out;
    for (const auto& [bit, name] : names)
        if (a & bit)
            out += (out.empty() ? "" : "|") + std::string(name);
    return out;
}

// The sentence for a key that does not load, by the TPM's reason.
std::string load_failure_text(const TpmError& e) {
    if (e.is(TPM2_RC_INTEGRITY))
        return "this key belongs to a different TPM, or its file was altered (the TPM's integrity check failed)";
    if (e.is(TPM2_RC_HANDLE) || e.is(TPM2_RC_REFERENCE_H0))
        return "its parent key is not in this TPM (the persistent handle is missing)";
    if (e.is(TPM2_RC_OBJECT_MEMORY))
        return "the TPM has no room for another object; close other TPM users or use /dev/tpmrm0";
    return e.what();
}

Secret ask_new_pin() {
    while (true) {
        Secret first = read_pin_from_terminal("Enter the new PIN (empty for no PIN): ");
        Secret second = read_pin_from_terminal("Enter the same PIN again: ");
        if (first == second)
            return first;
        std::cerr << "The PINs do not match; try again.\n";
    }
}

void need_args(const std::vector<std::string>& args, std::size_t n, const char* usage) {
    if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
        std::cout << "usage: " << usage << "\n";
        std::exit(0);
    }
    if (args.size() != n)
        throw UsageError(std::string("usage: ") + usage);
}

// ---- list ------------------------------------------------------------------

int cmd_list(const std::vector<std::string>& args) {
    need_args(args, 0, "tpmkey list");
    const Config config = load_config();
    std::cout << "Keys from " << (config.searched.empty() ? "nowhere" : config.searched.front()) << ":\n";
    int slot = 0;
    for (const auto& path : config.key_files) {
        try {
            const KeyFile key = read_key_file(path);
            check_usable(key, path.string());
            const PublicKey pub(key.blobs.pub.publicArea);
            std::cout << "slot " << slot++ << ": " << path.string() << "\n"
                      << "    " << key_type_text(pub) << "  " << pub.ssh_fingerprint() << "\n"
                      << "    PIN: " << (key.needs_pin() ? "yes" : "no") << "   parent: " << handle_text(key.parent)
                      << "\n";
        } catch (const Error& e) {
            std::cout << "skipped: " << e.what() << "\n";
        }
    }
    if (config.key_files.empty())
        std::cout << "(none; make one with tpmkey-keygen)\n";
    return 0;
}

// ---- pubkey ----------------------------------------------------------------

int cmd_pubkey(const std::vector<std::string>& args) {
    need_args(args, 1, "tpmkey pubkey KEY");
    const std::filesystem::path path = args[0];
    const KeyFile key = read_key_file(path);
    std::cout << PublicKey(key.blobs.pub.publicArea).ssh_line(path.stem().string()) << "\n";
    return 0;
}

// ---- info ------------------------------------------------------------------

int cmd_info(const std::vector<std::string>& args) {
    need_args(args, 1, "tpmkey info KEY");
    const std::filesystem::path path = args[0];
    const KeyFile key = read_key_file(path);
    const TPMT_PUBLIC& area = key.blobs.pub.publicArea;
    const PublicKey pub(area);
    std::cout << "file:        " << path.string() << "\n"
              << "type:        " << key_type_text(pub) << "\n"
              << "fingerprint: " << pub.ssh_fingerprint() << "\n"
              << "attributes:  " << attributes_text(area.objectAttributes) << "\n"
              << "PIN:         " << (key.needs_pin() ? "yes" : "no") << "\n"
              << "parent:      " << handle_text(key.parent)
              << (key.parent == owner_hierarchy ? " (storage key re-created from the owner hierarchy)" : " (persistent)")
              << "\n"
              << "policy:      " << (key.has_policy || area.authPolicy.size ? ((area.objectAttributes & TPMA_OBJECT_USERWITHAUTH) ? "yes (the PIN works too)" : "yes, required (tpmkey cannot use this key)") : "none")
              << "\n";
    if (!key.description.empty())
        std::cout << "description: " << key.description << "\n";
    try {
        Tpm tpm(tcti_for_tools());
        const Object parent = load_parent(tpm, key.parent);
        const Authorization auth = Authorization::for_secret(tpm, parent, false);
        const Object loaded = load_key(tpm, parent, auth, key.blobs);
        std::cout << "loads:       yes, on this TPM\n";
    } catch (const TpmError& e) {
        std::cout << "loads:       no: " << load_failure_text(e) << "\n";
        return 1;
    }
    return 0;
}

// ---- passwd ----------------------------------------------------------------

int cmd_passwd(const std::vector<std::string>& args) {
    std::vector<std::string> rest;
    std::string old_file, new_file;
    for (std::size_t i = 0; i < args.size(); ++i) {
        if ((args[i] == "--old-pin-file" || args[i] == "--new-pin-file") && i + 1 < args.size())
            (args[i] == "--old-pin-file" ? old_file : new_file) = args[++i];
        else
            rest.push_back(args[i]);
    }
    need_args(rest, 1, "tpmkey passwd [--old-pin-file FILE] [--new-pin-file FILE] KEY");
    const std::filesystem::path path = rest[0];
    KeyFile key = read_key_file(path);
    check_usable(key, path.string());

    Secret old_pin;
    if (!old_file.empty())
        old_pin = read_pin_file(old_file);
    else if (key.needs_pin())
        old_pin = read_pin_from_terminal("Enter the current PIN of " + path.filename().string() + ": ");
    const Secret new_pin = new_file.empty() ? ask_new_pin() : read_pin_file(new_file);

    Tpm tpm(tcti_for_tools());
    const Object parent = load_parent(tpm, key.parent);
    // Both PINs cross the bus only inside the salted, encrypted session.
    const Authorization auth = Authorization::for_secret(tpm, parent, !old_pin.empty() || !new_pin.empty());
    const Object loaded = load_key(tpm, parent, auth, key.blobs);
    {
        const AuthValue current(tpm, loaded, old_pin);
        try {
            key.blobs.priv = change_auth(tpm, loaded, parent, auth, new_pin);
        } catch (const TpmError& e) {
            if (e.is(TPM2_RC_AUTH_FAIL) || e.is(TPM2_RC_BAD_AUTH))
                throw Error("wrong PIN; " + path.string() + " is unchanged");
            if (e.is(TPM2_RC_LOCKOUT))
                throw Error("the TPM is in dictionary-attack lockout; try again later (" + path.string() + " is unchanged)");
            throw;
        }
    }
    key.empty_auth = new_pin.empty() ? std::optional<bool>(true) : std::nullopt;
    write_file_atomically(path, format_key_file(key), 0600, Replace::yes);
    std::cout << (new_pin.empty() ? "The PIN of " + path.string() + " is removed.\n"
                                  : "The PIN of " + path.string() + " is changed.\n");
    return 0;
}

// ---- doctor ----------------------------------------------------------------

struct Doctor {
    int problems = 0;
    void ok(const std::string& what) { std::cout << "[ok]      " << what << "\n"; }
    void warn(const std::string& what, const std::string& problem, const std::string& solution) {
        std::cout << "[warning] " << what << "\n"
                  << "          Likely problem:    " << problem << "\n"
                  << "          Possible solution: " << solution << "\n";
    }
    void fail(const std::string& what, const std::string& problem, const std::string& solution) {
        ++problems;
        std::cout << "[problem] " << what << "\n"
                  << "          Likely problem:    " << problem << "\n"
                  << "          Possible solution: " << solution << "\n";
    }
};

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

int cmd_doctor(const std::vector<std::string>& args) {
    need_args(args, 0, "tpmkey doctor");
    Doctor d;
    const Config config = load_config();
    for (const std::string& w : config.warnings)
        d.warn("configuration", w, "fix or remove that line of " + config_file_path().string());

    // The TPM.
    const std::string tcti_name = config.tcti.empty() ? "the default (tabrmd, /dev/tpmrm0, /dev/tpm0)" : config.tcti;
    std::optional<Tpm> tpm;
    if (config.tcti.empty() || config.tcti.starts_with("device")) {
        struct stat st {};
        const bool rm = ::stat("/dev/tpmrm0", &st) == 0;
        if (!rm)
            d.fail("/dev/tpmrm0", "this machine shows no TPM 2.0 resource manager",
                   "enable the TPM in the firmware settings (often 'Security Chip' or 'fTPM/PTT'), or set TPMKEY_TCTI");
        else if (::access("/dev/tpmrm0", R_OK | W_OK) != 0)
            d.fail("/dev/tpmrm0", "you may not use the TPM",
                   "join the 'tss' group (sudo usermod -aG tss $USER) and log in again");
        else
            d.ok("/dev/tpmrm0 is there and you may use it");
    }
    try {
        tpm.emplace(config.tcti);
        TPMI_YES_NO more = TPM2_NO;
        TPMS_CAPABILITY_DATA* raw = nullptr;
        check_rc(Esys_GetCapability(tpm->esys(), ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, TPM2_CAP_TPM_PROPERTIES,
                                    TPM2_PT_PERMANENT, 2, &more, &raw),
                 "TPM2_GetCapability");
        const EsysPtr<TPMS_CAPABILITY_DATA> data(raw);
        d.ok("TPM reachable through " + tcti_name + " (from " + config.tcti_source + ")");
        for (UINT32 i = 0; i < data->data.tpmProperties.count; ++i) {
            const TPMS_TAGGED_PROPERTY& p = data->data.tpmProperties.tpmProperty[i];
            if (p.property == TPM2_PT_PERMANENT && (p.value & TPMA_PERMANENT_INLOCKOUT))
                d.fail("dictionary-attack protection", "the TPM is in lockout after too many wrong PINs",
                       "wait for the lockout to end (tpm2_getcap properties-variable shows TPM2_PT_LOCKOUT_*), "
                       "or reset it with the lockout password: tpm2_dictionarylockout -c");
        }
        if (persistent_storage_key_exists(*tpm, standard_srk))
            d.ok("persistent storage key at 0x81000001 (fastest parent)");
        else
            d.ok("no persistent storage key at 0x81000001: keys use 0x40000001 (re-created on use; "
                 "tpm2_createprimary + tpm2_evictcontrol can make one)");
    } catch (const Error& e) {
        tpm.reset();
        d.fail("TPM", e.what(), "see the lines above; or set TPMKEY_TCTI (e.g. device:/dev/tpmrm0)");
    }

    // The keys.
    if (config.key_files.empty())
        d.fail("keys", "no key found in " + (config.searched.empty() ? std::string("any place") : config.searched.front()),
               "make one: tpmkey-keygen");
    for (const auto& path : config.key_files) {
        try {
            const KeyFile key = read_key_file(path);
            check_usable(key, path.string());
            struct stat st {};
            if (::stat(path.c_str(), &st) == 0 && (st.st_mode & 0022))
                d.warn(path.string(), "others can write to this key file", "chmod 600 " + path.string());
            if (tpm) {
                const Object parent = load_parent(*tpm, key.parent);
                const Authorization auth = Authorization::for_secret(*tpm, parent, false);
                const Object loaded = load_key(*tpm, parent, auth, key.blobs);
            }
            d.ok(path.string() + ": " + key_type_text(PublicKey(key.blobs.pub.publicArea)) +
                 (tpm ? ", loads on this TPM" : ""));
        } catch (const TpmError& e) {
            d.fail(path.string(), load_failure_text(e), "make a new key on this machine with tpmkey-keygen");
        } catch (const Error& e) {
            d.fail(path.string(), e.what(), "check the file, or move it out of the way");
        }
    }

    // ssh.
    const std::filesystem::path ssh_config = home_directory() / ".ssh" / "config";
    const std::string text = read_text(ssh_config);
    if (text.find("tpmkey-pkcs11.so") == std::string::npos)
        d.fail("~/.ssh/config", "ssh is not told to use the module",
               "run 'tpmkey ssh-config --apply' (adds: PKCS11Provider " + std::string(installed_module) + ")");
    else
        d.ok("~/.ssh/config names tpmkey-pkcs11.so");
    const bool allowed = std::string(installed_module).starts_with("/usr/lib") ||
                         std::string(installed_module).starts_with("/usr/local/lib");
    if (allowed)
        d.ok("module path " + std::string(installed_module) + " is inside ssh-agent's default allow-list");
    else
        d.warn("module path " + std::string(installed_module), "ssh-agent refuses modules outside /usr/lib*/ and /usr/local/lib*/",
               "start ssh-agent with -P '" + std::string(installed_module) + "', or install under /usr/local");
    const std::string version = command_output("ssh -V 2>&1");
    if (version.empty())
        d.fail("OpenSSH", "ssh is not installed", "sudo apt-get install openssh-client");
    else
        d.ok("OpenSSH: " + version.substr(0, version.find('\n')));

    std::cout << (d.problems == 0 ? "All is well.\n" : std::to_string(d.problems) + " problem(s) found.\n");
    return d.problems == 0 ? 0 : 1;
}

// ---- ssh-config ------------------------------------------------------------

int cmd_ssh_config(const std::vector<std::string>& args) {
    const bool apply = args.size() == 1 && args[0] == "--apply";
    if (!apply)
        need_args(args, 0, "tpmkey ssh-config [--apply]");
    const std::string line = std::string("PKCS11Provider ") + installed_module;
    std::cout << line << "\n";
    if (!apply)
        return 0;
    const std::filesystem::path dir = home_directory() / ".ssh";
    const std::filesystem::path file = dir / "config";
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
        throw Error(dir.string() + ": cannot create: " + std::strerror(errno));
    std::string text = read_text(file);
    if (text.find(line) != std::string::npos) {
        std::cout << file.string() << " has it already.\n";
        return 0;
    }
    // At the top: the first value ssh reads for an option is the one used.
    text = "# Added by 'tpmkey ssh-config --apply': SSH keys held in the TPM\n" + line + "\n\n" + text;
    struct stat st {};
    const mode_t mode = ::stat(file.c_str(), &st) == 0 ? (st.st_mode & 0777) : 0600;
    write_file_atomically(file, text, mode, Replace::yes);
    std::cout << "Added to the top of " << file.string() << ".\n";
    return 0;
}

int run(int argc, char** argv) {
    configure_logging();
    if (argc < 2)
        throw UsageError("a command is needed");
    const std::string command = argv[1];
    const std::vector<std::string> args(argv + 2, argv + argc);
    static const std::map<std::string, std::function<int(const std::vector<std::string>&)>> commands = {
        {"list", cmd_list},     {"pubkey", cmd_pubkey}, {"info", cmd_info},
        {"passwd", cmd_passwd}, {"doctor", cmd_doctor}, {"ssh-config", cmd_ssh_config},
    };
    if (command == "--help" || command == "-h" || command == "help") {
        std::cout << usage_text;
        return 0;
    }
    const auto it = commands.find(command);
    if (it == commands.end())
        throw UsageError("unknown command '" + command + "'");
    return it->second(args);
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const UsageError& e) {
        std::cerr << "tpmkey: " << e.what() << "\n" << usage_text;
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "tpmkey: " << e.what() << "\n";
        return 1;
    }
}
