#include "core/tpm/tpm_queries.hpp"

#include "core/base/error.hpp"
#include "core/keys/algorithms.hpp"

#include <algorithm>
#include <cstdio>

namespace tpmkey {

EsysPtr<TPMS_CAPABILITY_DATA> get_capability(Tpm& tpm, TPM2_CAP capability, UINT32 property, UINT32 count) {
    TPMI_YES_NO more = TPM2_NO;
    EsysPtr<TPMS_CAPABILITY_DATA> data;
    check_rc(Esys_GetCapability(tpm.esys(), ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, capability, property, count,
                                &more, out_ptr(data)),
             "TPM2_GetCapability");
    return data;
}

std::map<TPM2_PT, UINT32> tpm_properties(Tpm& tpm, TPM2_PT first, UINT32 count) {
    std::map<TPM2_PT, UINT32> out;
    TPM2_PT next = first;
    // A TPM may answer with fewer properties than asked for: ask again for the rest.
    while (next < first + count) {
        const auto data = get_capability(tpm, TPM2_CAP_TPM_PROPERTIES, next, first + count - next);
        const TPML_TAGGED_TPM_PROPERTY& list = data->data.tpmProperties;
        if (list.count == 0)
            break;
        for (UINT32 i = 0; i < list.count; ++i)
            out[list.tpmProperty[i].property] = list.tpmProperty[i].value;
        next = list.tpmProperty[list.count - 1].property + 1;
    }
    return out;
}

TpmIdentity tpm_identity(Tpm& tpm) {
    const auto props = tpm_properties(tpm, TPM2_PT_MANUFACTURER, TPM2_PT_FIRMWARE_VERSION_1 - TPM2_PT_MANUFACTURER + 1);
    const auto value = [&](TPM2_PT pt) {
        const auto it = props.find(pt);
        return it == props.end() ? 0u : it->second;
    };
    const auto id = [](UINT32 v) {
        char text[12];
        std::snprintf(text, sizeof text, "id:%08X", v);
        return std::string(text);
    };
    // Each vendor string holds four characters, big-endian.
    std::string model;
    for (TPM2_PT pt = TPM2_PT_VENDOR_STRING_1; pt <= TPM2_PT_VENDOR_STRING_4; ++pt)
        for (int shift = 24; shift >= 0; shift -= 8) {
            const char c = static_cast<char>((value(pt) >> shift) & 0xff);
            if (c >= 0x20 && c < 0x7f)
                model += c;
        }
    while (!model.empty() && model.back() == ' ')
        model.pop_back();
    return {id(value(TPM2_PT_MANUFACTURER)), model, id(value(TPM2_PT_FIRMWARE_VERSION_1))};
}

DictionaryAttackState dictionary_attack_state(Tpm& tpm) {
    // TPM2_PT_PERMANENT .. TPM2_PT_LOCKOUT_INTERVAL are one run: one command.
    auto props = tpm_properties(tpm, TPM2_PT_PERMANENT, TPM2_PT_LOCKOUT_INTERVAL - TPM2_PT_PERMANENT + 1);
    return DictionaryAttackState{props[TPM2_PT_LOCKOUT_COUNTER], props[TPM2_PT_MAX_AUTH_FAIL],
                                 props[TPM2_PT_LOCKOUT_INTERVAL],
                                 (props[TPM2_PT_PERMANENT] & TPMA_PERMANENT_INLOCKOUT) != 0,
                                 (props[TPM2_PT_PERMANENT] & TPMA_PERMANENT_LOCKOUTAUTHSET) != 0};
}

bool owner_auth_set(Tpm& tpm) {
    return (tpm_properties(tpm, TPM2_PT_PERMANENT, 1)[TPM2_PT_PERMANENT] & TPMA_PERMANENT_OWNERAUTHSET) != 0;
}

std::vector<TPM2_ALG_ID> implemented_hashes(Tpm& tpm) {
    const auto data = get_capability(tpm, TPM2_CAP_ALGS, TPM2_ALG_FIRST, TPM2_MAX_CAP_ALGS);
    std::vector<TPM2_ALG_ID> out;
    for (UINT32 i = 0; i < data->data.algorithms.count; ++i)
        for (const TPM2_ALG_ID h : hash_ids)
            if (data->data.algorithms.algProperties[i].alg == h)
                out.push_back(h);
    return out;
}

bool tpm_lacks_sha512(Tpm& tpm) {
    const std::vector<TPM2_ALG_ID> hashes = implemented_hashes(tpm);
    return std::find(hashes.begin(), hashes.end(), TPM2_ALG_SHA512) == hashes.end();
}

std::vector<TPM2_HANDLE> tpm_handles(Tpm& tpm, TPM2_HANDLE first) {
    const auto data = get_capability(tpm, TPM2_CAP_HANDLES, first, TPM2_MAX_CAP_HANDLES);
    std::vector<TPM2_HANDLE> out;
    for (UINT32 i = 0; i < data->data.handles.count; ++i)
        if ((data->data.handles.handle[i] >> TPM2_HR_SHIFT) == (first >> TPM2_HR_SHIFT))
            out.push_back(data->data.handles.handle[i]);
    return out;
}

}  // namespace tpmkey
