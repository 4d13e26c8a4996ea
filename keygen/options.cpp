#include "options.hpp"

#include "core/keys/key_file.hpp"
#include "core/trust/known_parents.hpp"
#include "tpmkey_version.hpp"

#include <tss2/tss2_tpm2_types.h>

#include <getopt.h>

#include <cerrno>
#include <cstdlib>
#include <iostream>

namespace tpmkey::keygen {

namespace {

constexpr const char* usage_text =
    "usage: tpmkey-keygen [-q] [-t ecdsa|rsa] [-b bits] [-f keyfile] [-C comment]\n"
    "                     [-N ''] [--pin-file FILE] [--own-pin | --same-pin-as KEY]\n"
    "                     [--parent HANDLE] [--no-persist-srk]\n"
    "                     [--tcti TCTI]\n"
    "                     [--pcr LIST [--pcr-bank BANK] [--policy-signer FILE]]\n"
    "\n"
    "Creates a key inside the TPM. Writes KEYFILE (default ~/.ssh/id_tpm.tpm), which\n"
    "only this TPM can use, and its public key next to it (id_tpm.pub).\n"
    "\n"
    "  -t ecdsa|rsa       key type (default ecdsa)\n"
    "  -b bits            ecdsa: 256 (default), 384 or 521; rsa: 2048 (default) or 3072\n"
    "  -f keyfile         where to write the key (.tpm is added unless it is there);\n"
    "                     the .pub goes next to it\n"
    "  -C comment         comment of the .pub line (default user@host); the key file\n"
    "                     keeps no comment, so that every reader of the format\n"
    "                     (tpm2-openssl, tpm2_print) takes it\n"
    "  -N ''              no PIN (a PIN itself is never taken from the command line)\n"
    "  --pin-file FILE    read the PIN from the first line of FILE\n"
    "                     A PIN is your shared PIN by default: the auth value of\n"
    "                     your PIN object (~/.config/tpmkey/pin-object, made\n"
    "                     with the first key that has a PIN), which every such\n"
    "                     key names; ssh-add -s adds them all with it, and\n"
    "                     'tpmkey passwd' changes it for all of them\n"
    "  --own-pin          a PIN of the key's own (its auth value), as tpm2-openssl\n"
    "                     and ssh-tpm-agent use it; a PCR-bound key (--pcr)\n"
    "                     always has one\n"
    "  --same-pin-as KEY  a PIN of its own, that of the key file KEY: checked\n"
    "                     once with the TPM, then recorded in the config file,\n"
    "                     so that ssh-add -s adds both with one PIN\n"
    "  --parent HANDLE    0x40000001 (re-created storage key) or a persistent\n"
    "                     handle such as 0x81000001 (default: 0x81000001 if the TPM\n"
    "                     has a storage key there, else 0x40000001)\n"
    "  --no-persist-srk   leave 0x81000001 empty. Without it, a key made under\n"
    "                     0x40000001 on a TPM with nothing at 0x81000001 and no\n"
    "                     owner password persists the TCG standard SRK there (as\n"
    "                     systemd-tpm2-setup does; 'tpmkey setup' for a TPM with\n"
    "                     an owner password), so that logins need not re-create it\n"
    "  --tcti TCTI        how to reach the TPM, as tpm2-tools writes it\n"
    "                     (device:/dev/tpmrm0, tabrmd, swtpm:host=127.0.0.1,port=2321);\n"
    "                     default: $TPMKEY_TCTI, else the config file's tcti line,\n"
    "                     else tpm2-tss's default (tpm2-abrmd, /dev/tpmrm0, /dev/tpm0)\n"
    "  --pcr LIST         bind the key to the current values of these PCRs\n"
    "                     (e.g. 7, or 0,2,4,7): it signs only while they hold\n"
    "                     them, i.e. while the machine boots the same way\n"
    "  --pcr-bank BANK    sha256 (default), sha1, sha384 or sha512\n"
    "  --policy-signer FILE  bind through a policy signed by the key in FILE\n"
    "                     (made if missing; default path: ~/.config/tpmkey/\n"
    "                     policy-signer.pem): after a firmware update,\n"
    "                     'tpmkey policy sign KEY' re-signs it for the new values\n"
    "  -q                 quiet\n"
    "  --version          print the version and exit\n"
    "\n"
    "See docs/pcr-bound-keys.md before binding keys to PCRs.\n";

std::uint32_t parse_handle(const std::string& text) {
    char* end = nullptr;
    errno = 0;
    const unsigned long value = std::strtoul(text.c_str(), &end, 0);
    if (text.empty() || *end != '\0' || errno != 0 || value > 0xffffffffUL)
        throw UsageError("--parent: '" + text + "' is not a handle (e.g. 0x81000001)");
    const auto handle = static_cast<std::uint32_t>(value);
    if (handle != owner_hierarchy && (handle >> 24) != TPM2_HT_PERSISTENT)
        throw UsageError("--parent: use 0x40000001 or a persistent handle (0x81xxxxxx)");
    return handle;
}

}  // namespace

Options parse_options(int argc, char** argv) {
    enum {
        opt_pin_file = 256,
        opt_parent,
        opt_tcti,
        opt_pcr,
        opt_pcr_bank,
        opt_policy_signer,
        opt_help,
        opt_version,
        opt_same_pin_as,
        opt_own_pin,
        opt_no_persist_srk
    };
    const option long_options[] = {
        {"pcr", required_argument, nullptr, opt_pcr},
        {"pcr-bank", required_argument, nullptr, opt_pcr_bank},
        {"policy-signer", required_argument, nullptr, opt_policy_signer},
        {"pin-file", required_argument, nullptr, opt_pin_file},
        {"same-pin-as", required_argument, nullptr, opt_same_pin_as},
        {"own-pin", no_argument, nullptr, opt_own_pin},
        {"parent", required_argument, nullptr, opt_parent},
        {"no-persist-srk", no_argument, nullptr, opt_no_persist_srk},
        {"tcti", required_argument, nullptr, opt_tcti},
        {"help", no_argument, nullptr, opt_help},
        {"version", no_argument, nullptr, opt_version},
        {nullptr, 0, nullptr, 0},
    };
    Options o;
    std::string pcr_list, pcr_bank = "sha256";
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":t:b:f:C:N:qh", long_options, nullptr)) != -1) {
        const std::string arg = optarg ? optarg : "";
        switch (c) {
        case 't':
            if (arg == "ecdsa")
                o.spec.algorithm = KeyAlgorithm::ecdsa;
            else if (arg == "rsa")
                o.spec.algorithm = KeyAlgorithm::rsa;
            else
                throw UsageError("-t: unknown key type '" + arg + "' (ecdsa or rsa; the TPM has no ed25519)");
            break;
        case 'b': {
            char* end = nullptr;
            const unsigned long bits = std::strtoul(arg.c_str(), &end, 10);
            if (arg.empty() || *end != '\0' || bits > 65536)
                throw UsageError("-b: '" + arg + "' is not a number of bits");
            o.spec.bits = static_cast<unsigned>(bits);
            o.bits_given = true;
            break;
        }
        case 'f': o.file = arg; break;
        case 'C':
            // It goes into the .pub line (the key file keeps no comment).
            if (!is_printable_utf8(arg))
                throw UsageError("-C: the comment must be printable UTF-8 text (no control characters)");
            o.comment = arg;
            break;
        case 'N':
            if (!arg.empty())
                throw UsageError("-N: a PIN on the command line is visible to every user (ps); "
                                 "use -N '' for no PIN, --pin-file FILE, or answer the prompt");
            o.no_pin = true;
            break;
        case 'q': o.quiet = true; break;
        case opt_pin_file: o.pin_file = arg; break;
        case opt_same_pin_as: o.same_pin_as = arg; break;
        case opt_own_pin: o.own_pin = true; break;
        case opt_parent: o.parent = parse_handle(arg); break;
        case opt_no_persist_srk: o.persist_srk = false; break;
        case opt_tcti: o.tcti = arg; break;
        case opt_pcr: pcr_list = arg; break;
        case opt_pcr_bank: pcr_bank = arg; break;
        case opt_policy_signer: o.policy_signer = arg; break;
        case 'h':
        case opt_help: std::cout << usage_text; std::exit(0);
        case opt_version: std::cout << "tpmkey-keygen " << version << "\n"; std::exit(0);
        case ':': throw UsageError(std::string("option needs a value: ") + argv[optind - 1]);
        default: throw UsageError(std::string("unknown option: ") + argv[optind - 1]);
        }
    }
    if (optind != argc)
        throw UsageError(std::string("unexpected argument: ") + argv[optind]);
    if (!pcr_list.empty()) {
        try {
            o.pcrs = parse_pcr_selection(pcr_list, pcr_bank);
        } catch (const Error& e) {
            throw UsageError(std::string("--pcr: ") + e.what());
        }
    }
    if (!o.pcrs && o.policy_signer)
        throw UsageError("--policy-signer signs a PCR policy: give the PCRs with --pcr");
    if (o.no_pin && !o.pin_file.empty())
        throw UsageError("-N '' and --pin-file contradict each other");
    if (o.no_pin && o.same_pin_as)
        throw UsageError("-N '' and --same-pin-as contradict each other");
    if (o.no_pin && o.own_pin)
        throw UsageError("-N '' and --own-pin contradict each other");
    if (!o.bits_given)
        o.spec.bits = o.spec.algorithm == KeyAlgorithm::ecdsa ? 256 : 2048;
    try {
        check_key_spec(o.spec);
    } catch (const Error& e) {
        throw UsageError(std::string("-b: ") + e.what());
    }
    return o;
}

}  // namespace tpmkey::keygen
