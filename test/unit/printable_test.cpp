// printable(): names shown on a terminal or given as a PKCS#11 label with
// what a terminal would act on escaped, as `ls -b` does (docs/security.md,
// "Threat model": a key file name with control characters).
#include "core/base/printable.hpp"

#include <catch2/catch.hpp>

#include <string>

using tpmkey::printable;

TEST_CASE("printable: plain names and UTF-8 stay as they are") {
    CHECK(printable("id_tpm") == "id_tpm");
    CHECK(printable("/home/me/.ssh/work key.tpm") == "/home/me/.ssh/work key.tpm");
    CHECK(printable("cl\xc3\xa9_\xe2\x82\xac_\xf0\x9f\x94\x91") == "cl\xc3\xa9_\xe2\x82\xac_\xf0\x9f\x94\x91");
    CHECK(printable("") == "");
}

TEST_CASE("printable: control characters are escaped as ls -b does") {
    CHECK(printable("a\nb") == "a\\nb");
    CHECK(printable("\t\r\a\b\f\v") == "\\t\\r\\a\\b\\f\\v");
    CHECK(printable("x\x1b[2J") == "x\\033[2J");  // clear the screen
    CHECK(printable(std::string("a\0b", 3)) == "a\\000b");
    CHECK(printable("\x7f") == "\\177");
    CHECK(printable("k\n[ok]      all is well") == "k\\n[ok]      all is well");
}

TEST_CASE("printable: the backslash itself is escaped, so the escaping can be read back") {
    CHECK(printable("a\\nb") == "a\\\\nb");
    CHECK(printable("a\nb") != printable("a\\nb"));
}

TEST_CASE("printable: C1 controls and bytes that are not UTF-8 are escaped") {
    CHECK(printable("\xc2\x9b"
                    "2J") == "\\302\\2332J");    // U+009B: CSI
    CHECK(printable("\xc2\xa0") == "\xc2\xa0");  // U+00A0 is printable
    CHECK(printable("\x9b"
                    "2J") == "\\2332J");                             // a lone CSI byte
    CHECK(printable("\xc3") == "\\303");                             // cut short
    CHECK(printable("\xc0\xaf") == "\\300\\257");                    // overlong '/'
    CHECK(printable("\xed\xa0\x80") == "\\355\\240\\200");           // a surrogate
    CHECK(printable("\xf4\x90\x80\x80") == "\\364\\220\\200\\200");  // above U+10FFFF
}
