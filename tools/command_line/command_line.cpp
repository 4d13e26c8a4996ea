#include "command_line.hpp"

#include "core/base/log.hpp"
#include "core/base/printable.hpp"

#include <iostream>
#include <sstream>

namespace tpmkey::cli {

namespace {

// The words of a command's name: "attest enroll" -> {"attest", "enroll"}.
std::vector<std::string> words_of(const char* name) {
    std::vector<std::string> words;
    std::istringstream in(name);
    for (std::string w; in >> w;)
        words.push_back(w);
    return words;
}

// Options may come in any order; "--" ends them (for a file named "-x").
Parsed parse_args(const Program& program, const CommandSpec& spec, const std::vector<std::string>& args) {
    const auto contains = [](const char* const* names, const std::string& s) {
        for (; *names; ++names)
            if (s == *names)
                return true;
        return false;
    };
    const std::string cmd = std::string(program.name) + " " + spec.name;
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
            // "[--principal NAME]..." in the usage line: it may repeat.
            const std::string usage = spec.usage;
            const std::size_t shown = usage.find("[" + a + " ");
            const std::size_t closed = shown == std::string::npos ? shown : usage.find(']', shown);
            const bool repeats = closed != std::string::npos && usage.compare(closed, 4, "]...") == 0;
            if (p.values.count(a) && !repeats)
                throw UsageError(cmd + ": " + a + " given twice", spec.usage);
            p.values[a] = args[++i];
            p.every_value.emplace_back(a, args[i]);
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
        throw UsageError(cmd + ": an argument is missing", spec.usage);
    return p;
}

}  // namespace

// Each command's usage without "PROGRAM ", then its summary (on a line
// of its own when the usage is too long).
std::string usage_text(const Program& program) {
    constexpr std::size_t column = 27;
    const std::size_t prefix = std::string_view(program.name).size() + 1;
    std::string text = std::string("usage: ") + program.name + " COMMAND [ARGS]\n\n";
    for (const Command* c : program.commands) {
        std::string line = std::string("  ") + (c->spec->usage + prefix);
        line += line.size() + 2 <= column ? std::string(column - line.size(), ' ') : "\n" + std::string(column, ' ');
        text += line + c->spec->summary + "\n";
    }
    return text + "\nRun '" + program.name + " COMMAND --help' for more; '" + program.name +
           " --version' prints the version.\n";
}

int run_command_line(const Program& program, int argc, char** argv) {
    if (argc < 2)
        throw UsageError(std::string(program.name) + ": a command is needed", "");
    const std::string first = argv[1];
    if (first == "--help" || first == "-h" || first == "help") {
        std::cout << usage_text(program);
        return 0;
    }
    if (first == "--version") {
        std::cout << program.name << " " << program.version << "\n";
        return 0;
    }
    const std::vector<std::string> args(argv + 1, argv + argc);
    const Command* found = nullptr;
    std::size_t found_words = 0;
    for (const Command* c : program.commands) {
        const std::vector<std::string> words = words_of(c->spec->name);
        if (words.size() > found_words && words.size() <= args.size() &&
            std::equal(words.begin(), words.end(), args.begin())) {
            found = c;
            found_words = words.size();
        }
    }
    if (!found) {
        // The first word of commands with subcommands ("policy"): --help
        // shows each of them.
        std::vector<const Command*> group;
        for (const Command* c : program.commands)
            if (words_of(c->spec->name).front() == first)
                group.push_back(c);
        if (!group.empty() && args.size() == 2 && (args[1] == "--help" || args[1] == "-h")) {
            for (const Command* c : group)
                std::cout << (c == group.front() ? "" : "\n") << "usage: " << c->spec->usage << "\n\n" << c->spec->help;
            return 0;
        }
        for (const Command* c : group)
            throw UsageError(std::string(program.name) + " " + first + ": unknown subcommand '" +
                                 (args.size() > 1 ? args[1] : std::string()) + "'",
                             c->spec->usage);
        throw UsageError(std::string(program.name) + ": unknown command '" + first + "'", "");
    }
    const Parsed parsed =
        parse_args(program, *found->spec, {args.begin() + static_cast<long>(found_words), args.end()});
    if (parsed.help) {
        std::cout << "usage: " << found->spec->usage << "\n\n" << found->spec->help;
        return 0;
    }
    return found->run(parsed);
}

int report_usage_error(const Program& program, const UsageError& e) {
    std::cerr << printable(e.what()) << "\n";  // it repeats the argument it refuses
    if (e.usage().empty()) {
        std::cerr << usage_text(program);
        return 2;
    }
    // The command's name is the usage line's lower-case words after the
    // program's, up to its first option: "tpmkey policy sign
    // [--policy-signer FILE] KEY", "tpmkey-ca challenge --ek-roots DIR ...".
    std::string name;
    const std::vector<std::string> words = words_of(e.usage().c_str());
    for (std::size_t i = 1; i < words.size(); ++i) {
        if (words[i].front() == '-' || words[i].find_first_not_of("abcdefghijklmnopqrstuvwxyz-") != std::string::npos)
            break;
        name += " " + words[i];
    }
    std::cerr << "usage: " << e.usage() << "\n(see '" << program.name << name << " --help')\n";
    return 2;
}

int run_program(const Program& program, int argc, char** argv, ExplainError explain) {
    try {
        configure_logging();
        return run_command_line(program, argc, argv);
    } catch (const UsageError& e) {
        return report_usage_error(program, e);
    } catch (const std::exception& e) {
        std::string line = explain ? explain(e) : std::string();
        if (line.empty())
            line = e.what();
        std::cerr << program.name << ": " << printable(line) << "\n";  // file names in it
        return 1;
    }
}

}  // namespace tpmkey::cli
