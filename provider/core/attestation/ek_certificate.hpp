// EK certificates without a TPM: the trusted EK roots, whether a
// certificate chains to one, and the EK's public area a certificate
// stands for. The parent's proof (trust/endorsement.hpp) reads the
// certificate from the TPM; an attestation CA (tpmkey-ca) gets it in an
// enrolment request and has no TPM.
#pragma once

#include "core/attestation/ek_templates.hpp"
#include "core/base/bytes.hpp"
#include "core/base/owned.hpp"

#include <openssl/x509.h>
#include <tss2/tss2_tpm2_types.h>

#include <cstdint>
#include <ctime>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace tpmkey {

// The directories of trusted EK root (and intermediate) certificates:
// the TPM makers' roots that ship with tpmkey (TPMKEY_EK_ROOTS_DIR, e.g.
// /usr/share/tpmkey/ek-roots: tools/ek-roots/README.md), /etc/tpmkey/ek-roots
// and $XDG_CONFIG_HOME/tpmkey/ek-roots; or only the config file's
// `ek-roots DIR` lines. Missing directories are no roots.
// `shipped` are the makers' roots that come with tpmkey: they certify an
// EK, but unlike `dirs` they do not make a certificate required
// (has_trusted_ek_root()), as a firmware TPM may have none to show.
struct EkRoots {
    std::vector<std::filesystem::path> dirs;
    std::vector<std::filesystem::path> shipped = {};
};
EkRoots default_ek_roots();

// The TPM's manufacturer, model and version that an EK certificate's
// subjectAltName names (a directoryName with tcg-at-tpmManufacturer
// 2.23.133.2.1, tcg-at-tpmModel 2.23.133.2.2, tcg-at-tpmVersion
// 2.23.133.2.3), as written there ("id:49465800"); empty where absent.
struct CertifiedTpm {
    std::string manufacturer;
    std::string model;
    std::string version;
};
CertifiedTpm tpm_identity_of(X509* certificate);

// Why `certificate` is not an EK certificate by the TCG EK Credential
// Profile, or empty when it is one: not a CA, the EK key purpose
// 2.23.133.8.1 where an extendedKeyUsage is present, the TPM's
// manufacturer, model and version in its subjectAltName, an RSA key with
// keyEncipherment or an ECC key with keyAgreement. What real makers'
// certificates do, and so what is accepted: docs/attestation.md.
std::string ek_profile_problem(X509* certificate);

// Why the certificate (DER) is not an EK certificate that chains to a
// trusted root in `roots`, or empty when it is: ek_profile_problem()
// first, then OpenSSL's verdict on the chain, the same as `openssl verify
// -CAfile ROOT -untrusted INTERMEDIATE` with the self-signed certificates
// of the directories as roots and the others as intermediates. `at`, when
// given, is the time the chain is verified at (tests of certificates
// whose chain has expired); otherwise now.
std::string ek_chain_problem(std::span<const std::uint8_t> certificate, const EkRoots& roots,
                             std::optional<std::time_t> at = std::nullopt);

// Whether a trusted EK root is installed at all in `roots.dirs` (the
// shipped roots do not count): then an EK
// that is not certified by one is refused, not trusted on first use (an
// interposer could hide the certificate, or show one that does not chain).
bool has_trusted_ek_root(const EkRoots& roots);

// Why files of `roots` were refused as roots because others could have put
// them there (check_not_replaceable), for the messages that say the EK is
// not certified.
std::vector<std::string> refused_ek_roots(const EkRoots& roots);

// "the directories a, b" of `roots`, for messages.
std::string dirs_text(const EkRoots& roots);

// The certificates in one file: PEM (one or more) or a single DER.
std::vector<X509Cert> certificates_in(const Bytes& data);

// An X.509 name on one line ("C = DE, O = ..."), for messages and reports.
std::string name_line(const X509_NAME* name);

// The EK's public area that `certificate` is for, when the EK was made
// from `ek_template`: the template with the certificate's key as its
// unique field (what TPM2_CreatePrimary gives, so its name is the EK's).
// Throws Error when the key is not one the template makes.
TPMT_PUBLIC ek_public_of(X509* certificate, const EkTemplate& ek_template);

}  // namespace tpmkey
