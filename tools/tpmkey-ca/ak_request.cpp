#include "ak_request.hpp"

#include "core/base/error.hpp"
#include "core/keys/key_parts.hpp"

#include <tss2/tss2_mu.h>

namespace tpmkey {

namespace {

constexpr std::size_t max_ek_certificate_size = 8192;

// "id:" and 8 upper-case hex digits, as tpm_identity() writes them.
bool is_tcg_id(const std::string& text) {
    return text.size() == 11 && text.compare(0, 3, "id:") == 0 &&
           text.find_first_not_of("0123456789ABCDEF", 3) == std::string::npos;
}

}  // namespace

AkRequest checked_request(const ExchangeFile& file, const std::string& what) {
    AkRequest r;
    r.ek_der = file.bytes(ak_request_file::ek_certificate, max_ek_certificate_size);
    const unsigned char* p = r.ek_der.data();
    r.ek_certificate.reset(d2i_X509(nullptr, &p, static_cast<long>(r.ek_der.size())));
    if (!r.ek_certificate || p != r.ek_der.data() + r.ek_der.size())
        throw Error(what + ": ek-certificate is not one X.509 certificate (DER)");
    try {
        r.ek_template = &ek_template_of(file.text(ak_request_file::ek_certificate_index));
    } catch (const Error& e) {
        throw Error(what + ": ek-certificate-index: " + e.what());
    }

    const Bytes ak_public = file.bytes(ak_request_file::ak_public, sizeof(TPM2B_PUBLIC));
    TPM2B_PUBLIC ak{};
    size_t offset = 0;
    if (Tss2_MU_TPM2B_PUBLIC_Unmarshal(ak_public.data(), ak_public.size(), &offset, &ak) != TSS2_RC_SUCCESS ||
        offset != ak_public.size())
        throw Error(what + ": ak-public is not a TPM2B_PUBLIC");
    if (!is_ak_public(ak.publicArea))
        throw Error(
            what +
            ": ak-public is not a tpmkey attestation key (a restricted ECDSA P-256 or RSASSA 2048 signing key with "
            "fixedTPM, fixedParent and sensitiveDataOrigin, made from tpmkey's template): refused");
    r.ak = ak.publicArea;
    r.ak_name = tpm_name(r.ak);

    r.manufacturer = file.text(ak_request_file::tpm_manufacturer);
    r.model = file.text(ak_request_file::tpm_model);
    r.version = file.text(ak_request_file::tpm_version);
    if (!is_tcg_id(r.manufacturer) || !is_tcg_id(r.version))
        throw Error(what +
                    ": tpm-manufacturer and tpm-version must be 'id:' and 8 hex digits (as the TPM reports "
                    "them), not '" +
                    r.manufacturer + "', '" + r.version + "'");
    // Four vendor strings of four characters.
    if (r.model.size() > 16 ||
        r.model.find_first_not_of(" !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`"
                                  "abcdefghijklmnopqrstuvwxyz{|}~") != std::string::npos)
        throw Error(what + ": tpm-model must be at most 16 printable ASCII characters");
    return r;
}

}  // namespace tpmkey
