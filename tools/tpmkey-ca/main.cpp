// tpmkey-ca: the attestation CA (docs/attestation.md). Runs where there is
// no TPM: it links only the core's offline groups. Usage errors exit 2;
// failures exit 1.
#include "ca.hpp"
#include "core/base/log.hpp"
#include "core/base/printable.hpp"
#include "tpmkey_version.hpp"
#include <exception>
#include <iostream>
namespace {
using namespace tpmkey;
using namespace tpmkey::cli;
constexpr const Command* commands[] = {
    &init_command, &challenge_command, &issue_ak_command, &verify_command,
    &revoke_command, &list_command, &crl_command,
};
constexpr Program ca_program{"tpmkey-ca", commands, version};
}  // namespace
int main(int argc, char** argv) {
    try {
        configure_logging();
        return run_command_line(ca_program, argc, argv);
    } catch (const UsageError& e) {
        return report_usage_error(ca_program, e);
    } catch (const std::exception& e) {
        std::cerr << "tpmkey-ca: " << printable(e.what()) << "\n";
        return 1;
    }
}
