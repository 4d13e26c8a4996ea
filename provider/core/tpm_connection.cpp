#include "tpm_connection.hpp"

namespace tpmkey {

Tpm& TpmConnection::tpm() {
    if (!tpm_)
        tpm_ = std::make_unique<Tpm>(tcti_);
    return *tpm_;
}

const Object& TpmConnection::parent(std::uint32_t handle) {
    auto it = parents_.find(handle);
    if (it == parents_.end())
        it = parents_.emplace(handle, load_parent(tpm(), handle)).first;
    return it->second;
}

void TpmConnection::close() noexcept {
    parents_.clear();
    tpm_.reset();
}

}  // namespace tpmkey
