// tpmkey-ca: the attestation CA (docs/attestation.md). Runs where there is
// no TPM: it links only the core's offline groups. Usage errors exit 2;
// failures exit 1.
#include "ca.hpp"
#include "tpmkey_version.hpp"
namespace {
using namespace tpmkey;
using namespace tpmkey::cli;
constexpr const Command* commands[] = {
    &init_command,      &challenge_command, &issue_ak_command,  &verify_command,
    &verify_sk_command, &revoke_command,    &reinstate_command, &list_command,
    &crl_command,       &webhook_command,   &rotate_command,    &reissue_ak_command,
};
constexpr Program ca_program{"tpmkey-ca", commands, version};
}  // namespace
int main(int argc, char** argv) { return run_program(ca_program, argc, argv); }
