#include "core/pin/prompt.hpp"

#include "core/base/error.hpp"
#include "core/base/log.hpp"
#include "core/base/owned.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <cstring>

namespace tpmkey {

namespace {

// The signal that ended a prompt (0: none), set by the handler the prompt
// holds while it waits.
volatile std::sig_atomic_t prompt_signal = 0;
extern "C" void on_prompt_signal(int sig) { prompt_signal = sig; }

constexpr std::array<int, 4> terminating_signals = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

// While it lives, the terminating signals only set prompt_signal (and
// interrupt a blocked read: no SA_RESTART), so that the prompt returns and
// the program unwinds instead of dying with the echo off and TPM objects
// loaded. A signal the program ignores stays ignored; the old handlers
// come back however the scope is left.
class SignalsCaught {
public:
    SignalsCaught() {
        struct sigaction sa {};
        sa.sa_handler = on_prompt_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = 0;
        for (std::size_t i = 0; i < terminating_signals.size(); ++i) {
            installed_[i] = ::sigaction(terminating_signals[i], nullptr, &old_[i]) == 0 &&
                            old_[i].sa_handler != SIG_IGN && ::sigaction(terminating_signals[i], &sa, nullptr) == 0;
        }
    }
    ~SignalsCaught() {
        for (std::size_t i = 0; i < terminating_signals.size(); ++i)
            if (installed_[i])
                (void)::sigaction(terminating_signals[i], &old_[i], nullptr);
    }
    SignalsCaught(const SignalsCaught&) = delete;
    SignalsCaught& operator=(const SignalsCaught&) = delete;

private:
    std::array<struct sigaction, terminating_signals.size()> old_{};
    std::array<bool, terminating_signals.size()> installed_{};
};

class Terminal {
public:
    Terminal() : tty_(::open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY)), fd_(tty_.get()) {
        if (!tty_)
            throw Error("no terminal to ask on");
    }
    ~Terminal() {
        if (echo_off_)
            (void)::tcsetattr(fd_, TCSAFLUSH, &saved_);
    }
    Terminal(const Terminal&) = delete;
    Terminal& operator=(const Terminal&) = delete;

    void write_text(const std::string& text) const { (void)!::write(fd_, text.data(), text.size()); }
    void echo_off() {
        if (::tcgetattr(fd_, &saved_) != 0)
            return;
        termios quiet = saved_;
        quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO | ECHONL);
        quiet.c_lflag |= ICANON | ISIG;
        echo_off_ = ::tcsetattr(fd_, TCSAFLUSH, &quiet) == 0;
    }
    // One line into a Secret; false on end of input or interruption
    // (prompt_signal says which).
    bool read_line(Secret& out) const {
        while (true) {
            if (prompt_signal != 0)
                return false;
            char c = 0;
            const ssize_t n = ::read(fd_, &c, 1);
            if (n < 0 && errno == EINTR)
                return false;  // Ctrl-C: give up rather than loop
            if (n <= 0)
                return false;
            if (c == '\n' || c == '\r')
                return true;
            out.push_back(static_cast<std::uint8_t>(c));
            c = 0;
        }
    }

private:
    UniqueFd tty_;
    int fd_;
    termios saved_{};
    bool echo_off_ = false;
};

}  // namespace

Interrupted::Interrupted(int signal)
    : Error(signal == SIGINT ? "interrupted (Ctrl-C) at the prompt"
                             : "interrupted (" + std::string(::strsignal(signal)) + ") at the prompt"),
      signal_(signal) {}

Secret read_pin_from_terminal(const std::string& prompt) {
    // Declared first: the terminal's echo is back on before the handlers go.
    const SignalsCaught signals;
    Terminal tty;
    tty.write_text(prompt);
    tty.echo_off();
    Secret pin;
    const bool ok = tty.read_line(pin);
    tty.write_text("\n");
    if (prompt_signal != 0)
        throw Interrupted(prompt_signal);
    if (!ok)
        throw Error("no PIN entered");
    return pin;
}

int exit_after_interruption(int status) {
    const int sig = prompt_signal;
    if (sig == 0)
        return status;
    // As if the default action had run at the prompt: the shell (and a
    // script's `wait`) sees the signal.
    struct sigaction sa {};
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    (void)::sigaction(sig, &sa, nullptr);
    sigset_t unblock;
    sigemptyset(&unblock);
    sigaddset(&unblock, sig);
    (void)::sigprocmask(SIG_UNBLOCK, &unblock, nullptr);
    (void)::raise(sig);
    return 128 + sig;  // a signal whose default is not to end the process
}

bool confirm_on_terminal(const std::string& question) {
    try {
        const SignalsCaught signals;
        Terminal tty;
        tty.write_text(question + " (y/n) ");
        Secret answer;
        if (!tty.read_line(answer) || answer.empty())
            return false;
        return answer.data()[0] == 'y' || answer.data()[0] == 'Y';
    } catch (const Error&) {
        return false;
    }
}

Secret read_pin_file(const std::string& path) {
    // Blocking on purpose: --pin-file <(pass show ...) is a pipe.
    const UniqueFd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!file)
        throw Error(path + ": cannot read the PIN file: " + std::strerror(errno));
    const int fd = file.get();
    // Only a regular file has modes worth judging (a pipe is private).
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        if (st.st_mode & S_IWOTH)
            throw Error(path +
                        ": the PIN file is writable by everyone, who could have put a PIN of theirs in it; "
                        "refusing it (chmod o-w " +
                        path + ")");
        if (st.st_mode & S_IROTH)
            log_error("warning: " + path + ": the PIN file is readable by everyone (chmod o-r " + path + ")");
    }
    Secret pin;
    bool line_done = false;
    std::size_t total = 0;
    while (!line_done) {
        char c = 0;
        const ssize_t n = ::read(fd, &c, 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (++total > 1024)
            throw Error(path + ": the PIN file's first line is too long");
        if (c == '\n')
            line_done = true;
        else
            pin.push_back(static_cast<std::uint8_t>(c));
        c = 0;
    }
    if (!pin.empty() && pin.data()[pin.size() - 1] == '\r')
        pin.pop_back();
    return pin;
}

}  // namespace tpmkey
