// Reading the files tpmkey trusts nothing in (core/files/file_read.hpp):
// check_not_replaceable(), which key files, the config file, pin files and
// EK roots go through, refuses what it cannot check.
#include "core/files/file_read.hpp"
#include "core/files/atomic_file.hpp"
#include "temp_dir.hpp"

#include <catch2/catch.hpp>

#include <filesystem>

using namespace tpmkey;
using Catch::Matchers::Contains;
using test::TempDir;

TEST_CASE("check_not_replaceable: a file whose directories cannot be checked is refused", "[file_read]") {
    TempDir tmp;
    const std::filesystem::path path = tmp.path / "id.tpm";
    write_file_atomically(path, "key", 0600, Replace::no);
    const FileRead read = read_regular_file(path, 4096);
    check_not_replaceable(path, read);

    // Gone (or renamed away) since it was read: its directories cannot be
    // followed from its name, so nothing says they are safe (was: accepted).
    std::filesystem::remove(path);
    CHECK_THROWS_AS(check_not_replaceable(path, read), FileError);
    CHECK_THROWS_WITH(check_not_replaceable(path, read),
                      Contains(path.string() + ": cannot check the directories it is in (") && Contains("refusing it"));
    // A name that does not resolve: a file where a directory should be.
    write_file_atomically(path, "key", 0600, Replace::no);
    CHECK_THROWS_WITH(check_not_replaceable(path / "x", read), Contains("cannot check the directories it is in"));
}
