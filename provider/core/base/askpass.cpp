#include "core/base/askpass.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

extern char** environ;

namespace tpmkey {

namespace {

constexpr const char* default_askpass = "/usr/bin/ssh-askpass";  // OpenSSH's _PATH_SSH_ASKPASS_DEFAULT on Debian
constexpr std::size_t max_answer = 1024;

bool set(const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0';
}

bool equals_ignoring_case(const char* a, const char* b) { return a != nullptr && ::strcasecmp(a, b) == 0; }

// Runs `program prompt`; its stdout into `out` when given. The exit status,
// or -1 when it did not run or exit normally.
int run(const std::string& program, const std::string& prompt, bool confirm, Secret* out) {
    // The environment as it is, with SSH_ASKPASS_PROMPT=confirm for a
    // confirmation and without it for a PIN.
    std::vector<char*> env;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e)
        if (std::strncmp(*e, "SSH_ASKPASS_PROMPT=", 19) != 0)
            env.push_back(*e);
    std::string confirm_var = "SSH_ASKPASS_PROMPT=confirm";
    if (confirm)
        env.push_back(confirm_var.data());
    env.push_back(nullptr);

    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
        return -1;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    std::string arg0 = program, arg1 = prompt;
    char* argv[] = {arg0.data(), arg1.data(), nullptr};
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, program.c_str(), &actions, nullptr, argv, env.data());
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    if (rc != 0) {
        ::close(fds[0]);
        return -1;
    }
    std::array<std::uint8_t, 256> buf;
    std::size_t total = 0;
    for (;;) {
        const ssize_t n = ::read(fds[0], buf.data(), buf.size());
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (ssize_t i = 0; i < n && out && total < max_answer; ++i, ++total)
            out->push_back(buf[static_cast<std::size_t>(i)]);
    }
    OPENSSL_cleanse(buf.data(), buf.size());
    ::close(fds[0]);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

Askpass find_askpass() {
    const char* require = std::getenv("SSH_ASKPASS_REQUIRE");
    if (equals_ignoring_case(require, "never"))
        return {"", "SSH_ASKPASS_REQUIRE=never in the agent's environment"};
    if (!equals_ignoring_case(require, "force") && !set("DISPLAY") && !set("WAYLAND_DISPLAY"))
        return {"", "no DISPLAY or WAYLAND_DISPLAY in the agent's environment (start the agent in your desktop "
                    "session, or with SSH_ASKPASS_REQUIRE=force and SSH_ASKPASS set)"};
    const std::string program = set("SSH_ASKPASS") ? std::getenv("SSH_ASKPASS") : default_askpass;
    struct stat st {};
    if (::stat(program.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || ::access(program.c_str(), X_OK) != 0)
        return {"", "no askpass program " + program +
                        (set("SSH_ASKPASS") ? " (SSH_ASKPASS)" : " (install ssh-askpass, or set SSH_ASKPASS)")};
    return {program, ""};
}

std::optional<Secret> askpass_secret(const Askpass& askpass, const std::string& prompt) {
    if (askpass.program.empty())
        return std::nullopt;
    Secret answer;
    if (run(askpass.program, prompt, false, &answer) != 0)
        return std::nullopt;
    while (!answer.empty() && (answer.data()[answer.size() - 1] == '\n' || answer.data()[answer.size() - 1] == '\r'))
        answer.pop_back();
    return answer;
}

bool askpass_confirm(const Askpass& askpass, const std::string& prompt) {
    return !askpass.program.empty() && run(askpass.program, prompt, true, nullptr) == 0;
}

}  // namespace tpmkey
