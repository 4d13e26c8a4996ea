// Pinned parents (known_parents.hpp): the file's format, which pin applies
// to which TPM, and systemd's SRK pin.
#include "core/trust/known_parents.hpp"
#include "core/base/error.hpp"
#include "core/tpm/tpm_keys.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>

using namespace tpmkey;

namespace {

const std::string name_a = "000b" + std::string(64, 'a');
const std::string name_b = "000b" + std::string(64, 'b');
namespace fs = std::filesystem;

// A private XDG_CONFIG_HOME (under a private HOME) for one test, restored afterwards.
struct TempConfig {
    fs::path home = fs::temp_directory_path() / ("tpmkey-pins-" + std::to_string(::getpid()));
    fs::path pins = home / ".config" / "tpmkey" / "known_parents";
    TempConfig() {
        fs::remove_all(home);
        fs::create_directories(pins.parent_path());
        ::setenv("HOME", home.c_str(), 1);
        ::unsetenv("XDG_CONFIG_HOME");
    }
    ~TempConfig() { fs::remove_all(home); }
    void write(const std::string& text) const { std::ofstream(pins) << text; }
};

}  // namespace

TEST_CASE("known_parents: a pin is per TPM and per handle; bad lines are skipped with a warning") {
    const KnownParents known = KnownParents::parse("# comment\n"
                                                   "0x40000001 " +
                                                       name_a +
                                                       " default\n"
                                                       "0x81000001 " +
                                                       name_b +
                                                       " default\n"
                                                       "0x40000001 " +
                                                       name_b +
                                                       " swtpm:port=2321\n"
                                                       "0x40000001 " +
                                                       name_b +
                                                       "\n"
                                                       "40000001 " +
                                                       name_b +
                                                       " default\n"
                                                       "0x40000001 000B" +
                                                       std::string(64, 'C') +
                                                       " other\n"
                                                       "0x40000001 " +
                                                       name_b + " default trailing\n",
                                                   std::nullopt);
    CHECK(known.expected("default", owner_hierarchy) == name_a);
    CHECK(known.expected("default", standard_srk) == name_b);
    CHECK(known.expected("swtpm:host=127.0.0.1,port=2321", owner_hierarchy) == name_b);
    CHECK_FALSE(known.expected("swtpm:host=127.0.0.1,port=2321", standard_srk));
    CHECK_FALSE(known.expected("other", owner_hierarchy));
    CHECK(known.warnings().size() == 4);
}

TEST_CASE("known_parents: lines written under another spelling of the same TPM are found") {
    // Files written before pins were filed under Tcti::identity().
    const KnownParents known = KnownParents::parse("0x40000001 " + name_a +
                                                       " device:/dev/tpmrm0\n"
                                                       "0x81000001 " +
                                                       name_b + " swtpm:port=2321,host=localhost\n",
                                                   std::nullopt);
    CHECK(known.expected("default", owner_hierarchy) == name_a);
    CHECK(known.expected("swtpm:host=127.0.0.1,port=2321", standard_srk) == name_b);
    CHECK(known.pinned_elsewhere("swtpm:host=127.0.0.1,port=2321", standard_srk).empty());
    const std::vector<ParentPin> elsewhere = known.pinned_elsewhere("swtpm:host=127.0.0.1,port=9", standard_srk);
    REQUIRE(elsewhere.size() == 1);
    CHECK(elsewhere[0].tpm == "swtpm:host=127.0.0.1,port=2321");
    CHECK(elsewhere[0].name_hex == name_b);
    CHECK(known.pinned_elsewhere("default", standard_srk).size() == 1);
    CHECK(known.pinned_elsewhere("default", 0x81000002).empty());
}

TEST_CASE("known_parents: a pin file that others could write, or that is no file, is a problem, not 'no pins'") {
    const TempConfig config;
    SECTION("missing: first use") { CHECK_FALSE(KnownParents::load().problem()); }
    SECTION("a good file") {
        config.write("0x40000001 " + name_a + " default\n");
        ::chmod(config.pins.c_str(), 0600);
        const KnownParents known = KnownParents::load();
        CHECK_FALSE(known.problem());
        CHECK(known.expected("default", owner_hierarchy) == name_a);
    }
    SECTION("a symlink to /dev/null") {
        fs::create_symlink("/dev/null", config.pins);
        CHECK_THAT(KnownParents::load().problem().value_or(""), Catch::Contains("not a regular file"));
    }
    SECTION("a directory") {
        fs::create_directory(config.pins);
        CHECK_THAT(KnownParents::load().problem().value_or(""), Catch::Contains("not a regular file"));
    }
    SECTION("over 64 KiB") {
        config.write(std::string(64 * 1024 + 1, '#'));
        CHECK_THAT(KnownParents::load().problem().value_or(""), Catch::Contains("too large"));
    }
    SECTION("writable by others") {
        config.write("0x40000001 " + name_a + " default\n");
        ::chmod(config.pins.c_str(), 0666);
        const KnownParents known = KnownParents::load();
        CHECK_THAT(known.problem().value_or(""),
                   Catch::Contains("the pin file is writable by others; refusing it (chmod go-w"));
        CHECK_FALSE(known.expected("default", owner_hierarchy));  // its pins are not used
    }
    SECTION("in a directory others may write to") {
        config.write("");
        ::chmod(config.pins.parent_path().c_str(), 0777);
        CHECK_THAT(KnownParents::load().problem().value_or(""),
                   Catch::Contains("is writable by others, who could replace the pins"));
    }
    SECTION("missing, in a directory others may write to: not a first use") {
        ::chmod(config.pins.parent_path().c_str(), 0777);
        CHECK_THAT(KnownParents::load().problem().value_or(""),
                   Catch::Contains("is writable by others, who could remove the pins or put theirs there"));
    }
    SECTION("missing, its directory too, and the one above writable by others") {
        fs::remove(config.pins.parent_path());
        ::chmod(config.pins.parent_path().parent_path().c_str(), 0777);
        CHECK_THAT(KnownParents::load().problem().value_or(""),
                   Catch::Contains("its directory " + config.pins.parent_path().parent_path().string() +
                                   " is writable by others"));
    }
    SECTION("missing, in a directory that is the user's alone: first use") {
        ::chmod(config.pins.parent_path().c_str(), 0700);
        fs::remove(config.pins.parent_path());
        CHECK_FALSE(KnownParents::load().problem());
    }
    SECTION("owned by another user") {
        config.write("");
        if (::getuid() == 0)
            REQUIRE(::chown(config.pins.c_str(), 65534, 65534) == 0);
        if (::getuid() == 0)
            CHECK_THAT(KnownParents::load().problem().value_or(""), Catch::Contains("belongs to another user"));
    }
    SECTION("adding a pin to a file with a problem is refused") {
        fs::create_symlink("/dev/null", config.pins);
        KnownParents known = KnownParents::load();
        CHECK_THROWS_AS(known.record({owner_hierarchy, name_a, "default", {}, {}, {}}), UnusablePinFile);
        CHECK_THROWS_AS(known.forget("default"), UnusablePinFile);
    }
}

TEST_CASE("known_parents: the EK that proved a parent, when, and a clear stand beside its pin; old lines still read") {
    const std::string ek_cert = "cert:" + std::string(64, 'c');
    const std::string ek_name = "ek:000b" + std::string(64, 'e');
    const KnownParents known =
        KnownParents::parse("0x40000001 " + name_a +
                                " default\n"  // before the proof
                                "0x81000001 " +
                                name_b + " default " + ek_cert +
                                " 2026-11-25T19:40:00Z\n"  // certified
                                "0x40000001 " +
                                name_b + " swtpm:port=2321 " + ek_name +
                                " 2026-11-25T19:40:00Z 2026-11-26T08:00:00Z\n"
                                "0x81000002 " +
                                name_b + " default " + ek_cert +
                                "\n"  // no date
                                "0x81000003 " +
                                name_b +
                                " default cert:ABCD 2026-11-25T19:40:00Z\n"  // not hex
                                "0x81000004 " +
                                name_b +
                                " default sha:abcdef 2026-11-25T19:40:00Z\n"  // no kind
                                "0x81000005 " +
                                name_b + " default " + ek_cert +
                                " yesterday\n"  // no time
                                "0x81000006 " +
                                name_b + " default " + ek_cert + " 2026-11-25T19:40:00Z 2026-11-25 x\n",  // extra
                            std::nullopt);
    const auto old = known.pin("default", owner_hierarchy);
    REQUIRE(old);
    CHECK(old->name_hex == name_a);
    CHECK(old->ek.empty());
    const auto certified = known.pin("default", standard_srk);
    REQUIRE(certified);
    CHECK(certified->certified());
    CHECK(certified->ek == ek_cert);
    CHECK(certified->proven == "2026-11-25T19:40:00Z");
    CHECK(certified->cleared.empty());
    const auto tofu = known.pin("swtpm:host=127.0.0.1,port=2321", owner_hierarchy);
    REQUIRE(tofu);
    CHECK_FALSE(tofu->certified());
    CHECK(tofu->cleared == "2026-11-26T08:00:00Z");
    CHECK(known.warnings().size() == 5);
    CHECK(known.pins_of("default").size() == 2);
}

TEST_CASE("known_parents: record replaces the pin of its TPM and handle, forget drops a TPM's pins, other lines stay") {
    const TempConfig config;
    config.write("# mine\n"
                 "0x40000001 " +
                 name_a +
                 " default\n"
                 "0x40000001 " +
                 name_a +
                 " swtpm:port=2321\n"
                 "not a pin\n");
    KnownParents known = KnownParents::load();
    const ParentPin proven{
        owner_hierarchy,       name_b, "default", "ek:000b" + std::string(64, 'e'), "2026-11-25T19:40:00Z",
        "2026-11-25T19:40:00Z"};
    known.record(proven);
    known.record({standard_srk, name_a, "default", "cert:" + std::string(64, 'c'), "2026-11-25T19:41:00Z", {}});
    const auto read_back = [&] {
        std::ifstream in(config.pins);
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    CHECK(read_back() == "# mine\n"
                         "0x40000001 " +
                             name_b + " default ek:000b" + std::string(64, 'e') +
                             " 2026-11-25T19:40:00Z 2026-11-25T19:40:00Z\n"
                             "0x40000001 " +
                             name_a +
                             " swtpm:port=2321\n"
                             "not a pin\n"
                             "0x81000001 " +
                             name_a + " default cert:" + std::string(64, 'c') + " 2026-11-25T19:41:00Z\n");
    const KnownParents again = KnownParents::load();
    CHECK(again.pin("default", owner_hierarchy)->ek == proven.ek);
    CHECK(again.expected("swtpm:host=127.0.0.1,port=2321", owner_hierarchy) == name_a);

    const std::vector<std::string> removed = known.forget("default");
    CHECK(removed.size() == 2);
    CHECK_FALSE(known.pin("default", owner_hierarchy));
    CHECK(read_back() == "# mine\n"
                         "0x40000001 " +
                             name_a +
                             " swtpm:port=2321\n"
                             "not a pin\n");
    CHECK(known.forget("default").empty());
    CHECK_FALSE(KnownParents::load().pin("default", standard_srk));
}

TEST_CASE("known_parents: a new file starts with a header that says its format") {
    const TempConfig config;
    fs::remove(config.pins);
    KnownParents known = KnownParents::load();
    known.record({owner_hierarchy, name_a, "default", "ek:000b" + std::string(64, 'e'), "2026-11-25T19:40:00Z", {}});
    std::ifstream in(config.pins);
    const std::string text(std::istreambuf_iterator<char>(in), {});
    CHECK_THAT(text, Catch::StartsWith("# The storage keys"));
    CHECK_THAT(text, Catch::Contains("# HANDLE NAME TPM [EK PROVEN [CLEARED]]\n0x40000001 " + name_a));
    CHECK((fs::status(config.pins).permissions() & fs::perms::all) == (fs::perms::owner_read | fs::perms::owner_write));
}

TEST_CASE("made_before_clear: a key whose file is older than a clear of its TPM") {
    const TempConfig config;
    const fs::path key = config.home / "id.tpm";
    std::ofstream(key) << "key";
    fs::last_write_time(key, fs::file_time_type::clock::now() - std::chrono::hours(2));
    const std::string ek = " ek:000b" + std::string(64, 'e') + " 2020-01-01T00:00:00Z";
    // Cleared an hour ago (in the file's own notation: UTC).
    const std::time_t hour_ago = std::time(nullptr) - 3600;
    std::tm tm{};
    ::gmtime_r(&hour_ago, &tm);
    char cleared[32];
    std::strftime(cleared, sizeof cleared, "%Y-%m-%dT%H:%M:%SZ", &tm);
    const KnownParents known = KnownParents::parse("0x40000001 " + name_a + " default" + ek + " " + cleared +
                                                       "\n"
                                                       "0x40000001 " +
                                                       name_a + " swtpm:port=2321" + ek + "\n",
                                                   std::nullopt);
    CHECK_THAT(made_before_clear(known, "default", key).value_or(""),
               Catch::Contains("made before the TPM was cleared (" + std::string(cleared) + ")"));
    CHECK_FALSE(made_before_clear(known, "swtpm:host=127.0.0.1,port=2321", key));  // never cleared
    CHECK_FALSE(made_before_clear(known, "default", config.home / "missing.tpm"));
    fs::last_write_time(key, fs::file_time_type::clock::now());  // made after the clear
    CHECK_FALSE(made_before_clear(known, "default", key));
}

TEST_CASE("systemd's SRK pin applies to the machine's own TPM only, and only where it is that key") {
    TPM2B_PUBLIC srk = storage_key_template();
    srk.publicArea.unique.ecc.x.size = 32;
    srk.publicArea.unique.ecc.y.size = 32;
    srk.publicArea.unique.ecc.x.buffer[0] = 7;
    const std::string srk_name = name_hex_of(srk);
    const KnownParents known = KnownParents::parse("", srk);
    CHECK(known.expected("default", standard_srk) == srk_name);
    CHECK(known.expected("default", owner_hierarchy) == srk_name);  // the H-2 template: the same key
    CHECK_FALSE(known.expected("swtpm:port=2321", standard_srk));   // a simulator is another TPM
    // The user's own pin wins.
    const KnownParents both = KnownParents::parse("0x81000001 " + name_a + " default\n", srk);
    CHECK(both.expected("default", standard_srk) == name_a);
    // An RSA SRK is not what 0x40000001 (ECC) re-creates.
    TPM2B_PUBLIC rsa = storage_key_template(TPM2_ALG_RSA);
    rsa.publicArea.unique.rsa.size = 256;
    const KnownParents rsa_known = KnownParents::parse("", rsa);
    CHECK(rsa_known.expected("default", standard_srk) == name_hex_of(rsa));
    CHECK_FALSE(rsa_known.expected("default", owner_hierarchy));
}

TEST_CASE("check_storage_key: exactly the storage attributes, userWithAuth and noDA allowed") {
    TPMT_PUBLIC area = storage_key_template().publicArea;
    CHECK_NOTHROW(check_storage_key(area, standard_srk));
    area.objectAttributes &= ~(TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA);
    CHECK_NOTHROW(check_storage_key(area, standard_srk));
    for (const TPMA_OBJECT missing : {TPMA_OBJECT_FIXEDTPM, TPMA_OBJECT_FIXEDPARENT, TPMA_OBJECT_SENSITIVEDATAORIGIN,
                                      TPMA_OBJECT_RESTRICTED, TPMA_OBJECT_DECRYPT}) {
        TPMT_PUBLIC bad = storage_key_template().publicArea;
        bad.objectAttributes &= ~missing;
        INFO(attributes_text(missing));
        CHECK_THROWS_WITH(check_storage_key(bad, standard_srk),
                          Catch::Contains("lacks " + attributes_text(missing)) && Catch::Contains("0x81000001"));
    }
    for (const TPMA_OBJECT extra : {TPMA_OBJECT_SIGN_ENCRYPT, TPMA_OBJECT_ADMINWITHPOLICY, TPMA_OBJECT_STCLEAR,
                                    TPMA_OBJECT_ENCRYPTEDDUPLICATION}) {
        TPMT_PUBLIC bad = storage_key_template().publicArea;
        bad.objectAttributes |= extra;
        INFO(attributes_text(extra));
        CHECK_THROWS_WITH(check_storage_key(bad, standard_srk), Catch::Contains("also has " + attributes_text(extra)));
    }
}
