// The TPM connection and the resources held in it, each owned by exactly
// one C++ object so that nothing is left in the TPM when it goes away.
#pragma once

#include "core/base/owned.hpp"
#include "core/base/secret.hpp"
#include "core/files/tpm_address.hpp"
#include "core/tpm/tcti_timeout.hpp"

#include <tss2/tss2_esys.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tpmkey {

// ESAPI hands out memory that must go back through Esys_Free; fill one
// with out_ptr() (owned.hpp).
template <class T>
using EsysPtr = Owned<T, Esys_Free>;

// Keeps tpm2-tss's own log quiet for its lifetime: TSS2_LOG=all+NONE in
// the process environment, removed again afterwards, so that nothing the
// host starts later inherits it. Does nothing when TSS2_LOG is already set
// (the user's setting wins). Nests. Not thread-safe: callers serialise
// their TPM use (the module's one mutex).
//
// tpm2-tss 3.2.1 (src/util/log.c) reads getenv("TSS2_LOG") once per source
// file, at that file's first message, and keeps the level for the life of
// the process. Residual: (1) while a guard is alive the variable is in the
// environment, so a child that another thread of the host forks at that
// moment inherits it, and the host's own getenv/setenv in other threads
// race with ours (glibc's setenv is not safe against a concurrent getenv);
// (2) a tpm2-tss file whose first message came under a guard stays silent
// for the process, also for a host that uses tpm2-tss itself, and one whose
// first message came outside our calls follows the host's setting.
class QuietTss2 {
public:
    QuietTss2();
    ~QuietTss2();
    QuietTss2(const QuietTss2&) = delete;
    QuietTss2& operator=(const QuietTss2&) = delete;
};

// What Tpm::esys() returns: the context, plus a QuietTss2 that lives until
// the end of the full expression, i.e. exactly for the call in
// `Esys_Sign(tpm.esys(), ...)`.
class EsysCall {
public:
    explicit EsysCall(ESYS_CONTEXT* esys) noexcept : esys_(esys) {}
    operator ESYS_CONTEXT*() const noexcept { return esys_; }

private:
    QuietTss2 quiet_;
    ESYS_CONTEXT* esys_;
};

// One ESAPI context on one TCTI. Not copyable, not movable: objects and
// sessions keep a reference to it.
class Tpm {
public:
    // The TPM at `address` (Config::tpm, tpm_address.hpp): its TCTI, or
    // for the tpm2-tss default the first of Tcti::default_search_order()
    // that opens. Every command is bounded in time: the address's timeout,
    // unset: the defaults of tcti_timeout.hpp. Throws Error for an address
    // that is refused (TpmAddress::refusal()), before anything is opened.
    explicit Tpm(const TpmAddress& address);
    ~Tpm();
    Tpm(const Tpm&) = delete;
    Tpm& operator=(const Tpm&) = delete;

    // For passing to one ESAPI call (not to be stored: see EsysCall).
    EsysCall esys() const { return EsysCall(esys_); }
    // What the connection was opened with: for messages, and the identity pins are filed under.
    const TpmAddress& address() const noexcept { return address_; }

    // A transient object or session of this context that could not be
    // flushed because a command was cut off by its time bound (TpmObject's
    // destructor): without a resource manager it stays in the TPM's few
    // slots after the process ends, so ~Tpm flushes it through a new
    // connection (docs/design.md, "What stays loaded").
    void strand(ESYS_TR handle) noexcept;
    bool cut_off() const noexcept { return tcti_ctx_ && tcti_ctx_->cut_off(); }

private:
    void flush_stranded() noexcept;

    TpmAddress address_;
    Tcti opened_;  // the TCTI that answered (one of the default search's for the default)
    std::vector<TPM2_HANDLE> stranded_;
    std::unique_ptr<TimeoutTcti> tcti_ctx_;
    ESYS_CONTEXT* esys_ = nullptr;
};

// An ESAPI object handle. A transient object is flushed from the TPM when
// this goes away; a persistent one is only forgotten by ESAPI.
class TpmObject {
public:
    enum class Kind { transient, persistent };

    TpmObject() = default;
    TpmObject(Tpm& tpm, ESYS_TR handle, Kind kind) noexcept : tpm_(&tpm), handle_(handle), kind_(kind) {}
    TpmObject(TpmObject&& other) noexcept { swap(other); }
    TpmObject& operator=(TpmObject&& other) noexcept {
        TpmObject(std::move(other)).swap(*this);
        return *this;
    }
    TpmObject(const TpmObject&) = delete;
    TpmObject& operator=(const TpmObject&) = delete;
    ~TpmObject();

    ESYS_TR handle() const noexcept { return handle_; }
    explicit operator bool() const noexcept { return handle_ != ESYS_TR_NONE; }

private:
    void swap(TpmObject& other) noexcept {
        std::swap(tpm_, other.tpm_);
        std::swap(handle_, other.handle_);
        std::swap(kind_, other.kind_);
    }
    Tpm* tpm_ = nullptr;
    ESYS_TR handle_ = ESYS_TR_NONE;
    Kind kind_ = Kind::transient;
};

// A transient object's context (TPM2_ContextSave), held in process memory
// only, never written out: a TPM without a resource manager can then be
// left empty between two calls and the object reloaded with one
// TPM2_ContextLoad instead of TPM2_CreatePrimary or TPM2_Load. The blob is
// ESAPI's: the TPM's part (the sensitive area, auth value included,
// encrypted and MACed under a key that never leaves the TPM: TPM 2.0 Part 1,
// 30.3), plus the object's handle, name and public area, but not the auth
// value ESAPI holds (Esys_TR_SetAuth), which is not part of an ESYS_TR's
// saved metadata. Valid until the TPM is reset (a reboot; for a primary key
// also TPM2_Clear): load() then throws and the caller makes the object anew.
// Objects only: a saved session would keep its slot in the TPM
// (docs/design.md, "Sessions").
class SavedContext {
public:
    // TPM2_ContextSave; the object stays loaded.
    static SavedContext save(Tpm& tpm, const TpmObject& object);
    // TPM2_ContextLoad: the object again, flushed when the TpmObject goes away.
    TpmObject load(Tpm& tpm) const;

    SavedContext(SavedContext&&) noexcept = default;
    SavedContext& operator=(SavedContext&&) noexcept = default;
    SavedContext(const SavedContext&) = delete;
    SavedContext& operator=(const SavedContext&) = delete;
    ~SavedContext() = default;

private:
    explicit SavedContext(EsysPtr<TPMS_CONTEXT> context) noexcept : context_(std::move(context)) {}
    EsysPtr<TPMS_CONTEXT> context_;
};

// How a command proves it may use an object.
//
// A non-empty auth value only ever travels in an HMAC session salted with
// the parent key, with parameter encryption both ways (AES-128-CFB), so the
// bus never carries it, nor a new auth value, in the clear. An empty auth
// value goes in the password session: it then carries nothing secret, and
// it saves the two commands (StartAuthSession, FlushContext) that keys
// without a PIN would otherwise pay on every ssh login.
class Authorization {
public:
    // `salt_key` is the parent: a loaded storage key whose public part ESAPI knows.
    static Authorization for_secret(Tpm& tpm, const TpmObject& salt_key, bool secret_involved);
    // The password session with an empty auth value, for a command that
    // carries nothing secret.
    static Authorization password() { return Authorization(); }
    // A policy session, salted and encrypted the same way, for a key whose
    // policy the caller then satisfies (tpm_policy_session.hpp).
    static Authorization policy_session(Tpm& tpm, const TpmObject& salt_key);

    Authorization(Authorization&&) = default;
    Authorization& operator=(Authorization&&) = default;
    ~Authorization() = default;

    ESYS_TR session() const noexcept { return session_ ? session_.handle() : ESYS_TR_PASSWORD; }
    bool encrypted() const noexcept { return static_cast<bool>(session_); }

private:
    Authorization() = default;
    TpmObject session_;  // empty for the password session
};

// An HMAC session salted with `salt_key` (a verified parent) with the audit
// attribute, for a command that authorises nothing but whose answer must be
// the TPM's own: the TPM MACs the answer with the session key, which only
// the TPM and we know, and ESAPI checks the MAC (TSS2_ESYS_RC_RSP_AUTH_FAILED
// when someone on the way changed the answer).
TpmObject audit_session(Tpm& tpm, const TpmObject& salt_key);

// Sets an object's auth value in ESAPI for the lifetime of this guard, and
// overwrites ESAPI's copy with the empty value afterwards.
class AuthValue {
public:
    AuthValue(Tpm& tpm, const TpmObject& object, const Secret& value);
    // The same for a hierarchy (ESYS_TR_RH_OWNER), whose auth value may be
    // as long as the TPM's largest digest (TPM2_HierarchyChangeAuth).
    AuthValue(Tpm& tpm, ESYS_TR hierarchy, const Secret& value);
    ~AuthValue();
    AuthValue(const AuthValue&) = delete;
    AuthValue& operator=(const AuthValue&) = delete;

private:
    Tpm& tpm_;
    ESYS_TR handle_;
};

// Copies a secret into a TPM2B_AUTH (which the caller must wipe), checking
// that it fits the name algorithm's digest size as the TPM requires.
void fill_auth(TPM2B_AUTH& auth, const Secret& value);

}  // namespace tpmkey
