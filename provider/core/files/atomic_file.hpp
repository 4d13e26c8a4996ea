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

// The checks write_file_atomically makes of `path` and its directory before
// it writes (a directory writable by everyone without the sticky bit; with
// Replace::yes, a `path` that is not a regular file), made now: a command
// that writes only after using the TPM or the network fails before them.
// Throws the same Error.
void check_writable_target(const std::filesystem::path& path, Replace replace);

}  // namespace tpmkey
