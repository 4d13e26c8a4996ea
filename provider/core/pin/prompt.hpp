// Asking a person for a PIN on the terminal, without echo.
#pragma once

#include "core/base/error.hpp"
#include "core/base/secret.hpp"

#include <string>

namespace tpmkey {

// A prompt ended by Ctrl-C (SIGINT), or SIGTERM, SIGHUP, SIGQUIT: thrown
// so that the program unwinds (the terminal's echo back on, the TPM
// objects it loaded flushed: a TPM without a resource manager keeps them
// after the process is gone), then dies of the signal
// (exit_after_interruption).
class Interrupted : public Error {
public:
    explicit Interrupted(int signal);
    int signal() const noexcept { return signal_; }

private:
    int signal_;
};

// Reads one line from /dev/tty with echo off, after printing `prompt` there.
// Throws Error when there is no terminal or on Ctrl-D, Interrupted on a
// terminating signal (caught only while it waits); echo is restored in
// every case.
Secret read_pin_from_terminal(const std::string& prompt);

// For a program's main(), once everything is unwound: after a prompt was
// Interrupted, dies of that signal as it would have without the prompt's
// handler (the shell sees it: 130 for Ctrl-C); otherwise returns `status`.
int exit_after_interruption(int status);

// Asks a yes/no question on /dev/tty; false when there is no terminal.
bool confirm_on_terminal(const std::string& question);

// The first line of a file (without its line break), as a PIN.
Secret read_pin_file(const std::string& path);

}  // namespace tpmkey
