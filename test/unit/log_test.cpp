// Logging: TPMKEY_LOG_FILE switched while other threads log. The old log
// descriptor is never closed under a writer, so no line lands in a file
// that happened to get its number.
#include "log.hpp"

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
