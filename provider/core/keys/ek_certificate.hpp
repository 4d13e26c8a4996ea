// EK certificates without a TPM: the trusted EK roots, whether a
// certificate chains to one, and the EK's public area a certificate
// stands for. The parent's proof (trust/endorsement.hpp) reads the
// certificate from the TPM; an attestation CA (tpmkey-ca) gets it in an
// enrolment request and has no TPM.
#pragma once

#include "core/base/owned.hpp"
#include "core/keys/ek_templates.hpp"

#include <openssl/x509.h>
#include <tss2/tss2_tpm2_types.h>

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace tpmkey {

using Bytes = std::vector<std::uint8_t>;

// The directories of trusted EK root (and intermediate) certificates:
// /etc/tpmkey/ek-roots and $XDG_CONFIG_HOME/tpmkey/ek-roots (or the
// config file's `ek-roots DIR`). Missing directories are no roots.
struct EkRoots {
    std::vector<std::filesystem::path> dirs;
};
EkRoots default_ek_roots();

// Why the certificate (DER) does not chain to a trusted root in `roots`,
// or empty when it does: OpenSSL's verdict, the same as `openssl verify
// -CAfile ROOT -untrusted INTERMEDIATE` with the self-signed certificates
// of the directories as roots and the others as intermediates.
std::string ek_chain_problem(std::span<const std::uint8_t> certificate, const EkRoots& roots);

// Whether a trusted EK root is installed at all in `roots`: then an EK
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
