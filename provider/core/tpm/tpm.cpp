#include "core/tpm/tpm.hpp"

#include "core/base/error.hpp"
#include "core/base/log.hpp"

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

Tpm::Tpm(const TpmAddress& address) : address_(address), opened_(address.tcti()) {
    address.check();
    const QuietTss2 quiet;
    TSS2_TCTI_CONTEXT* inner = nullptr;
    TSS2_RC rc = TSS2_RC_SUCCESS;
    if (address.is_default_search()) {
        // The default, tried as Tcti::default_search_order() says; a failure
        // reports the first one's reason (/dev/tpmrm0's).
        TSS2_RC first = TSS2_RC_SUCCESS;
        // (Not address.candidates(), whose identities would resolve the
        // simulators' "localhost" on every open of the machine's TPM.)
        for (const std::string& candidate : Tcti::default_search_order()) {
            rc = Tss2_TctiLdr_Initialize(candidate.c_str(), &inner);
            if (rc == TSS2_RC_SUCCESS) {
                opened_ = Tcti(candidate);
                break;
            }
            if (first == TSS2_RC_SUCCESS)
                first = rc;
        }
        if (rc != TSS2_RC_SUCCESS)
            rc = first;
    } else {
        rc = Tss2_TctiLdr_Initialize(address.text().c_str(), &inner);
    }
    check_rc(rc, "connecting to the TPM", TpmStep::connect);
    tcti_ctx_ = std::make_unique<TimeoutTcti>(inner, address.text(), address.timeout());
    rc = Esys_Initialize(&esys_, tcti_ctx_->context(), nullptr);
    check_rc(rc, "connecting to the TPM", TpmStep::connect);
}

Tpm::~Tpm() {
    const QuietTss2 quiet;
    // ESAPI first, then the TCTI it was using (ESAPI spec, Esys_Finalize).
    Esys_Finalize(&esys_);
    tcti_ctx_.reset();
    flush_stranded();
}

void Tpm::strand(ESYS_TR handle) noexcept {
    // A resource manager flushes a client's objects when its connection
    // closes, and its handles are virtual: nothing to do, nothing to send.
    try {
        TPM2_HANDLE tpm_handle = 0;
        if (!opened_.has_resource_manager() && Esys_TR_GetTpmHandle(esys(), handle, &tpm_handle) == TSS2_RC_SUCCESS)
            stranded_.push_back(tpm_handle);
    } catch (...) {
    }
}

// TPM2_FlushContext of each stranded handle, sent as it is (TPM 2.0 Part 3,
// 28.4: no sessions, no handle area, the handle as its one parameter) through
// a new connection: ESAPI's context, like the old TCTI, is done with. The
// handles are still ours: without a resource manager the TPM gives a
// transient handle to no one else until it is flushed, or the TPM is reset,
// which flushes it too. Bounded by 1 s, and given up at the first command
// that times out: a TPM that still does not answer cannot be helped here,
// and the call that failed must not wait much longer (a real TPM that
// stopped answering is reset, which empties its slots).
void Tpm::flush_stranded() noexcept {
    if (stranded_.empty())
        return;
    try {
        TSS2_TCTI_CONTEXT* inner = nullptr;
        if (Tss2_TctiLdr_Initialize(opened_.text().c_str(), &inner) != TSS2_RC_SUCCESS) {
            log_debug(std::to_string(stranded_.size()) + " TPM objects of a call that was cut off stay in the TPM: "
                                                         "no new connection to flush them");
            return;
        }
        TimeoutTcti connection(inner, opened_.text(), std::chrono::seconds(1));
        std::size_t flushed = 0;
        for (const TPM2_HANDLE handle : stranded_) {
            std::uint8_t command[14] = {0x80, 0x01, 0, 0, 0, sizeof command, 0, 0, 0x01, 0x65};
            for (int i = 0; i < 4; ++i)
                command[10 + i] = static_cast<std::uint8_t>(handle >> (24 - 8 * i));
            std::uint8_t answer[64] = {};
            size_t size = sizeof answer;
            if (connection.exchange(command, sizeof command, answer, &size) != TSS2_RC_SUCCESS)
                break;
            if (size >= 10 && answer[6] == 0 && answer[7] == 0 && answer[8] == 0 && answer[9] == 0)
                ++flushed;
        }
        log_debug("flushed " + std::to_string(flushed) + " of " + std::to_string(stranded_.size()) +
                  " TPM objects left by a call that was cut off");
    } catch (...) {
    }
    stranded_.clear();
}

TpmObject::~TpmObject() {
    if (!tpm_ || handle_ == ESYS_TR_NONE)
        return;
    // Failure here cannot be reported from a destructor; the TPM (or its
    // resource manager) reclaims the slot when the connection closes.
    if (kind_ == Kind::transient) {
        if (tpm_->cut_off()) {
            // Nothing goes through a connection whose command was cut off:
            // flushed through a new one when the Tpm goes away.
            tpm_->strand(handle_);
            (void)Esys_TR_Close(tpm_->esys(), &handle_);
        } else if (Esys_FlushContext(tpm_->esys(), handle_) != TSS2_RC_SUCCESS && tpm_->cut_off()) {
            // This very flush was cut off: the TPM may still run it late, and
            // flushing the handle again could then hit another process's
            // object loaded in its place. Left to the TPM.
            (void)Esys_TR_Close(tpm_->esys(), &handle_);
        }
    } else
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
    const TPMT_SYM_DEF symmetric{.algorithm = TPM2_ALG_AES, .keyBits = {.aes = 128}, .mode = {.aes = TPM2_ALG_CFB}};
    ESYS_TR session = ESYS_TR_NONE;
    check_rc(Esys_StartAuthSession(tpm.esys(), salt_key.handle(), ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                   ESYS_TR_NONE, nullptr, type, &symmetric, TPM2_ALG_SHA256, &session),
             "TPM2_StartAuthSession");
    TpmObject owned(tpm, session, TpmObject::Kind::transient);
    check_rc(Esys_TRSess_SetAttributes(tpm.esys(), session, attributes, 0xff), "Esys_TRSess_SetAttributes");
    return owned;
}

// AES-128-CFB parameter encryption both ways.
constexpr TPMA_SESSION encrypted_both_ways = TPMA_SESSION_CONTINUESESSION | TPMA_SESSION_DECRYPT | TPMA_SESSION_ENCRYPT;

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

AuthValue::AuthValue(Tpm& tpm, const TpmObject& object, const Secret& value) : tpm_(tpm), handle_(object.handle()) {
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
