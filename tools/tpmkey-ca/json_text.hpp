// JSON text for what tpmkey-ca writes for scripts: verify --json and the
// audit log (audit_log.hpp). One escaper, so the two never differ.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tpmkey {

// A JSON string: the text with '"', '\\' and control characters escaped
// (RFC 8259, 7). Callers pass printable() UTF-8 or ASCII: JSON text is
// UTF-8, and a byte that is not would make the line unreadable to a parser.
std::string json_string(std::string_view text);

// A JSON array of strings.
std::string json_list(const std::vector<std::string>& items);

}  // namespace tpmkey
