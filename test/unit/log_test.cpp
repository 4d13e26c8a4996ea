// Logging: TPMKEY_LOG_FILE switched while other threads log. The old log
// descriptor is never closed under a writer, so no line lands in a file
// that happened to get its number.
#include "core/base/log.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace {

std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace

TEST_CASE("switching TPMKEY_LOG_FILE while threads log: no line lands in another file") {
    char dir_template[] = "/tmp/tpmkey-log-test.XXXXXX";
    REQUIRE(::mkdtemp(dir_template) != nullptr);
    const std::filesystem::path dir = dir_template;
    const std::filesystem::path a = dir / "a.log", b = dir / "b.log", victim = dir / "victim";
    ::setenv("TPMKEY_LOG", "error", 1);
    std::atomic<bool> stop{false};
    std::thread writer([&] {
        while (!stop)
            tpmkey::log_error("a line of the module");
    });
    for (int i = 0; i < 200000; ++i) {
        ::setenv("TPMKEY_LOG_FILE", (i % 2 ? a : b).c_str(), 1);
        tpmkey::configure_logging();
        // An unrelated file of the host, opened and written while the
        // module logs: it may get any descriptor number that is free.
        const int fd = ::open(victim.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        REQUIRE(fd >= 0);
        ::close(fd);
    }
    stop = true;
    writer.join();
    ::unsetenv("TPMKEY_LOG_FILE");
    tpmkey::configure_logging();
    CHECK(slurp(victim).empty());
    CHECK(slurp(a).find("a line of the module") != std::string::npos);
    CHECK(slurp(b).find("a line of the module") != std::string::npos);
    std::filesystem::remove_all(dir);
}

namespace {

// Runs `body` with stderr on /dev/null, as in a background ssh-agent.
template <class Body>
void with_stderr_on_dev_null(Body body) {
    const int saved = ::dup(STDERR_FILENO);
    REQUIRE(saved >= 0);
    const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    REQUIRE(null >= 0);
    ::dup2(null, STDERR_FILENO);
    ::close(null);
    body();
    ::dup2(saved, STDERR_FILENO);
    ::close(saved);
}

}  // namespace

TEST_CASE("stderr on /dev/null: the module's lines go to the private state log, with the time") {
    char dir_template[] = "/tmp/tpmkey-state-test.XXXXXX";
    REQUIRE(::mkdtemp(dir_template) != nullptr);
    const std::filesystem::path dir = dir_template;
    ::setenv("XDG_STATE_HOME", (dir / "state").c_str(), 1);
    ::unsetenv("TPMKEY_LOG_FILE");
    ::setenv("TPMKEY_LOG", "error", 1);
    const std::filesystem::path log = dir / "state" / "tpmkey" / "log";
    CHECK(tpmkey::state_log_path() == log);

    with_stderr_on_dev_null([] {
        tpmkey::configure_logging();  // a CLI: its quiet stderr is wanted
        tpmkey::log_error("a line nobody asked to keep");
    });
    CHECK_FALSE(std::filesystem::exists(log));

    with_stderr_on_dev_null([] {
        tpmkey::configure_logging(tpmkey::LostStderr::to_state_log);
        tpmkey::log_error("a line of the module");
    });
    const std::string text = slurp(log);
    CHECK(text.find(" tpmkey: a line of the module\n") == 19);  // "YYYY-MM-DD HH:MM:SS "
    using std::filesystem::perms;
    CHECK((std::filesystem::status(log).permissions() & perms::all) == (perms::owner_read | perms::owner_write));
    CHECK((std::filesystem::status(log.parent_path()).permissions() & perms::all) == perms::owner_all);

    // A link planted in its place is not followed.
    std::filesystem::remove(log);
    const std::filesystem::path victim = dir / "victim";
    std::ofstream(victim) << "";
    std::filesystem::create_symlink(victim, log);
    with_stderr_on_dev_null([] {
        tpmkey::configure_logging(tpmkey::LostStderr::to_state_log);
        tpmkey::log_error("a line that must not land in the victim");
    });
    CHECK(slurp(victim).empty());

    ::unsetenv("XDG_STATE_HOME");
    tpmkey::configure_logging();
    std::filesystem::remove_all(dir);
}

namespace {

// A private XDG_STATE_HOME under a new temporary directory, removed again.
struct StateHome {
    std::filesystem::path dir, state, log;
    StateHome() {
        char dir_template[] = "/tmp/tpmkey-state-test.XXXXXX";
        REQUIRE(::mkdtemp(dir_template) != nullptr);
        dir = dir_template;
        state = dir / "state";
        log = state / "tpmkey" / "log";
        ::setenv("XDG_STATE_HOME", state.c_str(), 1);
        ::unsetenv("TPMKEY_LOG_FILE");
        ::setenv("TPMKEY_LOG", "error", 1);
    }
    ~StateHome() {
        ::unsetenv("XDG_STATE_HOME");
        tpmkey::configure_logging();
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    }
    StateHome(const StateHome&) = delete;
    StateHome& operator=(const StateHome&) = delete;
};

// As the module logs: configured in C_Initialize, one line, stderr lost.
void module_logs(const std::string& line) {
    with_stderr_on_dev_null([&] {
        tpmkey::configure_logging(tpmkey::LostStderr::to_state_log);
        tpmkey::log_error(line);
    });
}

}  // namespace

TEST_CASE("the state log: a hard link in its place is refused, the linked file untouched") {
    const StateHome home;
    std::filesystem::create_directories(home.log.parent_path());
    std::filesystem::permissions(home.state, std::filesystem::perms::owner_all);
    std::filesystem::permissions(home.log.parent_path(), std::filesystem::perms::owner_all);
    // Larger than the bound, as the authorized_keys of the report was: the
    // bound would truncate it.
    const std::filesystem::path victim = home.dir / "authorized_keys";
    const std::string keys(70026, 'k');
    std::ofstream(victim) << keys;
    std::filesystem::permissions(victim, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    std::filesystem::create_hard_link(victim, home.log);
    module_logs("a line that must not land in authorized_keys");
    CHECK(slurp(victim) == keys);
}

TEST_CASE("the state log: directories are opened without following links, and must be the user's and private") {
    const StateHome home;
    const std::filesystem::path elsewhere = home.dir / "elsewhere";
    std::filesystem::create_directories(elsewhere);
    std::filesystem::permissions(elsewhere, std::filesystem::perms::owner_all);
    std::filesystem::create_directories(home.state);
    std::filesystem::permissions(home.state, std::filesystem::perms::owner_all);

    SECTION("tpmkey/ a symbolic link to another directory") {
        std::filesystem::create_directory_symlink(elsewhere, home.log.parent_path());
        module_logs("a line that must not land elsewhere");
        CHECK_FALSE(std::filesystem::exists(elsewhere / "log"));
    }
    SECTION("XDG_STATE_HOME itself a link: the user's own setting, followed") {
        std::filesystem::remove(home.state);
        std::filesystem::create_directory_symlink(elsewhere, home.state);
        module_logs("a line of the module");
        CHECK(slurp(elsewhere / "tpmkey" / "log").find("a line of the module") != std::string::npos);
    }
    SECTION("tpmkey/ writable by others, or not 0700") {
        for (const auto mode :
             {std::filesystem::perms::all, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                                               std::filesystem::perms::group_exec}) {
            std::filesystem::create_directories(home.log.parent_path());
            std::filesystem::permissions(home.log.parent_path(), mode);
            module_logs("a line in a directory others may read or change");
            CHECK_FALSE(std::filesystem::exists(home.log));
            std::filesystem::remove_all(home.log.parent_path());
        }
    }
    SECTION("the base writable by others") {
        std::filesystem::permissions(home.state, std::filesystem::perms::all);
        module_logs("a line below a directory others may change");
        CHECK_FALSE(std::filesystem::exists(home.log));
    }
}

TEST_CASE("the state log stays under 64 KiB while it is written, not only when opened") {
    const StateHome home;
    with_stderr_on_dev_null([] {
        tpmkey::configure_logging(tpmkey::LostStderr::to_state_log);
        const std::string line(200, 'x');
        for (int i = 0; i < 2000; ++i)  // 400 KB of lines in one process
            tpmkey::log_error(line);
    });
    CHECK(std::filesystem::file_size(home.log) <= 64 * 1024);
    CHECK(std::filesystem::file_size(home.log) > 0);
}

TEST_CASE("the state log is looked at when the first line is written, not in C_Initialize") {
    const StateHome home;
    with_stderr_on_dev_null([] {
        for (int i = 0; i < 3; ++i)
            tpmkey::configure_logging(tpmkey::LostStderr::to_state_log);  // connections that log nothing
    });
    CHECK_FALSE(std::filesystem::exists(home.state));
    module_logs("the first line");
    CHECK(slurp(home.log).find("the first line") != std::string::npos);
}
