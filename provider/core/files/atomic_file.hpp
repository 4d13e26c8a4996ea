// Writing files so that a failure at any point leaves either the old file
// or the complete new one, never a partial one.
#pragma once

#include <sys/types.h>
#include <filesystem>
#include <string_view>

namespace tpmkey {

enum class Replace { no, yes };

// Writes `contents` to a temporary file next to `path` (created 0600 or
// `mode`), syncs it, then renames it into place. With Replace::no an
// existing `path` is an error and is left untouched (link(2) refuses
// atomically). With Replace::yes only a regular file (or a symbolic link
// to one, or to nothing: the link is replaced) is replaced: a device such
// as /dev/null, a FIFO, a socket or a directory, or a link to one, is
// refused and left as it is. Throws Error naming the path.
void write_file_atomically(const std::filesystem::path& path, std::string_view contents, mode_t mode, Replace replace);

}  // namespace tpmkey
