// What a login costs in TPM time: the commands it sends, each priced with
// a per-command time, summed. One model for two users: `tpmkey bench`
// prices them with the medians it measured on this machine's TPM, and
// tools/bench prices the sequences it counted (pcap TCTI) with the
// published figures of real chips (docs/performance.md). A model, not a
// measurement: transport, the host's own work and commands without a time
// are not in the sum (they are listed instead).
#pragma once

#include "core/tpm/tpm_keys.hpp"

#include <map>
#include <string>
#include <vector>

namespace tpmkey {

// Milliseconds per command, by the name count-tpm-commands gives it
// ("CreatePrimary"), except TPM2_Sign, whose time depends on the key:
// "Sign ECDSA P-256", "Sign RSA 2048" (priced_name(), which prices
// tpm2-pkcs11's RSA signature, a TPM2_RSA_Decrypt, as the latter).
using CommandTimes = std::map<std::string, double>;

// The name `command` of a login with a `key` key is priced under.
std::string priced_name(const std::string& command, KeyAlgorithm key);

struct LoginCost {
    double ms = 0;                      // the sum over the commands with a time
    std::vector<std::string> unpriced;  // the commands without one, in order
};
LoginCost login_cost(const std::vector<std::string>& commands, KeyAlgorithm key, const CommandTimes& times);

// A real chip's published figures for the commands whose time a public-key
// operation sets (the others have no published figure).
struct ReferenceChip {
    std::string name;    // "Infineon OPTIGA SLB9670 (SPI, 43 MHz)"
    std::string source;  // where the figures are published
    CommandTimes times;
};
std::vector<ReferenceChip> reference_chips();

// Where a login's parent comes from: TPM2_CreatePrimary under the owner
// hierarchy (0x40000001), or a persistent storage key (0x81000001 after
// `tpmkey setup`), which only needs reading.
enum class ParentKind { created, persistent };

// The commands tpmkey-pkcs11.so sends for one login (C_Initialize,
// C_Login for a key with a PIN, C_SignInit, C_Sign, C_Finalize: an ssh
// login), as count-tpm-commands names them, for a TCTI with or without a
// resource manager. Written down from the counts of tools/bench/run, and
// compared with a count of the module's traffic by
// test/e2e/tools/bench.sh, so a change in the module shows up there.
std::vector<std::string> login_commands(bool resource_manager, bool pin, ParentKind parent);

}  // namespace tpmkey
