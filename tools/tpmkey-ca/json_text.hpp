// JSON text for what tpmkey-ca writes for scripts: verify --json and the
// audit log (audit_log.hpp). The values are nlohmann-json's, in the order
// they were put in (ordered_json); only the layout is made here.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace tpmkey {

// `value` on one line, as tpmkey-ca has always written it:
// {"a": 1, "b": ["x", "y"]}. nlohmann's dump() writes {"a":1,...} on one
// line or breaks lines, and scripts (and tests, and docs/attestation.md)
// grep for '"decision": "accepted"'. Strings are escaped by nlohmann
// (RFC 8259, 7); a byte that is not UTF-8 (a path) becomes U+FFFD, so that
// the line is JSON.
std::string json_line(const nlohmann::ordered_json& value);

}  // namespace tpmkey
