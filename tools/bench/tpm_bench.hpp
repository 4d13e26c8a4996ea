// `tpmkey bench`: times, on a TPM, each command a login uses, a few times
// each. Creates nothing persistent: the storage key is re-created
// (TPM2_CreatePrimary, as for parent 0x40000001), the two signing keys are
// made under it for the run only, and everything is flushed when it ends
// (RAII, as everywhere). No secret of the user's is involved: the keys'
// auth value is a fixed text, thrown away with them.
#pragma once

#include "core/tpm/tpm.hpp"
#include "login_cost.hpp"

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace tpmkey {

struct TimedCommand {
    std::string name;        // as priced by login_cost.hpp: "CreatePrimary", "Sign RSA 2048"
    std::vector<double> ms;  // one entry per run, at least one
};

// The commands in the order they are timed.
std::vector<std::string> timed_command_names();

// Times every command of timed_command_names() up to `runs` times each,
// fewer when that would take longer than `budget` in all (each command gets
// an equal share of what is left; at least one run). Creating the two keys
// comes on top: an RSA key takes seconds on a real TPM. `say` is told
// before each step that may take long.
std::vector<TimedCommand> time_login_commands(Tpm& tpm, std::chrono::milliseconds budget, unsigned runs,
                                              const std::function<void(const std::string&)>& say);

// The median of `ms` (not empty).
double median(std::vector<double> ms);

}  // namespace tpmkey
