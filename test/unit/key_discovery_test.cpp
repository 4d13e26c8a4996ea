// find_keys(): each file the module would skip keeps its message whole
// ("PATH: REASON", as the module logs it and tpmkey list prints it) and the
// reason alone (what tpmkey doctor shows under its own "PATH: the module
// skips this file").
#include "core/keys/key_discovery.hpp"
#include "core/keys/key_file.hpp"
#include "temp_dir.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

using namespace tpmkey;

namespace {

std::filesystem::path data(const char* name) { return std::filesystem::path(TPMKEY_TEST_DATA) / name; }

void write(const std::filesystem::path& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
    ::chmod(path.c_str(), 0600);
}

}  // namespace

TEST_CASE("key discovery: a skipped file's message is kept whole, its reason beside it") {
    const test::TempDir dir;
    ::chmod(dir.path.c_str(), 0700);
    const std::filesystem::path good = dir.path / "good.tpm", directory = dir.path / "x.tpm",
                                garbage = dir.path / "garbage.tpm", writable = dir.path / "writable.tpm",
                                p192 = dir.path / "p192.tpm";
    std::filesystem::copy_file(data("ecdsa256.tpm"), good);
    ::chmod(good.c_str(), 0600);
    std::filesystem::create_directory(directory);
    write(garbage, "garbage\n");
    std::filesystem::copy_file(data("ecdsa256.tpm"), writable);
    ::chmod(writable.c_str(), 0666);
    // A key file that reads well but whose key tpmkey does not support: the
    // check (PublicKey) does not name the file, find_keys puts it in front.
    KeyFile key = read_key_file(good);
    key.blobs.pub.publicArea.parameters.eccDetail.curveID = TPM2_ECC_NIST_P192;
    write(p192, format_key_file(key));

    Config config;
    config.key_files = {good, directory, garbage, writable, p192};
    const std::vector<FoundKeyFile> found = find_keys(config);
    REQUIRE(found.size() == 5);

    CHECK(found[0].key.has_value());
    CHECK(found[0].skip_message.empty());

    CHECK_FALSE(found[1].key.has_value());
    CHECK(found[1].skip_message == directory.string() + ": not a regular file");
    CHECK(found[1].skip_reason == "not a regular file");
    CHECK_FALSE(found[1].replaceable);

    CHECK(found[2].skip_message == garbage.string() + ": not a key file (no '-----BEGIN TSS2 PRIVATE KEY-----' line)");
    CHECK(found[2].skip_reason == "not a key file (no '-----BEGIN TSS2 PRIVATE KEY-----' line)");

    const std::string writable_reason =
        "the key file is writable by others; refusing it (chmod go-w " + writable.string() + ")";
    CHECK(found[3].skip_message == writable.string() + ": " + writable_reason);
    CHECK(found[3].skip_reason == writable_reason);
    CHECK(found[3].replaceable);

    CHECK(found[4].skip_message == p192.string() + ": only the NIST P-256, P-384 and P-521 curves are supported");
    CHECK(found[4].skip_reason == "only the NIST P-256, P-384 and P-521 curves are supported");
    CHECK_FALSE(found[4].replaceable);
}

TEST_CASE("FileError: what() is NAME: REASON, reason() the REASON alone") {
    const FileError e("/home/u/.ssh/a.tpm", "not a regular file");
    CHECK(std::string(e.what()) == "/home/u/.ssh/a.tpm: not a regular file");
    CHECK(e.reason() == "not a regular file");
}
