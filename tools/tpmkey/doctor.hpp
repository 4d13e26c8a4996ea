// The checks of tpmkey doctor, in two files: the TPM's (doctor_tpm.cpp:
// the device, the TPM reached, its resource manager, dictionary-attack
// state, storage key, EK and pins) and the rest (doctor.cpp: the config
// file, the keys, the PIN sources, ssh, the module's log; the command).
#pragma once

#include "cli.hpp"
#include "core/base/printable.hpp"
#include "core/files/config.hpp"
#include "core/tpm/tpm.hpp"

#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace tpmkey::cli {

// One line per check; each problem or warning with a "Likely problem" and
// a "Possible solution".
class Doctor {
public:
    // Every part is printable(): names in them come from the file system.
    void ok(const std::string& what) { std::cout << "[ok]      " << printable(what) << "\n"; }
    void warn(const std::string& what, const std::string& problem, const std::string& solution) {
        report("[warning] ", what, problem, solution);
    }
    void fail(const std::string& what, const std::string& problem, const std::string& solution) {
        ++problems_;
        report("[problem] ", what, problem, solution);
    }
    // `lines` must be printable() already.
    void info(const std::string& what, const std::vector<std::string>& lines) {
        std::cout << "[info]    " << printable(what) << "\n";
        for (const std::string& line : lines)
            std::cout << "          " << line << "\n";
    }
    int problems() const noexcept { return problems_; }

private:
    static void report(const char* tag, const std::string& what, const std::string& problem,
                       const std::string& solution);
    int problems_ = 0;
};

// The TPM part of the doctor; returns the open connection (or nothing).
std::unique_ptr<Tpm> check_tpm(Doctor& d, const Config& config);
// The EK and what it proves: each storage key pinned for this TPM (or
// 0x40000001 before any) is proven afresh, so that what is shown is what
// the TPM says now, not what was written down.
void check_endorsement(Doctor& d, Tpm& tpm);

}  // namespace tpmkey::cli
