// The main of tpm-core-tests: refuses to start unless TPMKEY_TCTI names a
// software TPM (docs/design.md, practice 10), then runs the Catch2 session.
#define CATCH_CONFIG_RUNNER
#include "simulator_tcti.hpp"

#include <catch2/catch.hpp>

#include <iostream>

int main(int argc, char** argv) {
    if (!tpmkey::test::simulator_tcti()) {
        std::cerr << "tpm-core-tests: " << tpmkey::test::refusal << "\n";
        return 2;
    }
    return Catch::Session().run(argc, argv);
}
