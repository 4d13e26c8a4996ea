// One table from a failed TPM call to what a user reads, in the style of
// simple-tpm-pk11's "Likely problem / Possible solution": the module logs
// the problem and maps the kind to a CK_RV, the CLI prints both. Nothing
// else turns TPM codes into words, and nothing matches message text.
#pragma once

#include "core/base/error.hpp"
#include "core/files/tpm_address.hpp"
#include "core/tpm/tpm_queries.hpp"

#include <cstdint>
#include <string>

namespace tpmkey {

enum class TpmProblem {
    wrong_pin,         // the key's auth value was wrong (counted by the TPM)
    locked_out,        // dictionary-attack lockout
    unreachable,       // no TPM at the TCTI, or it went away
    no_room,           // no slot for another object or session
    parent_missing,    // the key's persistent parent is not in this TPM
    owner_password,    // the owner hierarchy has a password: 0x40000001 cannot be re-created
    foreign_key,       // the key was wrapped by another TPM (or the file was altered)
    pcr_changed,       // the PCRs a key is bound to hold other values than when it was made
    untrusted_parent,  // the storage key fails its checks or its pin (not a TPM error: no PIN sent)
    malformed_answer,  // the TPM's answer does not parse (a size no answer can have, parts that do not fit)
    other,
};

struct Diagnosis {
    TpmProblem kind;
    std::string problem;   // likely problem, one sentence
    std::string solution;  // possible solution, one sentence
};

// `address`: what the connection was opened with (Tpm::address()), for
// the unreachable case.
Diagnosis diagnose(const TpmError& e, const TpmAddress& address);

// What to do about a key (`key_file`) that its PCRs refuse: one with signed
// policies signs again after `tpmkey policy sign`; one bound to the PCRs
// directly only in the boot state it was made in.
std::string pcr_changed_solution(bool signed_policies, const std::string& key_file);

// The problem and the solution as one line, for logs and error messages.
std::string diagnosis_line(const Diagnosis& d);

// A time as a person reads it: "90 s", "10 minutes", "2 hours".
std::string duration_text(std::uint32_t seconds);

// The TPM's count of wrong PINs, for the messages about a wrong PIN or the
// lockout: "1 of 3 wrong PINs counted by the TPM; one is forgiven every 10
// minutes; at 3 it locks out", or, once the count is full, that the TPM is
// locked out now and for how long.
std::string dictionary_attack_text(const DictionaryAttackState& da);

// Why one TCTI did not answer, in a few words (tpmkey doctor lists each
// one it tried): a missing or forbidden device node, a TCTI library that
// is not installed, no simulator at the port.
std::string unreachable_reason(const TpmAddress& address, const TpmError& e);

}  // namespace tpmkey
