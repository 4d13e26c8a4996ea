#include "core/keys/key_discovery.hpp"

#include "core/base/error.hpp"
#include "core/files/file_read.hpp"

namespace tpmkey {

std::vector<FoundKeyFile> find_keys(const Config& config) {
    std::vector<FoundKeyFile> found;
    for (const std::filesystem::path& path : config.key_files) {
        FoundKeyFile f{path, std::nullopt, {}, {}, false};
        try {
            KeyFile key = read_key_file(path);
            PublicKey public_key(key.blobs.pub.publicArea);
            check_usable(key, path.string());
            f.key = UsableKey{std::move(key), std::move(public_key)};
        } catch (const ReplaceableFile& e) {
            f.skip_message = e.what();
            f.skip_reason = e.reason();
            f.replaceable = true;
        } catch (const FileError& e) {
            f.skip_message = e.what();
            f.skip_reason = e.reason();
        } catch (const Error& e) {
            // A check that does not name the file (PublicKey's).
            f.skip_message = path.string() + ": " + e.what();
            f.skip_reason = e.what();
        }
        found.push_back(std::move(f));
    }
    return found;
}

}  // namespace tpmkey
