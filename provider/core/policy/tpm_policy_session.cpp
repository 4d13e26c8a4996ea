#include "core/policy/tpm_policy_session.hpp"

#include "core/base/error.hpp"
#include "core/base/owned.hpp"
#include "core/tpm/pin_object.hpp"

#include <algorithm>
#include <optional>

namespace tpmkey {

namespace {

template <class T>
T tpm2b_of(std::span<const std::uint8_t> bytes) {
    T out{};
    if (bytes.size() > sizeof out.buffer)
        throw Error("a policy value is too long");
    out.size = static_cast<UINT16>(bytes.size());
    std::copy(bytes.begin(), bytes.end(), out.buffer);
    return out;
}

void run_pcr(Tpm& tpm, ESYS_TR session, const PolicyCommand& command, TpmStep step) {
    const PcrParts pcr = pcr_parts_of(command);
    const TSS2_RC rc =
        Esys_PolicyPCR(tpm.esys(), session, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &pcr.digest, &pcr.list);
    if (rc != TSS2_RC_SUCCESS)
        throw TpmError(step, rc, pcr_selection_text(pcr.selection));
}

// PolicyAuthorize after `approved_by` (the commands before it in the same
// signed policy): the TPM checks the signature over them (VerifySignature,
// with the signer loaded into the owner hierarchy: a NULL-hierarchy key's
// ticket is refused) and replaces the session's digest with the key's.
void run_authorize(Tpm& tpm, ESYS_TR session, const PolicyCommand& command,
                   std::span<const PolicyCommand> approved_by) {
    const AuthorizeParts parts = authorize_parts_of(command);
    const Bytes approved = policy_digest(approved_by);
    const TPM2B_DIGEST a_hash = tpm2b_of<TPM2B_DIGEST>(authorization_digest(approved, parts.policy_ref));
    const TPM2B_DIGEST approved_digest = tpm2b_of<TPM2B_DIGEST>(approved);

    ESYS_TR handle = ESYS_TR_NONE;
    check_rc(Esys_LoadExternal(tpm.esys(), ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, nullptr, &parts.signer,
                               ESYS_TR_RH_OWNER, &handle),
             "TPM2_LoadExternal of the policy signer");
    const TpmObject signer(tpm, handle, TpmObject::Kind::transient);
    EsysPtr<TPM2B_NAME> name;
    check_rc(Esys_TR_GetName(tpm.esys(), signer.handle(), out_ptr(name)), "Esys_TR_GetName");
    EsysPtr<TPMT_TK_VERIFIED> ticket;
    check_rc(Esys_VerifySignature(tpm.esys(), signer.handle(), ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &a_hash,
                                  &parts.signature, out_ptr(ticket)),
             "TPM2_VerifySignature of the signed policy");
    check_rc(Esys_PolicyAuthorize(tpm.esys(), session, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &approved_digest,
                                  &parts.policy_ref, name.get(), ticket.get()),
             "TPM2_PolicyAuthorize");
}

// Runs `commands` in order; a PolicyAuthorize covers the ones before it.
// `pcr_step`: whose PolicyPCR it is (the key's own, or a signed policy's),
// for what the user is told to do when it fails (diagnosis.hpp).
void run(Tpm& tpm, ESYS_TR session, std::span<const PolicyCommand> commands, TpmStep pcr_step,
         const PinObjectAuth* pin_object) {
    for (std::size_t i = 0; i < commands.size(); ++i) {
        switch (commands[i].code) {
        case TPM2_CC_PolicyAuthValue:
            check_rc(Esys_PolicyAuthValue(tpm.esys(), session, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE),
                     "TPM2_PolicyAuthValue");
            break;
        case TPM2_CC_PolicyPCR: run_pcr(tpm, session, commands[i], pcr_step); break;
        case TPM2_CC_PolicyAuthorize: run_authorize(tpm, session, commands[i], commands.first(i)); break;
        case TPM2_CC_PolicySecret:
            // The TPM checks the object's name against the policy digest;
            // a file of another PIN object only fails there, so it is told
            // here (and the PIN is not sent for it).
            if (!pin_object || pin_object->name != policy_secret_name(commands[i]))
                throw Error("the key's PIN object is not the one in " + pin_object_path().string() +
                            " (the key was made with another PIN object)");
            run_policy_secret(tpm, session, pin_object->object, pin_object->auth);
            break;
        default:
            // check_usable() let no other command through.
            throw Error("the key's policy uses a TPM command tpmkey does not run");
        }
    }
}

}  // namespace

std::vector<Bytes> read_pcrs(Tpm& tpm, const TpmObject& parent, const PcrSelection& selection) {
    const TpmObject audit = audit_session(tpm, parent);
    std::vector<Bytes> values;
    // The TPM answers at most 8 digests per TPM2_PCR_Read: ask again for the rest.
    TPML_PCR_SELECTION wanted = pcr_selection_list(selection);
    while (values.size() < selection.pcrs.size()) {
        EsysPtr<TPML_PCR_SELECTION> got;
        EsysPtr<TPML_DIGEST> digests;
        const TSS2_RC rc = Esys_PCR_Read(tpm.esys(), audit.handle(), ESYS_TR_NONE, ESYS_TR_NONE, &wanted, nullptr,
                                         out_ptr(got), out_ptr(digests));
        // A changed answer fails the response HMAC; one whose session area
        // was taken away (an interposer cannot compute the HMAC) is refused
        // by tss2-sys as out of sequence.
        if (rc == TSS2_ESYS_RC_RSP_AUTH_FAILED || rc == TSS2_SYS_RC_BAD_SEQUENCE)
            throw Error("the TPM's answer with the values of " + pcr_selection_text(selection) +
                        " was changed on its way (it fails the integrity check of the salted session): something "
                        "between tpmkey and the TPM "
                        "rewrites the TPM's answers; nothing was bound to those values");
        check_rc(rc, "TPM2_PCR_Read");
        if (digests->count == 0)
            throw Error("the TPM does not have the " + pcr_selection_text(selection) + " bank");
        if (values.size() + digests->count > selection.pcrs.size())
            throw Error("the TPM answered TPM2_PCR_Read with more PCRs than asked for");
        for (UINT32 i = 0; i < digests->count; ++i)
            values.emplace_back(digests->digests[i].buffer, digests->digests[i].buffer + digests->digests[i].size);
        for (UINT32 i = 0; i < got->count; ++i)
            for (int b = 0; b < 3; ++b)
                wanted.pcrSelections[0].pcrSelect[b] &= static_cast<BYTE>(~got->pcrSelections[i].pcrSelect[b]);
    }
    return values;
}

Bytes pcr_digest_now(Tpm& tpm, const TpmObject& parent, const PcrSelection& selection) {
    return pcr_digest(read_pcrs(tpm, parent, selection));
}

void check_policy_digest(const KeyFile& key) {
    const TPM2B_DIGEST& auth_policy = key.blobs.pub.publicArea.authPolicy;
    const Bytes digest = policy_digest(key.policy);
    if (!std::equal(digest.begin(), digest.end(), auth_policy.buffer, auth_policy.buffer + auth_policy.size))
        throw Error("the policy in the key file is not the one the key was made with (its digest is not the key's "
                    "authPolicy): the file was altered, or its policy belongs to another key; the TPM would refuse "
                    "the key");
}

std::string signed_policy_problem(const KeyFile& key, const SignedPolicy& policy) {
    try {
        check_runnable(policy);
    } catch (const Error& e) {
        return e.what();
    }
    const std::string which =
        policy.name.empty() ? "a signed policy of the key" : "the key's signed policy '" + policy.name + "'";
    const AuthorizeParts expected = authorize_parts_of(key.policy.front());
    const AuthorizeParts parts = authorize_parts_of(policy.commands.back());
    if (tpm_name(parts.signer.publicArea) != tpm_name(expected.signer.publicArea))
        return which + " is signed by another policy signer than the key's";
    if (!std::equal(parts.policy_ref.buffer, parts.policy_ref.buffer + parts.policy_ref.size,
                    expected.policy_ref.buffer, expected.policy_ref.buffer + expected.policy_ref.size))
        return which + " was signed for another key (its policy reference is not this key's)";
    const std::span<const PolicyCommand> approved_by = std::span(policy.commands).first(policy.commands.size() - 1);
    if (!signature_verifies(parts, authorization_digest(policy_digest(approved_by), parts.policy_ref)))
        return which + " has a signature that does not match its policy: the policy was altered after it was signed";
    return {};
}

Authorization PolicySession::take(Tpm& tpm, const TpmObject& salt_key) {
    if (!session_)
        return Authorization::policy_session(tpm, salt_key);
    Authorization auth = std::move(*session_);
    session_.reset();
    try {
        check_rc(Esys_PolicyRestart(tpm.esys(), auth.session(), ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE),
                 "TPM2_PolicyRestart");
    } catch (const TpmError& e) {
        if (e.tpm_unreachable())
            throw;
        // The kept session is gone (a TPM reset, a resource manager that
        // evicted it): a new one, as at the first use.
        return Authorization::policy_session(tpm, salt_key);
    }
    return auth;
}

const Authorization& PolicySession::satisfy(Tpm& tpm, const TpmObject& salt_key, const KeyFile& key,
                                            const PinObjectAuth* pin_object) {
    check_policy_digest(key);
    const std::span<const PolicyCommand> policy(key.policy);
    if (!key.has_signed_policies()) {
        Authorization auth = take(tpm, salt_key);
        run(tpm, auth.session(), policy, TpmStep::policy_pcr, pin_object);
        session_ = std::move(auth);
        return *session_;
    }
    // Signed policies, newest first: the first that holds, then the rest of
    // the key's own policy (PolicyAuthValue). A fresh session for each try
    // after a failed one: ESAPI would keep a failed try's PolicyAuthValue in
    // mind (TPM2_PolicyRestart does not reset ESAPI's view). One the
    // software checks refuse is not tried: it cannot hold, and it must not
    // hide an older one that does.
    const auto holds = [&](std::size_t i) {
        Authorization auth = take(tpm, salt_key);
        run(tpm, auth.session(), key.signed_policies[i].commands, TpmStep::signed_policy_pcr, nullptr);
        run(tpm, auth.session(), policy.subspan(1), TpmStep::policy_pcr, pin_object);
        session_ = std::move(auth);
        held_ = i;
    };
    const auto fatal = [](const TpmError& e) {
        return e.tpm_unreachable() || e.is(TPM2_RC_OBJECT_MEMORY) || e.is(TPM2_RC_SESSION_MEMORY);
    };
    if (session_ && held_ < key.signed_policies.size()) {
        // The one that held in this session last time (the file does not
        // change in a process), so that ESAPI's view stays the same.
        try {
            holds(held_);
            return *session_;
        } catch (const TpmError& e) {
            if (fatal(e))
                throw;
        }
    }
    std::optional<TpmError> first_failure;
    std::string first_problem;
    for (std::size_t i = 0; i < key.signed_policies.size(); ++i) {
        if (const std::string problem = signed_policy_problem(key, key.signed_policies[i]); !problem.empty()) {
            if (first_problem.empty())
                first_problem = problem;
            continue;
        }
        try {
            holds(i);
            return *session_;
        } catch (const TpmError& e) {
            if (fatal(e))
                throw;
            if (!first_failure)
                first_failure = e;
        }
    }
    if (first_failure)
        throw *first_failure;
    if (!first_problem.empty())
        throw Error(first_problem + "; the key has no other signed policy that can be used ('tpmkey policy sign' "
                                    "signs one, on a boot you trust)");
    throw Error("the key has no signed policy yet: sign one with 'tpmkey policy sign'");
}

}  // namespace tpmkey
