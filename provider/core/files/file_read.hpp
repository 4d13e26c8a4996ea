// Reading the small files tpmkey trusts nothing in (key files, the config
// file, certificates, pins): one way, bounded, from the descriptor that was
// checked, never blocking.
#pragma once

#include "core/base/error.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

namespace tpmkey {

struct FileRead {
    std::vector<std::uint8_t> data;
    uid_t owner = 0;
    mode_t mode = 0;
};

// Opens `path` with O_NONBLOCK (a FIFO or device put in a file's place must
// not hang the caller) and O_NOFOLLOW unless `follow_links`, refuses
// anything but a regular file, and reads at most `max_size` bytes from that
// same descriptor: a file that grows or is swapped after the check cannot
// make us read more. Throws Error naming the path ("PATH: not a regular
// file", "PATH: too large ...").
FileRead read_regular_file(const std::filesystem::path& path, std::size_t max_size, bool follow_links = true);

// ssh's StrictModes rules for a file whose contents we trust (a key file: its
// public key is what ssh-keygen -D prints): the file and every directory
// from its own up to $HOME (or to / for a file outside $HOME) belong to
// the user or root, and no one else may write to them (a directory
// writable by all is fine with the sticky bit, as /tmp). Throws Error
// naming what is wrong and the chmod that fixes it, also when the
// directories cannot be checked (the path no longer resolves); `kind` and
// `contents` name the file in it ("pin file", "the pins").
class ReplaceableFile : public FileError {
public:
    using FileError::FileError;
};
void check_not_replaceable(const std::filesystem::path& path, const FileRead& file, std::string_view kind = "key file",
                           std::string_view contents = "the key");

// The same, but nullopt when the file does not exist.
std::optional<FileRead> read_regular_file_if_present(const std::filesystem::path& path, std::size_t max_size,
                                                     bool follow_links = true);

}  // namespace tpmkey
