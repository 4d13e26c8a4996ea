// Reading ~/.ssh/config as ssh does (tools/tpmkey/ssh_config.hpp): what
// tpmkey ssh-config and doctor find in it decides what they add or report.
#include "ssh_config.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace tpmkey::cli;

namespace {

// "LINE_NO VALUE" for each line config_lines finds: a whole result in one
// comparison, printed readably when it fails.
std::vector<std::string> found(const std::string& text, const std::string& keyword) {
    std::vector<std::string> out;
    for (const ConfigLine& l : config_lines(text, keyword))
        out.push_back(std::to_string(l.line_no) + " " + l.value);
    return out;
}

using Lines = std::vector<std::string>;

}  // namespace

TEST_CASE("ssh config lines: keywords in any case, then blanks or one '=', then the value, quoted or not") {
    const std::string text = "# PKCS11Provider /commented.so\n"
                             "PKCS11Provider /a.so\n"
                             "pkcs11provider=/b.so\n"
                             "\n"
                             "PKCS11PROVIDER = /c.so\n"
                             "Pkcs11Provider\t/d.so  \t\r\n"  // trailing blanks and CR are dropped
                             "   \t\n"
                             "  PKCS11Provider   /e.so\n"
                             "  # indented comment\n"
                             "PKCS11Provider \"/opt/my keys/tpmkey-pkcs11.so\"\n"
                             "PKCS11ProviderX /not-this.so\n"
                             "PubkeyAcceptedAlgorithms=\"-rsa-sha2-512\"\n";
    CHECK(found(text, "pkcs11provider") ==
          Lines{"2 /a.so", "3 /b.so", "5 /c.so", "6 /d.so", "8 /e.so", "10 /opt/my keys/tpmkey-pkcs11.so"});
    CHECK(found(text, "pubkeyacceptedalgorithms") == Lines{"12 -rsa-sha2-512"});
}

TEST_CASE("ssh config lines: Host and Match blocks last to the next one, only '*' and 'all' cover all hosts") {
    const std::string text = "PKCS11Provider /top.so\n"
                             "Host example.com\n"
                             "  PKCS11Provider /example.so\n"
                             "host *\n"
                             "  PKCS11Provider /star.so\n"
                             "Match host work.example\n"
                             "  PKCS11Provider /match.so\n"
                             "MATCH all\n"
                             "  PKCS11Provider /all.so\n"
                             "Host=*.example.org\n"
                             "  PKCS11Provider /org.so\n"
                             "Host \"*\"\n"
                             "  PKCS11Provider /quoted-star.so\n";
    struct Expected {
        const char* value;
        const char* block;
        bool all_hosts;
    };
    const Expected expected[] = {
        {"/top.so", "", true},
        {"/example.so", "Host example.com", false},
        {"/star.so", "host *", true},
        {"/match.so", "Match host work.example", false},
        {"/all.so", "MATCH all", true},
        {"/org.so", "Host=*.example.org", false},
        {"/quoted-star.so", "Host \"*\"", true},
    };
    const std::vector<ConfigLine> lines = config_lines(text, "pkcs11provider");
    REQUIRE(lines.size() == std::size(expected));
    for (std::size_t i = 0; i < lines.size(); ++i) {
        INFO("line " << lines[i].line_no);
        CHECK(lines[i].line_no == static_cast<int>(2 * i + 1));
        CHECK(lines[i].value == expected[i].value);
        CHECK(lines[i].block == expected[i].block);
        CHECK(lines[i].all_hosts == expected[i].all_hosts);
    }
}

TEST_CASE("ssh config lines: none in an empty text or one without the keyword") {
    CHECK(found("", "pkcs11provider").empty());
    CHECK(found("Host *\n  User me\n", "pkcs11provider").empty());
}

TEST_CASE("is_tpmkey_module: the file name decides, wherever it is installed") {
    CHECK(is_tpmkey_module("/usr/lib/x86_64-linux-gnu/pkcs11/tpmkey-pkcs11.so"));
    CHECK(is_tpmkey_module("/usr/local/lib/pkcs11/tpmkey-pkcs11.so"));
    CHECK(is_tpmkey_module("tpmkey-pkcs11.so"));
    CHECK_FALSE(is_tpmkey_module("/usr/lib/x86_64-linux-gnu/opensc-pkcs11.so"));
    CHECK_FALSE(is_tpmkey_module("/usr/lib/pkcs11/tpmkey-pkcs11.so.1"));
    CHECK_FALSE(is_tpmkey_module("/usr/lib/tpmkey-pkcs11.so/other.so"));
    CHECK_FALSE(is_tpmkey_module(""));
}
