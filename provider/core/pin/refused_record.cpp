#include "core/pin/refused_record.hpp"

#include "core/base/error.hpp"
#include "core/base/log.hpp"
#include "core/files/atomic_file.hpp"
#include "core/files/file_read.hpp"

#include <sstream>
#include <vector>

#include <openssl/evp.h>
#include <unistd.h>

namespace tpmkey {

namespace {

// One line per record: "v1 SOURCE RECORD", each 64 hex digits. A file of
// more than this is not ours: no record.
constexpr std::size_t max_file_size = 64 * 1024;
constexpr const char* version = "v1";

RefusedPinRecords::Digest sha256(const std::vector<std::uint8_t>& data) {
    RefusedPinRecords::Digest out{};
    unsigned int n = 0;
    if (!EVP_Digest(data.data(), data.size(), out.data(), &n, EVP_sha256(), nullptr) || n != out.size())
        throw Error("SHA-256 failed (OpenSSL)");
    return out;
}

std::string hex(const RefusedPinRecords::Digest& d) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    for (const std::uint8_t b : d) {
        out += digits[b >> 4];
        out += digits[b & 15];
    }
    return out;
}

std::optional<RefusedPinRecords::Digest> from_hex(const std::string& s) {
    RefusedPinRecords::Digest out{};
    if (s.size() != 2 * out.size())
        return std::nullopt;
    const auto nibble = [](char c) -> int {
        if (c >= '0' && c <= '9')
            return c - '0';
        if (c >= 'a' && c <= 'f')
            return c - 'a' + 10;
        return -1;
    };
    for (std::size_t i = 0; i < out.size(); ++i) {
        const int hi = nibble(s[2 * i]), lo = nibble(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return std::nullopt;
        out[i] = static_cast<std::uint8_t>(hi << 4 | lo);
    }
    return out;
}

using Records = std::vector<std::pair<RefusedPinRecords::Digest, RefusedPinRecords::Digest>>;

// The records of the file; none when it is missing, not a regular file,
// not the user's, or writable by others (who could then make the module
// refuse a right PIN). A line that does not parse is skipped.
Records read_records(const std::filesystem::path& file) {
    Records out;
    if (file.empty())
        return out;
    std::optional<FileRead> read;
    try {
        read = read_regular_file_if_present(file, max_file_size, false);
    } catch (const Error& e) {
        log_debug(std::string("refused PIN records not read: ") + e.what());
        return out;
    }
    if (!read || read->owner != ::geteuid() || (read->mode & 022) != 0)
        return out;
    std::istringstream lines(std::string(read->data.begin(), read->data.end()));
    for (std::string line; std::getline(lines, line);) {
        std::istringstream fields(line);
        std::string v, source, record, extra;
        if (!(fields >> v >> source >> record) || (fields >> extra) || v != version)
            continue;
        const auto s = from_hex(source);
        const auto r = from_hex(record);
        if (s && r)
            out.emplace_back(*s, *r);
    }
    return out;
}

}  // namespace

std::filesystem::path RefusedPinRecords::default_file() {
    const std::filesystem::path log = state_log_path();
    return log.empty() ? log : log.parent_path() / "refused-pins";
}

RefusedPinRecords::Digest RefusedPinRecords::source_id(const std::string& key_name, const std::string& source) {
    std::vector<std::uint8_t> data(key_name.begin(), key_name.end());
    data.push_back(0);
    data.insert(data.end(), source.begin(), source.end());
    return sha256(data);
}

std::optional<RefusedPinRecords::Digest> RefusedPinRecords::find(const Digest& source) const {
    for (const auto& [s, r] : read_records(file_))
        if (s == source)
            return r;
    return std::nullopt;
}

void RefusedPinRecords::store(const Digest& source, const std::optional<Digest>& record) const {
    if (file_.empty())
        return;
    Records records = read_records(file_);
    std::erase_if(records, [&](const auto& entry) { return entry.first == source; });
    if (record)
        records.emplace_back(source, *record);
    // The directory as the state log makes it: the user's, 0700.
    const std::filesystem::path dir = file_.parent_path();
    std::error_code ec;
    if (!std::filesystem::exists(dir, ec) && std::filesystem::create_directories(dir, ec))
        std::filesystem::permissions(dir, std::filesystem::perms::owner_all, ec);
    std::string contents;
    for (const auto& [s, r] : records)
        contents += std::string(version) + " " + hex(s) + " " + hex(r) + "\n";
    write_file_atomically(file_, contents, 0600, Replace::yes);
}

}  // namespace tpmkey
