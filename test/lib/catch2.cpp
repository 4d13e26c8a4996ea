// Catch2 2's implementation (a single header) and our catch_main(), compiled
// once for the five Catch2 programs (catch2_main.hpp says why).
#define CATCH_CONFIG_RUNNER
#include "catch2_main.hpp"

#include <catch2/catch.hpp>

namespace tpmkey::test {

int catch_main(int argc, char** argv, const std::vector<CatchOption>& options,
               const std::function<int(const std::function<int()>& run_tests)>& before_tests) {
    Catch::Session session;
    auto cli = session.cli();
    for (const CatchOption& o : options)
        cli = cli | Catch::clara::Opt(*o.value, o.hint)[o.name](o.description);
    session.cli(cli);
    if (const int rc = session.applyCommandLine(argc, argv); rc != 0)
        return rc;
    const Catch::ConfigData& config = session.configData();
    if (config.showHelp || config.listTests || config.listTestNamesOnly || config.listTags || config.listReporters)
        return session.run();
    return before_tests([&session] { return session.run(); });
}

}  // namespace tpmkey::test
