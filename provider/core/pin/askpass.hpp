// A PIN, or a yes, from the user where there is no terminal (ssh-agent's
// helper), through the askpass program as OpenSSH runs it (readpass.c,
// read_passphrase and ask_permission; docs/design.md, "PINs, keys and the
// TPM's lockout").
#pragma once

#include "core/base/secret.hpp"

#include <chrono>
#include <optional>
#include <string>

namespace tpmkey {

struct Askpass {
    std::string program;  // empty: none can be shown
    std::string why_not;  // then: why, and what to do
};

// The module runs inside ssh-agent (its PKCS#11 helper, which has the
// agent's environment), rather than in a program that loaded it itself
// (ssh, pkcs11-tool, a browser): messages say whose environment counts.
bool running_in_ssh_agent();

// From the environment, as OpenSSH decides: SSH_ASKPASS_REQUIRE=never: none;
// =force: always; otherwise only with DISPLAY or WAYLAND_DISPLAY set. The
// program is $SSH_ASKPASS, else /usr/bin/ssh-askpass, and must be an
// executable regular file.
Askpass find_askpass();

// How long a prompt may stay unanswered: time for a person, not forever (a
// hung askpass would hang ssh-agent with it).
constexpr std::chrono::milliseconds askpass_timeout{std::chrono::seconds(120)};

// Runs the program with `prompt` as its one argument (no shell), stdin
// /dev/null, stdout a pipe read into a Secret (at most 1 KiB; cut at its
// first CR or LF, as OpenSSH does), stderr the host's, no other file descriptor of the host
// (the TPM's, the agent's sockets), every signal at its default, in a
// process group of its own. Nothing when it exits other than 0 (the user
// cancelled) or cannot be run; nor when it has not exited `timeout` after
// it started: then its process group is killed, reaped, and the log says
// so. Also where the host ignores SIGCHLD (see run() in askpass.cpp).
std::optional<Secret> askpass_secret(const Askpass& askpass, const std::string& prompt,
                                     std::chrono::milliseconds timeout = askpass_timeout);

// The same with SSH_ASKPASS_PROMPT=confirm in its environment: true only
// when it exits 0 in time.
bool askpass_confirm(const Askpass& askpass, const std::string& prompt,
                     std::chrono::milliseconds timeout = askpass_timeout);

}  // namespace tpmkey
