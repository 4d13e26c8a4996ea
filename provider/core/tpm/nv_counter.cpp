#include "core/tpm/nv_counter.hpp"

#include "core/base/bytes.hpp"
#include "core/base/error.hpp"

#include <tss2/tss2_mu.h>

#include <openssl/evp.h>

#include <cstring>
#include <iomanip>
#include <limits>
#include <optional>
#include <sstream>
#include <string>

namespace tpmkey {

namespace {

// Anyone who may use the TPM may count it up and read it (it holds nothing
// secret, and counting up is all a counter allows); noDA, as there is no
// PIN to guess; orderly, so that the TPM need not write its NV memory at
// every signature (Part 1, 37.2.4: at most a few counts are skipped after a
// power cut, never repeated).
constexpr TPMA_NV counter_attributes =
    (TPM2_NT_COUNTER << TPMA_NV_TPM2_NT_SHIFT) | TPMA_NV_AUTHWRITE | TPMA_NV_AUTHREAD | TPMA_NV_NO_DA | TPMA_NV_ORDERLY;

TPM2B_NV_PUBLIC counter_public(bool written) {
    TPM2B_NV_PUBLIC pub{};
    pub.nvPublic.nvIndex = sk_counter_index;
    pub.nvPublic.nameAlg = TPM2_ALG_SHA256;
    pub.nvPublic.attributes = counter_attributes | (written ? TPMA_NV_WRITTEN : 0);
    pub.nvPublic.dataSize = 8;
    return pub;
}

// The NV index's name (Part 1, 16: nameAlg || SHA-256 of its TPMS_NV_PUBLIC).
Bytes counter_name(bool written) {
    const TPM2B_NV_PUBLIC pub = counter_public(written);
    std::uint8_t buffer[sizeof(TPMS_NV_PUBLIC)];
    std::size_t size = 0;
    check_rc(Tss2_MU_TPMS_NV_PUBLIC_Marshal(&pub.nvPublic, buffer, sizeof buffer, &size),
             "Tss2_MU_TPMS_NV_PUBLIC_Marshal");
    Bytes name = {0x00, 0x0b};  // TPM2_ALG_SHA256
    name.resize(2 + 32);
    unsigned int length = 0;
    if (EVP_Digest(buffer, size, name.data() + 2, &length, EVP_sha256(), nullptr) != 1 || length != 32)
        throw Error("SHA-256 failed");
    return name;
}

// The counter as ESAPI knows it (TPM2_NV_ReadPublic), or nothing when the
// TPM has no index there.
std::optional<TpmObject> open_counter(Tpm& tpm) {
    ESYS_TR handle = ESYS_TR_NONE;
    const TSS2_RC rc =
        Esys_TR_FromTPMPublic(tpm.esys(), sk_counter_index, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &handle);
    if (rc != TSS2_RC_SUCCESS) {
        const TpmError error(TpmStep::other, rc, "TPM2_NV_ReadPublic of the security keys' counter");
        if (error.is(TPM2_RC_HANDLE))
            return std::nullopt;
        throw error;
    }
    return TpmObject(tpm, handle, TpmObject::Kind::persistent);
}

std::string hex(std::uint32_t v) {
    std::ostringstream out;
    out << "0x" << std::hex << std::setw(8) << std::setfill('0') << v;
    return out.str();
}

// Whether the index is ours, counted once already or not.
std::optional<bool> counter_written(Tpm& tpm, const TpmObject& counter) {
    EsysPtr<TPM2B_NAME> name;
    check_rc(Esys_TR_GetName(tpm.esys(), counter.handle(), out_ptr(name)), "Esys_TR_GetName");
    const Bytes have(name->name, name->name + name->size);
    if (have == counter_name(true))
        return true;
    if (have == counter_name(false))
        return false;
    return std::nullopt;
}

[[noreturn]] void not_ours() {
    throw Error("the TPM's NV index " + hex(sk_counter_index) +
                " is not tpmkey's security-key counter (another program's, or one made with other attributes): "
                "security keys need it as their signature counter; nothing was changed");
}

void increment(Tpm& tpm, const TpmObject& counter, ESYS_TR session) {
    check_rc(Esys_NV_Increment(tpm.esys(), counter.handle(), counter.handle(), session, ESYS_TR_NONE, ESYS_TR_NONE),
             "TPM2_NV_Increment of the security keys' counter");
}

}  // namespace

void provide_sk_counter(Tpm& tpm) {
    std::optional<TpmObject> counter = open_counter(tpm);
    if (!counter) {
        const TPM2B_AUTH no_auth{};
        const TPM2B_NV_PUBLIC pub = counter_public(false);
        ESYS_TR handle = ESYS_TR_NONE;
        const TSS2_RC rc = Esys_NV_DefineSpace(tpm.esys(), ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, ESYS_TR_NONE,
                                               ESYS_TR_NONE, &no_auth, &pub, &handle);
        if (rc != TSS2_RC_SUCCESS) {
            const TpmError error(TpmStep::other, rc, "TPM2_NV_DefineSpace of the security keys' counter");
            if (error.is(TPM2_RC_BAD_AUTH) || error.is(TPM2_RC_AUTH_FAIL))
                throw Error("the TPM's owner hierarchy has a password, so the security keys' signature counter "
                            "(NV index " +
                            hex(sk_counter_index) +
                            ") cannot be defined; define it once with that password: tpm2_nvdefine -C o -P PASSWORD "
                            "-s 8 -a 'nt=counter|authwrite|authread|no_da|orderly' " +
                            hex(sk_counter_index) + "; nothing was made");
            throw error;
        }
        counter = TpmObject(tpm, handle, TpmObject::Kind::persistent);
    }
    const std::optional<bool> written = counter_written(tpm, *counter);
    if (!written)
        not_ours();
    // A counter has no value until its first TPM2_NV_Increment.
    if (!*written)
        increment(tpm, *counter, ESYS_TR_PASSWORD);
}

std::uint32_t next_sk_counter(Tpm& tpm, const TpmObject& parent) {
    const std::optional<TpmObject> counter = open_counter(tpm);
    if (!counter)
        throw Error("the TPM has no security-key counter (NV index " + hex(sk_counter_index) +
                    "): it is made when a key is enrolled; was the TPM cleared since? (then the key is gone too)");
    if (counter_written(tpm, *counter) != true)
        not_ours();
    const TpmObject session = audit_session(tpm, parent);
    increment(tpm, *counter, session.handle());
    EsysPtr<TPM2B_MAX_NV_BUFFER> data;
    check_rc(Esys_NV_Read(tpm.esys(), counter->handle(), counter->handle(), session.handle(), ESYS_TR_NONE,
                          ESYS_TR_NONE, 8, 0, out_ptr(data)),
             "TPM2_NV_Read of the security keys' counter");
    if (data->size != 8)
        throw Error("the TPM's counter answer has " + std::to_string(data->size) + " bytes, not 8");
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < 8; ++i)
        value = value << 8 | data->buffer[i];
    if (value > std::numeric_limits<std::uint32_t>::max())
        throw Error("the TPM's security-key counter is past 2^32, which OpenSSH's signature cannot carry");
    return static_cast<std::uint32_t>(value);
}

}  // namespace tpmkey
