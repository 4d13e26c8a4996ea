// Which TPM tpmkey talks to and how long it may take, as one value made
// where the setting is read (load_config(), a --tcti option): the TCTI,
// parsed once (tcti.hpp), the identity pins are filed under
// (known_parents.hpp), the command time bound, and where it came from.
// Tpm is opened from it (tpm.hpp); everything that decides something from
// the TCTI asks it, nothing parses the string again (docs/design.md, "TPM
// connection").
#pragma once

#include "core/files/tcti.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tpmkey {

class TpmAddress {
public:
    enum class Source {
        tpm2_tss_default,  // nothing set: the tpm2-tss default search (Tcti::default_search_order())
        environment,       // TPMKEY_TCTI
        config_file,       // the config file's tcti line
        command_line,      // a --tcti option
    };

    // The tpm2-tss default, no time bound set (the defaults of tcti_timeout.hpp).
    TpmAddress() : TpmAddress({}, Source::tpm2_tss_default, {}, std::nullopt) {}
    // `tcti` in tpm2-tools syntax (empty: the tpm2-tss default search);
    // `origin`: what messages name as its source ("TPMKEY_TCTI", the config
    // file's path, "--tcti"); `timeout`: TPMKEY_TPM_TIMEOUT or the config
    // file's (unset: the defaults of tcti_timeout.hpp). Never throws: a
    // TCTI with blanks or control characters names no TPM exactly and is
    // kept refused (refusal()), so that nothing opens it, and no other
    // TCTI is used in its place.
    TpmAddress(std::string_view tcti, Source source, std::string origin, std::optional<std::chrono::seconds> timeout);

    // A --tcti option in place of this address: the same parser, the same time bound.
    TpmAddress overridden_by(std::string_view command_line_tcti) const;

    const Tcti& tcti() const noexcept { return tcti_; }
    // The TCTI as given; empty for the tpm2-tss default search.
    const std::string& text() const noexcept { return tcti_.text(); }
    bool is_default_search() const noexcept { return tcti_.text().empty(); }
    std::optional<std::chrono::seconds> timeout() const noexcept { return timeout_; }
    Source source() const noexcept { return source_; }
    // "TPMKEY_TCTI", the config file's path, "--tcti", "the tpm2-tss default".
    const std::string& origin() const noexcept { return origin_; }

    // Why this TCTI cannot be used (it names no TPM exactly), if it cannot.
    const std::optional<std::string>& refusal() const noexcept { return refusal_; }
    // Throws Error with refusal() if there is one.
    void check() const;
    // The TPM it reaches (Tcti::identity(): "default" for every spelling of
    // the machine's own TPM); the name pins are filed under. Throws Error
    // for a refused TCTI.
    const std::string& identity() const;

    // What to open, in order: the TCTIs of the tpm2-tss default search
    // (each an address of its own, with this one's time bound and source),
    // or this address alone.
    std::vector<TpmAddress> candidates() const;

private:
    Tcti tcti_;
    Source source_;
    std::string origin_;
    std::optional<std::chrono::seconds> timeout_;
    std::string identity_;
    std::optional<std::string> refusal_;
};

}  // namespace tpmkey
