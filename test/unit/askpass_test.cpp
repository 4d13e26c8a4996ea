// The askpass program as the module runs it inside its host (ssh-agent's
// PKCS#11 helper): none of the host's file descriptors, a bounded wait, the
// answer kept where the host ignores SIGCHLD (core/pin/askpass.hpp).
#include "core/pin/askpass.hpp"

#include "temp_dir.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

namespace fs = std::filesystem;
using namespace tpmkey;

namespace {

Askpass script(const fs::path& dir, const std::string& body) {
    const fs::path path = dir / "askpass";
    std::ofstream(path) << "#!/bin/sh\n" << body;
    fs::permissions(path, fs::perms::owner_all);
    return {path.string(), ""};
}

std::string read_all(const fs::path& p) {
    std::ifstream in(p);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool gone(pid_t pid) {
    // Gone, or a zombie left to whoever reaps orphans: not running.
    for (int i = 0; i < 200; ++i) {
        std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
        std::string line;
        if (!std::getline(stat, line))
            return true;
        const auto paren = line.rfind(')');
        if (paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z')
            return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
}

}  // namespace

TEST_CASE("askpass: the program gets stdin, stdout and stderr, none of the host's other file descriptors") {
    test::TempDir dir;
    const fs::path listing = dir.path / "fds";
    // The shell's own descriptors, each with what it points at.
    const Askpass askpass = script(dir.path, "ls -l /proc/$$/fd > '" + listing.string() + "'\necho 1234\n");
    // What a host holds: a device-like file, a listening socket, a
    // connection; opened as a library might (not close-on-exec).
    const fs::path device = dir.path / "tpm0";
    std::ofstream(device).close();
    const int file = ::open(device.c_str(), O_RDWR);
    REQUIRE(file >= 0);
    int pair[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair) == 0);
    const int listening = ::socket(AF_UNIX, SOCK_STREAM, 0);
    REQUIRE(listening >= 0);
    const int high = ::dup2(file, 200);
    REQUIRE(high == 200);

    const std::optional<Secret> pin = askpass_secret(askpass, "Enter PIN for 'work': ");
    for (const int fd : {file, pair[0], pair[1], listening, high})
        ::close(fd);
    REQUIRE(pin);
    CHECK(*pin == Secret("1234"));

    // The shell's standard streams, and its copies of them while it
    // redirects (dash keeps them at 10 and up), and the script it reads.
    std::map<int, std::string> seen;
    std::istringstream lines(read_all(listing));
    for (std::string line; std::getline(lines, line);) {
        const auto arrow = line.find(" -> ");
        if (arrow == std::string::npos)
            continue;  // "total 0"
        const auto space = line.rfind(' ', arrow - 1);
        seen[std::stoi(line.substr(space + 1, arrow - space - 1))] = line.substr(arrow + 4);
    }
    const std::string stderr_target = seen.count(2) == 1 ? seen.at(2) : "";
    for (const auto& [fd, target] : seen) {
        INFO(fd << " -> " << target);
        CHECK((fd <= 2 || target == askpass.program || target == "/dev/null" || target.rfind("pipe:", 0) == 0 ||
               target == stderr_target));
        CHECK(target != device.string());
        CHECK(target.rfind("socket:", 0) != 0);
    }
    CHECK(seen.count(0) == 1);
    CHECK(seen.count(1) == 1);
    CHECK(seen.count(2) == 1);
    CHECK(seen.count(200) == 0);
}

TEST_CASE("askpass: a program that does not answer is stopped after the timeout, with what it started") {
    test::TempDir dir;
    const fs::path pids = dir.path / "pids";
    // A shell that started a sleeper and waits for it: both are stopped.
    const Askpass askpass = script(dir.path, "sleep 1000 &\necho $$ $! > '" + pids.string() + "'\nwait\necho 1234\n");
    const auto start = std::chrono::steady_clock::now();
    const std::optional<Secret> pin = askpass_secret(askpass, "Enter PIN for 'work': ", std::chrono::milliseconds(500));
    const auto took = std::chrono::steady_clock::now() - start;
    CHECK_FALSE(pin);
    CHECK(took >= std::chrono::milliseconds(500));
    CHECK(took < std::chrono::seconds(10));
    std::istringstream in(read_all(pids));
    pid_t shell = 0, sleeper = 0;
    in >> shell >> sleeper;
    REQUIRE(shell > 0);
    REQUIRE(sleeper > 0);
    // The shell, our child, is reaped: no such process (not even a zombie).
    CHECK((::kill(shell, 0) != 0 && errno == ESRCH));
    CHECK(gone(sleeper));

    // A confirmation the same: no answer in time is no.
    const Askpass silent = script(dir.path, "exec sleep 1000\n");
    CHECK_FALSE(askpass_confirm(silent, "Allow?", std::chrono::milliseconds(300)));
    // An answer in time still counts.
    const Askpass quick = script(dir.path, "sleep 0.1; echo 1234\n");
    const std::optional<Secret> given = askpass_secret(quick, "Enter PIN: ", std::chrono::seconds(20));
    REQUIRE(given);
    CHECK(*given == Secret("1234"));
}

TEST_CASE("askpass: the PIN comes back where the host ignores SIGCHLD, and the host's disposition stays") {
    test::TempDir dir;
    const Askpass askpass = script(dir.path, "if [ \"$SSH_ASKPASS_PROMPT\" = confirm ]; then exit 0; fi\n"
                                             "case \"$1\" in *work*) echo 1234 ;; *) echo wrong; exit 1 ;; esac\n");
    struct sigaction ignore {
    }, host{};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    REQUIRE(::sigaction(SIGCHLD, &ignore, &host) == 0);

    const std::optional<Secret> pin = askpass_secret(askpass, "Enter PIN for 'work': ");
    const std::optional<Secret> cancelled = askpass_secret(askpass, "Enter PIN for 'zeta': ");
    const bool yes = askpass_confirm(askpass, "Allow?");
    struct sigaction after {};
    ::sigaction(SIGCHLD, &host, &after);

    REQUIRE(pin);
    CHECK(*pin == Secret("1234"));
    CHECK_FALSE(cancelled);  // exit 1: cancelled, whatever it printed
    CHECK(yes);
    CHECK(after.sa_handler == SIG_IGN);
}

namespace {

// Sets an environment variable for one test, and puts it back.
class ScopedEnv {
public:
    ScopedEnv(const char* name, const char* value) : name_(name) {
        if (const char* old = std::getenv(name))
            old_ = old;
        ::setenv(name, value, 1);
    }
    ~ScopedEnv() {
        if (old_)
            ::setenv(name_, old_->c_str(), 1);
        else
            ::unsetenv(name_);
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
    const char* name_;
    std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("askpass: a program named without a '/' is found in PATH's absolute directories, never in the current one") {
    test::TempDir dir;
    const fs::path bin = dir.path / "bin";
    fs::create_directory(bin);
    const Askpass in_bin = script(bin, "echo 1234\n");
    (void)script(dir.path, "echo stolen\n");  // ./askpass, where the host happens to be
    const fs::path before = fs::current_path();
    fs::current_path(dir.path);
    ScopedEnv require("SSH_ASKPASS_REQUIRE", "force");
    ScopedEnv name("SSH_ASKPASS", "askpass");
    SECTION("in a directory of PATH") {
        ScopedEnv path("PATH", (std::string(".:relative::") + bin.string()).c_str());
        CHECK(find_askpass().program == in_bin.program);
    }
    SECTION("only in the current directory: none, though PATH names '.' and an empty entry") {
        ScopedEnv path("PATH", ".::relative");
        const Askpass found = find_askpass();
        CHECK(found.program.empty());
        CHECK(found.why_not.find("in a directory of PATH") != std::string::npos);
    }
    fs::current_path(before);
}

TEST_CASE("askpass: an answer longer than 1 KiB is refused, not cut to fit") {
    test::TempDir dir;
    CHECK_FALSE(askpass_secret(script(dir.path, "head -c 2000 /dev/zero | tr '\\0' 7\n"), "PIN?").has_value());
    const auto fits = askpass_secret(script(dir.path, "head -c 1024 /dev/zero | tr '\\0' 7\n"), "PIN?");
    REQUIRE(fits.has_value());
    CHECK(fits->size() == 1024);
}

TEST_CASE("askpass: a confirmation is yes only for exit 0 with no answer or \"yes\", as OpenSSH's") {
    test::TempDir dir;
    CHECK(askpass_confirm(script(dir.path, "exit 0\n"), "Allow?"));
    CHECK(askpass_confirm(script(dir.path, "echo YES\n"), "Allow?"));
    CHECK_FALSE(askpass_confirm(script(dir.path, "echo no\n"), "Allow?"));
    CHECK_FALSE(askpass_confirm(script(dir.path, "echo yes; exit 1\n"), "Allow?"));
}

TEST_CASE("askpass: the answer ends at its first CR or LF, as OpenSSH's ssh_askpass() takes it") {
    test::TempDir dir;
    // A second line (a PIN, then something else) once went to the TPM with
    // the PIN as one wrong PIN.
    for (const char* printed : {"2222\\nxx\\n", "2222\\rxx", "2222\\r\\n", "2222"}) {
        const auto pin = askpass_secret(script(dir.path, std::string("printf '") + printed + "'\n"), "PIN?");
        REQUIRE(pin.has_value());
        CHECK(*pin == Secret(std::string_view("2222")));
    }
    const auto empty = askpass_secret(script(dir.path, "printf '\\nsecond line\\n'\n"), "PIN?");
    REQUIRE(empty.has_value());
    CHECK(empty->empty());
    CHECK(askpass_confirm(script(dir.path, "printf 'yes\\nno\\n'\n"), "Allow?"));
    CHECK_FALSE(askpass_confirm(script(dir.path, "printf 'no\\nyes\\n'\n"), "Allow?"));
}
