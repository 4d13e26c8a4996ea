// One description of a TCTI string (tpm2-tools syntax: NAME[:CONF], or
// empty for the tpm2-tss default), parsed once. Everything that decides
// something from the TCTI asks this type: whether a resource manager
// answers (what may stay loaded), whether it is the machine's own TPM
// (systemd's SRK pin), which device node it opens, whether it is a
// simulator, and the identity a pin (known_parents.hpp) is filed under.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tpmkey {

class Tcti {
public:
    enum class Kind { default_search, device, tabrmd, swtpm, mssim, other };

    // Never throws for any text; a TCTI with blanks or control characters
    // is refused by identity(), the one use that must be exact.
    explicit Tcti(std::string_view text);

    const std::string& text() const noexcept { return text_; }  // as given
    Kind kind() const noexcept { return kind_; }

    // The device node it opens: a device TCTI's path (/dev/tpm0 without
    // one, as tpm2-tss), /dev/tpmrm0 for the default; empty for the others.
    std::string device_path() const;
    // The kernel's /dev/tpmrm*, tpm2-abrmd, or the default where /dev/tpmrm0
    // exists (tpm2-tss tries it before /dev/tpm0).
    bool has_resource_manager() const;
    // The TPM of this machine: the default, /dev/tpm0 or /dev/tpmrm0,
    // tpm2-abrmd on the system bus.
    bool is_machine_tpm() const;
    bool is_simulator() const noexcept { return kind_ == Kind::swtpm || kind_ == Kind::mssim; }

    // The TPM it reaches, however it is spelt: "default" for the machine's
    // own TPM (every spelling above), else NAME:CONF with a pcap: wrapper
    // dropped, key=value pairs sorted and their defaults filled in, and a
    // simulator's host name resolved to its address. Throws Error for a
    // TCTI with blanks or control characters, which could name any TPM.
    std::string identity() const;

    // What tpmkey tries for the tpm2-tss default, one after the other: the
    // TCTIs tctildr tries, but the device nodes before tpm2-abrmd, and
    // tpm2-abrmd only where a system D-Bus runs. tctildr tries tabrmd
    // first, and its TCTI prints a GLib "CRITICAL ... failed to allocate
    // dbus proxy object" line on stderr wherever no tpm2-abrmd answers;
    // where one does, it holds /dev/tpm0, and /dev/tpmrm0 is the same TPM
    // with a resource manager too.
    static std::vector<std::string> default_search_order();

    // A simulator's address as written, with tpm2-tss's defaults filled in
    // (localhost, 2321); nothing for the others, or when its CONF is not
    // key=value pairs.
    struct Address {
        std::string host;
        std::string port;
    };
    std::optional<Address> simulator_address() const;

private:
    std::string text_;
    Kind kind_ = Kind::other;
    std::string name_;  // "device", "swtpm", ...; "" for the default
    std::string conf_;
};

}  // namespace tpmkey
