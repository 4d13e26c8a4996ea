// The main of the five Catch2 programs (unit-tests, tpm-core-tests,
// tpm-endorsement-tests, module-tests, security-tests), over Catch2's
// implementation compiled once in test/lib/catch2.cpp: Catch2 2 declares its
// Session only where its implementation is compiled, and compiling that is
// the slowest step of the tree (about 90 s under ASan), once per program
// before.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace tpmkey::test {

// An option a program adds to Catch2's own, e.g. --module PATH.
struct CatchOption {
    std::string* value;
    std::string name;  // "--module"
    std::string hint;  // "path"
    std::string description;
};

// Runs the tests: calls `before_tests` with a function that runs them, after
// parsing the command line, unless the command line only asks for help or a
// listing (which need no TPM). `before_tests` returns the exit status: what
// the run returned, or its own refusal.
int catch_main(int argc, char** argv, const std::vector<CatchOption>& options,
               const std::function<int(const std::function<int()>& run_tests)>& before_tests);

}  // namespace tpmkey::test
