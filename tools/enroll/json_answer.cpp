#include "json_answer.hpp"

#include "core/base/error.hpp"

namespace tpmkey::enroll {

std::string server_text(std::string_view text, std::size_t limit) {
    std::string out;
    for (const char c : text) {
        if (out.size() >= limit) {
            out += "...";
            break;
        }
        const auto u = static_cast<unsigned char>(c);
        out += (u >= 0x20 && u < 0x7f) ? c : '?';
    }
    return out;
}

nlohmann::json parse_bounded(const std::string& body, bool& too_deep) {
    too_deep = false;
    // The callback refuses (discards) every value from that depth on, so
    // the parser never builds a deep value.
    const nlohmann::json::parser_callback_t bounded = [&too_deep](int depth, nlohmann::json::parse_event_t,
                                                                  nlohmann::json&) {
        if (depth > max_json_depth)
            too_deep = true;
        return !too_deep;
    };
    nlohmann::json parsed = nlohmann::json::parse(body, bounded, /*allow_exceptions=*/false);
    if (too_deep)
        return nlohmann::json(nlohmann::json::value_t::discarded);
    return parsed;
}

nlohmann::json parse_answer(const std::string& body, const std::string& source) {
    bool too_deep = false;
    nlohmann::json parsed = parse_bounded(body, too_deep);
    if (too_deep)
        throw Error(server_text(source) + ": the answer is JSON nested deeper than " + std::to_string(max_json_depth) +
                    " levels; refused");
    return parsed;
}

}  // namespace tpmkey::enroll
