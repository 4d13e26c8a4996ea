#include "core/attestation/exchange_file.hpp"

#include "core/base/base64.hpp"
#include "core/base/printable.hpp"
#include "core/files/atomic_file.hpp"
#include "core/files/file_read.hpp"

#include <algorithm>
#include <optional>
#include <utility>

namespace tpmkey {

namespace {

bool is_name(std::string_view name) {
    return !name.empty() && name.size() <= 64 &&
           name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") == std::string_view::npos;
}

}  // namespace

void ExchangeFile::set_text(const std::string& name, const std::string& value) {
    if (!is_name(name) || value.find_first_of("\r\n") != std::string::npos || printable(value) != value)
        throw Error("cannot write '" + name + "': not a printable value on one line");
    fields_[name] = value;
}

void ExchangeFile::set_bytes(const std::string& name, std::span<const std::uint8_t> value) {
    set_text(name, base64(value));
}

std::string ExchangeFile::text(const std::string& name) const {
    const auto it = fields_.find(name);
    if (it == fields_.end())
        throw Error(what_ + ": no " + name);
    return it->second;
}

Bytes ExchangeFile::bytes(const std::string& name, std::size_t max_size) const {
    std::optional<Bytes> out = base64_decode(text(name));
    if (!out)
        throw Error(what_ + ": " + name + " is not base64");
    if (out->size() > max_size)
        throw Error(what_ + ": " + name + " is too long (" + std::to_string(out->size()) + " bytes)");
    return std::move(*out);
}

std::string ExchangeFile::to_string() const {
    std::string out = "tpmkey-" + kind_ + " 1\n";
    for (const auto& [name, value] : fields_)
        out += name + " " + value + "\n";
    return out;
}

ExchangeFile ExchangeFile::parse(std::string_view contents, const std::string& kind,
                                 std::initializer_list<const char*> names, const std::string& what) {
    ExchangeFile file(kind);
    file.what_ = what;
    const std::string header = "tpmkey-" + kind + " 1";
    bool first = true;
    while (!contents.empty()) {
        const std::size_t end = contents.find('\n');
        if (end == std::string_view::npos)
            throw Error(what + ": the last line has no end (a cut file?)");
        const std::string_view line = contents.substr(0, end);
        contents.remove_prefix(end + 1);
        if (first) {
            if (line != header)
                throw Error(what + ": not a tpmkey " + kind + " file (its first line must be '" + header + "')");
            first = false;
            continue;
        }
        const std::size_t space = line.find(' ');
        const std::string name(line.substr(0, space));
        if (space == std::string_view::npos || !is_name(name))
            throw Error(what + ": a line is not 'NAME VALUE'");
        if (std::none_of(names.begin(), names.end(), [&](const char* n) { return name == n; }))
            throw Error(what + ": unknown field '" + name + "'");
        const std::string value(line.substr(space + 1));
        if (value.find('\r') != std::string::npos || printable(value) != value)
            throw Error(what + ": " + name + " is not printable text");
        if (!file.fields_.emplace(name, value).second)
            throw Error(what + ": " + name + " given twice");
    }
    if (first)
        throw Error(what + ": empty, not a tpmkey " + kind + " file");
    return file;
}

ExchangeFile read_exchange_file(const std::filesystem::path& path, const std::string& kind,
                                std::initializer_list<const char*> names) {
    const FileRead read = read_regular_file(path, max_exchange_file_size);
    return ExchangeFile::parse({reinterpret_cast<const char*>(read.data.data()), read.data.size()}, kind, names,
                               path.string());
}

void write_exchange_file(const std::filesystem::path& path, const ExchangeFile& file, mode_t mode) {
    write_file_atomically(path, file.to_string(), mode, Replace::yes);
}

}  // namespace tpmkey
