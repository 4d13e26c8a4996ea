#include "security_key.hpp"

#include "core/attestation/sk_attestation.hpp"
#include "core/base/printable.hpp"
#include "core/files/config.hpp"
#include "core/keys/algorithms.hpp"
#include "core/pin/askpass.hpp"
#include "core/tpm/diagnosis.hpp"
#include "core/tpm/nv_counter.hpp"
#include "core/tpm/tpm_keys.hpp"
#include "core/tpm/tpm_queries.hpp"
#include "core/trust/attestation_key.hpp"
#include "core/trust/key_attestation.hpp"
#include "core/trust/known_parents.hpp"
#include "key_handle.hpp"
#include "parent.hpp"
#include "sk_api.hpp"

#include <openssl/evp.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

namespace tpmkey::sk {

namespace {

Bytes sha256(std::span<const std::uint8_t> bytes) { return digest_of(EVP_sha256(), {bytes}); }

std::span<const std::uint8_t> bytes_of(const std::string& text) {
    return {reinterpret_cast<const std::uint8_t*>(text.data()), text.size()};
}

void check_alg(std::uint32_t alg) {
    if (alg == ssh_sk_ed25519)
        throw Unsupported("ed25519-sk keys cannot be made or used with a TPM: TPMs do not implement Ed25519; "
                          "make an ECDSA one: ssh-keygen -t ecdsa-sk");
    if (alg != ssh_sk_ecdsa)
        throw Unsupported("algorithm " + std::to_string(alg) +
                          " is not one tpmkey-sk knows; use ssh-keygen -t ecdsa-sk");
}

Bytes uncompressed_point(const TPMS_ECC_POINT& point) {
    if (point.x.size > 32 || point.y.size > 32)
        throw Error("the TPM returned a P-256 point larger than the curve");
    Bytes out{0x04};
    out.insert(out.end(), 32 - point.x.size, 0);
    out.insert(out.end(), point.x.buffer, point.x.buffer + point.x.size);
    out.insert(out.end(), 32 - point.y.size, 0);
    out.insert(out.end(), point.y.buffer, point.y.buffer + point.y.size);
    return out;
}

// The lockout margin for a PIN about to be checked: a wrong one must leave
// the TPM at least one try (docs/security-keys.md; the module's finer rules
// live in provider/module/login.*).
void check_lockout_margin(Tpm& tpm) {
    const DictionaryAttackState da = dictionary_attack_state(tpm);
    if (da.locked_out() || (da.max_failures > 0 && da.failures + 1 >= da.max_failures))
        throw Error("the PIN was not sent to the TPM: " + dictionary_attack_text(da) +
                    "; a wrong PIN now could lock out every key of the TPM; try again later");
}

// Presence: a TPM has no button, so the user is asked through the askpass
// program, as the module's `confirm` keys are; only a yes sets the flag.
void confirm_presence(const std::string& application) {
    const Askpass askpass = find_askpass();
    if (askpass.program.empty())
        throw Error("this key requires user presence (it was made without -O no-touch-required), which tpmkey-sk "
                    "asks through an askpass program, and none can be shown: " +
                    askpass.why_not);
    if (!askpass_confirm(askpass, "Allow the use of your TPM security key for " + printable(application) + "?"))
        throw Error("user presence was not confirmed at the askpass prompt; nothing was signed");
}

}  // namespace

Bytes signed_data(const std::string& application, std::uint8_t flags, std::uint32_t counter,
                  std::span<const std::uint8_t> data) {
    Bytes out = sha256(bytes_of(application));
    out.push_back(flags);
    for (int shift = 24; shift >= 0; shift -= 8)
        out.push_back(static_cast<std::uint8_t>(counter >> shift));
    const Bytes message_hash = sha256(data);
    out.insert(out.end(), message_hash.begin(), message_hash.end());
    return out;
}

namespace {

// The AK certificate (and its chain) of TPMKEY_AK_CERT, if set.
std::vector<Bytes> ak_certificates() {
    const char* file = std::getenv(ak_cert_variable);
    if (file == nullptr || *file == '\0') {
        std::cerr << "tpmkey-sk: no attestation: " << ak_cert_variable
                  << " names no AK certificate, so a file written by -O write-attestation holds no statement of "
                     "the TPM; to have one, enrol this TPM's attestation key (tpmkey attest enroll, "
                     "docs/attestation.md) and set "
                  << ak_cert_variable << "=AK.crt\n";
        return {};
    }
    return read_ak_certificates(file);
}

}  // namespace

Enrolled enroll(std::uint32_t alg, const std::string& application, std::uint8_t flags, const char* pin,
                std::span<const std::uint8_t> challenge) {
    check_alg(alg);
    if (!is_printable_utf8(application))
        throw Error("the application name is not printable text");
    if (flags & ssh_sk_resident_key)
        throw Unsupported("TPM security keys are never resident (-O resident): the key lives in its key file, "
                          "wrapped by the TPM; keep a copy of that file instead (docs/security-keys.md)");
    const bool with_pin = (flags & ssh_sk_user_verification_reqd) != 0;
    if (with_pin && (pin == nullptr || *pin == '\0'))
        throw PinRequired("-O verify-required: the new key's PIN is needed");

    const Config config = load_config();
    Tpm tpm(config.tpm);
    KnownParents known = keygen::load_known_parents();
    // The standard SRK's place stays as it is (tpmkey-keygen persists it).
    const std::uint32_t parent_handle = keygen::choose_parent(tpm, true, false);
    if (parent_handle == owner_hierarchy)
        keygen::refuse_owner_password(tpm);
    // The AK before the key: a file that is not this TPM's AK certificate
    // refuses the enrolment before anything is made.
    const std::vector<Bytes> x5c = ak_certificates();
    TPMT_PUBLIC ak_area{};
    std::optional<TpmObject> ak;
    if (!x5c.empty()) {
        try {
            ak = create_ak_of_certificate(tpm, x5c.front(), ak_area);
        } catch (const TpmError&) {
            throw;
        } catch (const Error& e) {
            throw Error(std::string(std::getenv(ak_cert_variable)) + ": " + e.what());
        }
    }
    const TpmObject parent = load_verified_parent(tpm, parent_handle, known);
    provide_sk_counter(tpm);

    const Secret key_pin = with_pin ? Secret(std::string_view(pin)) : Secret();
    KeyFile key;
    key.parent = parent_handle;
    key.blobs = create_key(tpm, parent, KeySpec{KeyAlgorithm::ecdsa, 256}, key_pin);
    key.empty_auth = !with_pin;
    // The application, as a FIDO credential is bound to its relying party:
    // sign() refuses any other (key_handle.hpp).
    key.description = application;

    Enrolled enrolled;
    enrolled.flags = flags & (ssh_sk_user_presence_reqd | ssh_sk_user_verification_reqd);
    enrolled.public_key = uncompressed_point(key.blobs.pub.publicArea.unique.ecc);
    enrolled.key_handle = format_key_handle(key);
    if (ak) {
        // TPM2_Certify needs the key's ADMIN role: its PIN, in a session
        // salted with the verified parent (as `tpmkey attest`).
        const Authorization auth = Authorization::for_secret(tpm, parent, with_pin);
        const TpmObject loaded = load_key(tpm, parent, auth, key.blobs);
        const AuthValue auth_value(tpm, loaded, key_pin);
        const KeyAttestation attestation = attest_key(tpm, loaded, key.blobs.pub.publicArea, auth, *ak, x5c,
                                                      sk_certify_challenge(challenge, application));
        enrolled.attestation_cert = x5c.front();
        enrolled.authdata = attestation.attestation_object;
        enrolled.attestation_signature = parse_attestation_object(attestation.attestation_object).sig;
    }
    return enrolled;
}

Signed sign(std::uint32_t alg, std::span<const std::uint8_t> data, const std::string& application,
            std::span<const std::uint8_t> key_handle, std::uint8_t flags, const char* pin) {
    check_alg(alg);
    const KeyFile key = parse_key_handle(key_handle);
    if (key.description != application)
        throw Error("this key was enrolled for the application \"" + key.description + "\", not \"" + application +
                    "\": the key file was altered");
    const bool with_pin = key.needs_pin();
    if (with_pin && (pin == nullptr || *pin == '\0'))
        throw PinRequired("this key has a PIN (-O verify-required)");
    const bool presence = (flags & ssh_sk_user_presence_reqd) != 0;
    if (presence)
        confirm_presence(application);

    const Config config = load_config();
    Tpm tpm(config.tpm);
    KnownParents known = KnownParents::load();
    // No clear accepted: a key made before one cannot load anyway, and a PIN
    // goes only to a parent proven before (as in the module's logins).
    const TpmObject parent = load_verified_parent(tpm, key.parent, known, nullptr,
                                                  ParentPolicy{.accept_clear = false, .accept_new_tpm_ek = {}});
    const TpmObject loaded = load_key(tpm, parent, Authorization::password(), key.blobs);
    if (with_pin)
        check_lockout_margin(tpm);
    const std::uint32_t counter = next_sk_counter(tpm, parent);

    Signed result;
    result.counter = counter;
    // UV only for a signature the TPM authorised with the key's PIN: a key
    // with a PIN signs with nothing else.
    result.flags = static_cast<std::uint8_t>((presence ? ssh_sk_user_presence_reqd : 0) |
                                             (with_pin ? ssh_sk_user_verification_reqd : 0));
    const Bytes digest = sha256(signed_data(application, result.flags, counter, data));
    const Secret key_pin = with_pin ? Secret(std::string_view(pin)) : Secret();
    const Authorization auth = with_pin ? Authorization::for_secret(tpm, parent, true) : Authorization::password();
    const AuthValue auth_value(tpm, loaded, key_pin);
    Bytes signature;
    try {
        signature = sign_digest(tpm, loaded, auth, TPM2_ALG_ECDSA, TPM2_ALG_SHA256, digest, 32);
    } catch (const TpmError& e) {
        if (!e.is(TPM2_RC_AUTH_FAIL) && !e.is(TPM2_RC_BAD_AUTH))
            throw;
        throw PinRequired("wrong PIN (" + dictionary_attack_text(dictionary_attack_state(tpm)) + ")");
    }
    if (signature.size() != 64)
        throw Error("the TPM's P-256 signature has " + std::to_string(signature.size()) + " bytes, not 64");
    result.r.assign(signature.begin(), signature.begin() + 32);
    result.s.assign(signature.begin() + 32, signature.end());
    return result;
}

}  // namespace tpmkey::sk
