// The main of module-tests and security-tests (cmake/TpmkeyTests.cmake,
// tpmkey_module_test_program): programs that use the PKCS#11 module
// through dlopen + C_GetFunctionList only.
//
//   with-swtpm --relaxed-da -- module-tests --module tpmkey-pkcs11.so
//       --keygen tpmkey-keygen [Catch2 options and test filters]
//
// (or TPMKEY_MODULE_PATH / TPMKEY_KEYGEN_PATH). It makes its own keys in the
// swtpm it is given and refuses any other TPM (docs/design.md, practice 10):
// the tests make keys, try wrong PINs, lock the TPM out, stop it and fill it
// up. Listing the test cases needs no TPM (test/lib/check-catch-filters).
#include "catch2_main.hpp"
#include "harness.hpp"

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

namespace {

std::string from_env(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

}  // namespace

int main(int argc, char** argv) {
    // "module-tests" or "security-tests", for the messages.
    const std::string program = std::filesystem::path(argv[0]).filename().string();
    std::string module_path = from_env("TPMKEY_MODULE_PATH");
    std::string keygen_path = from_env("TPMKEY_KEYGEN_PATH");
    const std::vector<tpmkey::test::CatchOption> options = {
        {&module_path, "--module", "path", "the PKCS#11 module (default: $TPMKEY_MODULE_PATH)"},
        {&keygen_path, "--keygen", "path", "tpmkey-keygen (default: $TPMKEY_KEYGEN_PATH)"}};
    return tpmkey::test::catch_main(argc, argv, options, [&](const auto& run_tests) {
        // with-swtpm sets both: a swtpm TCTI and the swtpm's state directory.
        const std::string tcti = from_env("TPMKEY_TCTI");
        const std::string swtpm_dir = from_env("TPMKEY_SWTPM_DIR");
        if (tcti.rfind("swtpm:", 0) != 0 || swtpm_dir.empty()) {
            std::cerr << program << ": refusing to run: TPMKEY_TCTI is '" << tcti << "', TPMKEY_SWTPM_DIR is '"
                      << swtpm_dir
                      << "'.\nThese tests create keys and make wrong-PIN attempts; run them against a private\n"
                         "simulator ('swtpm:host=...,port=...' and its directory): swtpm-fixtures/with-swtpm\n"
                         "--relaxed-da -- "
                      << program << " ...\n";
            return 1;
        }
        if (module_path.empty() || keygen_path.empty()) {
            std::cerr << program << ": give --module and --keygen (or TPMKEY_MODULE_PATH, TPMKEY_KEYGEN_PATH)\n";
            return 1;
        }

        if (!mt::load_module(module_path, program.c_str()))
            return 1;
        ::setenv("TPMKEY_KEYGEN_PATH", keygen_path.c_str(), 1);  // for tests that make more keys

        // Inside with-swtpm's state directory: it is removed at teardown even
        // when this program is killed.
        std::string dir_template = (std::filesystem::path(swtpm_dir) / (program + ".XXXXXX")).string();
        if (!::mkdtemp(dir_template.data())) {
            std::cerr << program << ": cannot make a temporary directory\n";
            return 1;
        }
        const std::filesystem::path dir = dir_template;
        int rc = 1;
        try {
            mt::make_keys(keygen_path, dir);
            // The module finds the keys here; the tests that need other keys
            // set TPMKEY_KEYS themselves for a while.
            ::setenv("TPMKEY_KEYS", dir.c_str(), 1);
            rc = run_tests();
        } catch (const std::exception& e) {
            std::cerr << program << ": " << e.what() << "\n";
        }
        mt::keys().clear();
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
        return rc;
    });
}
