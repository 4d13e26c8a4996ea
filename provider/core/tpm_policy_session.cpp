#include "tpm_policy_session.hpp"

#include "error.hpp"
#include "owned.hpp"

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
void run(Tpm& tpm, ESYS_TR session, std::span<const PolicyCommand> commands, TpmStep pcr_step) {
    for (std::size_t i = 0; i < commands.size(); ++i) {
        switch (commands[i].code) {
        case TPM2_CC_PolicyAuthValue:
            check_rc(Esys_PolicyAuthValue(tpm.esys(), session, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE),
                     "TPM2_PolicyAuthValue");
            break;
        case TPM2_CC_PolicyPCR:
            run_pcr(tpm, session, commands[i], pcr_step);
            break;
        case TPM2_CC_PolicyAuthorize:
            run_authorize(tpm, session, commands[i], commands.first(i));
            break;
        default:
            // check_usable() let no other command through.
            throw Error("the key's policy uses a TPM command tpmkey does not run");
        }
    }
}

}  // namespace

std::vector<Bytes> read_pcrs(Tpm& tpm, const PcrSelection& selection) {
    std::vector<Bytes> values;
    // The TPM answers at most 8 digests per TPM2_PCR_Read: ask again for the rest.
    TPML_PCR_SELECTION wanted = pcr_selection_list(selection);
    while (values.size() < selection.pcrs.size()) {
        EsysPtr<TPML_PCR_SELECTION> got;
        EsysPtr<TPML_DIGEST> digests;
        check_rc(Esys_PCR_Read(tpm.esys(), ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &wanted, nullptr,
                               out_ptr(got), out_ptr(digests)),
                 "TPM2_PCR_Read");
        if (digests->count == 0)
            throw Error("the TPM does not have the " + pcr_selection_text(selection) + " bank");
        for (UINT32 i = 0; i < digests->count; ++i)
            values.emplace_back(digests->digests[i].buffer, digests->digests[i].buffer + digests->digests[i].size);
        for (UINT32 i = 0; i < got->count; ++i)
            for (int b = 0; b < 3; ++b)
                wanted.pcrSelections[0].pcrSelect[b] &= static_cast<BYTE>(~got->pcrSelections[i].pcrSelect[b]);
    }
    return values;
}

Bytes pcr_digest_now(Tpm& tpm, const PcrSelection& selection) { return pcr_digest(read_pcrs(tpm, selection)); }

Authorization satisfy_policy(Tpm& tpm, const TpmObject& salt_key, const KeyFile& key) {
    const std::span<const PolicyCommand> policy(key.policy);
    if (!key.has_signed_policies()) {
        Authorization auth = Authorization::policy_session(tpm, salt_key);
        run(tpm, auth.session(), policy, TpmStep::policy_pcr);
        return auth;
    }
    // Signed policies, newest first: the first that holds, then the rest of
    // the key's own policy (PolicyAuthValue). A fresh session for each try:
    // ESAPI would keep a failed try's PolicyAuthValue in mind.
    std::optional<TpmError> first_failure;
    for (const SignedPolicy& signed_policy : key.signed_policies) {
        try {
            check_runnable(signed_policy);
        } catch (const Error&) {
            continue;  // a kind of policy we do not run: the next one may do
        }
        try {
            Authorization auth = Authorization::policy_session(tpm, salt_key);
            run(tpm, auth.session(), signed_policy.commands, TpmStep::signed_policy_pcr);
            run(tpm, auth.session(), policy.subspan(1), TpmStep::policy_pcr);
            return auth;
        } catch (const TpmError& e) {
            if (e.tpm_unreachable() || e.is(TPM2_RC_OBJECT_MEMORY) || e.is(TPM2_RC_SESSION_MEMORY))
                throw;
            if (!first_failure)
                first_failure = e;
        }
    }
    if (first_failure)
        throw *first_failure;
    throw Error("the key has no signed policy yet: sign one with 'tpmkey policy sign'");
}

}  // namespace tpmkey
