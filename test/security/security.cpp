#include "security.hpp"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace st {

std::string read_text(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

namespace {
std::filesystem::path fresh_log_path(const std::string& name) {
    const std::filesystem::path p = mt::key_dir() / (name + ".log");
    std::filesystem::remove(p);
    return p;
}
}  // namespace

LogCapture::LogCapture(const std::string& name, const std::string& level)
    : path_(fresh_log_path(name)), file_("TPMKEY_LOG_FILE", path_.string()), level_("TPMKEY_LOG", level) {}

std::vector<TpmPacket> read_pcap(const std::filesystem::path& path) {
    const std::string data = read_text(path);
    const auto u32 = [&](std::size_t o) {
        std::uint32_t v;
        std::memcpy(&v, data.data() + o, 4);  // pcapng in host byte order
        return v;
    };
    const auto be16 = [](const std::uint8_t* p) { return static_cast<unsigned>(p[0] << 8 | p[1]); };
    const auto be32 = [](const std::uint8_t* p) {
        return static_cast<std::uint32_t>(p[0]) << 24 | static_cast<std::uint32_t>(p[1]) << 16 |
               static_cast<std::uint32_t>(p[2]) << 8 | p[3];
    };
    std::vector<TpmPacket> out;
    std::size_t o = 0;
    while (o + 12 <= data.size()) {
        const std::uint32_t type = u32(o), len = u32(o + 4);
        if (len < 12 || o + len > data.size())
            throw std::runtime_error(path.string() + ": broken pcapng block at " + std::to_string(o));
        if (type == 6 && len >= 28 + 40) {  // Enhanced Packet Block
            const std::uint32_t caplen = u32(o + 20);
            const auto* ip = reinterpret_cast<const std::uint8_t*>(data.data() + o + 28);
            const std::size_t ihl = (ip[0] & 0x0fu) * 4u;
            const std::uint8_t* tcp = ip + ihl;
            const std::size_t thl = (tcp[12] >> 4) * 4u;
            if (ihl + thl + 10 <= caplen) {
                TpmPacket p;
                p.command = be16(tcp + 2) == 2321;
                const std::uint8_t* payload = tcp + thl;
                p.code = be32(payload + 6);
                p.bytes.assign(payload, ip + caplen);
                out.push_back(std::move(p));
            }
        }
        o += len;
    }
    return out;
}

long rss_kib() {
    std::ifstream in("/proc/self/status");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("VmRSS:", 0) == 0)
            return std::stol(line.substr(6));
    return -1;
}

std::string swtpm_dir() {
    const char* d = std::getenv("TPMKEY_SWTPM_DIR");
    return d ? d : "";
}

std::string fixture(const std::string& script) { return (mt::fixtures_dir() / script).string(); }

std::string run_ok(const std::string& command) {
    int status = 0;
    const std::string out = mt::run(command, &status);
    INFO(command << "\n" << out);
    REQUIRE(status == 0);
    return out;
}

}  // namespace st
