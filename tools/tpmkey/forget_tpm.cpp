// tpmkey forget-tpm: drops the pins of a TPM (known_parents.hpp) on
// purpose, after the user replaced it, so that the next use proves and pins
// the new one. tpmkey trust-tpm: pins the storage key of a TPM not seen
// before on purpose, where its handle is pinned for other TPMs and its EK
// is trusted on first use (another TPM and an interposer in front of a
// pinned one cannot be told apart: the user decides). Both say what they
// change and ask on a terminal first (or take --yes).

#include "cli.hpp"
#include "core/base/printable.hpp"
#include "core/files/config.hpp"
#include "core/keys/key_parts.hpp"
#include "core/pin/prompt.hpp"
#include "core/tpm/tpm_keys.hpp"
#include "core/trust/endorsement.hpp"
#include "core/trust/known_parents.hpp"

#include <cerrno>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

namespace tpmkey::cli {

namespace {

constexpr CommandSpec forget_tpm_spec{"forget-tpm",
                                      "drop the pinned storage keys and EK of a TPM",
                                      "tpmkey forget-tpm [--tcti TCTI] [--yes]",
                                      "Removes the lines of one TPM from the pinned storage keys\n"
                                      "($XDG_CONFIG_HOME/tpmkey/known_parents): their names and the endorsement\n"
                                      "key (EK) that proved them. Do this only when you replaced the TPM itself\n"
                                      "and know that the one answering now is the new one: the next use\n"
                                      "(tpmkey-keygen, tpmkey passwd, tpmkey doctor) proves the storage key by\n"
                                      "whatever EK answers then and pins it. A cleared TPM keeps its EK and\n"
                                      "needs no forget-tpm: tpmkey recognises it. An EK that no longer matches\n"
                                      "its pin is another TPM, or something in between that answers for it.\n"
                                      "It shows the lines it drops and asks on the terminal; --yes drops them\n"
                                      "without asking (without a terminal it is needed).\n"
                                      "The TPM is the one tpmkey uses (TPMKEY_TCTI, else the config file's tcti,\n"
                                      "else this machine's), or --tcti TCTI. Keys are not touched: keys made\n"
                                      "under a forgotten storage key that is gone cannot load anyway.\n",
                                      {"--tcti", nullptr},
                                      {"--yes", nullptr},
                                      0};

constexpr CommandSpec trust_tpm_spec{"trust-tpm",
                                     "pin the storage key of a TPM not seen before, on purpose",
                                     "tpmkey trust-tpm [--tcti TCTI] [--parent HANDLE] [--yes]",
                                     "Proves the TPM's storage key (0x40000001, or --parent HANDLE: a\n"
                                     "persistent one) by its endorsement key (EK) and pins it in\n"
                                     "$XDG_CONFIG_HOME/tpmkey/known_parents for this TPM, where that handle is\n"
                                     "pinned only for other TPMs under another name and the EK is trusted on\n"
                                     "first use: a second simulator on another port, or another TPM. tpmkey\n"
                                     "refuses such a TPM on its own, because a relay in front of a pinned TPM\n"
                                     "looks the same. Run it only when you know which TPM answers at that\n"
                                     "address. It shows the storage key's and the EK's names and asks on the\n"
                                     "terminal; --yes pins without asking (without a terminal it is needed).\n"
                                     "The same storage key reached another way (tpm2-abrmd in front of the\n"
                                     "same TPM) and an EK certified by a trusted root need no trust-tpm.\n"
                                     "A handle already pinned for this TPM is not changed.\n",
                                     {"--tcti", "--parent", nullptr},
                                     {"--yes", nullptr},
                                     0};

// The TPM these commands act on: --tcti (recorded, for the diagnosis of
// a TPM failure), else the one tpmkey uses.
TpmAddress tpm_address(const Parsed& p, const Config& config) {
    if (!p.has_value("--tcti"))
        return config.tpm;
    TpmAddress address = config.tpm.overridden_by(p.value("--tcti"));
    record_tpm_in_use(address);
    return address;
}

// Whether to go on: --yes, or the user's yes on the terminal.
bool confirmed(const Parsed& p, const std::string& question, const char* command) {
    if (p.has_flag("--yes"))
        return true;
    if (confirm_on_terminal(question))
        return true;
    std::cerr << "tpmkey " << command
              << ": not confirmed, nothing changed (no terminal to ask on? give --yes "
                 "once you are sure)\n";
    return false;
}

int cmd_forget_tpm(const Parsed& p) {
    const std::string id = tpm_address(p, load_config()).identity();
    KnownParents known = KnownParents::load();
    if (known.problem())
        throw UnusablePinFile(*known.problem());
    const std::string file = KnownParents::file_path().string();
    const std::vector<ParentPin> pins = known.pins_of(id);
    if (pins.empty()) {
        std::cout << "No pins for TPM '" << printable(id) << "' in " << printable(file) << ": nothing to forget.\n";
        return 0;
    }
    std::cout << "The pins of TPM '" << printable(id) << "' in " << printable(file) << ":\n";
    for (const ParentPin& pin : pins)
        std::cout << "  " << handle_text(pin.handle) << " " << pin.name_hex << "  "
                  << (pin.ek.empty() ? std::string("(not proven)")
                                     : (pin.certified() ? "certified EK " : "EK trusted on first use ") + pin.ek)
                  << "\n";
    std::cout << "Dropped, they no longer protect you: the next use trusts whatever TPM answers at this address, "
                 "with its own EK. A cleared TPM keeps its EK and needs no forget-tpm.\n";
    if (!confirmed(p, "Drop these pins?", "forget-tpm"))
        return 1;
    const std::vector<std::string> removed = known.forget(id);
    std::cout << "Removed the pins of TPM '" << printable(id) << "' from " << printable(file) << ":\n";
    for (const std::string& line : removed)
        std::cout << "  " << printable(line) << "\n";
    std::cout << "The next use of this TPM proves its storage key by its endorsement key and pins it anew.\n";
    return 0;
}

std::uint32_t parent_option(const Parsed& p) {
    if (!p.has_value("--parent"))
        return owner_hierarchy;
    const std::string text = p.value("--parent");
    char* end = nullptr;
    errno = 0;
    const unsigned long value = std::strtoul(text.c_str(), &end, 0);
    const auto handle = static_cast<std::uint32_t>(value);
    if (text.empty() || *end != '\0' || errno != 0 || value > 0xffffffffUL ||
        (handle != owner_hierarchy && (handle >> 24) != TPM2_HT_PERSISTENT))
        throw UsageError("--parent: '" + text + "': use 0x40000001 or a persistent handle (0x81xxxxxx)",
                         trust_tpm_spec.usage);
    return handle;
}

int cmd_trust_tpm(const Parsed& p) {
    const std::uint32_t handle = parent_option(p);
    const Config config = load_config();
    const TpmAddress address = tpm_address(p, config);
    const std::string& id = address.identity();
    KnownParents known = KnownParents::load();
    if (known.problem())
        throw UnusablePinFile(*known.problem());
    const std::string file = KnownParents::file_path().string();
    Tpm tpm(address);
    if (known.pin(id, handle)) {
        // Matches, or is refused as any use would be: forget-tpm is for that.
        ParentCheck check;
        (void)load_verified_parent(tpm, handle, known, &check);
        std::cout << "Already pinned for TPM '" << printable(id) << "': " << printable(parent_check_text(handle, check))
                  << ".\n";
        return 0;
    }
    // Shown before anything is pinned; the pin below is of the same EK.
    const EndorsementKey ek = prove_storage_key(tpm, handle);
    std::cout << "TPM '" << printable(id) << "': its storage key " << handle_text(handle)
              << " is proven by its endorsement key "
              << (ek.certified ? "(certified by " + ek.issuer + ")"
                               : "(trusted on first use: " + ek.why_not_certified + ")")
              << ", " << ek.pin << ".\n";
    for (const ParentPin& other : known.pinned_elsewhere(id, handle))
        std::cout << "  " << handle_text(handle) << " is pinned for TPM '" << printable(other.tpm) << "' as "
                  << other.name_hex << (other.ek.empty() ? std::string() : ", " + other.ek) << "\n";
    std::cout << "Pin it only if you know which TPM answers at '" << printable(id)
              << "': a relay in front of a pinned TPM would be trusted from now on.\n";
    if (!confirmed(p, "Pin this TPM's storage key?", "trust-tpm"))
        return 1;
    ParentCheck check;
    // Accepted only under the EK shown: one that changed since is refused as any other.
    (void)load_verified_parent(tpm, handle, known, &check,
                               ParentPolicy{.accept_clear = true, .accept_new_tpm_ek = ek.pin});
    if (!check.not_recorded.empty())
        throw Error("the storage key was not pinned: " + check.not_recorded);
    std::cout << "Pinned: " << printable(parent_check_text(handle, check)) << ".\n";
    return 0;
}

}  // namespace

const Command forget_tpm_command{&forget_tpm_spec, cmd_forget_tpm};
const Command trust_tpm_command{&trust_tpm_spec, cmd_trust_tpm};

}  // namespace tpmkey::cli
