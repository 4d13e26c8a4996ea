// A TCTI that bounds how long the TPM may take to answer a command.
//
// ESAPI's synchronous calls (Esys_Sign, ...) receive with an infinite
// timeout and retry on TRY_AGAIN (tpm2-tss 3.2.1, src/tss2-esys/api/
// Esys_Sign.c: "esysContext->timeout = -1" and a do/while on TRY_AGAIN),
// so Esys_SetTimeout cannot stop a TPM that accepted a command and never
// answers: C_Sign inside ssh would hang forever. This TCTI sits between
// ESAPI and the one Tss2_TctiLdr_Initialize made, and turns a missing
// answer into TSS2_TCTI_RC_IO_ERROR (not a retry), so the call fails.
#pragma once

#include <tss2/tss2_tcti.h>

#include <chrono>
#include <optional>
#include <string>

namespace tpmkey {

// Without a setting: 2 minutes for a command, 10 for one that generates a
// key (an RSA 3072 TPM2_Create takes minutes on a slow TPM).
inline constexpr std::chrono::seconds default_tpm_timeout{120};
inline constexpr std::chrono::seconds default_key_generation_timeout{600};

class TimeoutTcti {
public:
    // Takes ownership of `inner` (made by Tss2_TctiLdr_Initialize from
    // `tcti`, which only names it in messages). `bound`: the setting
    // (TPMKEY_TPM_TIMEOUT or the config file) for every command; unset,
    // the defaults above.
    TimeoutTcti(TSS2_TCTI_CONTEXT* inner, std::string tcti, std::optional<std::chrono::seconds> bound);
    ~TimeoutTcti();
    TimeoutTcti(const TimeoutTcti&) = delete;
    TimeoutTcti& operator=(const TimeoutTcti&) = delete;

    // What ESAPI is given.
    TSS2_TCTI_CONTEXT* context() noexcept { return reinterpret_cast<TSS2_TCTI_CONTEXT*>(&table_); }
    // A command was cut off by the bound: from then on nothing is sent
    // through this connection (a late answer would be taken for the next
    // command's), so what the TPM holds for it can only be flushed through
    // a new one (Tpm's destructor).
    bool cut_off() const noexcept { return gone_; }
    // One command sent as it is and its answer received, within the bound:
    // for a command sent without ESAPI (TPM2_FlushContext of a handle whose
    // ESAPI context is gone).
    TSS2_RC exchange(const uint8_t* command, size_t size, uint8_t* answer, size_t* answer_size);

private:
    // The function table tpm2-tss calls through must come first in the
    // context it is handed; `self` leads back to this object.
    struct Table {
        TSS2_TCTI_CONTEXT_COMMON_V2 common;
        TimeoutTcti* self;
    };
    static TimeoutTcti& of(TSS2_TCTI_CONTEXT* context) noexcept;
    static TSS2_RC transmit(TSS2_TCTI_CONTEXT* context, size_t size, const uint8_t* command);
    static TSS2_RC receive(TSS2_TCTI_CONTEXT* context, size_t* size, uint8_t* response, int32_t timeout);
    static void finalize(TSS2_TCTI_CONTEXT* context);
    static TSS2_RC cancel(TSS2_TCTI_CONTEXT* context);
    static TSS2_RC get_poll_handles(TSS2_TCTI_CONTEXT* context, TSS2_TCTI_POLL_HANDLE* handles, size_t* count);
    static TSS2_RC set_locality(TSS2_TCTI_CONTEXT* context, uint8_t locality);
    static TSS2_RC make_sticky(TSS2_TCTI_CONTEXT* context, TPM2_HANDLE* handle, uint8_t sticky);

    bool wait_for_answer() const;
    TSS2_RC timed_out();

    Table table_{};
    TSS2_TCTI_CONTEXT* inner_;
    std::string tcti_;
    std::optional<std::chrono::seconds> setting_;
    std::chrono::seconds bound_ = default_tpm_timeout;  // of the command in flight
    int new_socket_ = -1;                               // see transmit()
    bool waited_ = false;                               // the answer of the command in flight has arrived
    bool gone_ = false;                                 // the TPM did not answer once: it is not asked again
};

}  // namespace tpmkey
