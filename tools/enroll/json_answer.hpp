// A server's JSON (step-ca's ACME and SSH answers), parsed with its depth
// bounded: nlohmann copies, compares and dumps a value by recursion, so a
// hostile server's deeply nested answer could exhaust the stack. The one
// parser of the enrolment clients (tpmkey enroll, tpmkey ssh-cert).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace tpmkey::enroll {

// The deepest nesting of arrays and objects accepted in a server's JSON
// (an ACME answer needs 4, step-ca's SSH answer 2).
constexpr int max_json_depth = 32;

// `body` parsed as JSON; discarded (not an object) when it is not JSON.
// Throws Error "SOURCE: the answer is JSON nested deeper than 32 levels;
// refused" when it nests deeper than max_json_depth (checked while
// parsing: no deep value is ever built).
nlohmann::json parse_answer(const std::string& body, const std::string& source);

// As parse_answer, but a too deep answer is returned as discarded and
// `too_deep` set (for a refusal's text, which is reported either way).
nlohmann::json parse_bounded(const std::string& body, bool& too_deep);

// Printable ASCII of a server's text, at most `limit` characters (then
// "..."): what a hostile server says reaches the terminal only this way.
std::string server_text(std::string_view text, std::size_t limit = 300);

}  // namespace tpmkey::enroll
