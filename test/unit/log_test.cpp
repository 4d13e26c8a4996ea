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
