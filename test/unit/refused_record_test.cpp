// The file of refused source PINs' records (core/pin/refused_record.*) is
// read as hostile input: what does not parse, a file others may write, a
// link or something not a file in its place give no record; a record is
// stored and dropped atomically. The TPM's part (compute) runs end to end:
// test/e2e/ssh/pin-rules.sh source.
#include "core/pin/refused_record.hpp"
#include "temp_dir.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

using namespace tpmkey;
using test::TempDir;

namespace {

RefusedPinRecords::Digest filled(std::uint8_t b) {
    RefusedPinRecords::Digest d{};
    d.fill(b);
    return d;
}

void write(const std::filesystem::path& p, const std::string& text, mode_t mode = 0600) {
    std::ofstream(p) << text;
    REQUIRE(::chmod(p.c_str(), mode) == 0);
}

const std::string hex_of_11(64, '1');
const std::string hex_of_22(64, '2');

}  // namespace

TEST_CASE("refused PIN records: stored, found, dropped, the file 0600 in a directory made for it") {
    TempDir dir;
    const std::filesystem::path file = dir.path / "state" / "tpmkey" / "refused-pins";
    const RefusedPinRecords records(file);
    const auto a = RefusedPinRecords::source_id("svc", "systemd credential 'svc-pin'");
    const auto b = RefusedPinRecords::source_id("svc", "kernel keyring key 'svc-pin'");
    CHECK(a != b);
    CHECK(a != RefusedPinRecords::source_id("other", "systemd credential 'svc-pin'"));
    CHECK_FALSE(records.find(a));
    records.store(a, filled(1));
    records.store(b, filled(2));
    CHECK(records.find(a) == filled(1));
    CHECK(records.find(b) == filled(2));
    struct stat st {};
    REQUIRE(::stat(file.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    records.store(a, filled(3));  // replaced, not added
    CHECK(records.find(a) == filled(3));
    records.store(a, std::nullopt);
    CHECK_FALSE(records.find(a));
    CHECK(records.find(b) == filled(2));
}

TEST_CASE("refused PIN records: a hostile file gives no record") {
    TempDir dir;
    const std::filesystem::path file = dir.path / "refused-pins";
    const RefusedPinRecords records(file);
    const auto source = filled(0x11);
    const std::string good = "v1 " + hex_of_11 + " " + hex_of_22 + "\n";
    SECTION("lines that do not parse are skipped, a good one is found") {
        write(file, "garbage\nv2 " + hex_of_11 + " " + hex_of_22 + "\nv1 " + hex_of_11 + " " + hex_of_22 +
                        " extra\nv1 " + hex_of_11 + " " + std::string(63, '2') + "\nv1 " + hex_of_11 + " " +
                        std::string(64, 'G') + "\n\n" + good);
        CHECK(records.find(source) == filled(0x22));
    }
    SECTION("upper-case hex, a short line: nothing") {
        write(file, "v1 " + std::string(64, 'A') + " " + hex_of_22 + "\nv1 " + hex_of_11 + "\n");
        CHECK_FALSE(records.find(source));
        CHECK_FALSE(records.find(filled(0xaa)));
    }
    SECTION("writable by others: no record (they could make a right PIN refused)") {
        write(file, good, 0622);
        CHECK_FALSE(records.find(source));
    }
    SECTION("a symbolic link in its place: no record") {
        write(dir.path / "elsewhere", good);
        std::filesystem::create_symlink(dir.path / "elsewhere", file);
        CHECK_FALSE(records.find(source));
    }
    SECTION("a directory in its place: no record") {
        std::filesystem::create_directory(file);
        CHECK_FALSE(records.find(source));
    }
    SECTION("larger than 64 KiB: no record") {
        write(file, good + std::string(70 * 1024, '#'));
        CHECK_FALSE(records.find(source));
    }
}

TEST_CASE("refused PIN records: no place, nothing kept") {
    const RefusedPinRecords records{std::filesystem::path()};
    records.store(filled(1), filled(2));
    CHECK_FALSE(records.find(filled(1)));
}
