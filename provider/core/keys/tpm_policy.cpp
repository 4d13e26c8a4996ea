#include "core/keys/tpm_policy.hpp"

#include "core/base/error.hpp"
#include "core/base/owned.hpp"
#include "core/keys/algorithms.hpp"

#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/objects.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <tss2/tss2_mu.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <initializer_list>

namespace tpmkey {

namespace {

// The engine's sizeofSelect (24 PCRs): part of the digest, so always 3.
constexpr std::uint8_t pcr_select_size = 3;
constexpr unsigned pcr_count = 8 * pcr_select_size;
// The name algorithm of every key we make, so of every policy digest.
constexpr std::size_t sha256_size = 32;

std::string code_text(std::uint32_t value) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%x", value);
    return buf;
}

std::string bank_name(TPMI_ALG_HASH alg) {
    const HashAlgorithm* h = find_hash(alg);
    return h ? h->name : "hash " + code_text(alg);
}

Bytes big_endian(std::uint32_t value) {
    return {static_cast<std::uint8_t>(value >> 24), static_cast<std::uint8_t>(value >> 16),
            static_cast<std::uint8_t>(value >> 8), static_cast<std::uint8_t>(value)};
}

// Appends the marshalled `value` to `out`.
template <class T>
void put(Bytes& out, const T& value, TSS2_RC (*fn)(const T*, uint8_t*, size_t, size_t*)) {
    size_t offset = out.size();
    out.resize(offset + sizeof(T));
    check_rc(fn(&value, out.data(), out.size(), &offset), "marshalling a policy command");
    out.resize(offset);
}

// Reads the TPM structures of a command body one after the other; tss2-mu
// checks every size against what is left. Bodies come from key files,
// which anyone may have written.
class BodyReader {
public:
    BodyReader(const PolicyCommand& command, TPM2_CC expected) : body_(command.body), code_(expected) {
        if (command.code != expected)
            fail("it is " + policy_command_text(command.code));
    }

    template <class T>
    T take(TSS2_RC (*fn)(const uint8_t*, size_t, size_t*, T*), const char* part) {
        T out{};
        if (fn(body_.data(), body_.size(), &offset_, &out) != TSS2_RC_SUCCESS)
            fail(std::string("its ") + part + " is truncated or malformed");
        return out;
    }
    std::size_t offset() const noexcept { return offset_; }
    std::size_t remaining() const noexcept { return body_.size() - offset_; }
    void finish() const {
        if (offset_ != body_.size())
            fail("it has " + std::to_string(body_.size() - offset_) + " bytes too many");
    }

    [[noreturn]] void fail(const std::string& problem) const {
        throw Error("malformed " + policy_command_text(code_) + " in the key's policy: " + problem);
    }

private:
    const Bytes& body_;
    TPM2_CC code_;
    size_t offset_ = 0;
};

// `digest` signed with SHA-256 as the hash: DER ECDSA-Sig-Value or the
// PKCS#1 v1.5 signature.
Bytes sign_digest(EVP_PKEY* key, std::span<const std::uint8_t> digest, bool rsa) {
    const Owned<EVP_PKEY_CTX, EVP_PKEY_CTX_free> ctx(EVP_PKEY_CTX_new(key, nullptr));
    size_t size = 0;
    bool ok = ctx && EVP_PKEY_sign_init(ctx.get()) > 0 &&
              (!rsa || EVP_PKEY_CTX_set_rsa_padding(ctx.get(), RSA_PKCS1_PADDING) > 0) &&
              EVP_PKEY_CTX_set_signature_md(ctx.get(), EVP_sha256()) > 0 &&
              EVP_PKEY_sign(ctx.get(), nullptr, &size, digest.data(), digest.size()) > 0;
    Bytes sig(size);
    ok = ok && EVP_PKEY_sign(ctx.get(), sig.data(), &size, digest.data(), digest.size()) > 0;
    if (!ok) {
        ERR_clear_error();
        throw Error("cannot sign the policy with the signer's key (it must be a private key)");
    }
    sig.resize(size);
    return sig;
}

TPMT_SIGNATURE tpm_signature(EVP_PKEY* key, std::span<const std::uint8_t> digest) {
    const bool rsa = EVP_PKEY_get_base_id(key) == EVP_PKEY_RSA;
    const Bytes der = sign_digest(key, digest, rsa);
    TPMT_SIGNATURE sig{};
    if (rsa) {
        sig.sigAlg = TPM2_ALG_RSASSA;
        sig.signature.rsassa.hash = TPM2_ALG_SHA256;
        set_tpm2b(sig.signature.rsassa.sig, der, "the policy signature");
        return sig;
    }
    const unsigned char* p = der.data();
    const Owned<ECDSA_SIG, ECDSA_SIG_free> ecdsa(d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(der.size())));
    if (!ecdsa)
        throw Error("OpenSSL made an ECDSA signature it cannot decode");
    // Unpadded, as the engine writes them (BN_bn2bin); the TPM takes both.
    auto unpadded = [](const BIGNUM* bn) {
        Bytes out(static_cast<std::size_t>(BN_num_bytes(bn)));
        BN_bn2bin(bn, out.data());
        return out;
    };
    sig.sigAlg = TPM2_ALG_ECDSA;
    sig.signature.ecdsa.hash = TPM2_ALG_SHA256;
    set_tpm2b(sig.signature.ecdsa.signatureR, unpadded(ECDSA_SIG_get0_r(ecdsa.get())), "the policy signature");
    set_tpm2b(sig.signature.ecdsa.signatureS, unpadded(ECDSA_SIG_get0_s(ecdsa.get())), "the policy signature");
    return sig;
}

}  // namespace

PcrSelection parse_pcr_selection(const std::string& pcrs, const std::string& bank) {
    PcrSelection selection;
    const HashAlgorithm* known = find_hash(std::string_view(bank));
    if (!known)
        throw Error("unknown PCR bank '" + bank + "' (sha1, sha256, sha384 or sha512)");
    selection.bank = known->tpm;
    std::size_t start = 0;
    while (true) {
        const std::size_t comma = std::min(pcrs.find(',', start), pcrs.size());
        const char* first = pcrs.data() + start;
        const char* last = pcrs.data() + comma;
        unsigned pcr = 0;
        const auto [end, ec] = std::from_chars(first, last, pcr);
        if (first == last || ec != std::errc() || end != last || pcr >= pcr_count)
            throw Error("'" + pcrs + "' is not a list of PCR numbers from 0 to 23, such as 7 or 0,2,4,7");
        if (std::find(selection.pcrs.begin(), selection.pcrs.end(), pcr) != selection.pcrs.end())
            throw Error("PCR " + std::to_string(pcr) + " is named twice in '" + pcrs + "'");
        selection.pcrs.push_back(pcr);
        if (comma == pcrs.size())
            break;
        start = comma + 1;
    }
    std::sort(selection.pcrs.begin(), selection.pcrs.end());
    return selection;
}

std::string pcr_selection_text(const PcrSelection& selection) {
    std::string text = selection.pcrs.size() == 1 ? "PCR " : "PCRs ";
    for (std::size_t i = 0; i < selection.pcrs.size(); ++i)
        text += (i ? ", " : "") + std::to_string(selection.pcrs[i]);
    return text + " (" + bank_name(selection.bank) + ")";
}

std::string policy_command_text(TPM2_CC code) {
    struct Name {
        TPM2_CC code;
        const char* name;
    };
    static constexpr Name names[] = {
        {TPM2_CC_PolicyNV, "TPM2_PolicyNV"},
        {TPM2_CC_PolicySecret, "TPM2_PolicySecret"},
        {TPM2_CC_PolicySigned, "TPM2_PolicySigned"},
        {TPM2_CC_PolicyAuthorize, "TPM2_PolicyAuthorize"},
        {TPM2_CC_PolicyAuthValue, "TPM2_PolicyAuthValue"},
        {TPM2_CC_PolicyCommandCode, "TPM2_PolicyCommandCode"},
        {TPM2_CC_PolicyCounterTimer, "TPM2_PolicyCounterTimer"},
        {TPM2_CC_PolicyCpHash, "TPM2_PolicyCpHash"},
        {TPM2_CC_PolicyLocality, "TPM2_PolicyLocality"},
        {TPM2_CC_PolicyNameHash, "TPM2_PolicyNameHash"},
        {TPM2_CC_PolicyOR, "TPM2_PolicyOR"},
        {TPM2_CC_PolicyTicket, "TPM2_PolicyTicket"},
        {TPM2_CC_PolicyPCR, "TPM2_PolicyPCR"},
        {TPM2_CC_PolicyPhysicalPresence, "TPM2_PolicyPhysicalPresence"},
        {TPM2_CC_PolicyDuplicationSelect, "TPM2_PolicyDuplicationSelect"},
        {TPM2_CC_PolicyPassword, "TPM2_PolicyPassword"},
        {TPM2_CC_PolicyNvWritten, "TPM2_PolicyNvWritten"},
        {TPM2_CC_PolicyTemplate, "TPM2_PolicyTemplate"},
        {TPM2_CC_PolicyAuthorizeNV, "TPM2_PolicyAuthorizeNV"},
    };
    for (const Name& n : names)
        if (n.code == code)
            return std::string(n.name) + " (" + code_text(code) + ")";
    return "TPM command " + code_text(code);
}

PolicyCommand policy_auth_value() { return {TPM2_CC_PolicyAuthValue, {}}; }

PolicyCommand policy_secret(std::span<const std::uint8_t> name) {
    TPM2B_NAME tpm2b{};
    if (name.size() < 2 || name.size() > sizeof tpm2b.name)
        throw Error("the name of a PIN object must be a TPM object name");
    tpm2b.size = static_cast<UINT16>(name.size());
    std::copy(name.begin(), name.end(), tpm2b.name);
    PolicyCommand command{TPM2_CC_PolicySecret, {}};
    put(command.body, tpm2b, Tss2_MU_TPM2B_NAME_Marshal);
    return command;
}

Bytes policy_secret_name(const PolicyCommand& secret) {
    BodyReader reader(secret, TPM2_CC_PolicySecret);
    const TPM2B_NAME name = reader.take(Tss2_MU_TPM2B_NAME_Unmarshal, "object name");
    reader.finish();
    // An object's name: its name algorithm (SHA-256, as every object we
    // make) and the digest of its public area.
    if (name.size != 2 + sha256_size || name.name[0] != (TPM2_ALG_SHA256 >> 8) ||
        name.name[1] != (TPM2_ALG_SHA256 & 0xff))
        reader.fail("it names no SHA-256 object (a PIN object)");
    return Bytes(name.name, name.name + name.size);
}

TPML_PCR_SELECTION pcr_selection_list(const PcrSelection& selection) {
    TPML_PCR_SELECTION list{};
    list.count = 1;
    list.pcrSelections[0].hash = selection.bank;
    list.pcrSelections[0].sizeofSelect = pcr_select_size;
    for (unsigned pcr : selection.pcrs) {
        if (pcr >= pcr_count)
            throw Error("PCR " + std::to_string(pcr) + " does not exist (0 to 23)");
        list.pcrSelections[0].pcrSelect[pcr / 8] |= static_cast<BYTE>(1u << (pcr % 8));
    }
    return list;
}

PolicyCommand policy_pcr(const PcrSelection& selection, std::span<const std::uint8_t> pcr_digest) {
    if (selection.pcrs.empty())
        throw Error("a PCR policy needs at least one PCR");
    if (pcr_digest.size() != sha256_size)
        throw Error("the PCR digest of a policy must be a SHA-256 digest");
    PolicyCommand command{TPM2_CC_PolicyPCR, {}};
    put(command.body, pcr_selection_list(selection), Tss2_MU_TPML_PCR_SELECTION_Marshal);
    command.body.insert(command.body.end(), pcr_digest.begin(), pcr_digest.end());
    return command;
}

PcrParts pcr_parts_of(const PolicyCommand& pcr) {
    BodyReader reader(pcr, TPM2_CC_PolicyPCR);
    PcrParts parts;
    parts.list = reader.take(Tss2_MU_TPML_PCR_SELECTION_Unmarshal, "PCR selection");
    const TPML_PCR_SELECTION& list = parts.list;
    if (list.count != 1)
        reader.fail("it selects PCRs of " + std::to_string(list.count) + " banks, not of one");
    const TPMS_PCR_SELECTION& bank = list.pcrSelections[0];
    PcrSelection& selection = parts.selection;
    selection.bank = bank.hash;
    if (!find_hash(bank.hash))
        reader.fail("its PCR bank is " + bank_name(bank.hash) + ", not sha1, sha256, sha384 or sha512");
    for (unsigned i = 0; i < 8u * bank.sizeofSelect; ++i) {
        if (!(bank.pcrSelect[i / 8] & (1u << (i % 8))))
            continue;
        if (i >= pcr_count)
            reader.fail("it selects PCR " + std::to_string(i) + " (only 0 to 23 exist)");
        selection.pcrs.push_back(i);
    }
    if (selection.pcrs.empty())
        reader.fail("it selects no PCR");
    const std::size_t digest_size = reader.remaining();
    if (digest_size != sha256_size)
        reader.fail("its PCR digest is " + std::to_string(digest_size) + " bytes long, not 32 (SHA-256)");
    parts.digest.size = static_cast<UINT16>(digest_size);
    std::copy(pcr.body.end() - static_cast<std::ptrdiff_t>(digest_size), pcr.body.end(), parts.digest.buffer);
    return parts;
}

PcrSelection pcr_selection_of(const PolicyCommand& pcr) { return pcr_parts_of(pcr).selection; }

Bytes pcr_digest(const std::vector<Bytes>& values) {
    const EvpMdCtx ctx(EVP_MD_CTX_new());
    bool ok = ctx && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
    for (const Bytes& value : values)
        ok = ok && EVP_DigestUpdate(ctx.get(), value.data(), value.size());
    Bytes out(sha256_size);
    if (!(ok && EVP_DigestFinal_ex(ctx.get(), out.data(), nullptr)))
        throw Error("cannot compute a PCR digest (OpenSSL)");
    return out;
}

std::string pcr_values_text(const PcrSelection& selection, const std::vector<Bytes>& values) {
    std::string text;
    for (std::size_t i = 0; i < selection.pcrs.size() && i < values.size(); ++i)
        text +=
            "  " + bank_name(selection.bank) + ":" + std::to_string(selection.pcrs[i]) + "  " + hex(values[i]) + "\n";
    return text;
}

Bytes authorization_digest(std::span<const std::uint8_t> approved, const TPM2B_DIGEST& policy_ref) {
    return digest_of(EVP_sha256(), {approved, std::span(policy_ref.buffer, policy_ref.size)});
}

PolicyCommand policy_authorize(const AuthorizeParts& parts) {
    PolicyCommand command{TPM2_CC_PolicyAuthorize, {}};
    put(command.body, parts.signer, Tss2_MU_TPM2B_PUBLIC_Marshal);
    put(command.body, parts.policy_ref, Tss2_MU_TPM2B_DIGEST_Marshal);
    put(command.body, parts.signature, Tss2_MU_TPMT_SIGNATURE_Marshal);
    return command;
}

AuthorizeParts authorize_parts_of(const PolicyCommand& authorize) {
    BodyReader reader(authorize, TPM2_CC_PolicyAuthorize);
    AuthorizeParts parts;
    parts.signer = reader.take(Tss2_MU_TPM2B_PUBLIC_Unmarshal, "signer's public key");
    // tss2-mu does not hold the public area to its size field; the name,
    // and so the policy digest, is computed from the area.
    if (parts.signer.size + sizeof parts.signer.size != reader.offset())
        reader.fail("its signer's public key does not match its size");
    parts.policy_ref = reader.take(Tss2_MU_TPM2B_DIGEST_Unmarshal, "policy reference");
    parts.signature = reader.take(Tss2_MU_TPMT_SIGNATURE_Unmarshal, "signature");
    reader.finish();
    return parts;
}

bool signature_verifies(const AuthorizeParts& parts, std::span<const std::uint8_t> a_hash) {
    try {
        const EvpPkey signer = PublicKey(parts.signer.publicArea).to_evp();
        const TPMT_SIGNATURE& sig = parts.signature;
        Bytes der;
        TPMI_ALG_HASH hash_alg = TPM2_ALG_NULL;
        if (sig.sigAlg == TPM2_ALG_RSASSA && parts.signer.publicArea.type == TPM2_ALG_RSA) {
            hash_alg = sig.signature.rsassa.hash;
            der.assign(sig.signature.rsassa.sig.buffer,
                       sig.signature.rsassa.sig.buffer + sig.signature.rsassa.sig.size);
        } else if (sig.sigAlg == TPM2_ALG_ECDSA && parts.signer.publicArea.type == TPM2_ALG_ECC) {
            hash_alg = sig.signature.ecdsa.hash;
            const TPM2B_ECC_PARAMETER& r = sig.signature.ecdsa.signatureR;
            const TPM2B_ECC_PARAMETER& s = sig.signature.ecdsa.signatureS;
            Owned<ECDSA_SIG, ECDSA_SIG_free> ecdsa(ECDSA_SIG_new());
            BIGNUM* bn_r = BN_bin2bn(r.buffer, r.size, nullptr);
            BIGNUM* bn_s = BN_bin2bn(s.buffer, s.size, nullptr);
            if (!ecdsa || !bn_r || !bn_s || ECDSA_SIG_set0(ecdsa.get(), bn_r, bn_s) != 1) {
                BN_free(bn_r);
                BN_free(bn_s);
                return false;
            }
            unsigned char* out = nullptr;
            const int size = i2d_ECDSA_SIG(ecdsa.get(), &out);
            if (size <= 0)
                return false;
            der.assign(out, out + size);
            OPENSSL_free(out);
        } else {
            return false;
        }
        // The TPM takes a digest of the signature's hash only (TPM 2.0 Part 3, VerifySignature).
        const EVP_MD* md = name_algorithm_md(hash_alg);
        if (static_cast<std::size_t>(EVP_MD_get_size(md)) != a_hash.size())
            return false;
        const Owned<EVP_PKEY_CTX, EVP_PKEY_CTX_free> ctx(EVP_PKEY_CTX_new(signer.get(), nullptr));
        const bool rsa = sig.sigAlg == TPM2_ALG_RSASSA;
        const bool ok = ctx && EVP_PKEY_verify_init(ctx.get()) > 0 &&
                        (!rsa || EVP_PKEY_CTX_set_rsa_padding(ctx.get(), RSA_PKCS1_PADDING) > 0) &&
                        EVP_PKEY_CTX_set_signature_md(ctx.get(), md) > 0 &&
                        EVP_PKEY_verify(ctx.get(), der.data(), der.size(), a_hash.data(), a_hash.size()) == 1;
        ERR_clear_error();
        return ok;
    } catch (const Error&) {
        ERR_clear_error();
        return false;  // a signer or hash we do not handle: the TPM would not take it either
    }
}

SignedPolicy sign_policy(std::vector<PolicyCommand> commands, EVP_PKEY* signer, const TPM2B_DIGEST& policy_ref,
                         const std::string& name) {
    const Bytes approved = policy_digest(commands);
    const Bytes to_sign = authorization_digest(approved, policy_ref);
    AuthorizeParts parts;
    parts.signer = signer_public(signer);
    parts.policy_ref = policy_ref;
    parts.signature = tpm_signature(signer, to_sign);
    commands.push_back(policy_authorize(parts));
    return {name, std::move(commands)};
}

PolicyCommand pcr_policy_for(const PcrSelection& selection, const std::vector<Bytes>& values) {
    return policy_pcr(selection, pcr_digest(values));
}

PcrBoundPolicy pcr_bound_policy(const PcrSelection& selection, const std::vector<Bytes>& values, bool pin,
                                const std::optional<PolicySigning>& signing) {
    PcrBoundPolicy out;
    const PolicyCommand pcr = pcr_policy_for(selection, values);
    if (!signing) {
        if (pin)
            out.policy.push_back(policy_auth_value());
        out.policy.push_back(pcr);
    } else {
        AuthorizeParts authorize;
        authorize.signer = signer_public(signing->signer);
        authorize.policy_ref = signing->nonce;
        authorize.signature.sigAlg = TPM2_ALG_NULL;
        out.policy.push_back(policy_authorize(authorize));
        if (pin)
            out.policy.push_back(policy_auth_value());
        out.signed_policies.push_back(sign_policy({pcr}, signing->signer, signing->nonce, signing->signed_name));
    }
    out.digest = policy_digest(out.policy);
    return out;
}

TPM2B_DIGEST new_policy_nonce() {
    TPM2B_DIGEST nonce{};
    nonce.size = sha256_size;
    if (RAND_bytes(nonce.buffer, nonce.size) != 1)
        throw Error("OpenSSL cannot make random bytes");
    return nonce;
}

Bytes policy_digest(std::span<const PolicyCommand> commands) {
    const EVP_MD* sha256 = EVP_sha256();
    const Bytes zeros(sha256_size, 0);
    Bytes digest = zeros;
    for (const PolicyCommand& command : commands) {
        const Bytes code = big_endian(command.code);
        switch (command.code) {
        case TPM2_CC_PolicyAuthValue:
            BodyReader(command, TPM2_CC_PolicyAuthValue).finish();  // no parameters
            digest = digest_of(sha256, {digest, code});
            break;
        case TPM2_CC_PolicyPCR:
            (void)pcr_selection_of(command);  // a malformed body has no digest
            digest = digest_of(sha256, {digest, code, command.body});
            break;
        case TPM2_CC_PolicySecret:
            // PolicyUpdate (TPM 2.0 Part 3, 23.2.4): the object's name, then
            // the policyRef, which tpmkey leaves empty.
            digest = digest_of(sha256, {digest, code, policy_secret_name(command)});
            digest = digest_of(sha256, {digest});
            break;
        case TPM2_CC_PolicyAuthorize: {
            // The TPM starts again from zeros: only the signer and the
            // reference count, not what the signed policy was.
            const AuthorizeParts parts = authorize_parts_of(command);
            const Bytes signer = tpm_name(parts.signer.publicArea);
            digest = digest_of(sha256, {zeros, code, signer});
            digest = digest_of(sha256, {digest, std::span(parts.policy_ref.buffer, parts.policy_ref.size)});
            break;
        }
        default: throw Error("cannot compute the digest of a policy with " + policy_command_text(command.code));
        }
    }
    return digest;
}

}  // namespace tpmkey
