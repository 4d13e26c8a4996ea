#include "module/tpm_connection.hpp"

#include "core/base/log.hpp"

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
        ParentCheck check;
        TpmObject parent = load_verified_parent(tpm(), handle, *known_parents_, &check);
        log_parent_check(handle, check);
        it = parents_.emplace(handle, std::move(parent)).first;
    }
    return it->second;
}

void TpmConnection::close() noexcept {
    parents_.clear();
    tpm_.reset();
}

}  // namespace tpmkey
