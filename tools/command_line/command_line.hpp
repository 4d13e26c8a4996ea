// The command line of tpmkey and tpmkey-ca: a table of commands, each
// described once (its name, its line in --help, its usage, its help and
// options), the parsing of its arguments, and the usage error. No TPM
// here: tpmkey-ca, which runs where there is none, links it too.
#pragma once

#include "core/base/error.hpp"

#include <algorithm>
#include <cstddef>
#include <exception>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tpmkey::cli {

// A mistake on the command line: main() prints it with the command's usage
// line and exits 2.
class UsageError : public Error {
public:
    UsageError(const std::string& message, std::string usage) : Error(message), usage_(std::move(usage)) {}
    const std::string& usage() const noexcept { return usage_; }

private:
    std::string usage_;
};

// Plain constants (no constructors run at start-up).
struct CommandSpec {
    const char* name;               // "pubkey"; a command with subcommands has one spec each: "attest enroll"
    const char* summary;            // its line in --help, the one list of the commands
    const char* usage;              // "tpmkey pubkey [-C COMMENT] KEY"
    const char* help;               // what --help prints after the usage line
    const char* value_options[12];  // take a value: "-C", "--old-pin-file"; null-terminated
    const char* flag_options[2];    // take none: "--apply"; null-terminated
    std::size_t positional;         // exact number of other arguments
};

struct Parsed {
    bool help = false;
    std::map<std::string, std::string> values;  // an option given more than once: its last value
    // Every value option as given, in order: an option the usage line
    // shows as "[OPTION VALUE]..." may be given more than once.
    std::vector<std::pair<std::string, std::string>> every_value;
    std::vector<std::string> flags;
    std::vector<std::string> positional;

    bool has_flag(const std::string& f) const { return std::find(flags.begin(), flags.end(), f) != flags.end(); }
    std::string value(const std::string& option) const {
        const auto it = values.find(option);
        return it == values.end() ? std::string() : it->second;
    }
    bool has_value(const std::string& option) const { return values.count(option) != 0; }
    std::vector<std::string> values_of(const std::string& option) const {
        std::vector<std::string> out;
        for (const auto& [name, value] : every_value)
            if (name == option)
                out.push_back(value);
        return out;
    }
};

struct Command {
    const CommandSpec* spec;
    int (*run)(const Parsed&);
};

// A program's commands and what --version prints.
struct Program {
    const char* name;  // "tpmkey"
    std::span<const Command* const> commands;
    const char* version;  // "0.6.0": --version prints "tpmkey 0.6.0"
};

// "usage: PROGRAM COMMAND [ARGS]" and each command's usage and summary.
std::string usage_text(const Program& program);

// Runs the command argv names (its words: "attest enroll"; the longest
// name that matches wins), or prints --help / --version. Throws
// UsageError for a command line that is wrong; a command's own errors
// pass through.
int run_command_line(const Program& program, int argc, char** argv);

// Prints a UsageError as run_program() does, and returns 2.
int report_usage_error(const Program& program, const UsageError& e);

// Words an error one program knows better than its message does (tpmkey:
// a TPM failure, diagnosed); "" leaves the error to run_program().
using ExplainError = std::string (*)(const std::exception& e);

// A program's main(): configures logging and runs its command line. A
// UsageError is printed with its usage (exit 2); any other error as one
// line "PROGRAM: MESSAGE" (exit 1), in `explain`'s words if it has them,
// else the message made printable (it may hold file names).
int run_program(const Program& program, int argc, char** argv, ExplainError explain = nullptr);

}  // namespace tpmkey::cli
