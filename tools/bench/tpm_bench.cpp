#include "tpm_bench.hpp"

#include "core/base/error.hpp"
#include "core/keys/key_parts.hpp"
#include "core/tpm/tpm_keys.hpp"
#include "core/tpm/tpm_queries.hpp"

#include <algorithm>
#include <array>
#include <optional>

namespace tpmkey {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Runs each timed step up to `runs` times within its share of the budget.
class Timer {
public:
    Timer(std::chrono::milliseconds budget, unsigned runs, std::size_t steps)
        : deadline_(Clock::now() + budget), runs_(runs), steps_left_(steps) {}

    // `step` runs the command once and returns its time in ms.
    void repeat(TimedCommand& into, const std::function<double()>& step) {
        const auto share = (deadline_ - Clock::now()) / static_cast<long>(std::max<std::size_t>(steps_left_, 1));
        const auto until = Clock::now() + share;
        for (unsigned i = 0; i < runs_; ++i) {
            const auto before = Clock::now();
            into.ms.push_back(step());
            // Another run only if one more as long as this one still fits.
            if (Clock::now() + (Clock::now() - before) > until)
                break;
        }
        if (steps_left_ > 0)
            --steps_left_;
    }

private:
    Clock::time_point deadline_;
    unsigned runs_;
    std::size_t steps_left_;
};

// Flushing is timed where an object goes away: `object` is emptied.
double flush(TpmObject& object) {
    const auto start = Clock::now();
    object = TpmObject();
    return ms_since(start);
}

}  // namespace

std::vector<std::string> timed_command_names() {
    return {"GetCapability", "CreatePrimary",    "ReadPublic",       "ContextSave",   "ContextLoad", "StartAuthSession",
            "Load",          "ObjectChangeAuth", "Sign ECDSA P-256", "Sign RSA 2048", "FlushContext"};
}

double median(std::vector<double> ms) {
    std::sort(ms.begin(), ms.end());
    const std::size_t n = ms.size();
    return n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
}

std::vector<TimedCommand> time_login_commands(Tpm& tpm, std::chrono::milliseconds budget, unsigned runs,
                                              const std::function<void(const std::string&)>& say) {
    std::vector<TimedCommand> timed;
    for (const std::string& name : timed_command_names())
        timed.push_back({name, {}});
    const auto entry = [&timed](const std::string& name) -> TimedCommand& {
        return *std::find_if(timed.begin(), timed.end(), [&](const TimedCommand& t) { return t.name == name; });
    };
    TimedCommand& flushes = entry("FlushContext");
    // FlushContext is timed along the others, not on its own.
    Timer timer(budget, runs, timed.size() - 1);

    // A login with a PIN first reads the lockout counter (docs/design.md,
    // "PINs, keys and the TPM's lockout").
    say("GetCapability of the dictionary-attack state");
    timer.repeat(entry("GetCapability"), [&] {
        const auto start = Clock::now();
        (void)dictionary_attack_state(tpm);
        return ms_since(start);
    });

    say("CreatePrimary of the storage key (ECC P-256, the TCG template)");
    timer.repeat(entry("CreatePrimary"), [&] {
        const auto start = Clock::now();
        TpmObject primary = load_parent(tpm, owner_hierarchy);
        const double ms = ms_since(start);
        flushes.ms.push_back(flush(primary));
        return ms;
    });
    const TpmObject primary = load_parent(tpm, owner_hierarchy);

    say("ReadPublic of the storage key");
    timer.repeat(entry("ReadPublic"), [&] {
        const auto start = Clock::now();
        (void)read_public(tpm, primary, owner_hierarchy);
        return ms_since(start);
    });

    // Without a resource manager the module keeps the storage key as a
    // saved context and loads it again for each call.
    say("ContextSave and ContextLoad of the storage key");
    std::optional<SavedContext> saved;
    timer.repeat(entry("ContextSave"), [&] {
        const auto start = Clock::now();
        saved = SavedContext::save(tpm, primary);
        return ms_since(start);
    });
    timer.repeat(entry("ContextLoad"), [&] {
        const auto start = Clock::now();
        TpmObject again = saved->load(tpm);
        const double ms = ms_since(start);
        flushes.ms.push_back(flush(again));
        return ms;
    });

    say("StartAuthSession salted with the storage key (one ECDH in the TPM)");
    timer.repeat(entry("StartAuthSession"), [&] {
        const auto start = Clock::now();
        const Authorization session = Authorization::for_secret(tpm, primary, true);
        return ms_since(start);
    });

    // Both keys get an auth value, as a key with a PIN: ObjectChangeAuth
    // and Sign then run in a salted, encrypted session as in a login.
    const Secret auth("tpmkey bench");
    const Authorization password = Authorization::for_secret(tpm, primary, false);
    const std::array<std::uint8_t, 32> digest{1, 2, 3, 4, 5, 6, 7, 8};

    say("making an ECDSA P-256 key under the storage key (TPM2_Create, for this run only)");
    const KeyBlobs ecdsa = create_key(tpm, primary, {KeyAlgorithm::ecdsa, 256}, auth);
    say("Load, ObjectChangeAuth, Sign with the ECDSA P-256 key");
    timer.repeat(entry("Load"), [&] {
        const auto start = Clock::now();
        TpmObject key = load_key(tpm, primary, password, ecdsa);
        const double ms = ms_since(start);
        flushes.ms.push_back(flush(key));
        return ms;
    });
    {
        const TpmObject key = load_key(tpm, primary, password, ecdsa);
        const AuthValue key_auth(tpm, key, auth);
        const Authorization session = Authorization::for_secret(tpm, primary, true);
        timer.repeat(entry("ObjectChangeAuth"), [&] {
            const auto start = Clock::now();
            (void)change_auth(tpm, key, primary, session, auth);
            return ms_since(start);
        });
        timer.repeat(entry("Sign ECDSA P-256"), [&] {
            const auto start = Clock::now();
            (void)sign_digest(tpm, key, session, TPM2_ALG_ECDSA, TPM2_ALG_SHA256, digest, 32);
            return ms_since(start);
        });
    }

    say("making an RSA 2048 key under the storage key (TPM2_Create, for this run only; "
        "on a real TPM this takes seconds, up to a minute)");
    const KeyBlobs rsa = create_key(tpm, primary, {KeyAlgorithm::rsa, 2048}, auth);
    say("Sign with the RSA 2048 key");
    {
        const TpmObject key = load_key(tpm, primary, password, rsa);
        const AuthValue key_auth(tpm, key, auth);
        const Authorization session = Authorization::for_secret(tpm, primary, true);
        timer.repeat(entry("Sign RSA 2048"), [&] {
            const auto start = Clock::now();
            (void)sign_digest(tpm, key, session, TPM2_ALG_RSASSA, TPM2_ALG_SHA256, digest, 0);
            return ms_since(start);
        });
    }
    return timed;
}

}  // namespace tpmkey
