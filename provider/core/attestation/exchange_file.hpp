// The files a machine and an attestation CA exchange (docs/attestation.md,
// "Files"): an enrolment request, a challenge, the proof of activation, a
// key's attestation. One plain format for all of them, readable with a
// pager and a base64 decoder:
//
//   tpmkey-KIND 1
//   NAME VALUE
//   ...
//
// KIND names the file ("ak-request"); each NAME appears once, in any
// order; a text VALUE is printable UTF-8 without line breaks, a binary one
// is base64 (RFC 4648, with padding). Nothing else: no comments, no blank
// lines, no unknown names. Every file is hostile until read by this.
#pragma once

#include "core/base/bytes.hpp"
#include "core/base/error.hpp"

#include <sys/types.h>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tpmkey {

class ExchangeFile {
public:
    explicit ExchangeFile(std::string kind) : kind_(std::move(kind)) {}

    const std::string& kind() const noexcept { return kind_; }
    void set_text(const std::string& name, const std::string& value);
    void set_bytes(const std::string& name, std::span<const std::uint8_t> value);
    bool has(const std::string& name) const { return fields_.count(name) != 0; }
    // Throw Error "FILE: no NAME" / "FILE: NAME is not base64" / "... too long".
    std::string text(const std::string& name) const;
    Bytes bytes(const std::string& name, std::size_t max_size = 64 * 1024) const;

    // The file's contents, fields sorted by name.
    std::string to_string() const;
    // Parses `contents`; `what` (the file name) starts every error. Throws
    // Error for another kind, a version other than 1, a line that is not
    // "NAME VALUE", a name given twice or not in `names`.
    static ExchangeFile parse(std::string_view contents, const std::string& kind,
                              std::initializer_list<const char*> names, const std::string& what);

private:
    std::string kind_;
    std::string what_;
    std::map<std::string, std::string> fields_;
};

// The largest exchange file read.
inline constexpr std::size_t max_exchange_file_size = 1024 * 1024;

// Reads PATH (a regular file, at most max_exchange_file_size) as
// ExchangeFile::parse does.
ExchangeFile read_exchange_file(const std::filesystem::path& path, const std::string& kind,
                                std::initializer_list<const char*> names);

// Writes `file` to `path` atomically (mode 0644; 0600 for a file with a
// secret in it), replacing what was there.
void write_exchange_file(const std::filesystem::path& path, const ExchangeFile& file, mode_t mode = 0644);

// Each kind of file, its name and its fields, in one place
// (docs/attestation.md, "The files", lists them the same; a unit test
// compares the two). Code names a field only by these constants.

// The enrolment request: tpmkey attest enroll writes it, tpmkey-ca
// challenge reads it.
namespace ak_request_file {
inline constexpr const char* kind = "ak-request";
inline constexpr const char* ak_public = "ak-public";
inline constexpr const char* ek_certificate = "ek-certificate";
inline constexpr const char* ek_certificate_index = "ek-certificate-index";
inline constexpr const char* tpm_manufacturer = "tpm-manufacturer";
inline constexpr const char* tpm_model = "tpm-model";
inline constexpr const char* tpm_version = "tpm-version";
inline constexpr std::initializer_list<const char*> fields = {ak_public,        ek_certificate, ek_certificate_index,
                                                              tpm_manufacturer, tpm_model,      tpm_version};
}  // namespace ak_request_file

// The challenge: tpmkey-ca challenge writes it, tpmkey attest activate reads it.
namespace ak_challenge_file {
inline constexpr const char* kind = "ak-challenge";
inline constexpr const char* ak_name = "ak-name";
inline constexpr const char* credential_blob = "credential-blob";
inline constexpr const char* ek_certificate_index = "ek-certificate-index";
inline constexpr const char* encrypted_secret = "encrypted-secret";
inline constexpr std::initializer_list<const char*> fields = {ak_name, credential_blob, ek_certificate_index,
                                                              encrypted_secret};
}  // namespace ak_challenge_file

// The proof of activation: tpmkey attest activate writes it, tpmkey-ca
// issue-ak reads it.
namespace ak_proof_file {
inline constexpr const char* kind = "ak-proof";
inline constexpr const char* ak_name = "ak-name";
inline constexpr const char* secret = "secret";
inline constexpr std::initializer_list<const char*> fields = {ak_name, secret};
}  // namespace ak_proof_file

// A key's attestation: tpmkey attest writes it, tpmkey-ca verify reads it.
namespace attestation_file {
inline constexpr const char* kind = "attestation";
inline constexpr const char* attestation_object = "attestation-object";
inline constexpr const char* client_data_json = "client-data-json";
inline constexpr const char* key_policy = "key-policy";  // only for a key with a policy
inline constexpr const char* ssh_public_key = "ssh-public-key";
inline constexpr std::initializer_list<const char*> fields = {attestation_object, client_data_json, key_policy,
                                                              ssh_public_key};
}  // namespace attestation_file

// Not exchanged: the CA's own copy of an outstanding challenge
// (tpmkey-ca's pending/, ca_directory.hpp), in the same format: the
// request's fields, the challenge's secret and when it was made.
namespace ak_pending_file {
inline constexpr const char* kind = "ak-pending";
inline constexpr const char* secret = "secret";
inline constexpr const char* created = "created";  // utc_text()
inline constexpr std::initializer_list<const char*> fields = {ak_request_file::ak_public,
                                                              ak_request_file::ek_certificate,
                                                              ak_request_file::ek_certificate_index,
                                                              ak_request_file::tpm_manufacturer,
                                                              ak_request_file::tpm_model,
                                                              ak_request_file::tpm_version,
                                                              secret,
                                                              created};
}  // namespace ak_pending_file

// Not exchanged: the CA's record of an AK certificate it issued
// (tpmkey-ca's records/SERIAL, tools/tpmkey-ca/ak_records.hpp), in the
// same format. revoked and revocation-reason only once it is revoked.
namespace ak_record_file {
inline constexpr const char* kind = "ak-record";
inline constexpr const char* serial = "serial";
inline constexpr const char* ak_certificate_sha256 = "ak-certificate-sha256";
inline constexpr const char* ak_name = "ak-name";
inline constexpr const char* ek_certificate_sha256 = "ek-certificate-sha256";
inline constexpr const char* ek_certificate_issuer = "ek-certificate-issuer";
inline constexpr const char* ek_certificate_serial = "ek-certificate-serial";
// The EK's permanentIdentifier (ek_permanent_identifier()), the identifier
// of its ACME orders; absent in records written before it was kept.
inline constexpr const char* ek_identifier = "ek-identifier";
inline constexpr const char* tpm_manufacturer = "tpm-manufacturer";
inline constexpr const char* tpm_model = "tpm-model";
inline constexpr const char* tpm_version = "tpm-version";
inline constexpr const char* machine = "machine";
inline constexpr const char* principals = "principals";
inline constexpr const char* issued = "issued";
inline constexpr const char* not_after = "not-after";
inline constexpr const char* revoked = "revoked";
inline constexpr const char* revocation_reason = "revocation-reason";
// When the operator reinstated the TPM (tpmkey-ca reinstate); only with revoked.
inline constexpr const char* reinstated = "reinstated";
inline constexpr std::initializer_list<const char*> fields = {serial,
                                                              ak_certificate_sha256,
                                                              ak_name,
                                                              ek_certificate_sha256,
                                                              ek_certificate_issuer,
                                                              ek_certificate_serial,
                                                              ek_identifier,
                                                              tpm_manufacturer,
                                                              tpm_model,
                                                              tpm_version,
                                                              machine,
                                                              principals,
                                                              issued,
                                                              not_after,
                                                              revoked,
                                                              revocation_reason,
                                                              reinstated};
}  // namespace ak_record_file

}  // namespace tpmkey
