// tpmkey forget-tpm: drops the pins of a TPM (known_parents.hpp) on
// purpose, after the user replaced it or its storage key, so that the next
// use proves and pins the new one. Every refusal of an unverified parent
// names this command.

#include "cli.hpp"
#include "core/base/printable.hpp"
#include "core/files/config.hpp"
#include "core/tpm/tcti.hpp"
#include "core/trust/known_parents.hpp"

#include <iostream>
#include <string>
#include <vector>

namespace tpmkey::cli {

namespace {

constexpr CommandSpec forget_tpm_spec{
    "forget-tpm",
    "drop the pinned storage keys and EK of a TPM",
    "tpmkey forget-tpm [--tcti TCTI]",
    "Removes the lines of one TPM from the pinned storage keys\n"
    "($XDG_CONFIG_HOME/tpmkey/known_parents): their names and the endorsement\n"
    "key (EK) that proved them. Do this only when you know why they no longer\n"
    "match: you replaced the TPM, or cleared it in a way tpmkey cannot\n"
    "recognise. The next use (tpmkey-keygen, tpmkey passwd, the module) proves\n"
    "the TPM's storage key by its EK again and pins it anew. A cleared TPM with\n"
    "the same EK needs no forget-tpm: tpmkey recognises it.\n"
    "The TPM is the one tpmkey uses (TPMKEY_TCTI, else the config file's tcti,\n"
    "else this machine's), or --tcti TCTI. Keys are not touched: keys made\n"
    "under a forgotten storage key that is gone cannot load anyway.\n",
    {"--tcti", nullptr}, {nullptr}, 0};

int cmd_forget_tpm(const Parsed& p) {
    const std::string tcti = p.has_value("--tcti") ? p.value("--tcti") : load_config().tcti;
    const std::string id = Tcti(tcti).identity();
    KnownParents known = KnownParents::load();
    const std::string file = KnownParents::file_path().string();
    const std::vector<std::string> removed = known.forget(id);
    if (removed.empty()) {
        std::cout << "No pins for TPM '" << printable(id) << "' in " << printable(file) << ": nothing to forget.\n";
        return 0;
    }
    std::cout << "Removed the pins of TPM '" << printable(id) << "' from " << printable(file) << ":\n";
    for (const std::string& line : removed)
        std::cout << "  " << printable(line) << "\n";
    std::cout << "The next use of this TPM proves its storage key by its endorsement key and pins it anew.\n";
    return 0;
}

}  // namespace

const Command forget_tpm_command{&forget_tpm_spec, cmd_forget_tpm};

}  // namespace tpmkey::cli
