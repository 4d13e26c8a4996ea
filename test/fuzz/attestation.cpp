// Fuzz target: the decoder of a key's attestation (the attestation-object
// field of an `attestation` file: core/attestation/cbor.cpp, core/attestation/webauthn.cpp),
// what tpmkey-ca verify reads from a hostile file before any signature is
// checked.
//
// Properties: decoding throws only tpmkey::Error, never crashes; an object
// that is read back is built again (attestation_object) into one that reads
// back to the same fields; authData, certInfo and pubArea inside it are read
// or refused with Error the same way. The same input is also read as a
// security key's attestation file and as its .pub line
// (core/attestation/sk_attestation.hpp, tpmkey-ca verify-sk): Error or a
// result within bounds.
#include "fuzz.hpp"

#include "core/attestation/cbor.hpp"
#include "core/attestation/sk_attestation.hpp"
#include "core/attestation/webauthn.hpp"
#include "core/base/error.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) { return 0; }

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::uint8_t> input(data, size);
    try {
        (void)tpmkey::cbor::decode(input, "input");
    } catch (const tpmkey::Error&) {
    }
    try {
        const tpmkey::SkAttestation sk = tpmkey::parse_sk_attestation(input);
        FUZZ_CHECK(sk.attestation_cert.size() + sk.signature.size() + sk.authdata.size() <= size);
    } catch (const tpmkey::Error&) {
    }
    try {
        const tpmkey::SkPublicKey pub =
            tpmkey::parse_sk_public_key(std::string_view(reinterpret_cast<const char*>(data), size));
        FUZZ_CHECK(pub.point.size() == 65 && pub.point[0] == 0x04 && pub.application.size() <= 1024);
    } catch (const tpmkey::Error&) {
    }
    tpmkey::TpmAttestation a;
    try {
        a = tpmkey::parse_attestation_object(input);
    } catch (const tpmkey::Error&) {
        return 0;
    }
    const tpmkey::TpmAttestation again = tpmkey::parse_attestation_object(tpmkey::attestation_object(a));
    FUZZ_CHECK(again.auth_data == a.auth_data && again.alg == a.alg && again.x5c == a.x5c && again.sig == a.sig &&
               again.cert_info == a.cert_info && again.pub_area == a.pub_area);
    FUZZ_CHECK(!a.x5c.empty());
    try {
        const tpmkey::AuthData auth = tpmkey::parse_auth_data(a.auth_data);
        FUZZ_CHECK(auth.rp_id_hash.size() == 32 && auth.aaguid.size() == 16);
    } catch (const tpmkey::Error&) {
    }
    try {
        (void)tpmkey::parse_certify_info(a.cert_info);
    } catch (const tpmkey::Error&) {
    }
    try {
        const TPMT_PUBLIC area = tpmkey::parse_public_area(a.pub_area);
        FUZZ_CHECK(tpmkey::public_area_bytes(area) == a.pub_area);
    } catch (const tpmkey::Error&) {
    }
    return 0;
}
