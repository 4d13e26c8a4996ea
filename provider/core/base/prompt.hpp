// Asking a person for a PIN on the terminal, without echo.
#pragma once

#include "core/base/secret.hpp"

#include <string>

namespace tpmkey {

// Reads one line from /dev/tty with echo off, after printing `prompt` there.
// Throws Error when there is no terminal or on Ctrl-C/Ctrl-D; echo is
// restored in every case.
Secret read_pin_from_terminal(const std::string& prompt);

// Asks a yes/no question on /dev/tty; false when there is no terminal.
bool confirm_on_terminal(const std::string& question);

// The first line of a file (without its line break), as a PIN.
Secret read_pin_file(const std::string& path);

}  // namespace tpmkey
