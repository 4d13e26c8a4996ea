// Logging for the module and the tools. Errors go to stderr by default
// (one line a person can act on); TPMKEY_LOG=debug adds detail,
// TPMKEY_LOG=off silences it, TPMKEY_LOG_FILE sends it to a file.
// Never pass a PIN, an auth value or signed data to these functions.
#pragma once

#include <string>

namespace tpmkey {

enum class LogLevel { off = 0, error = 1, info = 2, debug = 3 };

// Reads TPMKEY_LOG and TPMKEY_LOG_FILE; called by C_Initialize and the CLIs.
void configure_logging();

LogLevel log_level() noexcept;
void log(LogLevel level, const std::string& message) noexcept;
inline void log_error(const std::string& m) noexcept { log(LogLevel::error, m); }
inline void log_info(const std::string& m) noexcept { log(LogLevel::info, m); }
inline void log_debug(const std::string& m) noexcept { log(LogLevel::debug, m); }

}  // namespace tpmkey
