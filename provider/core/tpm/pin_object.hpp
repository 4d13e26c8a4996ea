// The user's PIN object (docs/design.md, "PINs, keys and the TPM's
// lockout"): one TPM object whose auth value is the PIN that every key made
// with it shares, as a smartcard's PIN guards all its keys. Such a key has
// an empty auth value, no userWithAuth, and the policy TPM2_PolicySecret
// naming this object: the TPM uses the key only in a session where this
// object's auth value was proven. One TPM check of the PIN (counted once
// by the dictionary-attack counter if wrong) is then known to hold for
// every key that names the object, and changing the object's auth value
// (tpmkey passwd) changes the PIN of them all.
//
// The object is a keyedhash data object (16 random bytes nobody reads): nothing to read or
// sign with; only its name (bound to the TPM-chosen seed in its public
// area's unique field) and its auth value matter. It is bound to this TPM
// and its parent (fixedTPM, fixedParent) and under dictionary-attack
// protection (noDA clear). Its file is a TSS2 key file at a fixed place
// per user, next to the config file, so that keys find it with no
// configuration.
#pragma once

#include "core/base/secret.hpp"
#include "core/keys/key_file.hpp"
#include "core/tpm/tpm.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>

namespace tpmkey {

inline constexpr TPMA_OBJECT pin_object_attributes =
    TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_USERWITHAUTH;

// ~/.config/tpmkey/pin-object ($XDG_CONFIG_HOME/tpmkey/pin-object): not
// *.tpm, so that no directory scan takes it for a key; empty without a
// home directory.
std::filesystem::path pin_object_path();

// The public template: keyedhash, no scheme, pin_object_attributes (a data
// object: neither sign nor decrypt, so no sensitiveDataOrigin).
TPM2B_PUBLIC pin_object_template();

// Throws Error unless `area` is a PIN object as tpmkey makes them: the
// template's type and attributes exactly (no noDA, no adminWithPolicy: the
// PIN is what the TPM checks, under its lockout counter).
void check_pin_object(const TPMT_PUBLIC& area, const std::string& name);

// TPM2_Create of a new PIN object under `parent` with `pin` as its auth
// value, sent in a session salted with the parent; its key file (emptyAuth
// FALSE, parent `parent_handle`).
KeyFile create_pin_object(Tpm& tpm, const TpmObject& parent, std::uint32_t parent_handle, const Secret& pin);

// The PIN object's file at pin_object_path(), checked (check_pin_object);
// nullopt when there is none. Throws Error for a file that is not one.
std::optional<KeyFile> read_pin_object();

// Writes the PIN object's file at pin_object_path() (its directory made
// 0700 if missing), replacing an existing one only with Replace::yes.
void write_pin_object(const KeyFile& pin_object, bool replace);

// The PIN object a key's policy names (TPM2_PolicySecret): empty for a
// key with a PIN of its own or none.
Bytes shared_pin_name(const KeyFile& key);

// The PIN object's file for `key` (a key with the shared PIN): read, and
// its name the one the key's policy holds; throws Error naming what to do.
KeyFile pin_object_for(const KeyFile& key);

// The name the keys' PolicySecret holds.
Bytes pin_object_name(const KeyFile& pin_object);

// TPM2_PolicySecret in `policy_session` with the loaded PIN object, whose
// auth value (AuthValue) goes in the HMAC of `auth` (a session salted with
// a verified parent). A wrong PIN fails with the TPM's AUTH_FAIL and counts
// once.
void run_policy_secret(Tpm& tpm, ESYS_TR policy_session, const TpmObject& pin_object, const Authorization& auth);

}  // namespace tpmkey
