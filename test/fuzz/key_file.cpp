// Fuzz target: the TSS2 PRIVATE KEY parser (provider/core/keys/key_file.cpp),
// which reads files a user may have been handed by anyone.
//
// Input: one mode byte, then the payload; the mode is the byte modulo 3.
//  0: the payload is DER, wrapped here into a PEM block with the right
//     label, so that mutations reach the DER walker instead of breaking
//     the base64;
//  1: the payload is the file's text as is (PEM armour, labels, headers);
//  2: the payload is a list of elements, each a tag byte, a two-byte
//     length and that many bytes of content; they are encoded here as DER
//     with correct lengths inside the outer SEQUENCE, so that mutations
//     can grow or shrink a field (a longer OID, a bigger INTEGER) without
//     having to fix up the lengths around it.
//
// Properties: parse_key_file either returns a key or throws tpmkey::Error
// (nothing else, no crash); so does check_usable, which unmarshals the
// policy commands' parameters; a key it returns is written back by
// format_key_file into a file that parses to the same key, and writing that
// again gives the same text (the writer's output is a fixed point).
#include "fuzz.hpp"

#include "../unit/der_builder.hpp"
#include "core/base/error.hpp"
#include "core/keys/key_file.hpp"

#include <tss2/tss2_mu.h>

#include <algorithm>
#include <cstring>
#include <string>

namespace {

// Mode 0: the DER in its PEM armour.
std::string pem_of(std::span<const std::uint8_t> der) {
    return test::pem("TSS2 PRIVATE KEY", test::Der(der.begin(), der.end()));
}

// Mode 2: the elements, as a DER SEQUENCE.
test::Der der_of_elements(std::span<const std::uint8_t> in) {
    test::Der body;
    std::size_t i = 0;
    while (i + 3 <= in.size()) {
        const std::uint8_t tag = in[i];
        const std::size_t n = std::min<std::size_t>((std::size_t{in[i + 1]} << 8) | in[i + 2], in.size() - i - 3);
        const auto content = in.subspan(i + 3, n);
        const test::Der element = test::tlv(tag, test::Der(content.begin(), content.end()));
        body.insert(body.end(), element.begin(), element.end());
        i += 3 + n;
    }
    return test::tlv(0x30, body);
}

std::span<const std::uint8_t> bytes_of(const std::string& s) {
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

bool same_key(const tpmkey::KeyFile& a, const tpmkey::KeyFile& b) {
    // The writer keeps type, emptyAuth, the policies, the description, parent, pubkey and privkey.
    std::uint8_t ma[sizeof(TPM2B_PUBLIC)], mb[sizeof(TPM2B_PUBLIC)];
    std::size_t na = 0, nb = 0;
    if (Tss2_MU_TPM2B_PUBLIC_Marshal(&a.blobs.pub, ma, sizeof ma, &na) != TSS2_RC_SUCCESS ||
        Tss2_MU_TPM2B_PUBLIC_Marshal(&b.blobs.pub, mb, sizeof mb, &nb) != TSS2_RC_SUCCESS)
        return false;
    return a.empty_auth == b.empty_auth && a.policy == b.policy && a.signed_policies == b.signed_policies &&
           a.description == b.description && a.parent == b.parent && na == nb && std::memcmp(ma, mb, na) == 0 &&
           a.blobs.priv.size == b.blobs.priv.size &&
           std::memcmp(a.blobs.priv.buffer, b.blobs.priv.buffer, a.blobs.priv.size) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) { return 0; }

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0)
        return 0;
    const std::span<const std::uint8_t> payload(data + 1, size - 1);
    std::string wrapped;
    std::span<const std::uint8_t> file = payload;
    switch (data[0] % 3) {
    case 0:
        wrapped = pem_of(payload);
        file = bytes_of(wrapped);
        break;
    case 2:
        wrapped = pem_of(der_of_elements(payload));
        file = bytes_of(wrapped);
        break;
    default: break;
    }
    tpmkey::KeyFile key;
    try {
        key = tpmkey::parse_key_file(file, "fuzz.tpm");
    } catch (const tpmkey::Error&) {
        return 0;  // refused with a message: fine
    }
    try {
        tpmkey::check_usable(key, "fuzz.tpm");
    } catch (const tpmkey::Error&) {
        // refused with a message: fine
    }
    const std::string text = tpmkey::format_key_file(key);
    tpmkey::KeyFile again;
    try {
        again = tpmkey::parse_key_file(bytes_of(text), "again.tpm");
    } catch (const tpmkey::Error& e) {
        std::fprintf(stderr, "our own output does not parse: %s\n", e.what());
        FUZZ_CHECK(false);
    }
    FUZZ_CHECK(same_key(key, again));
    FUZZ_CHECK(tpmkey::format_key_file(again) == text);
    return 0;
}
