// What the tpmkey-ca commands share: their table entries (main.cpp lists
// them) and what the CA's files have in common.
#pragma once

#include "command_line.hpp"

namespace tpmkey::cli {

extern const Command verify_command;  // verify.cpp

}  // namespace tpmkey::cli
