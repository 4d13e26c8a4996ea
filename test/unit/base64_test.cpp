// core/base/base64: RFC 4648's vectors (10) in both alphabets, and what a
// peer or a file might send instead: padding where there is none or in the
// middle, the other alphabet, white space, impossible lengths, non-zero
// left-over bits (3.5), bytes that are no characters, and texts longer
// than one OpenSSL call takes. The callers' own refusals are in
// exchange_file_test, ak_certificate_test (the webhook's secret) and
// step_ssh_test.
#include "core/base/base64.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace tpmkey;

namespace {

std::string text_of(const Bytes& b) { return std::string(b.begin(), b.end()); }

Bytes bytes_of(std::string_view s) { return Bytes(s.begin(), s.end()); }

}  // namespace

TEST_CASE("base64: RFC 4648's vectors, padded, the standard alphabet", "[base64]") {
    const std::pair<const char*, const char*> vectors[] = {{"", ""},
                                                           {"f", "Zg=="},
                                                           {"fo", "Zm8="},
                                                           {"foo", "Zm9v"},
                                                           {"foob", "Zm9vYg=="},
                                                           {"fooba", "Zm9vYmE="},
                                                           {"foobar", "Zm9vYmFy"}};
    for (const auto& [plain, encoded] : vectors) {
        CAPTURE(plain);
        CHECK(base64(bytes_of(plain)) == encoded);
        REQUIRE(base64_decode(encoded));
        CHECK(text_of(*base64_decode(encoded)) == plain);
    }
    const Bytes high{0xfb, 0xff, 0xbf};
    CHECK(base64(high) == "+/+/");
    CHECK(base64_decode("+/+/") == high);
    CHECK(base64_decode("AA==") == Bytes{0});
    CHECK(base64_decode("AQI=") == Bytes{1, 2});
    CHECK(base64_decode("AAAA") == Bytes{0, 0, 0});
    CHECK(base64_decode("+/8=") == Bytes{0xfb, 0xff});
}

TEST_CASE("base64url: RFC 4648's vectors, the URL alphabet, no padding", "[base64]") {
    const std::pair<const char*, const char*> vectors[] = {
        {"", ""},           {"f", "Zg"},          {"fo", "Zm8"},         {"foo", "Zm9v"},
        {"foob", "Zm9vYg"}, {"fooba", "Zm9vYmE"}, {"foobar", "Zm9vYmFy"}};
    for (const auto& [plain, encoded] : vectors) {
        CAPTURE(plain);
        CHECK(base64url(std::string_view(plain)) == encoded);
        CHECK(base64url(bytes_of(plain)) == encoded);
        REQUIRE(base64url_decode(encoded));
        CHECK(text_of(*base64url_decode(encoded)) == plain);
    }
    const Bytes high{0xfb, 0xff, 0xbf};
    CHECK(base64url(high) == "-_-_");
    CHECK(base64url_decode("-_-_") == high);
    // RFC 7515 A.1's protected header, CR LF and all.
    CHECK(base64url(std::string_view("{\"typ\":\"JWT\",\r\n \"alg\":\"HS256\"}")) ==
          "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9");
}

TEST_CASE("base64: every byte value, and every length to 100, round trip in both alphabets", "[base64]") {
    Bytes all;
    for (int b = 0; b < 256; ++b)
        all.push_back(static_cast<std::uint8_t>(b));
    for (std::size_t size = 0; size <= 100; ++size) {
        const Bytes data(all.begin() + static_cast<long>(size), all.begin() + static_cast<long>(2 * size));
        CAPTURE(size);
        CHECK(base64_decode(base64(data)) == data);
        CHECK(base64url_decode(base64url(data)) == data);
        CHECK(base64(data).size() == 4 * ((size + 2) / 3));
        CHECK(base64url(data).size() == (4 * size + 2) / 3);
    }
}

TEST_CASE("base64: padding misplaced, another alphabet, white space, impossible lengths are refused", "[base64]") {
    for (const char* bad : {"A",     "AA",   "AAA",  "Zg",       "Zg=",    "AA=A",        "Zg=a",     "A===",  "Z===",
                            "====",  "=Zg=", "=AAA", "Zg==Zg==", "AA\n==", "Zm9v\n",      "AA== ",    " AA==", "Zm9 ",
                            "AA EC", "-_8=", "Zm-_", "AAE-",     "AAE_",   "AAE\xc3\xa4", "Zm9vYg==="}) {
        CAPTURE(bad);
        CHECK_FALSE(base64_decode(bad));
    }
    CHECK_FALSE(base64_decode(std::string_view("Zm\0v", 4)));
}

TEST_CASE("base64url: padding, another alphabet, impossible lengths and non-canonical ends are refused", "[base64]") {
    for (const char* bad :
         {"Zg==", "Zg=", "Zm8=", "a+b/", "Zm9vY", "A", "Zh", "Zm9", "Zm\n9v", " Zg", "Zg ", "Zm 9v", "Zm9v\xff"}) {
        CAPTURE(bad);
        CHECK_FALSE(base64url_decode(bad));
    }
    CHECK_FALSE(base64url_decode(std::string_view("Zm\0v", 4)));
}

TEST_CASE("base64: bits left over in the last group are refused (RFC 4648 3.5: one text per byte string)", "[base64]") {
    // "f" is Zg: 'g' is 32, its low 4 bits unused; Zh has one set. "fo" is
    // Zm8: '8' is 60, its low 2 bits unused; Zm9 has one set.
    CHECK(base64_decode("Zg==") == bytes_of("f"));
    CHECK(base64url_decode("Zg") == bytes_of("f"));
    for (const char* bad : {"Zh==", "Zv==", "Z/==", "Zm9=", "Zm/=", "AB=="}) {
        CAPTURE(bad);
        CHECK_FALSE(base64_decode(bad));
    }
    for (const char* bad : {"Zh", "Zv", "Z_", "Zm9", "Zm_", "AB"}) {
        CAPTURE(bad);
        CHECK_FALSE(base64url_decode(bad));
    }
}

TEST_CASE("base64: texts longer than one OpenSSL call takes (4 MiB) are whole, and checked to their end", "[base64]") {
    // 3 MiB + 2 bytes: a second call for the last group and its padding.
    Bytes data((std::size_t{3} << 20) + 2);
    for (std::size_t i = 0; i < data.size(); ++i)
        data[i] = static_cast<std::uint8_t>(i * 7 + i / 251);
    const std::string text = base64(data);
    REQUIRE(text.size() == (std::size_t{4} << 20) + 4);
    CHECK(text.ends_with("="));
    CHECK(base64_decode(text) == data);
    CHECK(base64url_decode(base64url(data)) == data);
    // A flaw in the second call's part is still found.
    for (const char flaw : {'.', '\n', '-'}) {
        std::string flawed = text;
        flawed[text.size() - 3] = flaw;
        CHECK_FALSE(base64_decode(flawed));
    }
}
