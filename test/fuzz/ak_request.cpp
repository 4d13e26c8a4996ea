// Fuzz target: an enrolment request as tpmkey-ca challenge reads it (the
// exchange file parser, core/attestation/exchange_file.cpp, then
// tools/tpmkey-ca/ak_request.cpp: base64, d2i_X509, the NV index,
// Tss2_MU_TPM2B_PUBLIC_Unmarshal, is_ak_public, the TPM's attributes).
//
// Properties: every input is either refused with an Error naming the file
// or accepted as a request whose fields keep the checks' promises: the
// certificate re-encodes to exactly its bytes, the AK is tpmkey's AK and
// its name is SHA-256's, the attributes have their forms.
#include "fuzz.hpp"

#include "ak_request.hpp"
#include "core/base/error.hpp"
#include "core/keys/key_parts.hpp"

#include <openssl/x509.h>

#include <string>
#include <string_view>

extern "C" int LLVMFuzzerInitialize(int*, char***) { return 0; }

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        const tpmkey::ExchangeFile file = tpmkey::ExchangeFile::parse(text, tpmkey::ak_request_file::kind,
                                                                      tpmkey::ak_request_file::fields, "request");
        const tpmkey::AkRequest r = tpmkey::checked_request(file, "request");
        unsigned char* der = nullptr;
        const int der_size = i2d_X509(r.ek_certificate.get(), &der);
        FUZZ_CHECK(der_size > 0 && static_cast<std::size_t>(der_size) == r.ek_der.size());
        OPENSSL_free(der);
        FUZZ_CHECK(r.ek_template != nullptr);
        FUZZ_CHECK(tpmkey::is_ak_public(r.ak));
        FUZZ_CHECK(r.ak_name.size() == 34 && r.ak_name == tpmkey::tpm_name(r.ak));
        FUZZ_CHECK(r.manufacturer.size() == 11 && r.version.size() == 11 && r.model.size() <= 16);
    } catch (const tpmkey::Error& e) {
        FUZZ_CHECK(std::string(e.what()).rfind("request: ", 0) == 0);  // names the file
    }
    return 0;
}
