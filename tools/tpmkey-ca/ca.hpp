// What the commands of tpmkey-ca share: their entries in main.cpp's table
// (one line per file), the CA directory of --ca, and writing a result to
// -o FILE or standard output.
#pragma once

#include "ca_directory.hpp"
#include "command_line.hpp"

#include <sys/types.h>
#include <string_view>

namespace tpmkey::cli {

extern const Command init_command, challenge_command, issue_ak_command;  // enrol.cpp
extern const Command verify_command;                                     // verify.cpp
extern const Command verify_sk_command;                                  // verify.cpp
extern const Command revoke_command, list_command, crl_command;          // inventory.cpp
extern const Command reinstate_command;                                  // reinstate.cpp
extern const Command webhook_command;                                    // webhook.cpp
extern const Command rotate_command, reissue_ak_command;                 // rotation.cpp

// --ca DIR, else default_ca_directory().
CaDirectory ca_directory_of(const Parsed& p);

// `contents` to -o FILE (atomically, `mode`), else to standard output.
void write_output(const Parsed& p, std::string_view contents, mode_t mode);

}  // namespace tpmkey::cli
