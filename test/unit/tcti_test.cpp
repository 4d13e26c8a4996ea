// The one description of a TCTI string (tcti.hpp): its kind, device node,
// resource manager, machine TPM, simulator, and the identity pins are filed
// under; and the TPM address made of it once (tpm_address.hpp).
#include "core/files/tcti.hpp"
#include "core/base/error.hpp"
#include "core/files/tpm_address.hpp"
#include "core/tpm/tpm.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdlib>

#include <string>

using namespace tpmkey;

TEST_CASE("Tcti: the kind, with pcap: wrappers and library names seen through") {
    CHECK(Tcti("").kind() == Tcti::Kind::default_search);
    CHECK(Tcti("default").kind() == Tcti::Kind::default_search);  // how old pin lines name it
    CHECK(Tcti("pcap:").kind() == Tcti::Kind::default_search);
    CHECK(Tcti("device").kind() == Tcti::Kind::device);
    CHECK(Tcti("pcap:pcap:device:/dev/tpmrm0").kind() == Tcti::Kind::device);
    CHECK(Tcti("libtss2-tcti-device.so.0:/dev/tpm0").kind() == Tcti::Kind::device);
    CHECK(Tcti("tabrmd:bus_type=session").kind() == Tcti::Kind::tabrmd);
    CHECK(Tcti("swtpm:port=2321").kind() == Tcti::Kind::swtpm);
    CHECK(Tcti("mssim").kind() == Tcti::Kind::mssim);
    CHECK(Tcti("cmd:tpm2_send").kind() == Tcti::Kind::other);
    CHECK(Tcti("devices:/dev/tpm0").kind() == Tcti::Kind::other);  // a prefix is not a name
    CHECK(Tcti("pcap:swtpm:port=1").is_simulator());
    CHECK(Tcti("mssim:host=h").is_simulator());
    CHECK_FALSE(Tcti("device:/dev/tpm0").is_simulator());
    CHECK(Tcti("pcap:swtpm:port=1").text() == "pcap:swtpm:port=1");
}

TEST_CASE("Tcti: the device node it opens, and whether a resource manager answers") {
    CHECK(Tcti("device").device_path() == "/dev/tpm0");
    CHECK(Tcti("device:").device_path() == "/dev/tpm0");  // tpm2-tss's default for an empty conf
    CHECK(Tcti("device:/dev/tpmrm1").device_path() == "/dev/tpmrm1");
    CHECK(Tcti("pcap:device:/dev/tpmrm0").device_path() == "/dev/tpmrm0");
    CHECK(Tcti("").device_path() == "/dev/tpmrm0");
    CHECK(Tcti("swtpm").device_path().empty());
    CHECK(Tcti("tabrmd").has_resource_manager());
    CHECK(Tcti("tabrmd:bus_type=session").has_resource_manager());
    CHECK(Tcti("device:/dev/tpmrm0").has_resource_manager());
    CHECK(Tcti("pcap:device:/dev/tpmrm1").has_resource_manager());
    CHECK_FALSE(Tcti("device:/dev/tpm0").has_resource_manager());
    CHECK_FALSE(Tcti("device:/tmp/tpmrm-lookalike/tpm0").has_resource_manager());
    CHECK_FALSE(Tcti("device").has_resource_manager());
    CHECK_FALSE(Tcti("swtpm:port=1").has_resource_manager());
    CHECK_FALSE(Tcti("cmd:tpmrm").has_resource_manager());
    CHECK(Tcti("").has_resource_manager() == (::access("/dev/tpmrm0", F_OK) == 0));
}

TEST_CASE("Tcti::identity: every spelling of the machine's own TPM is 'default'") {
    for (const char* spelling :
         {"", "default", "pcap:", "device", "device:", "device:/dev/tpm0", "device:/dev/tpmrm0", "device:/dev//tpmrm0",
          "pcap:device:/dev/tpmrm0", "libtss2-tcti-device.so.0:/dev/tpmrm0", "tabrmd",
          "tabrmd:", "tabrmd:bus_type=system", "tabrmd:bus_name=com.intel.tss2.Tabrmd,bus_type=system",
          "tabrmd:bus_type=system,bus_name=com.intel.tss2.Tabrmd"}) {
        INFO(spelling);
        CHECK(Tcti(spelling).identity() == "default");
        CHECK(Tcti(spelling).is_machine_tpm());
    }
    // /dev/tpmrm1 is the resource manager of /dev/tpm1: another TPM than tpm0, the same as tpm1.
    CHECK(Tcti("device:/dev/tpmrm1").identity() == "device:/dev/tpm1");
    CHECK(Tcti("device:/dev/tpm1").identity() == "device:/dev/tpm1");
    CHECK_FALSE(Tcti("device:/dev/tpm1").is_machine_tpm());
    // tpm2-abrmd on the session bus (a test's) may front any TPM.
    CHECK(Tcti("tabrmd:bus_type=session").identity() == "tabrmd:bus_name=com.intel.tss2.Tabrmd,bus_type=session");
    CHECK_FALSE(Tcti("tabrmd:bus_type=session").is_machine_tpm());
    CHECK_FALSE(Tcti("swtpm").is_machine_tpm());
}

TEST_CASE("Tcti::identity: a simulator's key=value order, defaults and host name do not matter") {
    const std::string id = "swtpm:host=127.0.0.1,port=2321";
    for (const char* spelling : {"swtpm", "swtpm:", "swtpm:host=127.0.0.1,port=2321", "swtpm:port=2321,host=127.0.0.1",
                                 "swtpm:host=localhost", "swtpm:port=2321", "pcap:swtpm:port=2321,host=localhost",
                                 "libtss2-tcti-swtpm.so.0:host=localhost,port=2321"}) {
        INFO(spelling);
        CHECK(Tcti(spelling).identity() == id);
    }
    CHECK(Tcti("swtpm:port=2322").identity() == "swtpm:host=127.0.0.1,port=2322");
    CHECK(Tcti("mssim:port=2321,host=localhost").identity() == "mssim:host=127.0.0.1,port=2321");
    CHECK(Tcti("mssim").identity() != Tcti("swtpm").identity());
    // A name that does not resolve stays as written.
    CHECK(Tcti("swtpm:host=no-such-host.invalid,port=1").identity() == "swtpm:host=no-such-host.invalid,port=1");
    // Another TCTI: key=value pairs sorted, anything else as written.
    CHECK(Tcti("spi-helper:b=2,a=1").identity() == "spi-helper:a=1,b=2");
    CHECK(Tcti("libtpms:/var/lib/state").identity() == "libtpms:/var/lib/state");
    CHECK(Tcti("cmd").identity() == "cmd");
}

TEST_CASE("Tcti::identity: blanks and control characters are refused, with the TCTI shown escaped") {
    for (const char* spelling :
         {"swtpm:port=2321 ", " swtpm:port=2321", "swtpm:port=2321\t", "swtpm:port=2321\n", "device:/dev/tpmrm0\r",
          "device:/dev/tpm\x01"
          "0",
          "cmd:tpm2_send --tcti x", "swtpm:port=2321\x7f"}) {
        INFO(spelling);
        CHECK_THROWS_AS(Tcti(spelling).identity(), Error);
        CHECK_FALSE(Tcti(spelling).is_machine_tpm());
    }
    CHECK_THROWS_WITH(Tcti("swtpm:port=1\n").identity(),
                      Catch::Contains("the TCTI 'swtpm:port=1\\x0a' contains a blank or a control character"));
}

TEST_CASE("Tcti::default_search_order: the device nodes first, tpm2-abrmd only with a system D-Bus") {
    // tpm2-abrmd is tried only where a system bus could run it: its TCTI
    // prints a GLib CRITICAL line wherever none answers.
    const bool system_bus =
        ::access("/run/dbus/system_bus_socket", F_OK) == 0 || ::access("/var/run/dbus/system_bus_socket", F_OK) == 0;
    ::unsetenv("DBUS_SYSTEM_BUS_ADDRESS");
    CHECK(Tcti::default_search_order() ==
          (system_bus ? std::vector<std::string>{"device:/dev/tpmrm0", "device:/dev/tpm0", "tabrmd", "swtpm", "mssim"}
                      : std::vector<std::string>{"device:/dev/tpmrm0", "device:/dev/tpm0", "swtpm", "mssim"}));
    ::setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nowhere", 1);
    CHECK(Tcti::default_search_order() ==
          std::vector<std::string>{"device:/dev/tpmrm0", "device:/dev/tpm0", "tabrmd", "swtpm", "mssim"});
    ::unsetenv("DBUS_SYSTEM_BUS_ADDRESS");
}

TEST_CASE("TpmAddress: the TCTI parsed once, with its identity, time bound and origin, and --tcti keeps the bound") {
    const TpmAddress env("pcap:swtpm:port=2321,host=localhost", TpmAddress::Source::environment, "TPMKEY_TCTI",
                         std::chrono::seconds(7));
    CHECK(env.text() == "pcap:swtpm:port=2321,host=localhost");
    CHECK(env.tcti().is_simulator());
    CHECK(env.identity() == "swtpm:host=127.0.0.1,port=2321");
    CHECK(env.timeout() == std::chrono::seconds(7));
    CHECK(env.origin() == "TPMKEY_TCTI");
    CHECK_FALSE(env.is_default_search());
    CHECK_FALSE(env.refusal());

    const TpmAddress option = env.overridden_by("device:/dev/tpmrm0");
    CHECK(option.source() == TpmAddress::Source::command_line);
    CHECK(option.origin() == "--tcti");
    CHECK(option.identity() == "default");
    CHECK(option.timeout() == std::chrono::seconds(7));
    CHECK(option.tcti().has_resource_manager());

    const TpmAddress none;
    CHECK(none.is_default_search());
    CHECK(none.identity() == "default");
    CHECK(none.origin() == "the tpm2-tss default");
    CHECK_FALSE(none.timeout());
}

TEST_CASE("TpmAddress: the default search's candidates, each an address with the same bound, else itself") {
    const TpmAddress def({}, TpmAddress::Source::tpm2_tss_default, {}, std::chrono::seconds(3));
    const std::vector<TpmAddress> candidates = def.candidates();
    const std::vector<std::string> order = Tcti::default_search_order();
    REQUIRE(candidates.size() == order.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
        CHECK(candidates[i].text() == order[i]);
        CHECK(candidates[i].timeout() == std::chrono::seconds(3));
    }
    const TpmAddress one("swtpm:port=1", TpmAddress::Source::config_file, "/home/u/.config/tpmkey/config",
                         std::nullopt);
    REQUIRE(one.candidates().size() == 1);
    CHECK(one.candidates()[0].text() == "swtpm:port=1");
    CHECK(one.candidates()[0].origin() == "/home/u/.config/tpmkey/config");
}

TEST_CASE("TpmAddress: a TCTI with blanks or control characters is refused when made, and never opened") {
    for (const char* spelling : {"swtpm:port=2321 ", "device:/dev/tpmrm0\n", "cmd:tpm2_send --tcti x"}) {
        INFO(spelling);
        const TpmAddress address(spelling, TpmAddress::Source::command_line, "--tcti", std::nullopt);
        REQUIRE(address.refusal());
        CHECK_THAT(*address.refusal(),
                   Catch::Contains("contains a blank or a control character, so it cannot say which TPM it reaches"));
        CHECK_THROWS_AS(address.identity(), Error);
        // Refused before any TCTI is loaded: an Error, not a TpmError of the connection.
        try {
            Tpm tpm(address);
            FAIL("a refused address was opened");
        } catch (const TpmError&) {
            FAIL("a refused address was handed to tpm2-tss");
        } catch (const Error& e) {
            CHECK(std::string(e.what()) == *address.refusal());
        }
    }
}
