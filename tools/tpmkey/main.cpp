// tpmkey: look after TPM keys. Usage errors exit 2; failures exit 1.
//
// This file: the command line and the command table, the one list of the
// commands ('tpmkey --help' is made from it); the commands are in
// key_commands.cpp, doctor.cpp, ssh_config.cpp, policy.cpp, setup.cpp, bench.cpp and forget_tpm.cpp.

#include "cli.hpp"
#include "core/files/config.hpp"
#include "core/tpm/diagnosis.hpp"
#include "core/base/log.hpp"
#include "core/base/printable.hpp"
#include "tpmkey_version.hpp"

#include <exception>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace tpmkey;
using namespace tpmkey::cli;

// ---- command line ----------------------------------------------------------

// Options may come in any order; "--" ends them (for a file named "-x").
Parsed parse_args(const CommandSpec& spec, const std::vector<std::string>& args) {
    const auto contains = [](const char* const* names, const std::string& s) {
        for (; *names; ++names)
            if (s == *names)
                return true;
        return false;
    };
    const std::string cmd = std::string("tpmkey ") + spec.name;
    Parsed p;
    bool options_done = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (!options_done && (a == "--help" || a == "-h")) {
            p.help = true;
            return p;
        }
        if (!options_done && a == "--") {
            options_done = true;
        } else if (!options_done && contains(spec.value_options, a)) {
            if (i + 1 >= args.size())
                throw UsageError(cmd + ": " + a + " needs a value", spec.usage);
            if (p.values.count(a))
                throw UsageError(cmd + ": " + a + " given twice", spec.usage);
            p.values[a] = args[++i];
        } else if (!options_done && contains(spec.flag_options, a)) {
            p.flags.push_back(a);
        } else if (!options_done && a.size() > 1 && a[0] == '-') {
            throw UsageError(cmd + ": unknown option '" + a + "'", spec.usage);
        } else {
            p.positional.push_back(a);
        }
    }
    if (p.positional.size() > spec.positional)
        throw UsageError(cmd + ": unexpected argument '" + p.positional[spec.positional] + "'", spec.usage);
    if (p.positional.size() < spec.positional)
        throw UsageError(cmd + ": the key file is missing", spec.usage);
    return p;
}

// ---- main ------------------------------------------------------------------

constexpr const Command* commands[] = {
    &list_command,   &pubkey_command, &info_command,
    &passwd_command, &doctor_command, &ssh_config_command, &policy_command,
    &setup_command, &bench_command, &forget_tpm_command,
};

// "usage: tpmkey COMMAND [ARGS]" and each command of the table: its usage
// without "tpmkey ", then its summary (on a line of its own when the usage
// is too long).
std::string usage_text() {
    constexpr std::size_t column = 27;
    std::string text = "usage: tpmkey COMMAND [ARGS]\n\n";
    for (const Command* c : commands) {
        std::string line = std::string("  ") + (c->spec->usage + std::string_view("tpmkey ").size());
        line += line.size() + 2 <= column ? std::string(column - line.size(), ' ') : "\n" + std::string(column, ' ');
        text += line + c->spec->summary + "\n";
    }
    return text + "\nRun 'tpmkey COMMAND --help' for more; 'tpmkey --version' prints the version.\n";
}

int run(int argc, char** argv) {
    configure_logging();
    if (argc < 2)
        throw UsageError("tpmkey: a command is needed", "");
    const std::string name = argv[1];
    if (name == "--help" || name == "-h" || name == "help") {
        std::cout << usage_text();
        return 0;
    }
    if (name == "--version") {
        std::cout << "tpmkey " << version << "\n";
        return 0;
    }
    const std::vector<std::string> args(argv + 2, argv + argc);
    for (const Command* c : commands) {
        if (name != c->spec->name)
            continue;
        const Parsed parsed = parse_args(*c->spec, args);
        if (parsed.help) {
            std::cout << "usage: " << c->spec->usage << "\n\n" << c->spec->help;
            return 0;
        }
        return c->run(parsed);
    }
    throw UsageError("tpmkey: unknown command '" + name + "'", "");
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const UsageError& e) {
        std::cerr << e.what() << "\n";
        if (e.usage().empty())
            std::cerr << usage_text();
        else
            std::cerr << "usage: " << e.usage() << "\n(see 'tpmkey " << std::string(argv[1]) << " --help')\n";
        return 2;
    } catch (const TpmError& e) {
        // The commands reach the TPM through the configured TCTI.
        std::string tcti;
        try {
            tcti = load_config().tcti;
        } catch (const std::exception&) {
        }
        std::cerr << "tpmkey: " << diagnosis_line(diagnose(e, tcti)) << "\n";
        return 1;
    } catch (const std::exception& e) {
        std::cerr << "tpmkey: " << printable(e.what()) << "\n";  // file names in it
        return 1;
    }
}
