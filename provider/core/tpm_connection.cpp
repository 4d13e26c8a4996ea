#include "tpm_connection.hpp"

#include "log.hpp"

#include <unistd.h>

namespace tpmkey {

Tpm& TpmConnection::tpm() {
    if (!tpm_)
        tpm_ = std::make_unique<Tpm>(tcti_, timeout_);
    return *tpm_;
}

const TpmObject& TpmConnection::parent(std::uint32_t handle) {
    auto it = parents_.find(handle);
    if (it == parents_.end()) {
        if (!known_parents_) {
            known_parents_ = KnownParents::load();
            for (const std::string& w : known_parents_->warnings())
                log_error(w);
        }
        bool pinned = false;
        TpmObject parent = load_verified_parent(tpm(), handle, *known_parents_, &pinned);
        if (!pinned)
            log_debug("parent " + handle_text(handle) + " is not pinned in " + KnownParents::file_path().string() +
                      ": checked by its attributes only");
        it = parents_.emplace(handle, std::move(parent)).first;
    }
    return it->second;
}

void TpmConnection::close() noexcept {
    parents_.clear();
    tpm_.reset();
}

bool TpmConnection::has_resource_manager(const std::string& tcti) noexcept {
    const std::string tpm = tpm_identity(tcti);
    if (tpm.starts_with("tabrmd"))
        return true;
    if (tpm.starts_with("device"))
        return tpm.find("/dev/tpmrm") != std::string::npos;
    // The tpm2-tss default tries tpm2-abrmd and /dev/tpmrm0 before /dev/tpm0
    // and the simulators: with /dev/tpmrm0 present, a resource manager answers.
    if (tpm == "default")
        return ::access("/dev/tpmrm0", F_OK) == 0;
    return false;  // simulators and anything we do not know: assume none
}

}  // namespace tpmkey
