// The login-cost model (login_cost.hpp): sums, what is not priced, the
// signature priced by key type, the reference chips' figures complete.
#include "login_cost.hpp"
#include "tpm_bench.hpp"

#include <catch2/catch.hpp>

using namespace tpmkey;

TEST_CASE("login_cost: the sum of the priced commands, the others listed in order") {
    const CommandTimes times{{"CreatePrimary", 100}, {"Sign ECDSA P-256", 20}, {"Sign RSA 2048", 50}};
    const std::vector<std::string> login{"CreatePrimary", "Load", "Sign", "FlushContext", "FlushContext"};
    const LoginCost ec = login_cost(login, KeyAlgorithm::ecdsa, times);
    CHECK(ec.ms == Approx(120));
    CHECK(ec.unpriced == std::vector<std::string>{"Load", "FlushContext", "FlushContext"});
    CHECK(login_cost(login, KeyAlgorithm::rsa, times).ms == Approx(150));
    CHECK(login_cost({}, KeyAlgorithm::rsa, times).ms == 0);
}

TEST_CASE("login_cost: tpm2-pkcs11's RSA signature, a TPM2_RSA_Decrypt, is priced as the RSA private-key operation") {
    const CommandTimes times{{"StartAuthSession", 10}, {"Sign RSA 2048", 50}};
    const std::vector<std::string> login{"StartAuthSession", "Load", "RSA_Decrypt", "FlushContext"};
    const LoginCost rsa = login_cost(login, KeyAlgorithm::rsa, times);
    CHECK(rsa.ms == Approx(60));
    CHECK(rsa.unpriced == std::vector<std::string>{"Load", "FlushContext"});
    // An ECDSA key sends no TPM2_RSA_Decrypt to sign: not priced there.
    CHECK(login_cost(login, KeyAlgorithm::ecdsa, times).unpriced.size() == 3);
}

TEST_CASE("login_cost: each reference chip prices what a login's public-key operations cost") {
    const auto chips = reference_chips();
    REQUIRE(chips.size() == 3);
    for (const ReferenceChip& chip : chips) {
        INFO(chip.name);
        CHECK(chip.source.rfind("https://", 0) == 0);
        for (const char* command : {"CreatePrimary", "StartAuthSession", "Sign ECDSA P-256", "Sign RSA 2048"}) {
            REQUIRE(chip.times.count(command) == 1);
            CHECK(chip.times.at(command) > 1);
        }
    }
}

TEST_CASE("login_commands: a persistent parent is read, not re-created; the PIN costs a salted session") {
    for (const bool rm : {false, true})
        for (const bool pin : {false, true}) {
            const auto created = login_commands(rm, pin, ParentKind::created);
            const auto persistent = login_commands(rm, pin, ParentKind::persistent);
            const auto count = [](const std::vector<std::string>& v, const char* c) {
                return std::count(v.begin(), v.end(), std::string(c));
            };
            CHECK(count(created, "CreatePrimary") >= 1);
            CHECK(count(persistent, "CreatePrimary") == 0);
            CHECK(count(persistent, "ReadPublic") >= 1);
            CHECK(count(created, "Sign") == 1);
            CHECK((count(created, "StartAuthSession") >= 1) == pin);
        }
}

TEST_CASE("tpm_bench: every command a login sends is one the bench times") {
    const auto timed = timed_command_names();
    for (const bool rm : {false, true})
        for (const bool pin : {false, true})
            for (const ParentKind parent : {ParentKind::created, ParentKind::persistent})
                for (const std::string& command : login_commands(rm, pin, parent))
                    for (const KeyAlgorithm key : {KeyAlgorithm::ecdsa, KeyAlgorithm::rsa})
                        CHECK(std::count(timed.begin(), timed.end(), priced_name(command, key)) == 1);
    CHECK(median({3, 1, 2}) == 2);
    CHECK(median({4, 1, 2, 3}) == Approx(2.5));
}
