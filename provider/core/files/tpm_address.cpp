#include "core/files/tpm_address.hpp"

#include "core/base/error.hpp"

#include <utility>

namespace tpmkey {

TpmAddress::TpmAddress(std::string_view tcti, Source source, std::string origin,
                       std::optional<std::chrono::seconds> timeout)
    : tcti_(tcti), source_(source), origin_(std::move(origin)), timeout_(timeout) {
    if (origin_.empty())
        origin_ = source == Source::tpm2_tss_default ? "the tpm2-tss default"
                  : source == Source::environment    ? "TPMKEY_TCTI"
                  : source == Source::command_line   ? "--tcti"
                                                     : "the config file";
    try {
        identity_ = tcti_.identity();
    } catch (const Error& e) {
        refusal_ = e.what();
    }
}

TpmAddress TpmAddress::overridden_by(std::string_view command_line_tcti) const {
    return TpmAddress(command_line_tcti, Source::command_line, "--tcti", timeout_);
}

void TpmAddress::check() const {
    if (refusal_)
        throw Error(*refusal_);
}

const std::string& TpmAddress::identity() const {
    check();
    return identity_;
}

std::vector<TpmAddress> TpmAddress::candidates() const {
    if (!is_default_search())
        return {*this};
    std::vector<TpmAddress> out;
    for (const std::string& candidate : Tcti::default_search_order())
        out.emplace_back(candidate, source_, origin_, timeout_);
    return out;
}

}  // namespace tpmkey
