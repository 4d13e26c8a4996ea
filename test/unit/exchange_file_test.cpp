// The exchange files of key attestation (core/attestation/exchange_file.hpp): a
// round trip of text and binary fields, and every refusal of a file that
// is not exactly what the format allows.
#include "core/attestation/exchange_file.hpp"
#include "core/base/error.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>

using namespace tpmkey;
using Catch::Matchers::Contains;

namespace {

ExchangeFile parse(const std::string& contents) {
    return ExchangeFile::parse(contents, "ak-proof", ak_proof_file::fields, "proof.txt");
}

}  // namespace

TEST_CASE("exchange file: a round trip keeps every field, sorted by name, binary as base64", "[exchange-file]") {
    for (std::size_t size = 0; size <= 5; ++size) {  // every padding: none, ==, =
        Bytes secret;
        for (std::size_t i = 0; i < size; ++i)
            secret.push_back(static_cast<std::uint8_t>(0xfd + i));
        ExchangeFile file("ak-proof");
        file.set_bytes("secret", secret);
        file.set_text("ak-name", "text with spaces, and UTF-8: \xc3\xa4");
        const std::string text = file.to_string();
        CHECK(text.rfind("tpmkey-ak-proof 1\nak-name text with spaces", 0) == 0);
        const ExchangeFile back = parse(text);
        CHECK(back.kind() == "ak-proof");
        CHECK(back.bytes("secret") == secret);
        CHECK(back.text("ak-name") == "text with spaces, and UTF-8: \xc3\xa4");
        CHECK(back.to_string() == text);
    }
    CHECK(parse("tpmkey-ak-proof 1\nsecret AAEC\n").bytes("secret") == Bytes{0, 1, 2});
}

TEST_CASE("exchange file: another kind, another version, no header, an empty file are refused", "[exchange-file]") {
    CHECK_THROWS_WITH(parse("tpmkey-ak-request 1\nsecret AAEC\n"),
                      "proof.txt: not a tpmkey ak-proof file (its first line must be 'tpmkey-ak-proof 1')");
    CHECK_THROWS_WITH(parse("tpmkey-ak-proof 2\nsecret AAEC\n"), Contains("not a tpmkey ak-proof file"));
    CHECK_THROWS_WITH(parse("tpmkey-ak-proof  1\n"), Contains("not a tpmkey ak-proof file"));
    CHECK_THROWS_WITH(parse("secret AAEC\n"), Contains("not a tpmkey ak-proof file"));
    CHECK_THROWS_WITH(parse(""), "proof.txt: empty, not a tpmkey ak-proof file");
}

TEST_CASE("exchange file: a field twice, an unknown field, a line that is not NAME VALUE are refused",
          "[exchange-file]") {
    CHECK_THROWS_WITH(parse("tpmkey-ak-proof 1\nsecret AAEC\nsecret AAEC\n"), "proof.txt: secret given twice");
    CHECK_THROWS_WITH(parse("tpmkey-ak-proof 1\nsecrets AAEC\n"), "proof.txt: unknown field 'secrets'");
    CHECK_THROWS_WITH(parse("tpmkey-ak-proof 1\nsecret\n"), "proof.txt: a line is not 'NAME VALUE'");
    CHECK_THROWS_WITH(parse("tpmkey-ak-proof 1\n\n"), "proof.txt: a line is not 'NAME VALUE'");
    CHECK_THROWS_WITH(parse("tpmkey-ak-proof 1\n# comment\n"), "proof.txt: a line is not 'NAME VALUE'");
    CHECK_THROWS_WITH(parse("tpmkey-ak-proof 1\nSecret AAEC\n"), "proof.txt: a line is not 'NAME VALUE'");
}

TEST_CASE("exchange file: no newline at the end, a carriage return, a control character are refused",
          "[exchange-file]") {
    CHECK_THROWS_WITH(parse("tpmkey-ak-proof 1\nsecret AAEC"), "proof.txt: the last line has no end (a cut file?)");
    CHECK_THROWS_WITH(parse("tpmkey-ak-proof 1"), "proof.txt: the last line has no end (a cut file?)");
    CHECK_THROWS_WITH(parse("tpmkey-ak-proof 1\nsecret AAEC\r\n"), "proof.txt: secret is not printable text");
    CHECK_THROWS_WITH(parse("tpmkey-ak-proof 1\nak-name a\x1b[2Jb\n"), "proof.txt: ak-name is not printable text");
    CHECK_THROWS_WITH(parse(std::string("tpmkey-ak-proof 1\nak-name a\0b\n", 30)),
                      "proof.txt: ak-name is not printable text");
}

TEST_CASE("exchange file: a binary field that is not strict base64, or too long, is refused", "[exchange-file]") {
    for (const char* bad :
         {"AAE", "AAECA", "AA=C", "A===", "AAEC====", "AA EC", "AAE\xc3\xa4", "AAE-", "AAE_", "=AAA", "AB==", "AAF="}) {
        CAPTURE(bad);
        const ExchangeFile file = parse(std::string("tpmkey-ak-proof 1\nsecret ") + bad + "\n");
        CHECK_THROWS_WITH(file.bytes("secret"), "proof.txt: secret is not base64");
    }
    const ExchangeFile file = parse("tpmkey-ak-proof 1\nsecret AAECAw==\n");
    CHECK(file.bytes("secret", 4) == Bytes{0, 1, 2, 3});
    CHECK_THROWS_WITH(file.bytes("secret", 3), "proof.txt: secret is too long (4 bytes)");
    CHECK_THROWS_WITH(file.text("ak-name"), "proof.txt: no ak-name");
}

TEST_CASE("exchange file: a value that would break the format is not written", "[exchange-file]") {
    ExchangeFile file("ak-proof");
    CHECK_THROWS_AS(file.set_text("ak-name", "two\nlines"), Error);
    CHECK_THROWS_AS(file.set_text("ak-name", "cr\r"), Error);
    CHECK_THROWS_AS(file.set_text("ak-name", "escape \x1b"), Error);
    CHECK_THROWS_AS(file.set_text("Ak name", "x"), Error);
    CHECK_THROWS_AS(file.set_text("", "x"), Error);
    CHECK(file.to_string() == "tpmkey-ak-proof 1\n");
}

// Each kind's name and fields are in exchange_file.hpp alone; the table of
// docs/attestation.md ("The files") lists the same kinds and fields.
TEST_CASE("exchange file: the kinds and fields are the ones docs/attestation.md lists", "[exchange-file]") {
    std::ifstream doc(TPMKEY_DOCS "/attestation.md");
    REQUIRE(doc);
    std::map<std::string, std::set<std::string>> documented;
    bool in_table = false;
    for (std::string line; std::getline(doc, line);) {
        if (line == "| kind | written by | fields |") {
            in_table = true;
            continue;
        }
        if (!in_table || line == "|---|---|---|")
            continue;
        if (line.rfind("| `", 0) != 0)
            break;
        // "| `KIND` | WRITER | `name` (...), `name`, ... |": the fields are
        // the names in backquotes of the last cell (not `0x01c0000a`, `.pub`).
        const std::size_t kind_end = line.find('`', 3);
        const std::string kind = line.substr(3, kind_end - 3);
        const std::string cell = line.substr(line.rfind(" | ") + 3);
        static const std::regex field("`([a-z][a-z0-9-]*)`");
        std::set<std::string>& fields = documented[kind];
        for (std::sregex_iterator it(cell.begin(), cell.end(), field), end; it != end; ++it)
            fields.insert((*it)[1]);
    }
    const auto fields_of = [](std::initializer_list<const char*> list) {
        return std::set<std::string>(list.begin(), list.end());
    };
    const std::map<std::string, std::set<std::string>> in_code{
        {ak_request_file::kind, fields_of(ak_request_file::fields)},
        {ak_challenge_file::kind, fields_of(ak_challenge_file::fields)},
        {ak_proof_file::kind, fields_of(ak_proof_file::fields)},
        {attestation_file::kind, fields_of(attestation_file::fields)},
    };
    CHECK(documented == in_code);
    // Each list names each field once.
    for (const auto list : {ak_request_file::fields, ak_challenge_file::fields, ak_proof_file::fields,
                            attestation_file::fields, ak_pending_file::fields})
        CHECK(fields_of(list).size() == list.size());
    // The CA's pending file holds the request, the secret and when it was made.
    std::set<std::string> pending = fields_of(ak_request_file::fields);
    pending.insert({ak_pending_file::secret, ak_pending_file::created});
    CHECK(fields_of(ak_pending_file::fields) == pending);
}
