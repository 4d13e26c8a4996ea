// tpmkey bench: what a login costs on this machine's TPM. Times the
// commands a login uses (tools/bench/tpm_bench.hpp) and prices the module's
// login sequences with the medians (tools/bench/login_cost.hpp, the model
// docs/performance.md applies to published figures of real chips).

#include "cli.hpp"
#include "core/files/config.hpp"
#include "core/keys/key_parts.hpp"
#include "core/trust/owner_srk.hpp"
#include "login_cost.hpp"
#include "tpm_bench.hpp"

#include <charconv>
#include <cstdio>
#include <iostream>

namespace tpmkey::cli {

namespace {

constexpr unsigned default_max_seconds = 30;
constexpr unsigned runs_per_command = 5;

constexpr CommandSpec bench_spec{"bench",
                                 "time the TPM commands of a login here; what a persistent SRK saves",
                                 "tpmkey bench [--max-seconds N]",
                                 "Times, on the configured TPM, the commands an ssh login uses (CreatePrimary\n"
                                 "of the storage key, ReadPublic, a salted StartAuthSession, Load,\n"
                                 "ObjectChangeAuth, Sign with ECDSA P-256 and RSA 2048, FlushContext), up to\n"
                                 "5 times each, and prints the median of each, what a login costs here (the\n"
                                 "sum of the medians over the commands the PKCS#11 module sends), and what a\n"
                                 "persistent storage key at 0x81000001 would save per login.\n"
                                 "\n"
                                 "It makes an ECDSA and an RSA key for the run (an RSA key takes seconds on a\n"
                                 "real TPM) and leaves nothing in the TPM: nothing persistent, everything\n"
                                 "flushed at the end. No key of yours and no PIN is used.\n"
                                 "\n"
                                 "  --max-seconds N   time to spend timing, 1 to 3600 (default 30); making the\n"
                                 "                    two keys comes on top\n",
                                 {"--max-seconds", nullptr},
                                 {nullptr},
                                 0};

unsigned max_seconds(const Parsed& p) {
    if (!p.has_value("--max-seconds"))
        return default_max_seconds;
    const std::string text = p.value("--max-seconds");
    unsigned n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc() || end != text.data() + text.size() || n < 1 || n > 3600)
        throw UsageError("tpmkey bench: --max-seconds needs a whole number of seconds from 1 to 3600",
                         bench_spec.usage);
    return n;
}

std::string ms_text(double ms) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f ms", ms);
    return buf;
}

std::string padded(std::string s, std::size_t width) {
    if (s.size() < width)
        s.append(width - s.size(), ' ');
    return s;
}

std::string joined(const std::vector<std::string>& words) {
    std::string out;
    for (const std::string& w : words)
        out += (out.empty() ? "" : " ") + w;
    return out;
}

int cmd_bench(const Parsed& p) {
    const unsigned seconds = max_seconds(p);
    const Config config = load_config();
    const bool resource_manager = config.tpm.tcti().has_resource_manager();
    Tpm tpm(config.tpm);
    const std::string where = config.tpm.is_default_search() ? "the default TPM" : config.tpm.text();
    std::cerr << "tpmkey bench: timing the TPM commands of a login on " << where << " (about " << seconds << " s)\n";
    const auto say = [](const std::string& step) { std::cerr << "tpmkey bench: " << step << " ...\n"; };

    const std::vector<TimedCommand> timed =
        time_login_commands(tpm, std::chrono::seconds(seconds), runs_per_command, say);

    CommandTimes medians;
    std::cout << padded("command", 20) << "runs  median\n";
    for (const TimedCommand& t : timed) {
        medians[t.name] = median(t.ms);
        std::cout << padded(t.name, 20) << padded(std::to_string(t.ms.size()), 6) << ms_text(medians[t.name]) << "\n";
    }

    struct Case {
        const char* what;
        KeyAlgorithm key;
        bool pin;
    };
    constexpr Case cases[] = {
        {"ECDSA P-256, no PIN", KeyAlgorithm::ecdsa, false},
        {"ECDSA P-256, PIN", KeyAlgorithm::ecdsa, true},
        {"RSA 2048, no PIN", KeyAlgorithm::rsa, false},
        {"RSA 2048, PIN", KeyAlgorithm::rsa, true},
    };
    std::cout << "\nA login here (" << (resource_manager ? "with" : "without")
              << " a resource manager), the sum of the medians:\n"
              << padded("key", 22) << padded("parent 0x40000001", 20) << padded("persistent 0x81000001", 24)
              << "saved\n";
    for (const Case& c : cases) {
        const double owner =
            login_cost(login_commands(resource_manager, c.pin, ParentKind::created), c.key, medians).ms;
        const double persistent =
            login_cost(login_commands(resource_manager, c.pin, ParentKind::persistent), c.key, medians).ms;
        std::cout << padded(c.what, 22) << padded(ms_text(owner), 20) << padded(ms_text(persistent), 24)
                  << ms_text(owner - persistent) << "\n";
    }

    std::cout << "\nThe commands of one login (C_Initialize .. C_Sign .. C_Finalize, as ssh logs in):\n";
    for (const bool pin : {false, true})
        for (const ParentKind parent : {ParentKind::created, ParentKind::persistent})
            std::cout << "  " << (pin ? "PIN" : "no PIN") << ", parent "
                      << (parent == ParentKind::created ? "0x40000001" : "0x81000001") << ": "
                      << joined(login_commands(resource_manager, pin, parent)) << "\n";

    // Which storage key a login of a key under 0x40000001 uses here, and
    // what that costs against the floor (the persistent storage key).
    const KnownParents known = KnownParents::load();
    const OwnerSrkUse use = owner_srk_use(tpm, known);
    const ParentKind used = use == OwnerSrkUse::persistent ? ParentKind::persistent : ParentKind::created;
    std::cout << "\nA login of a key under 0x40000001 uses: " << owner_srk_use_text(use) << ".\n";
    for (const Case& c : cases) {
        const double here = login_cost(login_commands(resource_manager, c.pin, used), c.key, medians).ms;
        const double floor =
            login_cost(login_commands(resource_manager, c.pin, ParentKind::persistent), c.key, medians).ms;
        std::cout << "  " << padded(c.what, 22) << padded(ms_text(here), 12) << "(floor " << ms_text(floor)
                  << (here > floor ? ", " + ms_text(here - floor) + " more)" : ": at the floor)") << "\n";
    }
    switch (inspect_persistent_srk(tpm).state) {
    case PersistentSrk::State::standard:
        std::cout << "0x81000001 holds the standard storage key: tpmkey-keygen makes new keys under it.\n";
        break;
    case PersistentSrk::State::absent:
        std::cout << "'tpmkey setup' makes the persistent storage key at 0x81000001, as does\n"
                     "tpmkey-keygen when it next makes a key; logins then use it and save the\n"
                     "difference above.\n";
        break;
    default: std::cout << "0x81000001 holds another key than the standard storage key ('tpmkey doctor').\n"; break;
    }
    std::cout << "A model: transport and the host's work between commands are not in the sums.\n";
    return 0;
}

}  // namespace

const Command bench_command{&bench_spec, cmd_bench};

}  // namespace tpmkey::cli
