// tpmkey: look after TPM keys. Usage errors exit 2; failures exit 1.
//
// This file: the command table, the one list of the commands ('tpmkey
// --help' is made from it; ../command_line parses it); the commands are in
// key_commands.cpp, doctor.cpp, ssh_config.cpp, policy.cpp, setup.cpp, bench.cpp, forget_tpm.cpp, attest_enroll.cpp,
// attest_key.cpp, enroll.cpp and ssh_cert.cpp.

#include "cli.hpp"
#include "core/files/config.hpp"
#include "core/pin/prompt.hpp"
#include "core/tpm/diagnosis.hpp"
#include "tpmkey_version.hpp"

#include <exception>
#include <string>

namespace {

using namespace tpmkey;
using namespace tpmkey::cli;

constexpr const Command* commands[] = {
    &list_command,       &pubkey_command,     &info_command,          &passwd_command,          &drop_comment_command,
    &doctor_command,     &ssh_config_command, &policy_command,        &setup_command,           &bench_command,
    &forget_tpm_command, &trust_tpm_command,  &attest_enroll_command, &attest_activate_command, &attest_key_command,
    &enroll_command,     &ssh_cert_command,
};

constexpr Program tpmkey_program{"tpmkey", commands, version};

// A TPM failure, diagnosed for the TPM the command used: the one it
// recorded (--tcti), else the configured TPM address.
std::string explain_tpm_failure(const std::exception& e) {
    const auto* tpm_error = dynamic_cast<const TpmError*>(&e);
    if (!tpm_error)
        return "";
    TpmAddress address;
    if (tpm_in_use()) {
        address = *tpm_in_use();
    } else {
        try {
            address = load_config().tpm;
        } catch (const std::exception&) {
        }
    }
    return diagnosis_line(diagnose(*tpm_error, address));
}

}  // namespace

// After Ctrl-C at a PIN prompt, unwound (the TPM's objects flushed, the
// echo back on) and then dead of the signal, as without the prompt.
int main(int argc, char** argv) {
    return exit_after_interruption(run_program(tpmkey_program, argc, argv, explain_tpm_failure));
}
