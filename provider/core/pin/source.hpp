// A key's PIN from where a service manager or the kernel keeps it, for keys
// that sign with nobody at the keyboard (docs/design.md, "Keys that need
// nobody at the keyboard"; docs/unattended-keys.md). Read when the key signs,
// never at start-up, never from the environment, never logged. The source
// itself (PinSource) is named where the config file names it, config.hpp.
#pragma once

#include "core/base/error.hpp"
#include "core/base/secret.hpp"
#include "core/files/config.hpp"

#include <string>

namespace tpmkey {

// "systemd credential 'NAME'", "kernel keyring key 'NAME'".
std::string describe(const PinSource& source);

// Why a source gives no PIN: missing, expired, readable by others, ...
// The message names the source and what to do; it never holds PIN bytes.
class PinSourceError : public Error {
public:
    using Error::Error;
};

// The largest PIN a source may hold.
inline constexpr std::size_t max_source_pin_size = 1024;

// The PIN, one trailing newline dropped ("echo PIN | systemd-creds encrypt",
// "keyctl padd" from a file). Throws PinSourceError:
//  - credential: $CREDENTIALS_DIRECTORY unset or not absolute; the file
//    missing, not a regular file, not the user's or root's, readable or
//    writable by group or others, in a directory others could write;
//  - keyring: no such key in the session or user keyring, expired, revoked,
//    not the user's, readable by group or others; the keyring not
//    available (a seccomp filter, as in some containers);
//  - both: empty, or longer than max_source_pin_size.
Secret read_pin(const PinSource& source);

}  // namespace tpmkey
