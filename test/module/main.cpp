// module-tests: the PKCS#11 module through dlopen + C_GetFunctionList only.
//
//   with-swtpm --relaxed-da -- module-tests --module tpmkey-pkcs11.so
//       --keygen tpmkey-keygen [Catch2 options and test filters]
//
// (or TPMKEY_MODULE_PATH / TPMKEY_KEYGEN_PATH). It makes its own keys in the
// swtpm it is given and refuses any other TPM (docs/design.md, practice 10).
#define CATCH_CONFIG_RUNNER
#include "harness.hpp"

#include <dlfcn.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>

namespace {

std::string from_env(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

}  // namespace

int main(int argc, char** argv) {
    Catch::Session session;
    std::string module_path = from_env("TPMKEY_MODULE_PATH");
    std::string keygen_path = from_env("TPMKEY_KEYGEN_PATH");
    using Catch::clara::Opt;
    session.cli(session.cli() |
                Opt(module_path, "path")["--module"]("the PKCS#11 module (default: $TPMKEY_MODULE_PATH)") |
                Opt(keygen_path, "path")["--keygen"]("tpmkey-keygen (default: $TPMKEY_KEYGEN_PATH)"));
    if (const int rc = session.applyCommandLine(argc, argv); rc != 0)
        return rc;
    const Catch::ConfigData& config = session.configData();
    if (config.showHelp || config.listTests || config.listTestNamesOnly || config.listTags || config.listReporters)
        return session.run();

    const std::string tcti = from_env("TPMKEY_TCTI");
    if (tcti.rfind("swtpm:", 0) != 0) {
        std::cerr << "module-tests: refusing to run: TPMKEY_TCTI is '" << tcti
                  << "', not a swtpm ('swtpm:host=...,port=...').\n"
                     "These tests create keys and make wrong-PIN attempts; run them against a private\n"
                     "simulator: swtpm-fixtures/with-swtpm --relaxed-da -- module-tests ...\n";
        return 1;
    }
    if (module_path.empty() || keygen_path.empty()) {
        std::cerr << "module-tests: give --module and --keygen (or TPMKEY_MODULE_PATH, TPMKEY_KEYGEN_PATH)\n";
        return 1;
    }

    if (!mt::load_module(module_path, "module-tests"))
        return 1;

    // Inside with-swtpm's state directory when there is one: it is removed
    // at teardown even when this program is killed.
    const std::string swtpm_dir = from_env("TPMKEY_SWTPM_DIR");
    std::string dir_template =
        ((swtpm_dir.empty() ? std::filesystem::temp_directory_path() : std::filesystem::path(swtpm_dir)) /
         "module-tests.XXXXXX")
            .string();
    if (!::mkdtemp(dir_template.data())) {
        std::cerr << "module-tests: cannot make a temporary directory\n";
        return 1;
    }
    const std::filesystem::path dir = dir_template;
    int rc = 1;
    try {
        mt::make_keys(keygen_path, dir);
        // The module finds the keys here; the tests that need other keys
        // set TPMKEY_KEYS themselves for a while.
        ::setenv("TPMKEY_KEYS", dir.c_str(), 1);
        rc = session.run();
    } catch (const std::exception& e) {
        std::cerr << "module-tests: " << e.what() << "\n";
    }
    mt::keys().clear();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    return rc;
}
