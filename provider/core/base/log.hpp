// Logging for the module and the tools. Errors go to stderr by default
// (one line a person can act on); TPMKEY_LOG=debug adds detail,
// TPMKEY_LOG=off silences it, TPMKEY_LOG_FILE sends it to a file. Where
// stderr is /dev/null (ssh-agent in the background and its PKCS#11
// helper), the module's lines go to the state log instead, which
// `tpmkey doctor` shows.
// Lines written to a file start with the local time.
// Never pass a PIN, an auth value or signed data to these functions.
#pragma once

#include <filesystem>
#include <string>

namespace tpmkey {

enum class LogLevel { off = 0, error = 1, info = 2, debug = 3 };

// Reads TPMKEY_LOG and TPMKEY_LOG_FILE; called by C_Initialize and the CLIs.
// Only the module keeps lines that would go to a lost stderr (a CLI whose
// stderr was sent to /dev/null was asked to be quiet): whether stderr is
// lost, and the state log, are looked at when the first line is written,
// not here (every ssh connection runs C_Initialize).
enum class LostStderr { drop, to_state_log };
void configure_logging(LostStderr lost = LostStderr::drop);

// $XDG_STATE_HOME/tpmkey/log, else ~/.local/state/tpmkey/log; empty
// without a home directory. Written to only through directories opened
// without following links, each the user's and writable by no one else
// (tpmkey/ itself 0700), when the file is the user's with a single link;
// kept under 64 KiB while it is written.
std::filesystem::path state_log_path();

LogLevel log_level() noexcept;
void log(LogLevel level, const std::string& message) noexcept;
inline void log_error(const std::string& m) noexcept { log(LogLevel::error, m); }
inline void log_info(const std::string& m) noexcept { log(LogLevel::info, m); }
inline void log_debug(const std::string& m) noexcept { log(LogLevel::debug, m); }

}  // namespace tpmkey
