// Key discovery and TPM selection from the environment and the config file.
#include "core/files/config.hpp"
#include "core/base/error.hpp"
#include "core/files/atomic_file.hpp"
#include "core/pin/askpass.hpp"
#include "core/pin/source.hpp"
#include "core/trust/endorsement.hpp"
#include "temp_dir.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

using namespace tpmkey;
namespace fs = std::filesystem;

namespace {

// A private HOME and XDG_CONFIG_HOME for one test, restored afterwards.
struct TempHome {
    fs::path dir = fs::temp_directory_path() / ("tpmkey-home-" + std::to_string(::getpid()));
    TempHome() {
        fs::remove_all(dir);
        fs::create_directories(dir / ".ssh");
        ::setenv("HOME", dir.c_str(), 1);
        ::unsetenv("XDG_CONFIG_HOME");
        ::unsetenv("TPMKEY_KEYS");
        ::unsetenv("TPMKEY_TCTI");
    }
    ~TempHome() { fs::remove_all(dir); }
    void touch(const fs::path& p) {
        fs::create_directories(p.parent_path());
        std::ofstream(p) << "x";
    }
    void write_config(const std::string& text) {
        fs::create_directories(dir / ".config" / "tpmkey");
        std::ofstream(dir / ".config" / "tpmkey" / "config") << text;
    }
};

}  // namespace

TEST_CASE("config lines: key and tcti are read, bad lines skipped with a warning") {
    const ConfigFile c =
        parse_config("# comment\n\n  key ~/keys/a.tpm\nkey /etc/b#1.tpm   # work\r\ntcti swtpm:port=2321\n"
                     "colour blue\nkey\n",
                     "cfg");
    REQUIRE(c.keys.size() == 2);
    CHECK(c.keys[1] == "/etc/b#1.tpm");
    CHECK(c.tcti == "swtpm:port=2321");
    REQUIRE(c.warnings.size() == 2);
    CHECK_THAT(c.warnings[0], Catch::StartsWith("cfg:6: ignored: unknown keyword 'colour'"));
    CHECK_THAT(c.warnings[1], Catch::StartsWith("cfg:7: ignored: 'key' needs a value"));
}

TEST_CASE("keys come from TPMKEY_KEYS, else the config file, else ~/.ssh/*.tpm") {
    TempHome home;
    home.touch(home.dir / ".ssh" / "b.tpm");
    home.touch(home.dir / ".ssh" / "a.tpm");
    home.touch(home.dir / ".ssh" / "id_ecdsa");
    home.touch(home.dir / "keys" / "work.tpm");

    Config c = load_config();
    REQUIRE(c.key_files.size() == 2);
    CHECK(c.key_files[0].filename() == "a.tpm");  // sorted: stable slot order
    CHECK(c.key_files[1].filename() == "b.tpm");
    CHECK(c.tpm.text().empty());

    home.write_config("key ~/keys\ntcti device:/dev/tpmrm0\n");
    c = load_config();
    REQUIRE(c.key_files.size() == 1);
    CHECK(c.key_files[0] == home.dir / "keys" / "work.tpm");
    CHECK(c.tpm.text() == "device:/dev/tpmrm0");

    ::setenv("TPMKEY_KEYS", (home.dir.string() + "/keys/work.tpm::~/.ssh/a.tpm:" + home.dir.string() + "/keys").c_str(),
             1);
    ::setenv("TPMKEY_TCTI", "swtpm:port=1", 1);
    c = load_config();
    REQUIRE(c.key_files.size() == 2);  // the directory repeats work.tpm: listed once
    CHECK(c.key_files[1] == home.dir / ".ssh" / "a.tpm");
    CHECK(c.tpm.text() == "swtpm:port=1");
    CHECK(c.tpm.origin() == "TPMKEY_TCTI");
    ::unsetenv("TPMKEY_KEYS");
    ::unsetenv("TPMKEY_TCTI");
}

TEST_CASE("the TPM address: TPMKEY_TCTI, else the config file's tcti, else the default, with the time bound") {
    TempHome home;
    ::unsetenv("TPMKEY_TPM_TIMEOUT");
    Config c = load_config();
    CHECK(c.tpm.source() == TpmAddress::Source::tpm2_tss_default);
    CHECK(c.tpm.is_default_search());
    CHECK(c.tpm.identity() == "default");
    CHECK_FALSE(c.tpm.timeout());

    home.write_config("tcti swtpm:port=2321,host=localhost\ntimeout 30\n");
    c = load_config();
    CHECK(c.tpm.source() == TpmAddress::Source::config_file);
    CHECK(c.tpm.origin() == (home.dir / ".config" / "tpmkey" / "config").string());
    CHECK(c.tpm.identity() == "swtpm:host=127.0.0.1,port=2321");
    CHECK(c.tpm.timeout() == std::chrono::seconds(30));

    ::setenv("TPMKEY_TCTI", "device:/dev/tpmrm0", 1);
    ::setenv("TPMKEY_TPM_TIMEOUT", "5", 1);
    c = load_config();
    CHECK(c.tpm.source() == TpmAddress::Source::environment);
    CHECK(c.tpm.text() == "device:/dev/tpmrm0");
    CHECK(c.tpm.identity() == "default");
    CHECK(c.tpm.timeout() == std::chrono::seconds(5));
    CHECK(c.warnings.empty());
    ::unsetenv("TPMKEY_TCTI");
    ::unsetenv("TPMKEY_TPM_TIMEOUT");
}

TEST_CASE("the TPM address: a TCTI that names no TPM exactly is refused at config read, none other used") {
    TempHome home;
    home.write_config("tcti swtpm:port=2321\n");
    ::setenv("TPMKEY_TCTI", "swtpm:port=2322\n", 1);
    const Config c = load_config();
    CHECK(c.tpm.text() == "swtpm:port=2322\n");  // not the config file's, nor the default
    REQUIRE(c.tpm.refusal());
    CHECK_THAT(*c.tpm.refusal(), Catch::Contains("the TCTI 'swtpm:port=2322\\x0a' contains a blank"));
    CHECK(std::find(c.warnings.begin(), c.warnings.end(), *c.tpm.refusal()) != c.warnings.end());
    CHECK_THROWS_AS(c.tpm.identity(), Error);
    CHECK(c.tpm.candidates().size() == 1);
    ::unsetenv("TPMKEY_TCTI");
}

TEST_CASE("EK roots: /etc/tpmkey/ek-roots and ~/.config/tpmkey/ek-roots, or the config file's ek-roots lines") {
    TempHome home;
    EkRoots roots = default_ek_roots();
    REQUIRE(roots.dirs.size() == 2);
    CHECK(roots.dirs[0] == "/etc/tpmkey/ek-roots");
    CHECK(roots.dirs[1] == home.dir / ".config" / "tpmkey" / "ek-roots");

    home.write_config("ek-roots ~/vendor-roots\nek-roots /srv/ek roots\nek-roots\n");
    const ConfigFile c = parse_config("ek-roots ~/vendor-roots\nek-roots /srv/ek roots\nek-roots\n", "cfg");
    REQUIRE(c.warnings.size() == 1);
    CHECK_THAT(c.warnings[0], Catch::StartsWith("cfg:3: ignored: 'ek-roots' needs a value"));
    roots = default_ek_roots();
    REQUIRE(roots.dirs.size() == 2);
    CHECK(roots.dirs[0] == home.dir / "vendor-roots");
    CHECK(roots.dirs[1] == "/srv/ek roots");
}

TEST_CASE("atomic writes: 0600, no overwrite unless asked, no temp file left") {
    TempHome home;
    const fs::path key = home.dir / "k.tpm";
    ::umask(0);
    write_file_atomically(key, "one", 0600, Replace::no);
    struct stat st {};
    REQUIRE(::stat(key.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    CHECK_THROWS_WITH(write_file_atomically(key, "two", 0600, Replace::no), Catch::Contains("already exists"));
    std::ifstream in(key);
    std::string content;
    in >> content;
    CHECK(content == "one");
    write_file_atomically(key, "three", 0600, Replace::yes);
    std::ifstream in2(key);
    in2 >> content;
    CHECK(content == "three");
    CHECK_THROWS(write_file_atomically(home.dir / "missing" / "k.tpm", "x", 0600, Replace::no));
    ::umask(022);
    int files = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(home.dir))
        ++files;
    CHECK(files == 2);  // .ssh and k.tpm: no temporary file left behind
}

TEST_CASE("a world-writable directory is refused for key files") {
    TempHome home;
    const fs::path open_dir = home.dir / "open";
    fs::create_directories(open_dir);
    ::chmod(open_dir.c_str(), 0777);
    CHECK_THROWS_WITH(write_file_atomically(open_dir / "k.tpm", "x", 0600, Replace::no),
                      Catch::Contains("writable by everyone"));
    CHECK_FALSE(fs::exists(open_dir / "k.tpm"));
}

TEST_CASE("record_same_pin: a same-pin line added, the rest kept; a file others may write is left alone") {
    TempHome home;
    const fs::path dir = home.dir / ".config" / "tpmkey";
    const fs::path file = dir / "config";
    SECTION("no config file yet: made 0600 in a 0700 directory") {
        fs::permissions(home.dir, fs::perms::owner_all);
        CHECK(record_same_pin("id_tpm", "work") == file);
        CHECK(record_same_pin("work", "laptop") == file);
        CHECK((fs::status(dir).permissions() & fs::perms::all) == fs::perms::owner_all);
        CHECK((fs::status(file).permissions() & fs::perms::all) == (fs::perms::owner_read | fs::perms::owner_write));
        const Config c = load_config();
        CHECK(c.warnings.empty());
        REQUIRE(c.same_pin.size() == 2);
        CHECK(c.same_pin[0] == std::vector<std::string>{"id_tpm", "work"});
        CHECK(c.same_pin[1] == std::vector<std::string>{"work", "laptop"});
    }
    SECTION("an existing file keeps its lines, also one without a final newline") {
        home.write_config("tcti swtpm:port=2321\nkey ~/keys");
        fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write);
        record_same_pin("id_tpm", "work");
        const Config c = load_config();
        CHECK(c.tpm.text() == "swtpm:port=2321");
        CHECK(c.searched.front() == file.string());
        REQUIRE(c.same_pin.size() == 1);
        CHECK(c.same_pin[0] == std::vector<std::string>{"id_tpm", "work"});
    }
    SECTION("a config file others may write: refused, unchanged") {
        home.write_config("tcti swtpm:port=2321\n");
        fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write | fs::perms::others_write);
        CHECK_THROWS_AS(record_same_pin("id_tpm", "work"), Error);
        std::ifstream in(file);
        const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        CHECK(text == "tcti swtpm:port=2321\n");
    }
}

TEST_CASE("askpass: found as OpenSSH finds it, run without a shell, its answer a Secret") {
    TempHome home;
    const fs::path script = home.dir / "askpass";
    const fs::path marker = home.dir / "ran";
    // Answers by the prompt; a confirmation only with SSH_ASKPASS_PROMPT=confirm.
    std::ofstream(script) << "#!/bin/sh\n"
                             "if [ \"$SSH_ASKPASS_PROMPT\" = confirm ]; then [ \"$1\" = 'Allow?' ]; exit; fi\n"
                             "case \"$1\" in *work*) printf 'pin of work\\r\\n' ;; *) exit 1 ;; esac\n";
    fs::permissions(script, fs::perms::owner_all);
    ::setenv("SSH_ASKPASS", script.c_str(), 1);
    ::unsetenv("DISPLAY");
    ::unsetenv("WAYLAND_DISPLAY");
    ::unsetenv("SSH_ASKPASS_REQUIRE");
    CHECK(find_askpass().program.empty());
    CHECK_THAT(find_askpass().why_not, Catch::StartsWith("no DISPLAY or WAYLAND_DISPLAY"));
    ::setenv("WAYLAND_DISPLAY", "wayland-0", 1);
    CHECK(find_askpass().program == script.string());
    ::setenv("SSH_ASKPASS_REQUIRE", "never", 1);
    // Not "the agent's environment": no agent runs this program (nor
    // pkcs11-tool, a browser, ssh itself), and its own environment counts.
    CHECK(find_askpass().why_not ==
          "SSH_ASKPASS_REQUIRE=never in the environment of " + std::string(program_invocation_short_name));
    CHECK_FALSE(running_in_ssh_agent());
    ::unsetenv("SSH_ASKPASS_REQUIRE");
    ::unsetenv("WAYLAND_DISPLAY");
    CHECK(find_askpass().why_not == "no DISPLAY or WAYLAND_DISPLAY in the environment of " +
                                        std::string(program_invocation_short_name) +
                                        " (run it in your desktop session, or with SSH_ASKPASS_REQUIRE=force and "
                                        "SSH_ASKPASS set)");
    ::setenv("SSH_ASKPASS_REQUIRE", "never", 1);
    ::unsetenv("WAYLAND_DISPLAY");
    ::setenv("SSH_ASKPASS_REQUIRE", "force", 1);
    const Askpass askpass = find_askpass();
    REQUIRE(askpass.program == script.string());

    const std::optional<Secret> pin = askpass_secret(askpass, "Enter PIN for 'work': ");
    REQUIRE(pin);
    CHECK(*pin == Secret("pin of work"));
    CHECK_FALSE(askpass_secret(askpass, "Enter PIN for 'zeta': "));
    // The prompt is one argument, never shell text.
    CHECK_FALSE(askpass_secret(askpass, "'$(touch " + marker.string() + ")'; touch " + marker.string()));
    CHECK_FALSE(fs::exists(marker));
    CHECK(askpass_confirm(askpass, "Allow?"));
    CHECK_FALSE(askpass_confirm(askpass, "Allow? (another)"));

    ::setenv("SSH_ASKPASS", (home.dir / "missing").c_str(), 1);
    CHECK_THAT(find_askpass().why_not, Catch::StartsWith("no askpass program "));
    ::unsetenv("SSH_ASKPASS");
    ::unsetenv("SSH_ASKPASS_REQUIRE");
}

TEST_CASE("config lines: confirm names keys; an empty one is skipped with a warning") {
    const ConfigFile c = parse_config("confirm work  laptop\nconfirm\nconfirm id_tpm\n", "cfg");
    CHECK(c.confirm == std::vector<std::string>{"work", "laptop", "id_tpm"});
    REQUIRE(c.warnings.size() == 1);
    CHECK_THAT(c.warnings[0], Catch::StartsWith("cfg:2: ignored: 'confirm' needs a value"));
}

TEST_CASE("config lines: pin-from names a key and a credential or keyring key; bad ones skipped with a warning") {
    const ConfigFile c = parse_config("pin-from host credential host-pin\n"
                                      "pin-from backup keyring tpmkey:backup\n"
                                      "pin-from work credential ../etc/pin\n"
                                      "pin-from work file /tmp/pin\n"
                                      "pin-from work credential\n"
                                      "pin-from host keyring other\n",
                                      "cfg");
    REQUIRE(c.pin_from.size() == 2);
    CHECK(c.pin_from[0].first == "host");
    CHECK(c.pin_from[0].second == PinSource{PinSource::Kind::credential, "host-pin"});
    CHECK(c.pin_from[1].first == "backup");
    CHECK(c.pin_from[1].second == PinSource{PinSource::Kind::keyring, "tpmkey:backup"});
    REQUIRE(c.warnings.size() == 4);
    CHECK_THAT(c.warnings[0], Catch::StartsWith("cfg:3: ignored: 'pin-from': a credential's name is a file name"));
    CHECK_THAT(c.warnings[1],
               Catch::StartsWith("cfg:4: ignored: 'pin-from' needs a key name, 'credential' or 'keyring'"));
    CHECK_THAT(c.warnings[2], Catch::StartsWith("cfg:5: ignored: 'pin-from' needs a key name"));
    CHECK_THAT(c.warnings[3], Catch::StartsWith("cfg:6: ignored: 'pin-from': a second source for 'host'"));
}

TEST_CASE("pin-from credential: read from $CREDENTIALS_DIRECTORY only when private; one newline dropped") {
    test::TempDir dir;
    const fs::path creds = dir.path / "creds";
    fs::create_directory(creds);
    fs::permissions(creds, fs::perms::owner_all);
    const fs::path file = creds / "pin";
    std::ofstream(file) << "secret PIN\n";
    const PinSource source{PinSource::Kind::credential, "pin"};

    ::unsetenv("CREDENTIALS_DIRECTORY");
    CHECK_THROWS_WITH(read_pin(source), Catch::Contains("$CREDENTIALS_DIRECTORY is not set") &&
                                            Catch::Contains("LoadCredentialEncrypted=pin:FILE"));
    ::setenv("CREDENTIALS_DIRECTORY", "relative/dir", 1);
    CHECK_THROWS_WITH(read_pin(source), Catch::Contains("is not set to an absolute path"));
    ::setenv("CREDENTIALS_DIRECTORY", creds.c_str(), 1);

    for (const fs::perms readable : {fs::perms::group_read, fs::perms::others_read, fs::perms::others_write}) {
        fs::permissions(file, fs::perms::owner_read | readable);
        CHECK_THROWS_WITH(read_pin(source), Catch::Contains("is readable or writable by others") &&
                                                Catch::Contains("(chmod 0400 " + file.string() + ")"));
    }
    fs::permissions(file, fs::perms::owner_read);
    CHECK(read_pin(source) == Secret("secret PIN"));
    fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write);
    std::ofstream(file) << "no newline";
    CHECK(read_pin(source) == Secret("no newline"));
    std::ofstream(file) << "\n";
    CHECK_THROWS_WITH(read_pin(source), Catch::Contains("empty; the key has a PIN"));
    std::ofstream(file) << std::string(max_source_pin_size + 1, 'x');
    CHECK_THROWS_WITH(read_pin(source), Catch::Contains("longer than 1024 bytes"));

    // A link or a FIFO in the credential's place is no credential.
    fs::remove(file);
    fs::create_symlink(dir.path / "elsewhere", file);
    CHECK_THROWS_WITH(read_pin(source), Catch::Contains("cannot read the systemd credential 'pin'"));
    fs::remove(file);
    REQUIRE(::mkfifo(file.c_str(), 0600) == 0);
    CHECK_THROWS_WITH(read_pin(source), Catch::Contains("is not a regular file"));
    fs::remove(file);
    CHECK_THROWS_WITH(read_pin(source), Catch::Contains("No such file or directory"));
    // A directory others may write: they could have put their PIN there.
    std::ofstream(file) << "secret PIN\n";
    fs::permissions(file, fs::perms::owner_read);
    fs::permissions(creds, fs::perms::all);
    CHECK_THROWS_WITH(read_pin(source), Catch::Contains("is writable by others, who could replace the PIN"));
    ::unsetenv("CREDENTIALS_DIRECTORY");
}

TEST_CASE("config lines: confirm, same-pin and pin-from name a key as NAME, NAME.tpm or its path; others warn") {
    TempHome home;
    home.touch(home.dir / ".ssh" / "k0.tpm");
    home.touch(home.dir / ".ssh" / "work.tpm");
    home.write_config("confirm k0.tpm\nconfirm ~/.ssh/work.tpm\nconfirm " + (home.dir / ".ssh" / "k0.tpm").string() +
                      "\nconfirm K0\nconfirm ~/keys/k0.tpm\nsame-pin work.tpm ~/.ssh/k0.tpm\n"
                      "pin-from ~/.ssh/work.tpm keyring tpmkey:work\npin-from work credential work-pin\n");
    fs::permissions(home.dir / ".config" / "tpmkey" / "config", fs::perms::owner_read | fs::perms::owner_write);
    const Config c = load_config();
    // Once a confirm k0.tpm, a confirm ~/.ssh/k0.tpm or a confirm K0 let k0
    // sign with no question and no word.
    CHECK(c.confirm == std::vector<std::string>{"k0", "work", "k0", "K0", "~/keys/k0.tpm"});
    REQUIRE(c.same_pin.size() == 1);
    CHECK(c.same_pin[0] == std::vector<std::string>{"work", "k0"});
    REQUIRE(c.pin_from.size() == 1);
    CHECK(c.pin_from[0].first == "work");
    CHECK(c.pin_from[0].second.kind == PinSource::Kind::keyring);
    REQUIRE(c.warnings.size() == 3);
    CHECK_THAT(c.warnings[0], Catch::Contains("'confirm K0': 'K0' names none of the keys found in") &&
                                  Catch::Contains("(k0, work)") && Catch::Contains("case-sensitive") &&
                                  Catch::Contains("'k0'?"));
    CHECK_THAT(c.warnings[1], Catch::Contains("'confirm ~/keys/k0.tpm': '~/keys/k0.tpm' names none of the keys") &&
                                  !Catch::Contains("case-sensitive"));
    CHECK_THAT(c.warnings[2], Catch::Contains("'pin-from work': ignored: a second source for that key"));
}
