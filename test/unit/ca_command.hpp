// Running a tpmkey-ca command in a unit test as main() would.
#pragma once

#include "command_line.hpp"

#include <iostream>
#include <sstream>
#include <string>

namespace test {

// Runs the command, its standard output in `out` (also when it throws).
inline int run_ca_command(const tpmkey::cli::Command& command, const tpmkey::cli::Parsed& p, std::string& out) {
    std::ostringstream captured;
    std::streambuf* const old = std::cout.rdbuf(captured.rdbuf());
    try {
        const int rc = command.run(p);
        std::cout.rdbuf(old);
        out = captured.str();
        return rc;
    } catch (...) {
        std::cout.rdbuf(old);
        out = captured.str();
        throw;
    }
}

}  // namespace test
