// The TSS2 PRIVATE KEY file (the ASN.1 TPM key format of
// draft-bottomley-tpm2-keys, shared with tpm2-openssl, openssl_tpm2_engine,
// ssh-tpm-agent and the Linux kernel).
//
//   TPMKey ::= SEQUENCE {
//     type        OBJECT IDENTIFIER,   -- 2.23.133.10.1.3: loadable key
//     emptyAuth   [0] EXPLICIT BOOLEAN OPTIONAL,
//     policy      [1] EXPLICIT SEQUENCE OF TPMPolicy OPTIONAL,
//     secret      [2] EXPLICIT OCTET STRING OPTIONAL,
//     authPolicy  [3] EXPLICIT SEQUENCE OF TPMAuthPolicy OPTIONAL,
//     description [4] EXPLICIT UTF8String OPTIONAL,
//     rsaParent   [5] EXPLICIT BOOLEAN OPTIONAL,
//     parent      INTEGER,
//     pubkey      OCTET STRING,        -- marshalled TPM2B_PUBLIC
//     privkey     OCTET STRING }       -- marshalled TPM2B_PRIVATE
#pragma once

#include "core/keys/key_parts.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tpmkey {

// Larger files are refused before parsing; a real one is under 2 KiB.
inline constexpr std::size_t max_key_file_size = 64 * 1024;

struct KeyFile {
    // Tri-state as in the file: absent, TRUE or FALSE. Only TRUE promises
    // an empty auth value; otherwise a PIN is asked for.
    std::optional<bool> empty_auth;
    std::uint32_t parent = owner_hierarchy;
    KeyBlobs blobs;
    // policy [1]: the commands that authorise the key, in the order they
    // run (tpm_policy.hpp). Empty when the file has none (or an empty one).
    std::vector<PolicyCommand> policy;
    // authPolicy [3]: the signed policies, newest first; used when
    // `policy` starts with TPM2_PolicyAuthorize.
    std::vector<SignedPolicy> signed_policies;
    // description [4]: the comment of the key's .pub, as ssh-tpm-agent
    // keeps it (tpmkey-keygen -C); printable UTF-8, empty when absent.
    std::string description;
    // Every other optional field (secret [2], rsaParent [5], tags of later
    // versions of the format), as the DER it was read as, in file order:
    // rewriting a key (tpmkey passwd) keeps them all.
    std::vector<std::vector<std::uint8_t>> other_fields;

    bool needs_pin() const noexcept { return empty_auth != true; }
    bool has_policy() const noexcept { return !policy.empty(); }
    // The policy starts with PolicyAuthorize: the PCR policies are the
    // signed ones in `signed_policies`.
    bool has_signed_policies() const noexcept { return has_policy() && policy.front().code == TPM2_CC_PolicyAuthorize; }
};

// Valid UTF-8 without control characters: what a description may hold.
bool is_printable_utf8(std::string_view text);

// What a key file must hold: a signing key (RSA or ECC, 'sign'), or the
// user's PIN object (a keyedhash data object, core/tpm/pin_object.hpp).
enum class KeyFileKind { signing_key, pin_object };

// Parses PEM text. `name` (the file's path) prefixes every error message.
KeyFile parse_key_file(std::span<const std::uint8_t> pem, const std::string& name,
                       KeyFileKind kind = KeyFileKind::signing_key);

// The PEM text of a key file: type, emptyAuth (when known), policy, the
// other optional fields as they were read (authPolicy and description
// among them in tag order), parent, pubkey, privkey. A file read in DER is
// written back byte for byte (but an empty policy, authPolicy or
// description, or an empty signed-policy name, is left out). Keys we make
// have only the five fields every reader understands (a description only
// when asked for: tpm2-openssl reads no other field and refuses a file with
// one), and always say emptyAuth TRUE or FALSE: tpm2-openssl before 1.3
// (Debian 12 has 1.1) takes an absent emptyAuth for TRUE and never asks for
// a PIN.
std::string format_key_file(const KeyFile& key);

// A key's policy [1] alone: its DER (SEQUENCE OF TPMPolicy), as the key
// file holds it; the `key-policy` of an attestation (tpmkey attest), from
// which tpmkey-ca verify recomputes the key's authPolicy. parse_policy
// throws Error (prefixed by `name`) for anything else.
Bytes format_policy(const std::vector<PolicyCommand>& policy);
std::vector<PolicyCommand> parse_policy(std::span<const std::uint8_t> der, const std::string& name);

// Throws Error unless tpmkey runs `policy`: PolicyAuthValue and PolicyPCR
// commands, then the PolicyAuthorize that carries the signature. A key's
// signed policies that fail this are skipped when it signs.
void check_runnable(const SignedPolicy& policy);

// Throws Error (prefixed by `name`) for a key tpmkey cannot use although the
// file is valid: one usable only through a TPM policy (no userWithAuth)
// whose commands are not all ones tpmkey runs: TPM2_PolicyAuthValue,
// TPM2_PolicyPCR, and TPM2_PolicyAuthorize as the first command with at
// least one signed policy made of those two.
void check_usable(const KeyFile& key, const std::string& name);

// Reads and parses a key file: a regular file of at most max_key_file_size
// bytes that only the user (or root) can replace (check_not_replaceable).
KeyFile read_key_file(const std::filesystem::path& path, KeyFileKind kind = KeyFileKind::signing_key);

}  // namespace tpmkey
