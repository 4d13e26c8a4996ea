// security-tests: the hardening checks of docs/security.md that need a
// process of their own around the module (DA flags, a TPM that goes away,
// a full TPM, TPM_RC_RETRY on the bus, wiped PIN buffers, the soak). Like
// module-tests it dlopen()s the built module and uses only the function
// list; it makes its keys in the swtpm it is given and refuses any other.
//
//   with-swtpm -- security-tests --module tpmkey-pkcs11.so --keygen tpmkey-keygen [filters]
#define CATCH_CONFIG_RUNNER
#include "../module/harness.hpp"

#include <dlfcn.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
    Catch::Session session;
    const char* env_module = std::getenv("TPMKEY_MODULE_PATH");
    const char* env_keygen = std::getenv("TPMKEY_KEYGEN_PATH");
    std::string module_path = env_module ? env_module : "";
    std::string keygen_path = env_keygen ? env_keygen : "";
    using Catch::clara::Opt;
    session.cli(session.cli() | Opt(module_path, "path")["--module"]("the PKCS#11 module") |
                Opt(keygen_path, "path")["--keygen"]("tpmkey-keygen"));
    if (const int rc = session.applyCommandLine(argc, argv); rc != 0)
        return rc;
    const Catch::ConfigData& config = session.configData();
    if (config.showHelp || config.listTests || config.listTestNamesOnly || config.listTags || config.listReporters)
        return session.run();

    // docs/design.md, practice 10: these tests lock the TPM out, stop it and fill
    // it up; only a private simulator will do.
    const char* tcti = std::getenv("TPMKEY_TCTI");
    const char* swtpm_dir = std::getenv("TPMKEY_SWTPM_DIR");
    if (!tcti || std::string(tcti).rfind("swtpm:", 0) != 0 || !swtpm_dir || !*swtpm_dir) {
        std::cerr << "security-tests: refusing to run: TPMKEY_TCTI is '" << (tcti ? tcti : "")
                  << "'; run under swtpm-fixtures/with-swtpm (a private swtpm, TPMKEY_SWTPM_DIR set)\n";
        return 1;
    }
    if (module_path.empty() || keygen_path.empty()) {
        std::cerr << "security-tests: give --module and --keygen\n";
        return 1;
    }
    if (!mt::load_module(module_path, "security-tests"))
        return 1;
    ::setenv("TPMKEY_KEYGEN_PATH", keygen_path.c_str(), 1);  // for tests that make more keys

    std::string dir_template = (std::filesystem::path(swtpm_dir) / "security-tests.XXXXXX").string();
    if (!::mkdtemp(dir_template.data())) {
        std::cerr << "security-tests: cannot make a temporary directory\n";
        return 1;
    }
    const std::filesystem::path dir = dir_template;
    int rc = 1;
    try {
        mt::make_keys(keygen_path, dir);
        ::setenv("TPMKEY_KEYS", dir.c_str(), 1);
        rc = session.run();
    } catch (const std::exception& e) {
        std::cerr << "security-tests: " << e.what() << "\n";
    }
    mt::keys().clear();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    return rc;
}
