// The main of tpm-core-tests: refuses to start unless TPMKEY_TCTI names a
// software TPM (docs/design.md, practice 10), then runs the Catch2 session.
// Listing the test cases needs no TPM (test/lib/check-catch-filters).
#define CATCH_CONFIG_RUNNER
#include "simulator_tcti.hpp"

#include <catch2/catch.hpp>

#include <iostream>

int main(int argc, char** argv) {
    Catch::Session session;
    if (const int rc = session.applyCommandLine(argc, argv); rc != 0)
        return rc;
    const Catch::ConfigData& config = session.configData();
    const bool only_lists =
        config.showHelp || config.listTests || config.listTestNamesOnly || config.listTags || config.listReporters;
    if (!only_lists && !tpmkey::test::simulator_tcti()) {
        std::cerr << "tpm-core-tests: " << tpmkey::test::refusal << "\n";
        return 2;
    }
    return session.run();
}
