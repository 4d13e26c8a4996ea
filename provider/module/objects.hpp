// PKCS#11 objects: a handle and a fixed set of attributes. Our objects
// never change after C_Initialize, so they are plain values.
#pragma once

#include "core/keys/public_key.hpp"
#include "module/pkcs11.hpp"

#include <tss2/tss2_tpm2_types.h>

#include <span>
#include <string>
#include <vector>

namespace tpmkey::pkcs11 {

struct Attribute {
    CK_ATTRIBUTE_TYPE type;
    Bytes value;
    bool sensitive = false;  // exists, but its value never leaves (CKR_ATTRIBUTE_SENSITIVE)
};

class P11Object {
public:
    P11Object(CK_OBJECT_HANDLE handle, std::vector<Attribute> attributes)
        : handle_(handle), attributes_(std::move(attributes)) {}

    CK_OBJECT_HANDLE handle() const noexcept { return handle_; }
    // A new handle: the old one must stop working (after C_Logout).
    void renumber(CK_OBJECT_HANDLE handle) noexcept { handle_ = handle; }
    const Attribute* find(CK_ATTRIBUTE_TYPE type) const noexcept;
    bool is_private() const noexcept;  // CKA_PRIVATE: visible only after login
    CK_OBJECT_CLASS object_class() const noexcept;

    // True when every attribute of the template is present with exactly that
    // value. An empty template matches everything.
    bool matches(std::span<const CK_ATTRIBUTE> templ) const;

    // C_GetAttributeValue with the per-attribute rules of PKCS#11 2.40,
    // 5.7 (sensitive, invalid type, size query, too small); returns the rv.
    CK_RV get_attributes(std::span<CK_ATTRIBUTE> templ) const;

    // C_GetObjectSize: the sum of the attribute values.
    CK_ULONG size() const noexcept;

private:
    CK_OBJECT_HANDLE handle_;
    std::vector<Attribute> attributes_;
};

// One C_FindObjectsInit..C_FindObjectsFinal: the handles of the objects
// that matched, collected up front (our objects never change), handed out
// in batches.
class FindOperation {
public:
    // Throws Pkcs11Error(CKR_ARGUMENTS_BAD) for an attribute without a value
    // but with a length. Private objects are found only when `logged_in`.
    FindOperation(const std::vector<P11Object>& objects, bool logged_in, std::span<const CK_ATTRIBUTE> templ);

    // C_FindObjects: up to out.size() handles; how many were written.
    std::size_t next(std::span<CK_OBJECT_HANDLE> out) noexcept;

private:
    std::vector<CK_OBJECT_HANDLE> found_;
    std::size_t next_ = 0;
};

// The facts about a key that its objects are made from.
struct KeyFacts {
    std::string label;                          // CKA_LABEL: the key's name
    Bytes id;                                   // CKA_ID
    const PublicKey* pub;                       // outlives the objects
    TPMA_OBJECT tpm_attributes;                 // for CKA_LOCAL, CKA_NEVER_EXTRACTABLE, ...
    bool needs_pin;                             // CKA_PRIVATE of the private key
    std::vector<CK_MECHANISM_TYPE> mechanisms;  // CKA_ALLOWED_MECHANISMS
};

P11Object make_public_key_object(CK_OBJECT_HANDLE handle, const KeyFacts& key);
P11Object make_private_key_object(CK_OBJECT_HANDLE handle, const KeyFacts& key);
// `der` is an X.509 certificate whose public key is the key's; throws
// Error otherwise.
P11Object make_certificate_object(CK_OBJECT_HANDLE handle, const KeyFacts& key, const Bytes& der);

// CKA_ID: SHA-1 of the public key's BIT STRING contents, the X.509
// subject key identifier, so a certificate's SKI matches it.
Bytes key_id_of(const PublicKey& pub);

}  // namespace tpmkey::pkcs11
