// write_file_atomically() with Replace::yes replaces only a regular file:
// renaming over /dev/null (as root: "-o /dev/null") would leave a regular
// file in the device's place for the whole machine. The device tested
// here is the test's own node (mknod, as root) in a temporary directory,
// never /dev/null itself; a FIFO stands for it everywhere.
#include "core/files/atomic_file.hpp"
#include "core/base/error.hpp"
#include "temp_dir.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

using namespace tpmkey;
using Catch::Matchers::Contains;
using test::TempDir;

namespace {

mode_t type_of(const std::filesystem::path& p) {
    struct stat st {};
    REQUIRE(lstat(p.c_str(), &st) == 0);
    return st.st_mode & S_IFMT;
}

std::string contents_of(const std::filesystem::path& p) {
    std::ifstream in(p);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

// Nothing but the named entries in dir: no temporary file was left.
std::size_t entries(const std::filesystem::path& dir) {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir))
        ++n;
    return n;
}

}  // namespace

TEST_CASE("atomic file: a FIFO, a device, a directory or a link to one is not replaced", "[files]") {
    TempDir tmp;
    const auto fifo = tmp.path / "fifo";
    REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
    CHECK_THROWS_WITH(write_file_atomically(fifo, "x", 0600, Replace::yes),
                      Contains("fifo: not a regular file (a FIFO); not replaced"));
    CHECK(type_of(fifo) == S_IFIFO);

    const auto link = tmp.path / "link-to-fifo";
    REQUIRE(symlink(fifo.c_str(), link.c_str()) == 0);
    CHECK_THROWS_WITH(write_file_atomically(link, "x", 0600, Replace::yes), Contains("not a regular file (a FIFO)"));
    CHECK(type_of(link) == S_IFLNK);

    const auto dir = tmp.path / "dir";
    REQUIRE(mkdir(dir.c_str(), 0700) == 0);
    CHECK_THROWS_WITH(write_file_atomically(dir, "x", 0600, Replace::yes),
                      Contains("not a regular file (a directory)"));

    // The test's own null device (1:3), where mknod is allowed (root).
    const auto null = tmp.path / "null";
    if (mknod(null.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0) {
        CHECK_THROWS_WITH(write_file_atomically(null, "x", 0600, Replace::yes),
                          Contains("null: not a regular file (a character device); not replaced"));
        CHECK(type_of(null) == S_IFCHR);
        CHECK(entries(tmp.path) == 4);
    } else {
        WARN("mknod is not allowed here (not root): the device case was not run");
        CHECK(entries(tmp.path) == 3);
    }
}

TEST_CASE("atomic file: a regular file, a link to one, a dangling link and a new name are written", "[files]") {
    TempDir tmp;
    const auto file = tmp.path / "file";
    write_file_atomically(file, "one", 0600, Replace::no);
    write_file_atomically(file, "two", 0600, Replace::yes);
    CHECK(contents_of(file) == "two");
    CHECK_THROWS_WITH(write_file_atomically(file, "three", 0600, Replace::no), Contains("already exists"));

    // A link is replaced by the new file (its target is left alone), as before.
    const auto link = tmp.path / "link";
    REQUIRE(symlink(file.c_str(), link.c_str()) == 0);
    write_file_atomically(link, "new", 0600, Replace::yes);
    CHECK(type_of(link) == S_IFREG);
    CHECK(contents_of(link) == "new");
    CHECK(contents_of(file) == "two");
    const auto dangling = tmp.path / "dangling";
    REQUIRE(symlink((tmp.path / "none").c_str(), dangling.c_str()) == 0);
    write_file_atomically(dangling, "d", 0600, Replace::yes);
    CHECK(contents_of(dangling) == "d");
    CHECK(entries(tmp.path) == 3);
}
