// Key operations inside the TPM: the parent (storage key), creating,
// loading and using signing keys. The private parts never leave the TPM
// except wrapped by the parent, which is useless on any other TPM.
#pragma once

#include "core/base/secret.hpp"
#include "core/keys/algorithms.hpp"
#include "core/keys/key_parts.hpp"
#include "core/tpm/tpm.hpp"

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace tpmkey {

// The attributes of every key we create: bound to this TPM and this
// parent, generated inside it, usable with its auth value, signing only.
// A key without a PIN has noDA besides (signing_key_template).
inline constexpr TPMA_OBJECT signing_key_attributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT |
                                                      TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH |
                                                      TPMA_OBJECT_SIGN_ENCRYPT;

// The kind of key to make: the one enum of core/keys/algorithms.
using KeyAlgorithm = KeyKind;

struct KeySpec {
    KeyAlgorithm algorithm = KeyAlgorithm::ecdsa;
    unsigned bits = 256;  // ecdsa: 256, 384 or 521; rsa: 2048 or 3072
};

// Throws Error unless the spec is one we create (docs/design.md, "Key objects").
void check_key_spec(const KeySpec& spec);

// The public template of a new signing key: scheme NULL, so the scheme and
// hash are chosen per signature. `auth_policy`: a policy digest
// (tpm_policy.hpp) the key is bound to, or empty; a key with one can be
// used only through its policy (no userWithAuth). `with_pin`: false for a
// key whose auth value is empty, which is then made noDA: it has nothing
// to guess, so dictionary-attack protection only lets a lockout stop it
// (docs/design.md, "Key objects").
TPM2B_PUBLIC signing_key_template(const KeySpec& spec, std::span<const std::uint8_t> auth_policy = {},
                                  bool with_pin = true);

// A key without a PIN (empty auth value) that lacks noDA: made before
// tpmkey-keygen set it (or its PIN removed by tpmkey passwd), so a TPM in
// dictionary-attack lockout refuses it although nothing can be guessed.
// tpmkey-keygen without a PIN makes a key that a lockout does not stop.
bool lockout_stops_pinless_key(const TPMT_PUBLIC& area, bool empty_auth);

// What the module's log and tpmkey doctor say of such a key, `key_file` named.
std::string pinless_key_lockout_advice(const std::string& key_file);

// The TCG standard storage key templates (TCG TPM v2.0 Provisioning
// Guidance, 7.5.1; empty unique): ECC P-256 ("H-2"), the one tpm2-openssl,
// openssl_tpm2_engine, systemd and the kernel use, and RSA 2048.
TPM2B_PUBLIC storage_key_template(TPMI_ALG_PUBLIC type = TPM2_ALG_ECC);

// The attribute names of tpm2-tools ("fixedtpm|fixedparent|..."), so output compares.
std::string attributes_text(TPMA_OBJECT attributes);

// Throws Error unless `area` may be a parent: a storage key bound to this
// TPM, exactly fixedTPM|fixedParent|sensitiveDataOrigin|restricted|decrypt,
// plus userWithAuth and noDA as the TCG template has them, and nothing else
// (not 'sign', no duplication: a key that could leave the TPM would let its
// owner read every secret salted with it).
void check_storage_key(const TPMT_PUBLIC& area, std::uint32_t handle);

// TPM2_ReadPublic of a loaded object, as the TPM (or whatever answers for
// it) says; `handle` names it in an error (TpmStep::parent).
TPM2B_PUBLIC read_public(Tpm& tpm, const TpmObject& object, std::uint32_t handle);

// Makes the parent usable: 0x40000001 re-creates the storage key with
// TPM2_CreatePrimary; a persistent handle (0x81xxxxxx) is used as is. The
// TPM's answer must pass check_storage_key. Whether it is the right key is
// for known_parents.hpp to say.
TpmObject load_parent(Tpm& tpm, std::uint32_t parent);

// The same without the second look at a persistent handle: ESAPI reads its
// public area once (TPM2_ReadPublic) to learn its name, and
// check_storage_key is the caller's to run, with read_public(), unless the
// name alone settles it: a name pinned after the key passed the check and
// its proof is the hash of that very public area (load_verified_parent).
// 0x40000001 is checked as in load_parent: its area comes with it.
TpmObject open_parent(Tpm& tpm, std::uint32_t parent);

// What the TCG's SRK location 0x81000001 holds, for choosing the parent of a
// new key and for tpmkey doctor.
struct PersistentSrk {
    enum class State {
        absent,
        standard,           // the TCG standard SRK: the key 0x40000001 re-creates (or its RSA twin)
        other_storage_key,  // a storage key of another template (tpm2-pkcs11's primary, say)
        unfit,              // not a storage key bound to this TPM (check_storage_key)
    };
    State state = State::absent;
    std::string detail;  // other_storage_key, unfit: what it is
};
PersistentSrk inspect_persistent_srk(Tpm& tpm);

// tpmkey setup: makes the TCG standard SRK (the key 0x40000001 re-creates,
// storage_key_template()) with TPM2_CreatePrimary under the owner hierarchy
// and persists it at 0x81000001 (TPM2_EvictControl), which must be free.
// `owner_auth`: the owner hierarchy's password, empty when it has none; a
// non-empty one is sent only in a salted HMAC session (see the .cpp for
// which key salts it). `check_before_persisting` sees the new key while it
// is still transient, and may throw to leave the TPM as it was (the pins,
// known_parents.hpp). Returns the persistent key.
TpmObject persist_standard_srk(Tpm& tpm, const Secret& owner_auth,
                               const std::function<void(const TpmObject& srk)>& check_before_persisting);

// TPM2_Create under `parent`, with `pin` (possibly empty) as the auth value,
// bound to `auth_policy` if not empty (signing_key_template); noDA when
// `pin` is empty.
KeyBlobs create_key(Tpm& tpm, const TpmObject& parent, const KeySpec& spec, const Secret& pin,
                    std::span<const std::uint8_t> auth_policy = {});

// TPM2_Load of a wrapped key under its parent (whose auth value is empty).
TpmObject load_key(Tpm& tpm, const TpmObject& parent, const Authorization& auth, const KeyBlobs& blobs);

// TPM2_Sign of a digest with `scheme` (TPM2_ALG_ECDSA, _RSASSA, _RSAPSS)
// and `hash`. The key's auth value must already be set (AuthValue).
// Returns the signature as PKCS#11 wants it: raw r||s, each half
// `ec_half_size` bytes, for ECDSA; the signature block for RSA.
std::vector<std::uint8_t> sign_digest(Tpm& tpm, const TpmObject& key, const Authorization& auth, TPM2_ALG_ID scheme,
                                      TPM2_ALG_ID hash, std::span<const std::uint8_t> digest, std::size_t ec_half_size);

// TPM2_ObjectChangeAuth: the key wrapped again with a new auth value. With
// new_pin equal to the current one it only proves the current one right.
TPM2B_PRIVATE change_auth(Tpm& tpm, const TpmObject& key, const TpmObject& parent, const Authorization& auth,
                          const Secret& new_pin);

// Proves `pin` to be the PIN of the loaded `key`, or throws the TPM's
// TpmError (TPM2_RC_AUTH_FAIL, or BAD_AUTH for a key without DA
// protection; a wrong PIN counts as a failed try). It asks for
// TPM2_ObjectChangeAuth to the same PIN and drops the new private part: the
// cheapest command that checks a key's auth value without signing
// anything, and it changes nothing (the key file keeps its blob).
void prove_pin(Tpm& tpm, const TpmObject& key, const TpmObject& parent, const Authorization& auth, const Secret& pin);

}  // namespace tpmkey
