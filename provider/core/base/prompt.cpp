#include "core/base/prompt.hpp"

#include "core/base/error.hpp"
#include "core/base/log.hpp"
#include "core/base/owned.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tpmkey {

namespace {

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
    // One line into a Secret; false on end of input or interruption.
    bool read_line(Secret& out) const {
        while (true) {
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

Secret read_pin_from_terminal(const std::string& prompt) {
    Terminal tty;
    tty.write_text(prompt);
    tty.echo_off();
    Secret pin;
    const bool ok = tty.read_line(pin);
    tty.write_text("\n");
    if (!ok)
        throw Error("no PIN entered");
    return pin;
}

bool confirm_on_terminal(const std::string& question) {
    try {
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
