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

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <sys/types.h>
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

// Reads PATH (a regular file, at most 1 MiB) as ExchangeFile::parse does.
ExchangeFile read_exchange_file(const std::filesystem::path& path, const std::string& kind,
                                std::initializer_list<const char*> names);

// Writes `file` to `path` atomically (mode 0644; 0600 for a file with a
// secret in it), replacing what was there.
void write_exchange_file(const std::filesystem::path& path, const ExchangeFile& file, mode_t mode = 0644);

// The fields of enrolment's files: tpmkey attest enroll writes the
// request, tpmkey-ca challenge the challenge, tpmkey attest activate the
// proof, which tpmkey-ca issue-ak reads.
inline constexpr std::initializer_list<const char*> ak_request_fields = {
    "ek-certificate", "ek-certificate-index", "ak-public", "tpm-manufacturer", "tpm-model", "tpm-version"};
inline constexpr std::initializer_list<const char*> ak_challenge_fields = {"ak-name", "ek-certificate-index",
                                                                          "credential-blob", "encrypted-secret"};
inline constexpr std::initializer_list<const char*> ak_proof_fields = {"ak-name", "secret"};

}  // namespace tpmkey
