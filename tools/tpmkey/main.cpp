// tpmkey: look after TPM keys. Usage errors exit 2; failures exit 1.
//
// This file: the command table, the one list of the commands ('tpmkey
// --help' is made from it; ../command_line parses it); the commands are in
// key_commands.cpp, doctor.cpp, ssh_config.cpp, policy.cpp, setup.cpp, bench.cpp, forget_tpm.cpp, attest_enroll.cpp and attest_key.cpp.

#include "cli.hpp"
#include "core/files/config.hpp"
#include "core/tpm/diagnosis.hpp"
#include "core/base/log.hpp"
#include "core/base/printable.hpp"
#include "tpmkey_version.hpp"

#include <exception>
#include <iostream>
#include <string>
#include <vector>

namespace {

using namespace tpmkey;
using namespace tpmkey::cli;

constexpr const Command* commands[] = {
    &list_command,   &pubkey_command, &info_command,
    &passwd_command, &drop_comment_command, &doctor_command, &ssh_config_command, &policy_command,
    &setup_command, &bench_command, &forget_tpm_command, &trust_tpm_command,
    &attest_enroll_command, &attest_activate_command, &attest_key_command,
};

constexpr Program tpmkey_program{"tpmkey", commands, version};

}  // namespace

int main(int argc, char** argv) {
    try {
        configure_logging();
        return run_command_line(tpmkey_program, argc, argv);
    } catch (const UsageError& e) {
        return report_usage_error(tpmkey_program, e);
    } catch (const TpmError& e) {
        // The commands reach the TPM through the configured address.
        TpmAddress address;
        try {
            address = load_config().tpm;
        } catch (const std::exception&) {
        }
        std::cerr << "tpmkey: " << diagnosis_line(diagnose(e, address)) << "\n";
        return 1;
    } catch (const std::exception& e) {
        std::cerr << "tpmkey: " << printable(e.what()) << "\n";  // file names in it
        return 1;
    }
}
