#include "verify.hpp"

#include "ak_records.hpp"
#include "audit_log.hpp"
#include "json_text.hpp"
#include "revocation.hpp"

#include "core/attestation/exchange_file.hpp"
#include "core/attestation/key_verification.hpp"
#include "core/attestation/sk_attestation.hpp"
#include "core/attestation/webauthn.hpp"
#include "core/base/printable.hpp"
#include "core/files/file_read.hpp"
#include "core/keys/key_file.hpp"
#include "core/keys/public_key.hpp"

#include "core/base/base64.hpp"
#include "core/keys/algorithms.hpp"
#include "core/keys/tpm_policy.hpp"

#include <algorithm>
#include <charconv>
#include <ctime>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace tpmkey::cli {

namespace {

constexpr CommandSpec verify_spec{"verify",
                                  "check a key's attestation; print what it proves, or refuse it",
                                  "tpmkey-ca verify ATTESTATION --roots FILE --challenge FILE [--key-file KEY] [--crl "
                                  "FILE] [--ca DIR] [--audit-log FILE] [-o FILE] [--json] "
                                  "[--min-rsa-bits N] [--require-pcrs LIST] [--manufacturers LIST]",
                                  "Checks ATTESTATION (written by 'tpmkey attest'): the AK certificate in it\n"
                                  "was issued by a CA of --roots and is an AK certificate (WebAuthn 8.3.1);\n"
                                  "the AK signed TPM2_Certify's result over the key (certInfo) for the\n"
                                  "challenge in --challenge (the same file the machine was given: a replay\n"
                                  "of an older attestation is refused); the certified key is the SSH key in\n"
                                  "the file and was made in a TPM that will not let it out (fixedTPM,\n"
                                  "fixedParent, sensitiveDataOrigin). Then prints what that proves, and\n"
                                  "what it cannot prove. Exit 0 only if every check holds; a refusal is\n"
                                  "'tpmkey-ca: REFUSED: REASON', exit 1, and prints nothing on standard\n"
                                  "output (with --json: the refusal, as JSON). With -o, writes the\n"
                                  "verified key's .pub line to FILE: sign that one (ssh-keygen -s), never\n"
                                  "the ATTESTATION file read again, which its sender may have changed\n"
                                  "since.\n"
                                  "\n"
                                  "  --roots FILE       the CA certificates to trust (PEM)\n"
                                  "  --challenge FILE   the challenge the machine was given (16 to 1024 bytes)\n"
                                  "  --key-file KEY     the key file (KEY.tpm), whose policy then explains\n"
                                  "                     the key's authPolicy; its public key must be the\n"
                                  "                     attested one\n"
                                  "  -o FILE            write the verified key's .pub line to FILE (replaced\n"
                                  "                     in one step; in a directory only the CA can write)\n"
                                  "  --crl FILE         the CA's CRL (PEM or DER); else --ca's crl.pem, else\n"
                                  "                     the file:// CRL the AK certificate names. Refused:\n"
                                  "                     a revoked AK, a CRL out of date or not the CA's\n"
                                  "  --ca DIR           the CA directory: its record of the AK certificate\n"
                                  "                     names the machine and principals (printed), a\n"
                                  "                     revoked record or a CRL older than the CA's newest\n"
                                  "                     is refused, and the decision goes to its audit\n"
                                  "                     log, DIR/audit.log\n"
                                  "  --audit-log FILE   append the decision to FILE instead (one JSON\n"
                                  "                     object per line; made 0600, in a directory no one\n"
                                  "                     else may write)\n"
                                  "  --json             print the result as one JSON object on standard\n"
                                  "                     output, a refusal too (with the check's name)\n"
                                  "\n"
                                  "The CA's policy (each off unless given; a key that breaks it is refused):\n"
                                  "  --min-rsa-bits N   RSA keys need at least N bits (2048 to 16384)\n"
                                  "  --require-pcrs LIST  keys must be bound to these PCRs (sha256 bank,\n"
                                  "                     \"7\" or \"0,7\"), as the attestation proves\n"
                                  "  --manufacturers LIST  TPMs of these makers only: \"IBM,INTC\" or\n"
                                  "                     \"id:49424D00\" (TPM_PT_MANUFACTURER), comma-separated\n",
                                  {"--roots", "--challenge", "--key-file", "-o", "--crl", "--ca", "--audit-log",
                                   "--min-rsa-bits", "--require-pcrs", "--manufacturers", nullptr},
                                  {"--json", nullptr},
                                  1};

// "id:49424D00" -> "IBM (id:49424D00)".
std::string manufacturer_text(const std::string& id) {
    const std::string letters = manufacturer_letters(id);
    return letters.empty() ? id : letters + " (" + id + ")";
}

// The facts for scripts: docs/attestation.md, "verify --json".
std::string json_of(const std::string& path, const VerifiedKey& key, const std::string& revocation,
                    const std::optional<AkRecord>& record) {
    std::vector<std::string> checks;
    for (const VerifyCheck check : verify_checks())
        checks.emplace_back(check_name(check));
    checks.emplace_back("not-revoked");  // the CLI's, after the core's (ca_facts)
    if (record)
        checks.emplace_back("ca-record");
    nlohmann::ordered_json pcrs = nlohmann::ordered_json::array();
    for (const PcrSelection& selection : key.pcrs) {
        const HashAlgorithm* bank = find_hash(selection.bank);
        pcrs.push_back(nlohmann::ordered_json{{"bank", bank ? bank->name : "?"}, {"pcrs", selection.pcrs}});
    }
    const nlohmann::ordered_json null = nullptr;
    return json_line({{"verified", true},
                      {"attestation", path},
                      {"ssh_public_key", key.ssh_public_key},
                      {"key",
                       {{"type", key_kind_algorithm(key.kind).name},
                        {"bits", key.bits},
                        {"fingerprint", key.fingerprint},
                        {"tpm_resident", true},
                        {"user_with_auth", key.user_with_auth}}},
                      {"ek_certificate_sha256",
                       key.ek_certificate_sha256 ? nlohmann::ordered_json(*key.ek_certificate_sha256) : null},
                      {"ak_certificate", {{"serial", key.ak_serial}, {"issuer", key.ak_issuer}}},
                      {"tpm",
                       {{"manufacturer", key.tpm_manufacturer},
                        {"manufacturer_letters", manufacturer_letters(key.tpm_manufacturer)},
                        {"model", key.tpm_model},
                        {"version", key.tpm_version},
                        {"proven", true}}},
                      {"policy",
                       {{"auth_policy", key.auth_policy},
                        {"explained", key.policy_explained},
                        {"pcrs", pcrs},
                        {"lines", key.policy}}},
                      {"pin_proven", false},
                      {"revocation", revocation},
                      {"machine", record ? nlohmann::ordered_json(record->machine) : null},
                      {"principals", record ? nlohmann::ordered_json(record->principals) : null},
                      {"checks", checks}}) +
           "\n";
}

// The CA's policy from the command line; UsageError for a bad value.
VerifyPolicy policy_of(const Parsed& p) {
    VerifyPolicy policy;
    if (p.has_value("--min-rsa-bits")) {
        const std::string text = p.value("--min-rsa-bits");
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), policy.min_rsa_bits);
        if (ec != std::errc() || end != text.data() + text.size() || policy.min_rsa_bits < 2048 ||
            policy.min_rsa_bits > 16384)
            throw UsageError("tpmkey-ca verify: --min-rsa-bits needs a whole number of bits from 2048 to 16384",
                             verify_spec.usage);
    }
    if (p.has_value("--require-pcrs")) {
        try {
            policy.required_pcrs = parse_pcr_selection(p.value("--require-pcrs"), "sha256");
        } catch (const Error& e) {
            throw UsageError(std::string("tpmkey-ca verify: --require-pcrs: ") + e.what(), verify_spec.usage);
        }
    }
    if (p.has_value("--manufacturers")) {
        const std::string list = p.value("--manufacturers");
        for (std::size_t start = 0; start <= list.size();) {
            const std::size_t comma = std::min(list.find(',', start), list.size());
            policy.manufacturers.push_back(list.substr(start, comma - start));
            if (policy.manufacturers.back().empty())
                throw UsageError("tpmkey-ca verify: --manufacturers needs makers separated by commas, as "
                                 "'IBM,INTC' or 'id:49424D00'",
                                 verify_spec.usage);
            start = comma + 1;
        }
    }
    return policy;
}

// verify --json's refusal: the check that failed (null for a failure that
// is no check's: a file of the CA's that cannot be read, the audit log) and
// why, on standard output before main() prints "REFUSED: ..." on standard
// error. Made once, in cmd_verify, for every way verify fails.
void print_json_refusal(const std::string& path, const std::string& check, std::string_view message) {
    constexpr std::string_view prefix = "REFUSED: ";
    const std::string_view reason = message.starts_with(prefix) ? message.substr(prefix.size()) : message;
    std::cout << json_line({{"verified", false},
                            {"attestation", path},
                            {"check", check.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(check)},
                            {"reason", printable(reason)}})
              << "\n"
              << std::flush;
}

// What the CA directory adds to a verified key: not revoked (the CA's CRL,
// revocation.hpp) and its record of the AK certificate (ak_records.hpp).
// Here, not among the core's checks, because finding the CRL and the
// records is the CA directory's matter. Refused: "REFUSED: ...", check
// "not-revoked" or "ca-record".
struct CaFacts {
    std::string revocation;  // the line verify prints
    std::optional<AkRecord> record;
};
CaFacts ca_facts(const Parsed& p, const VerifiedKey& key, AuditEntry& entry) {
    const unsigned char* der = key.ak_certificate.data();
    const X509Cert ak(d2i_X509(nullptr, &der, static_cast<long>(key.ak_certificate.size())));
    const std::optional<CaDirectory> ca_dir =
        p.has_value("--ca") ? std::optional<CaDirectory>(ca_directory_of(p)) : std::nullopt;
    CaFacts facts;
    entry.check = "not-revoked";
    facts.revocation = check_ak_not_revoked(ak.get(), p.value("--roots"),
                                            p.has_value("--crl") ? std::optional(p.value("--crl")) : std::nullopt,
                                            ca_dir, std::time(nullptr));
    entry.check = "ca-record";
    if (ca_dir)
        facts.record = record_of_certificate(*ca_dir, ak.get());
    entry.check.clear();
    return facts;
}

void print_text(const std::string& path, const VerifiedKey& key, const CaFacts& facts) {
    std::cout << "Verified:      " << path << "\n"
              << "SSH key:       " << key.bits << " " << key.fingerprint << " (" << key_kind_algorithm(key.kind).name
              << ")\n"
              << "               TPM-resident, not exportable (fixedTPM, fixedParent, sensitiveDataOrigin)\n";
    if (key.ek_certificate_sha256)
        std::cout << "EK:            the CA enrolled the AK with the EK certificate of SHA-256 "
                  << *key.ek_certificate_sha256 << "\n";
    else
        std::cout << "EK:            not recorded by the CA\n";
    std::cout << "AK:            certificate serial " << key.ak_serial << ", issuer " << key.ak_issuer
              << ", subject (empty)\n"
              << "TPM:           manufacturer " << manufacturer_text(key.tpm_manufacturer) << ", model "
              << key.tpm_model << ", version " << key.tpm_version
              << " (as the AK certificate names them: tpmkey-ca takes them from the EK certificate, which the TPM's "
                 "maker signed)\n"
              << "Revocation:    " << facts.revocation << "\n";
    if (facts.record)
        std::cout << "Machine:       " << facts.record->machine << "\n"
                  << "Principals:    " << facts.record->principals << "\n";
    else
        std::cout << "Machine:       not looked up (give --ca DIR for the CA's record)\n";
    for (std::size_t i = 0; i < key.policy.size(); ++i)
        std::cout << (i == 0 ? "Policy:        " : "               ") << key.policy[i] << "\n";
    std::cout << "Not proven:    whether the key has a PIN (its auth value is not in the public area)";
    if (key.user_with_auth)
        std::cout << "; userWithAuth: the key is usable with its auth value alone";
    std::cout << "\n";
}

// Reads the files, has the core verify (core/attestation/key_verification.hpp)
// and prints what it proves; nothing is printed before every check held,
// and logged (`log`, if any) before anything is printed or written.
void verify(const Parsed& p, const VerifyPolicy& policy, AuditLog* log, AuditEntry& entry) {
    const std::string path = p.positional[0];
    const std::string challenge_file = p.value("--challenge");
    const Bytes challenge = read_regular_file(challenge_file, max_challenge_size + 1).data;
    if (challenge.size() < min_challenge_size || challenge.size() > max_challenge_size)
        throw Error(challenge_file + ": not a challenge (" + std::to_string(min_challenge_size) + " to " +
                    std::to_string(max_challenge_size) + " bytes)");
    std::optional<KeyFile> key_file;
    if (p.has_value("--key-file"))
        key_file = read_key_file(p.value("--key-file"));
    // The attestation is the sender's: a file that cannot be read is refused.
    Bytes attestation;
    try {
        attestation = read_regular_file(path, max_exchange_file_size).data;
    } catch (const Error& e) {
        throw Error(std::string("REFUSED: ") + e.what());
    }
    const Bytes roots = read_regular_file(p.value("--roots"), 1024 * 1024).data;

    const std::variant<VerifiedKey, Refusal> outcome = verify_key_attestation({
        .attestation = std::string_view(reinterpret_cast<const char*>(attestation.data()), attestation.size()),
        .attestation_name = path,
        .challenge = challenge,
        .challenge_name = challenge_file,
        .roots = roots,
        .roots_name = p.value("--roots"),
        .key_file = key_file ? &*key_file : nullptr,
        .key_file_name = p.value("--key-file"),
        .policy = policy,
    });
    // main() prints "tpmkey-ca: REFUSED: REASON" and exits 1.
    if (const Refusal* refusal = std::get_if<Refusal>(&outcome)) {
        entry.check = check_name(refusal->check);
        throw Error("REFUSED: " + refusal->reason);
    }
    const VerifiedKey& key = std::get<VerifiedKey>(outcome);
    entry.ak_serial = key.ak_serial;
    entry.key_fingerprint = key.fingerprint;
    entry.ek_certificate_sha256 = key.ek_certificate_sha256.value_or("");
    const CaFacts facts = ca_facts(p, key, entry);
    if (facts.record) {
        entry.ak_name = facts.record->ak_name;
        entry.machine = facts.record->machine;
        entry.principals = facts.record->principals;
    }
    if (log) {
        entry.reason = "verified: " + std::to_string(key.bits) + "-bit " + key_kind_algorithm(key.kind).name +
                       " key, TPM-resident, not exportable; " + facts.revocation;
        log->accepted(entry);
    }
    if (p.has_value("-o"))
        write_output(p, key.ssh_public_key + "\n", 0644);
    if (p.has_flag("--json"))
        std::cout << json_of(path, key, facts.revocation, facts.record);
    else
        print_text(path, key, facts);
}

int cmd_verify(const Parsed& p) {
    if (!p.has_value("--roots") || !p.has_value("--challenge"))
        throw UsageError("tpmkey-ca verify: --roots and --challenge are needed", verify_spec.usage);
    const VerifyPolicy policy = policy_of(p);
    AuditEntry entry{.command = "verify", .input = p.positional[0]};
    try {
        // verify needs no CA directory; it logs where it is told to.
        std::optional<AuditLog> log;
        if (p.has_value("--audit-log")) {
            log.emplace(p.value("--audit-log"));
        } else if (p.has_value("--ca")) {
            const CaDirectory ca = ca_directory_of(p);
            check_ca_directory(ca);  // before making audit.log in it
            log.emplace(audit_log_file(ca));
        }
        if (log)
            run_audited(*log, entry, [&] { verify(p, policy, &*log, entry); });
        else
            verify(p, policy, nullptr, entry);
    } catch (const std::exception& e) {
        // A script reads one JSON object whatever went wrong: nothing was
        // printed before (verify prints only once all held).
        if (p.has_flag("--json"))
            print_json_refusal(p.positional[0], entry.check, e.what());
        throw;
    }
    return 0;
}

constexpr CommandSpec verify_sk_spec{"verify-sk",
                                     "check a security key's attestation (ssh-keygen -O write-attestation)",
                                     "tpmkey-ca verify-sk ATTESTATION --pub KEY.pub --challenge FILE --roots FILE "
                                     "[--crl FILE] [--ca DIR] [--verify-required]",
                                     "Checks ATTESTATION, written by 'ssh-keygen -t ecdsa-sk -w tpmkey-sk.so\n"
                                     "-O challenge=FILE -O write-attestation=ATTESTATION' with TPMKEY_AK_CERT set\n"
                                     "(docs/security-keys.md, \"Attestation\"): its AK certificate was issued by\n"
                                     "a CA of --roots, is an AK certificate and is not revoked (as verify);\n"
                                     "the AK signed TPM2_Certify's result over the key for this challenge and\n"
                                     "the application of KEY.pub; the certified key is the key of KEY.pub\n"
                                     "(its P-256 point) and was made in a TPM that will not let it out\n"
                                     "(fixedTPM, fixedParent, sensitiveDataOrigin). Then prints what that\n"
                                     "proves and what it cannot. Exit 0 only if every check holds; a refusal\n"
                                     "is 'tpmkey-ca: REFUSED: REASON', exit 1.\n"
                                     "\n"
                                     "  --pub KEY.pub      the security key's public key (sk-ecdsa-sha2-nistp256)\n"
                                     "  --challenge FILE   the challenge given to ssh-keygen -O challenge=FILE\n"
                                     "                     (16 to 1024 bytes); without it nothing shows the\n"
                                     "                     attestation is fresh, so it is needed\n"
                                     "  --roots FILE       the CA certificates to trust (PEM)\n"
                                     "  --crl FILE         the CA's CRL (PEM or DER), as for verify\n"
                                     "  --ca DIR           the CA directory: its CRL, records and audit log, as\n"
                                     "                     for verify\n"
                                     "  --verify-required  refuse a key without dictionary-attack protection\n"
                                     "                     (noDA): tpmkey-sk makes those without a PIN\n",
                                     {"--pub", "--challenge", "--roots", "--crl", "--ca", nullptr},
                                     {"--verify-required", nullptr},
                                     1};

// As verify(): nothing printed before every check held, and the decision
// logged (`log`, if any) before anything is printed.
void verify_sk(const Parsed& p, AuditLog* log, AuditEntry& entry) {
    const std::string path = p.positional[0];
    const std::string challenge_file = p.value("--challenge");
    const Bytes challenge = read_regular_file(challenge_file, max_challenge_size + 1).data;
    if (challenge.size() < min_challenge_size || challenge.size() > max_challenge_size)
        throw Error(challenge_file + ": not a challenge (" + std::to_string(min_challenge_size) + " to " +
                    std::to_string(max_challenge_size) + " bytes)");
    const Bytes roots = read_regular_file(p.value("--roots"), 1024 * 1024).data;
    // The attestation and the .pub are the sender's: whatever is wrong with
    // them is a refusal.
    SkAttestation attestation;
    SkPublicKey pub;
    entry.check = check_name(VerifyCheck::attestation_file);  // until the core's checks run
    try {
        attestation = parse_sk_attestation(read_regular_file(path, max_sk_attestation_size + 1).data);
    } catch (const Error& e) {
        throw Error("REFUSED: " + path + ": " + e.what());
    }
    try {
        entry.check = check_name(VerifyCheck::ssh_public_key);
        const Bytes text = read_regular_file(p.value("--pub"), 64 * 1024).data;
        pub = parse_sk_public_key(std::string_view(reinterpret_cast<const char*>(text.data()), text.size()));
    } catch (const Error& e) {
        throw Error("REFUSED: " + p.value("--pub") + ": " + e.what());
    }
    // OpenSSH's attestation_cert and signature are the attestation object's
    // x5c[0] and sig (sk_attestation.hpp): two copies that must agree.
    entry.check = check_name(VerifyCheck::attestation_file);
    TpmAttestation object;
    try {
        object = parse_attestation_object(attestation.authdata);
    } catch (const Error& e) {
        throw Error("REFUSED: " + path + ": its authenticator data is not a TPM attestation object: " + e.what());
    }
    if (object.x5c.empty() || object.x5c.front() != attestation.attestation_cert)
        throw Error("REFUSED: " + path +
                    ": its attestation certificate is not the AK certificate of its "
                    "authenticator data (the file was altered)");
    if (object.sig != attestation.signature)
        throw Error("REFUSED: " + path +
                    ": its signature is not the one of its authenticator data (the file "
                    "was altered)");

    // The rest is verify's checks (key_verification.hpp), on the exchange
    // file `tpmkey attest` would have written: the SSH key of KEY.pub's
    // point, the clientDataJSON of the challenge bound to the application.
    const Bytes certified = sk_certify_challenge(challenge, pub.application);
    ExchangeFile file(attestation_file::kind);
    Bytes blob;
    const auto put_string = [&blob](std::string_view text) {
        for (int shift = 24; shift >= 0; shift -= 8)
            blob.push_back(static_cast<std::uint8_t>(text.size() >> shift));
        blob.insert(blob.end(), text.begin(), text.end());
    };
    put_string("ecdsa-sha2-nistp256");
    put_string("nistp256");
    put_string(std::string_view(reinterpret_cast<const char*>(pub.point.data()), pub.point.size()));
    file.set_text(attestation_file::ssh_public_key, "ecdsa-sha2-nistp256 " + base64(blob));
    const std::string client_data = client_data_json(certified);
    file.set_bytes(attestation_file::client_data_json, Bytes(client_data.begin(), client_data.end()));
    file.set_bytes(attestation_file::attestation_object, attestation.authdata);
    const std::string text = file.to_string();
    entry.check.clear();
    const std::variant<VerifiedKey, Refusal> outcome = verify_key_attestation({
        .attestation = text,
        .attestation_name = path,
        .challenge = certified,
        .challenge_name = challenge_file + " and the application of " + p.value("--pub"),
        .roots = roots,
        .roots_name = p.value("--roots"),
    });
    if (const Refusal* refusal = std::get_if<Refusal>(&outcome)) {
        entry.check = check_name(refusal->check);
        if (refusal->check == VerifyCheck::ssh_public_key)
            throw Error("REFUSED: the attested key is not the key of " + p.value("--pub"));
        if (refusal->check == VerifyCheck::challenge || refusal->check == VerifyCheck::extra_data)
            throw Error("REFUSED: the attestation was not made for the challenge " + challenge_file +
                        " and the application \"" + printable(pub.application) + "\" of " + p.value("--pub") + " (" +
                        refusal->reason + ")");
        throw Error("REFUSED: " + refusal->reason);
    }
    const VerifiedKey& key = std::get<VerifiedKey>(outcome);
    // tpmkey-sk gives a key DA protection exactly when it has a PIN
    // (key_handle.hpp); the PIN itself is not in the public area.
    entry.ak_serial = key.ak_serial;
    entry.key_fingerprint = ssh_fingerprint(pub.blob);
    entry.ek_certificate_sha256 = key.ek_certificate_sha256.value_or("");
    if (p.has_flag("--verify-required") && key.no_da) {
        entry.check = "verify-required";
        throw Error("REFUSED: the key is noDA: tpmkey-sk made it without -O verify-required, so it has no PIN");
    }
    const CaFacts facts = ca_facts(p, key, entry);
    if (facts.record) {
        entry.ak_name = facts.record->ak_name;
        entry.machine = facts.record->machine;
        entry.principals = facts.record->principals;
    }
    if (log) {
        entry.reason = "verified: security key (ECDSA-SK P-256, application \"" + printable(pub.application) +
                       "\"), TPM-resident, not exportable, " + (key.no_da ? "noDA" : "dictionary-attack protected") +
                       "; " + facts.revocation;
        log->accepted(entry);
    }
    std::cout << "Verified:      " << path << "\n"
              << "Security key:  " << ssh_fingerprint(pub.blob) << " (ECDSA-SK P-256), application \""
              << printable(pub.application) << "\"\n"
              << "               TPM-resident, not exportable (fixedTPM, fixedParent, sensitiveDataOrigin)\n"
              << "AK:            certificate serial " << key.ak_serial << ", issuer " << key.ak_issuer << "\n"
              << "TPM:           manufacturer " << manufacturer_text(key.tpm_manufacturer) << ", model "
              << key.tpm_model << ", version " << key.tpm_version << " (as the AK certificate names them)\n"
              << "Revocation:    " << facts.revocation << "\n";
    if (facts.record)
        std::cout << "Machine:       " << facts.record->machine << "\n";
    std::cout
        << "Lockout:       "
        << (key.no_da
                ? "noDA: made without -O verify-required (tpmkey-sk gives such keys no PIN)"
                : "dictionary-attack protected: as tpmkey-sk makes a key with a PIN (-O verify-required); the PIN "
                  "itself is not proven")
        << "\n"
        << "Not proven:    the PIN itself (its auth value is not in the public area), user presence "
           "(the askpass confirmation is the host's, not the TPM's), the key's flags in the key file\n";
}

int cmd_verify_sk(const Parsed& p) {
    if (!p.has_value("--pub") || !p.has_value("--roots") || !p.has_value("--challenge"))
        throw UsageError("tpmkey-ca verify-sk: --pub, --challenge and --roots are needed", verify_sk_spec.usage);
    AuditEntry entry{.command = "verify-sk", .input = p.positional[0]};
    // With --ca, the decision goes to the CA's audit log, as verify's.
    if (!p.has_value("--ca")) {
        verify_sk(p, nullptr, entry);
        return 0;
    }
    const CaDirectory ca = ca_directory_of(p);
    check_ca_directory(ca);  // before making audit.log in it
    AuditLog log(audit_log_file(ca));
    run_audited(log, entry, [&] { verify_sk(p, &log, entry); });
    return 0;
}

}  // namespace

const Command verify_command{&verify_spec, cmd_verify};
const Command verify_sk_command{&verify_sk_spec, cmd_verify_sk};

}  // namespace tpmkey::cli
