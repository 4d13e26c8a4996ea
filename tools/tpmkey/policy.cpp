// tpmkey policy sign, and the policy part of tpmkey info: keys bound to
// PCRs (docs/pcr-bound-keys.md).
#include "cli.hpp"

#include "core/files/atomic_file.hpp"
#include "core/files/config.hpp"
#include "core/keys/tpm_policy.hpp"
#include "core/policy/policy_signer.hpp"
#include "core/policy/tpm_policy_session.hpp"
#include "core/tpm/diagnosis.hpp"
#include "core/trust/known_parents.hpp"

#include <iostream>

namespace tpmkey::cli {

namespace {

// The PolicyPCR of a list of commands, if it has one.
const PolicyCommand* pcr_command(std::span<const PolicyCommand> commands) {
    for (const PolicyCommand& c : commands)
        if (c.code == TPM2_CC_PolicyPCR)
            return &c;
    return nullptr;
}

// Whether the PCRs of a PolicyPCR hold the values it was made for.
bool pcrs_match(Tpm& tpm, const TpmObject& parent, const PolicyCommand& pcr) {
    const PcrParts parts = pcr_parts_of(pcr);
    const Bytes now = pcr_digest_now(tpm, parent, parts.selection);
    return std::equal(now.begin(), now.end(), parts.digest.buffer, parts.digest.buffer + parts.digest.size);
}

}  // namespace

std::optional<bool> policy_pcrs_match(Tpm& tpm, const KeyFile& key) {
    // The PolicyPCRs to check: the key's own, or each of its signed policies'.
    std::vector<const PolicyCommand*> pcrs;
    if (key.has_signed_policies())
        for (const SignedPolicy& s : key.signed_policies)
            pcrs.push_back(pcr_command(s.commands));
    else
        pcrs.push_back(pcr_command(key.policy));
    std::erase(pcrs, nullptr);
    if (pcrs.empty())
        return std::nullopt;
    // The PCR values are read under the key's parent, verified as for a PIN.
    TpmObject parent;
    KnownParents known = KnownParents::load();
    try {
        parent = load_verified_parent(tpm, key.parent, known);
    } catch (const TpmError& e) {
        throw Error(diagnose(e, tpm.address()).problem);
    }
    return std::any_of(pcrs.begin(), pcrs.end(),
                       [&](const PolicyCommand* pcr) { return pcrs_match(tpm, parent, *pcr); });
}

std::optional<bool> print_policy(const KeyFile& key, Tpm* tpm) {
    const TPMT_PUBLIC& area = key.blobs.pub.publicArea;
    if (!key.has_policy() && area.authPolicy.size == 0) {
        std::cout << "policy:      none\n";
        return std::nullopt;
    }
    if (area.objectAttributes & TPMA_OBJECT_USERWITHAUTH) {
        std::cout << "policy:      yes, optional (the PIN works too; tpmkey uses the PIN)\n";
        return std::nullopt;
    }
    const bool pin = std::any_of(key.policy.begin(), key.policy.end(),
                                 [](const PolicyCommand& c) { return c.code == TPM2_CC_PolicyAuthValue; });
    const auto pcrs_text = [](const PolicyCommand* pcr) {
        return pcr ? pcr_selection_text(pcr_selection_of(*pcr)) : std::string("no PCRs");
    };
    if (key.has_signed_policies()) {
        const AuthorizeParts signer = authorize_parts_of(key.policy.front());
        std::cout << "policy:      signed policies (" << key.signed_policies.size() << ")"
                  << (pin ? " and the PIN" : "") << "; signer " << hex(tpm_name(signer.signer.publicArea)).substr(4, 16)
                  << "...\n";
        for (const SignedPolicy& s : key.signed_policies)
            std::cout << "             " << (s.name.empty() ? std::string("(no name)") : s.name) << ": "
                      << pcrs_text(pcr_command(s.commands)) << "\n";
    } else {
        std::cout << "policy:      " << pcrs_text(pcr_command(key.policy)) << (pin ? " and the PIN" : "") << "\n";
    }
    std::cout << "policy digest: " << hex(std::span(area.authPolicy.buffer, area.authPolicy.size)) << "\n";
    if (!tpm)
        return std::nullopt;
    std::optional<bool> match;
    try {
        match = policy_pcrs_match(*tpm, key);
    } catch (const Error& e) {
        std::cout << "PCRs now:    cannot tell: " << e.what() << "\n";
        return std::nullopt;
    }
    if (!match)
        return std::nullopt;
    if (*match)
        std::cout << "PCRs now:    match: the key signs in this boot state\n";
    else
        std::cout << "PCRs now:    changed since the key was made: the key does not sign in this boot state"
                  << (key.has_signed_policies() ? " ('tpmkey policy sign' approves it, on a boot you trust)" : "")
                  << "\n";
    return match;
}

namespace {

int cmd_policy(const Parsed& p) {
    const std::filesystem::path path = rewritten_key_file(p.positional[0]);
    KeyFile key = read_key_file(path);
    if (!key.has_signed_policies() || key.signed_policies.empty())
        throw Error(path.string() + ": not a key with a signed policy (made with tpmkey-keygen --pcr ... "
                                    "--policy-signer); a key bound to PCRs directly cannot follow a change");
    // Never sign for a file whose policy is not the key's; the PCRs are
    // those of the newest signed policy that can be used (an altered newer
    // one is no guide).
    try {
        check_policy_digest(key);
    } catch (const Error& e) {
        throw Error(path.string() + ": " + e.what() + "; the file is unchanged");
    }
    const SignedPolicy* newest = nullptr;
    for (const SignedPolicy& s : key.signed_policies)
        if (signed_policy_problem(key, s).empty()) {
            newest = &s;
            break;
        }
    if (!newest)
        throw Error(path.string() + ": " + signed_policy_problem(key, key.signed_policies.front()) +
                    ", and no other signed policy of the key can be used; the file is unchanged");
    const PolicyCommand* newest_pcr = pcr_command(newest->commands);
    if (!newest_pcr)
        throw Error(path.string() + ": its newest signed policy binds no PCRs");
    const PcrSelection selection = pcr_selection_of(*newest_pcr);

    const std::filesystem::path signer_path = p.has_value("--policy-signer")
                                                  ? std::filesystem::path(p.value("--policy-signer"))
                                                  : default_policy_signer_path();
    const EvpPkey signer = read_policy_signer(signer_path);
    const AuthorizeParts authorize = authorize_parts_of(key.policy.front());
    if (tpm_name(signer_public(signer.get()).publicArea) != tpm_name(authorize.signer.publicArea))
        throw Error(signer_path.string() + " is not the policy signer of " + path.string() + "; the file is unchanged");

    // The values this signs for are read under the key's parent, verified
    // as for a PIN: an interposer that rewrote them would choose the boot
    // state the key signs in.
    const Config config = load_config();
    Tpm tpm(config.tpm);
    std::vector<Bytes> values;
    KnownParents known = KnownParents::load();
    try {
        const TpmObject parent = load_verified_parent(tpm, key.parent, known);
        values = read_pcrs(tpm, parent, selection);
    } catch (const TpmError& e) {
        throw Error(path.string() + ": " + diagnose(e, tpm.address()).problem + "; the file is unchanged");
    } catch (const Error& e) {
        throw Error(path.string() + ": " + e.what() + "; the file is unchanged");
    }
    const PolicyCommand pcr = pcr_policy_for(selection, values);
    for (const SignedPolicy& s : key.signed_policies)
        if (const PolicyCommand* c = pcr_command(s.commands); c && *c == pcr && signed_policy_problem(key, s).empty()) {
            std::cout << path.string() << ": a signed policy for the current values of "
                      << pcr_selection_text(selection) << " is there already; nothing changed:\n"
                      << pcr_values_text(selection, values);
            return 0;
        }
    key.signed_policies.insert(key.signed_policies.begin(),
                               sign_policy({pcr}, signer.get(), authorize.policy_ref, "tpmkey policy sign"));
    write_file_atomically(path, format_key_file(key), 0600, Replace::yes);
    std::cout << path.string() << ": signed a policy for the current values of " << pcr_selection_text(selection)
              << "; the key signs in this boot state (" << key.signed_policies.size()
              << " signed policies). The values (compare them with the boot's event log, tpm2_eventlog):\n"
              << pcr_values_text(selection, values);
    return 0;
}

constexpr CommandSpec policy_spec{"policy sign",
                                  "re-sign a PCR-bound key's policy for the PCRs' values now",
                                  "tpmkey policy sign [--policy-signer FILE] KEY",
                                  "For a key bound to PCRs through a signed policy (tpmkey-keygen --pcr ...\n"
                                  "--policy-signer; see docs/pcr-bound-keys.md): signs a policy for the\n"
                                  "values the PCRs hold now, with the signer's private key in FILE (default\n"
                                  "~/.config/tpmkey/policy-signer.pem), and adds it to KEY, newest first.\n"
                                  "The key then signs in this boot state, with the same public key. Run it\n"
                                  "after a firmware update, on a boot you trust: it approves this boot state.\n",
                                  {"--policy-signer", nullptr},
                                  {nullptr},
                                  1};

}  // namespace

const Command policy_command{&policy_spec, cmd_policy};

}  // namespace tpmkey::cli
