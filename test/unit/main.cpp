// The main of unit-tests: Catch2's, with nothing before the tests.
#include "catch2_main.hpp"

int main(int argc, char** argv) {
    return tpmkey::test::catch_main(argc, argv, {}, [](const auto& run_tests) { return run_tests(); });
}
