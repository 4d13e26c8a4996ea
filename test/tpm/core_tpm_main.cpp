// The main of tpm-core-tests and tpm-endorsement-tests: refuses to run the
// tests unless TPMKEY_TCTI names a software TPM (docs/design.md, practice
// 10). Listing the test cases needs no TPM (test/lib/check-catch-filters).
#include "catch2_main.hpp"
#include "simulator_tcti.hpp"

#include <iostream>

int main(int argc, char** argv) {
    return tpmkey::test::catch_main(argc, argv, {}, [](const auto& run_tests) {
        if (!tpmkey::test::simulator_tcti()) {
            std::cerr << "tpm-core-tests: " << tpmkey::test::refusal << "\n";
            return 2;
        }
        return run_tests();
    });
}
