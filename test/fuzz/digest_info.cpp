// Fuzz target: the DigestInfo parser of CKM_RSA_PKCS
// (provider/module/mechanisms.cpp, parse_digest_info), which reads bytes
// straight from the PKCS#11 caller, and ecdsa_request, which takes the raw
// digest of CKM_ECDSA.
//
// Properties: parse_digest_info accepts exactly the four DER DigestInfo
// encodings of RFC 8017, 9.2, note 1 (SHA-1/256/384/512 with NULL
// parameters and a digest of the right length): everything it accepts has
// that form and yields that digest, and everything of that form is
// accepted. ecdsa_request always yields a digest of the curve's size that
// is the input's first bytes, zero padded on the left (FIPS 186-4, 6.4).
#include "fuzz.hpp"

#include "module/mechanisms.hpp"

#include <algorithm>
#include <cstring>

namespace {

struct Prefix {
    TPM2_ALG_ID hash;
    std::uint8_t bytes[19];
    std::size_t size;
};

// RFC 8017, 9.2, note 1: the DER of DigestInfo up to the digest's bytes.
constexpr Prefix prefixes[] = {
    {TPM2_ALG_SHA1, {0x30, 0x21, 0x30, 0x09, 0x06, 0x05, 0x2b, 0x0e, 0x03, 0x02, 0x1a, 0x05, 0x00, 0x04, 0x14}, 15},
    {TPM2_ALG_SHA256,
     {0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00, 0x04, 0x20},
     19},
    {TPM2_ALG_SHA384,
     {0x30, 0x41, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x02, 0x05, 0x00, 0x04, 0x30},
     19},
    {TPM2_ALG_SHA512,
     {0x30, 0x51, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x03, 0x05, 0x00, 0x04, 0x40},
     19},
};

// The hash whose DigestInfo `der` is, or nullptr.
const Prefix* well_formed(std::span<const std::uint8_t> der) {
    for (const Prefix& p : prefixes) {
        const std::size_t digest = p.bytes[p.size - 1];
        if (der.size() == p.size + digest && std::memcmp(der.data(), p.bytes, p.size) == 0)
            return &p;
    }
    return nullptr;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) { return 0; }

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace tpmkey::pkcs11;
    const std::span<const std::uint8_t> input(data, size);

    const std::optional<TpmSignRequest> request = parse_digest_info(input);
    const Prefix* expected = well_formed(input);
    FUZZ_CHECK(request.has_value() == (expected != nullptr));
    if (request) {
        FUZZ_CHECK(request->scheme == TPM2_ALG_RSASSA);
        FUZZ_CHECK(request->hash == expected->hash);
        FUZZ_CHECK(request->digest.size() == digest_size(expected->hash));
        FUZZ_CHECK(std::equal(request->digest.begin(), request->digest.end(),
                              input.begin() + static_cast<long>(expected->size)));
    }

    // P-256, P-384: a digest of the field's size; P-521 (66 bytes): SHA-512's 64.
    for (const std::size_t field : {std::size_t{32}, std::size_t{48}, std::size_t{66}}) {
        const TpmSignRequest ecdsa = ecdsa_request(input, field);
        const std::size_t want = std::min(field, std::size_t{64});
        FUZZ_CHECK(ecdsa.scheme == TPM2_ALG_ECDSA);
        FUZZ_CHECK(ecdsa.digest.size() == want);
        FUZZ_CHECK(digest_size(ecdsa.hash) == want);
        const std::size_t n = std::min(size, want);
        FUZZ_CHECK(std::all_of(ecdsa.digest.begin(), ecdsa.digest.end() - static_cast<long>(n),
                               [](std::uint8_t b) { return b == 0; }));
        FUZZ_CHECK(std::equal(ecdsa.digest.end() - static_cast<long>(n), ecdsa.digest.end(), input.begin()));
    }
    return 0;
}
