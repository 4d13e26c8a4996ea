#include "core/pin/askpass.hpp"

#include "core/base/log.hpp"
#include "core/base/printable.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <span>
#include <string_view>
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

// While the child runs, SIGCHLD as waitpid() needs it. A host that ignores
// SIGCHLD (SIG_IGN, or SA_NOCLDWAIT) has the kernel reap its children as
// they exit, their status thrown away: waitpid() then fails with ECHILD,
// and a right PIN would read as cancelled. The exit status is the answer
// (a cancelled askpass may still print something), so it is kept rather
// than guessed from the pipe: SIGCHLD is set to SIG_DFL (which delivers
// nothing: its default action is to ignore the signal, but the exited
// child stays to be waited for), or SA_NOCLDWAIT is cleared from the host's
// handler, and the host's disposition is put back once the child is
// reaped. A child of the host's own that exits meanwhile stays a zombie
// (the host, ignoring SIGCHLD, will not wait for it): one process-table
// entry, against a lost answer. ssh-agent's PKCS#11 helper runs one
// request at a time; a host that changes SIGCHLD on another thread while a
// prompt is up may find its change undone.
class ChildStatusKept {
public:
    ChildStatusKept() {
        if (::sigaction(SIGCHLD, nullptr, &host_) != 0)
            return;
        const bool ignored = (host_.sa_flags & SA_SIGINFO) == 0 && host_.sa_handler == SIG_IGN;
        if (!ignored && (host_.sa_flags & SA_NOCLDWAIT) == 0)
            return;
        struct sigaction keep = host_;
        keep.sa_flags &= ~SA_NOCLDWAIT;
        if (ignored) {
            keep.sa_handler = SIG_DFL;
            keep.sa_flags &= ~SA_SIGINFO;
        }
        changed_ = ::sigaction(SIGCHLD, &keep, nullptr) == 0;
    }
    ~ChildStatusKept() {
        if (changed_)
            ::sigaction(SIGCHLD, &host_, nullptr);
    }
    ChildStatusKept(const ChildStatusKept&) = delete;
    ChildStatusKept& operator=(const ChildStatusKept&) = delete;

private:
    struct sigaction host_ {};
    bool changed_ = false;
};

std::string duration_text(std::chrono::milliseconds d) {
    return d.count() % 1000 == 0 ? std::to_string(d.count() / 1000) + " s" : std::to_string(d.count()) + " ms";
}

// Runs `program prompt`; its stdout into `out` when given. The exit status,
// or -1 when it did not run, did not exit normally, or was still running
// `timeout` after it started (then killed, with its process group).
int run(const std::string& program, const std::string& prompt, bool confirm, Secret* out,
        std::chrono::milliseconds timeout) {
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

    const ChildStatusKept status_kept;
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
        return -1;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    // Nothing of the host's but stderr: not the TPM device or its resource
    // manager's socket, not the agent's listening socket or its clients'
    // connections, whether or not the host opened them close-on-exec (glibc
    // closes them in the child with close_range, else one by one).
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    // Signals as a program started from a shell has them (not the host's
    // ignored SIGCHLD or SIGPIPE, nor its blocked ones), and a process group
    // of its own, so that a timeout ends the program and whatever it started.
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
    std::string arg0 = program, arg1 = prompt;
    char* argv[] = {arg0.data(), arg1.data(), nullptr};
    pid_t pid = -1;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    const int rc = ::posix_spawn(&pid, program.c_str(), &actions, &attr, argv, env.data());
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    if (rc != 0) {
        ::close(fds[0]);
        return -1;
    }
    const auto ms_left = [&] {
        // Rounded up: a truncated 0.3 ms would be a 0 ms poll, ending the
        // wait before the timeout.
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        return static_cast<int>(std::clamp<std::chrono::milliseconds::rep>(left.count(), 0, 60'000));
    };

    bool timed_out = false;
    std::array<std::uint8_t, 256> buf;
    std::size_t total = 0;
    for (;;) {
        pollfd readable{fds[0], POLLIN, 0};
        const int ready = ::poll(&readable, 1, ms_left());
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready == 0 && ms_left() > 0)
            continue;  // a wait cut to a minute
        if (ready == 0) {
            timed_out = true;
            break;
        }
        if (ready < 0)
            break;
        const ssize_t n = ::read(fds[0], buf.data(), buf.size());
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (ssize_t i = 0; i < n && out; ++i, ++total)
            if (total < max_answer)
                out->push_back(buf[static_cast<std::size_t>(i)]);
    }
    OPENSSL_cleanse(buf.data(), buf.size());
    ::close(fds[0]);
    if (timed_out)
        ::kill(-pid, SIGKILL);
    // Its stdout closed: it has exited, or is about to (waited for until
    // the deadline too).
    int status = 0;
    for (;;) {
        const pid_t w = ::waitpid(pid, &status, timed_out ? 0 : WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        if (ms_left() == 0) {
            timed_out = true;
            ::kill(-pid, SIGKILL);
            continue;
        }
        ::poll(nullptr, 0, std::min(ms_left(), 10));
    }
    if (timed_out) {
        log_error("the askpass program " + program + " gave no answer within " + duration_text(timeout) +
                  ": stopped it, taken as cancelled (docs/troubleshooting.md)");
        return -1;
    }
    if (total > max_answer) {
        // Not cut to fit and sent: a wrong PIN would cost a try.
        log_error("the askpass program " + program + " answered more than " + std::to_string(max_answer) +
                  " bytes: taken as cancelled (docs/troubleshooting.md)");
        return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Where a program named without a '/' is, as OpenSSH's execlp() finds it:
// the first executable regular file of that name in a directory of $PATH.
// Only absolute directories: an empty or relative entry would run a file
// of that name from wherever the host happens to be (a cloned repository,
// for the module inside ssh). Empty if none.
std::string find_in_path(const std::string& name) {
    const char* path = std::getenv("PATH");
    const std::string dirs = path ? path : "/usr/bin:/bin";
    for (std::size_t start = 0; start <= dirs.size();) {
        const std::size_t colon = std::min(dirs.find(':', start), dirs.size());
        const std::string dir = dirs.substr(start, colon - start);
        start = colon + 1;
        if (dir.empty() || dir.front() != '/')
            continue;
        const std::string candidate = dir + "/" + name;
        struct stat st {};
        if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0)
            return candidate;
    }
    return "";
}

// The answer up to its first CR or LF, as OpenSSH's ssh_askpass() takes it
// (readpass.c: buf[strcspn(buf, "\r\n")] = '\0'): a program that prints
// more lines (a PIN, then a warning of its own) gives its first line, not
// all of them as one wrong PIN, which would cost a try at the TPM.
Secret first_line(const Secret& answer) {
    const std::span<const std::uint8_t> bytes = answer.bytes();
    const auto end = std::find_if(bytes.begin(), bytes.end(), [](std::uint8_t b) { return b == '\r' || b == '\n'; });
    return Secret(bytes.first(static_cast<std::size_t>(end - bytes.begin())));
}

}  // namespace

bool running_in_ssh_agent() {
    // ssh-agent loads a PKCS#11 module in its helper, started with the
    // agent's environment; any other program loads it in its own process.
    return std::string_view(program_invocation_short_name) == "ssh-pkcs11-helper";
}

Askpass find_askpass() {
    const bool agent = running_in_ssh_agent();
    const std::string environment =
        agent ? "the agent's environment" : "the environment of " + printable(program_invocation_short_name);
    const char* require = std::getenv("SSH_ASKPASS_REQUIRE");
    if (equals_ignoring_case(require, "never"))
        return {"", "SSH_ASKPASS_REQUIRE=never in " + environment};
    if (!equals_ignoring_case(require, "force") && !set("DISPLAY") && !set("WAYLAND_DISPLAY"))
        return {"", "no DISPLAY or WAYLAND_DISPLAY in " + environment + " (" + (agent ? "start the agent" : "run it") +
                        " in your desktop session, or with SSH_ASKPASS_REQUIRE=force and SSH_ASKPASS set)"};
    const char* askpass = std::getenv("SSH_ASKPASS");  // once: a second getenv() is not known to be non-null
    std::string program = askpass != nullptr && *askpass != '\0' ? askpass : default_askpass;
    if (program.find('/') == std::string::npos) {
        const std::string found = find_in_path(program);
        if (found.empty())
            return {"", "no askpass program " + program + " in a directory of PATH (SSH_ASKPASS)"};
        program = found;
    }
    struct stat st {};
    if (::stat(program.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || ::access(program.c_str(), X_OK) != 0)
        return {"", "no askpass program " + program +
                        (set("SSH_ASKPASS") ? " (SSH_ASKPASS)" : " (install ssh-askpass, or set SSH_ASKPASS)")};
    return {program, ""};
}

std::optional<Secret> askpass_secret(const Askpass& askpass, const std::string& prompt,
                                     std::chrono::milliseconds timeout) {
    if (askpass.program.empty())
        return std::nullopt;
    Secret answer;
    if (run(askpass.program, prompt, false, &answer, timeout) != 0)
        return std::nullopt;
    return first_line(answer);
}

bool askpass_confirm(const Askpass& askpass, const std::string& prompt, std::chrono::milliseconds timeout) {
    if (askpass.program.empty())
        return false;
    // As OpenSSH's ask_permission(): exit 0, and an answer that is empty or
    // "yes" (a program that prints "no" and exits 0 has not said yes).
    Secret answer;
    if (run(askpass.program, prompt, true, &answer, timeout) != 0)
        return false;
    const Secret line = first_line(answer);
    const std::string text(reinterpret_cast<const char*>(line.data()), line.size());
    return text.empty() || equals_ignoring_case(text.c_str(), "yes");
}

}  // namespace tpmkey
