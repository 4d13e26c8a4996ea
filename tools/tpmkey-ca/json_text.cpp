#include "json_text.hpp"

namespace tpmkey {

std::string json_line(const nlohmann::ordered_json& value) {
    if (value.is_object()) {
        std::string out = "{";
        for (auto it = value.begin(); it != value.end(); ++it)
            out += (it == value.begin() ? "" : ", ") + json_line(it.key()) + ": " + json_line(it.value());
        return out + "}";
    }
    if (value.is_array()) {
        std::string out = "[";
        for (auto it = value.begin(); it != value.end(); ++it)
            out += (it == value.begin() ? "" : ", ") + json_line(*it);
        return out + "]";
    }
    return value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace tpmkey
