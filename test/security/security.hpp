// Helpers shared by the security tests (on top of test/module/harness.hpp).
#pragma once

#include "../module/harness.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace st {

// A whole file as text ("" when it does not exist).
std::string read_text(const std::filesystem::path& path);

// Sends the module's log (TPMKEY_LOG_FILE, at `level`) to a fresh file for
// the life of this object. Must exist before C_Initialize, which reads the
// variables.
class LogCapture {
public:
    explicit LogCapture(const std::string& name, const std::string& level = "info");
    std::string text() const { return read_text(path_); }
    const std::filesystem::path& path() const noexcept { return path_; }

private:
    std::filesystem::path path_;
    mt::ScopedEnv file_;
    mt::ScopedEnv level_;
};

// One TPM command or response from a pcap-TCTI capture (pcapng written by
// tpm2-tss's tcti-pcap: fake IPv4+TCP packets, commands to port 2321).
struct TpmPacket {
    bool command;                     // false: a response
    std::uint32_t code;               // command code, or response code
    std::vector<std::uint8_t> bytes;  // the whole TPM command/response
};
std::vector<TpmPacket> read_pcap(const std::filesystem::path& path);

// VmRSS of this process in KiB.
long rss_kib();

// The swtpm's state dir (TPMKEY_SWTPM_DIR) and a fixture script in swtpm-fixtures/.
std::string swtpm_dir();
std::string fixture(const std::string& script);

// Runs `command` (through sh), REQUIREs exit status 0, returns stdout.
std::string run_ok(const std::string& command);

}  // namespace st
