#include "core/files/tcti.hpp"

#include "core/base/error.hpp"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>

namespace tpmkey {

namespace {

// tpm2-tss's defaults (tcti-tabrmd, tcti-swtpm, tcti-mssim): a spelling that
// leaves them out names the same TPM as one that writes them.
constexpr const char* tabrmd_bus_name = "com.intel.tss2.Tabrmd";
constexpr const char* simulator_host = "localhost";
constexpr const char* simulator_port = "2321";

// tctildr also takes the library's file name: "libtss2-tcti-swtpm.so.0" is "swtpm".
std::string_view short_name(std::string_view name) {
    constexpr std::string_view lib = "libtss2-tcti-";
    if (name.starts_with(lib)) {
        name.remove_prefix(lib.size());
        name = name.substr(0, name.find(".so"));
    }
    return name;
}

// CONF as key=value pairs ("host=h,port=p"), or nothing when it is not.
bool parse_pairs(std::string_view conf, std::map<std::string, std::string>& pairs) {
    while (!conf.empty()) {
        const std::string_view item = conf.substr(0, conf.find(','));
        conf.remove_prefix(std::min(conf.size(), item.size() + 1));
        const std::size_t eq = item.find('=');
        if (eq == std::string_view::npos || eq == 0)
            return false;
        pairs[std::string(item.substr(0, eq))] = std::string(item.substr(eq + 1));
    }
    return true;
}

std::string join_pairs(const std::map<std::string, std::string>& pairs) {
    std::string out;
    for (const auto& [key, value] : pairs)
        out += (out.empty() ? "" : ",") + key + "=" + value;
    return out;
}

// A host's address, IPv4 first (so "localhost" is 127.0.0.1 wherever
// /etc/hosts also lists ::1); the name itself when it does not resolve.
std::string resolved_host(const std::string& host) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || !found)
        return host;
    const std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owner(found, ::freeaddrinfo);
    const addrinfo* best = found;
    for (const addrinfo* a = found; a; a = a->ai_next)
        if (a->ai_family == AF_INET) {
            best = a;
            break;
        }
    char text[NI_MAXHOST];
    if (::getnameinfo(best->ai_addr, best->ai_addrlen, text, sizeof text, nullptr, 0, NI_NUMERICHOST) != 0)
        return host;
    return text;
}

// /dev/tpmrmN is the resource manager in front of /dev/tpmN: one TPM.
std::string device_identity(const std::string& path) {
    std::string p = std::filesystem::path(path).lexically_normal().string();
    if (p.starts_with("/dev/tpmrm"))
        p = "/dev/tpm" + p.substr(10);
    return p == "/dev/tpm0" ? "default" : "device:" + p;
}

bool printable(std::string_view text) {
    for (const char c : text)
        if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f)
            return false;
    return true;
}

// The TCTI with control characters shown as \xNN, for a message.
std::string escaped(std::string_view text) {
    std::string out;
    for (const char c : text) {
        if (static_cast<unsigned char>(c) < ' ' || c == 0x7f) {
            char hex[5];
            std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned>(static_cast<unsigned char>(c)));
            out += hex;
        } else {
            out += c;
        }
    }
    return out;
}

}  // namespace

Tcti::Tcti(std::string_view text) : text_(text) {
    // tpm2-tss's pcap TCTI records the traffic of the TCTI after its colon.
    while (text.starts_with("pcap:"))
        text.remove_prefix(5);
    const std::size_t colon = text.find(':');
    name_ = std::string(short_name(text.substr(0, colon)));
    conf_ = colon == std::string_view::npos ? std::string() : std::string(text.substr(colon + 1));
    // "default" is how the pins file has always named the tpm2-tss default.
    if (name_.empty() || name_ == "default")
        kind_ = Kind::default_search;
    else if (name_ == "device")
        kind_ = Kind::device;
    else if (name_ == "tabrmd")
        kind_ = Kind::tabrmd;
    else if (name_ == "swtpm")
        kind_ = Kind::swtpm;
    else if (name_ == "mssim")
        kind_ = Kind::mssim;
}

std::string Tcti::device_path() const {
    if (kind_ == Kind::device)
        return conf_.empty() ? "/dev/tpm0" : conf_;
    return kind_ == Kind::default_search ? "/dev/tpmrm0" : std::string();
}

bool Tcti::has_resource_manager() const {
    switch (kind_) {
    case Kind::tabrmd: return true;
    case Kind::device: return std::filesystem::path(device_path()).filename().string().starts_with("tpmrm");
    case Kind::default_search: return ::access("/dev/tpmrm0", F_OK) == 0;
    default: return false;  // simulators and anything we do not know: assume none
    }
}

bool Tcti::is_machine_tpm() const {
    const bool may_be = kind_ == Kind::default_search || kind_ == Kind::device || kind_ == Kind::tabrmd;
    return may_be && printable(text_) && identity() == "default";
}

std::string Tcti::identity() const {
    if (!printable(text_))
        throw Error("the TCTI '" + escaped(text_) +
                    "' contains a blank or a control character, so it cannot say which TPM it reaches; refusing "
                    "it (correct TPMKEY_TCTI, --tcti or the config file's tcti line)");
    std::map<std::string, std::string> pairs;
    switch (kind_) {
    case Kind::default_search: return "default";
    case Kind::device: return device_identity(device_path());
    case Kind::tabrmd:
        if (!parse_pairs(conf_, pairs))
            break;
        pairs.try_emplace("bus_name", tabrmd_bus_name);
        pairs.try_emplace("bus_type", "system");
        if (pairs.size() == 2 && pairs["bus_name"] == tabrmd_bus_name && pairs["bus_type"] == "system")
            return "default";
        return name_ + ":" + join_pairs(pairs);
    case Kind::swtpm:
    case Kind::mssim:
        if (!parse_pairs(conf_, pairs))
            break;
        pairs.try_emplace("host", simulator_host);
        pairs.try_emplace("port", simulator_port);
        pairs["host"] = resolved_host(pairs["host"]);
        return name_ + ":" + join_pairs(pairs);
    case Kind::other:
        if (parse_pairs(conf_, pairs) && !pairs.empty())
            return name_ + ":" + join_pairs(pairs);
        break;
    }
    return conf_.empty() ? name_ : name_ + ":" + conf_;
}

std::optional<Tcti::Address> Tcti::simulator_address() const {
    std::map<std::string, std::string> pairs;
    if (!is_simulator() || !parse_pairs(conf_, pairs))
        return std::nullopt;
    pairs.try_emplace("host", simulator_host);
    pairs.try_emplace("port", simulator_port);
    return Address{pairs["host"], pairs["port"]};
}

std::vector<std::string> Tcti::default_search_order() {
    const bool system_bus = std::getenv("DBUS_SYSTEM_BUS_ADDRESS") ||
                            ::access("/run/dbus/system_bus_socket", F_OK) == 0 ||
                            ::access("/var/run/dbus/system_bus_socket", F_OK) == 0;
    if (system_bus)
        return {"device:/dev/tpmrm0", "device:/dev/tpm0", "tabrmd", "swtpm", "mssim"};
    return {"device:/dev/tpmrm0", "device:/dev/tpm0", "swtpm", "mssim"};
}

}  // namespace tpmkey
