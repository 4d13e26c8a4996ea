#include "core/keys/key_discovery.hpp"

#include "core/base/error.hpp"
#include "core/files/file_read.hpp"

namespace tpmkey {

namespace {

// Most messages start with the file's path ("PATH: reason"); the reason
// is kept without it.
std::string reason_without_path(const std::string& what, const std::string& path) {
    return what.starts_with(path) ? what.substr(path.size() + 2) : what;
}

}  // namespace

std::vector<FoundKeyFile> find_keys(const Config& config) {
    std::vector<FoundKeyFile> found;
    for (const std::filesystem::path& path : config.key_files) {
        FoundKeyFile f{path, std::nullopt, {}, false};
        try {
            KeyFile key = read_key_file(path);
            PublicKey public_key(key.blobs.pub.publicArea);
            check_usable(key, path.string());
            f.key = UsableKey{std::move(key), std::move(public_key)};
        } catch (const ReplaceableFile& e) {
            f.skip_reason = reason_without_path(e.what(), path.string());
            f.replaceable = true;
        } catch (const Error& e) {
            f.skip_reason = reason_without_path(e.what(), path.string());
        }
        found.push_back(std::move(f));
    }
    return found;
}

}  // namespace tpmkey
