#include "core/tpm/tpm.hpp"

#include "core/base/error.hpp"
#include "core/tpm/tcti.hpp"

#include <tss2/tss2_rc.h>
#include <tss2/tss2_tctildr.h>

#include <cstdlib>
#include <cstring>

namespace tpmkey {

namespace {

// QuietTss2's state. No lock of its own: the module calls tpm2-tss only
// under its one mutex, the tools have one thread; and a lock held by
// another thread at fork() would be inherited locked by the child.
int quiet_depth = 0;     // guards alive
bool quiet_set = false;  // the outermost guard set TSS2_LOG (it was unset)

}  // namespace

// tpm2-tss writes its own errors to stderr, inside ssh's terminal; our
// messages say what matters.
QuietTss2::QuietTss2() {
    if (quiet_depth++ == 0) {
        quiet_set = std::getenv("TSS2_LOG") == nullptr;
        if (quiet_set)
            ::setenv("TSS2_LOG", "all+NONE", 1);
    }
}

QuietTss2::~QuietTss2() {
    if (--quiet_depth == 0 && quiet_set) {
        ::unsetenv("TSS2_LOG");
        quiet_set = false;
    }
}

Tpm::Tpm(const std::string& tcti, std::optional<std::chrono::seconds> timeout) : tcti_(tcti) {
    const QuietTss2 quiet;
    TSS2_TCTI_CONTEXT* inner = nullptr;
    TSS2_RC rc = TSS2_RC_SUCCESS;
    if (tcti.empty()) {
        // The default, tried as Tcti::default_search_order() says; a failure
        // reports the first one's reason (/dev/tpmrm0's).
        TSS2_RC first = TSS2_RC_SUCCESS;
        for (const std::string& candidate : Tcti::default_search_order()) {
            rc = Tss2_TctiLdr_Initialize(candidate.c_str(), &inner);
            if (rc == TSS2_RC_SUCCESS)
                break;
            if (first == TSS2_RC_SUCCESS)
                first = rc;
        }
        if (rc != TSS2_RC_SUCCESS)
            rc = first;
    } else {
        rc = Tss2_TctiLdr_Initialize(tcti.c_str(), &inner);
    }
    check_rc(rc, "connecting to the TPM", TpmStep::connect);
    tcti_ctx_ = std::make_unique<TimeoutTcti>(inner, tcti, timeout);
    rc = Esys_Initialize(&esys_, tcti_ctx_->context(), nullptr);
    check_rc(rc, "connecting to the TPM", TpmStep::connect);
}

Tpm::~Tpm() {
    const QuietTss2 quiet;
    // ESAPI first, then the TCTI it was using (ESAPI spec, Esys_Finalize).
    Esys_Finalize(&esys_);
    tcti_ctx_.reset();
}

TpmObject::~TpmObject() {
    if (!tpm_ || handle_ == ESYS_TR_NONE)
        return;
    // Failure here cannot be reported from a destructor; the TPM (or its
    // resource manager) reclaims the slot when the connection closes.
    if (kind_ == Kind::transient)
        (void)Esys_FlushContext(tpm_->esys(), handle_);
    else
        (void)Esys_TR_Close(tpm_->esys(), &handle_);
}

SavedContext SavedContext::save(Tpm& tpm, const TpmObject& object) {
    EsysPtr<TPMS_CONTEXT> context;
    check_rc(Esys_ContextSave(tpm.esys(), object.handle(), out_ptr(context)), "TPM2_ContextSave");
    return SavedContext(std::move(context));
}

TpmObject SavedContext::load(Tpm& tpm) const {
    ESYS_TR handle = ESYS_TR_NONE;
    check_rc(Esys_ContextLoad(tpm.esys(), context_.get(), &handle), "TPM2_ContextLoad");
    return TpmObject(tpm, handle, TpmObject::Kind::transient);
}

namespace {

// A session salted with `salt_key`, with `attributes`.
TpmObject start_session(Tpm& tpm, const TpmObject& salt_key, TPM2_SE type, TPMA_SESSION attributes) {
    const TPMT_SYM_DEF symmetric{.algorithm = TPM2_ALG_AES,
                                 .keyBits = {.aes = 128},
                                 .mode = {.aes = TPM2_ALG_CFB}};
    ESYS_TR session = ESYS_TR_NONE;
    check_rc(Esys_StartAuthSession(tpm.esys(), salt_key.handle(), ESYS_TR_NONE, ESYS_TR_NONE,
                                   ESYS_TR_NONE, ESYS_TR_NONE, nullptr, type, &symmetric,
                                   TPM2_ALG_SHA256, &session),
             "TPM2_StartAuthSession");
    TpmObject owned(tpm, session, TpmObject::Kind::transient);
    check_rc(Esys_TRSess_SetAttributes(tpm.esys(), session, attributes, 0xff),
             "Esys_TRSess_SetAttributes");
    return owned;
}

// AES-128-CFB parameter encryption both ways.
constexpr TPMA_SESSION encrypted_both_ways =
    TPMA_SESSION_CONTINUESESSION | TPMA_SESSION_DECRYPT | TPMA_SESSION_ENCRYPT;

}  // namespace

Authorization Authorization::for_secret(Tpm& tpm, const TpmObject& salt_key, bool secret_involved) {
    Authorization auth;
    if (secret_involved)
        auth.session_ = start_session(tpm, salt_key, TPM2_SE_HMAC, encrypted_both_ways);
    return auth;
}

Authorization Authorization::policy_session(Tpm& tpm, const TpmObject& salt_key) {
    Authorization auth;
    auth.session_ = start_session(tpm, salt_key, TPM2_SE_POLICY, encrypted_both_ways);
    return auth;
}

TpmObject audit_session(Tpm& tpm, const TpmObject& salt_key) {
    // The response HMAC of an audit session covers the answer's parameters
    // (TPM 2.0 Part 1, 19.6.6); encryption is not allowed on an answer that
    // does not start with a sized buffer (TPM2_PCR_Read's does not).
    return start_session(tpm, salt_key, TPM2_SE_HMAC, TPMA_SESSION_CONTINUESESSION | TPMA_SESSION_AUDIT);
}

void fill_auth(TPM2B_AUTH& auth, const Secret& value) {
    // TPM 2.0 Part 1, 19.6.4: an auth value is at most the size of the
    // object's name algorithm digest (SHA-256 for every key we make).
    if (value.size() > 32)
        throw Error("the PIN is too long: at most 32 bytes");
    auth = TPM2B_AUTH{};
    auth.size = static_cast<UINT16>(value.size());
    if (!value.empty())
        std::memcpy(auth.buffer, value.data(), value.size());
}

AuthValue::AuthValue(Tpm& tpm, const TpmObject& object, const Secret& value)
    : tpm_(tpm), handle_(object.handle()) {
    TPM2B_AUTH auth;
    fill_auth(auth, value);
    const TSS2_RC rc = Esys_TR_SetAuth(tpm.esys(), handle_, &auth);
    OPENSSL_cleanse(&auth, sizeof auth);
    check_rc(rc, "Esys_TR_SetAuth");
}

AuthValue::AuthValue(Tpm& tpm, ESYS_TR hierarchy, const Secret& value) : tpm_(tpm), handle_(hierarchy) {
    TPM2B_AUTH auth{};
    if (value.size() > sizeof auth.buffer)
        throw Error("the hierarchy's password is too long: at most " + std::to_string(sizeof auth.buffer) + " bytes");
    auth.size = static_cast<UINT16>(value.size());
    if (!value.empty())
        std::memcpy(auth.buffer, value.data(), value.size());
    const TSS2_RC rc = Esys_TR_SetAuth(tpm.esys(), handle_, &auth);
    OPENSSL_cleanse(&auth, sizeof auth);
    check_rc(rc, "Esys_TR_SetAuth");
}

AuthValue::~AuthValue() {
    const TPM2B_AUTH empty{};
    (void)Esys_TR_SetAuth(tpm_.esys(), handle_, &empty);
}

}  // namespace tpmkey
