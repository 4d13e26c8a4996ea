// Rotating the attestation CA's key (docs/design.md, "Rotating the CA";
// docs/step-ca.md, "Rotating the attestation CA"). An AK certificate of an
// earlier tpmkey-ca names no permanentIdentifier, and step-ca then takes
// any identifier the ACME order names: only a CA key that never signed
// such a certificate closes that. `tpmkey-ca rotate` gives the CA a new
// key and root; the old one moves to DIR/retired/SERIAL/ (the old
// certificate's serial, upper-case hex):
//
//   ca.key, ca.crt   the retired CA's key and certificate, as they were
//   crl.pem          its CRL, which crl and revoke keep signing (with
//                    that key) so that the AK certificates it issued stay
//                    revocable, and verifiable (verify --ca), until they
//                    expire or the directory is removed
//   crl-number       its CRL's number
//
// issue-ak and reissue-ak sign with the new key only. reissue-ak gives a
// valid AK certificate of a retired CA a new one under the new key,
// with the permanentIdentifier, from the CA's record: no new TPM round trip
// (the TPM proved at enrolment that it holds the AK and the EK).
#pragma once

#include "ak_records.hpp"
#include "ca_directory.hpp"

#include <openssl/x509.h>

#include <ctime>
#include <filesystem>
#include <vector>

namespace tpmkey {

// DIR/retired
std::filesystem::path retired_dir(const CaDirectory& ca);

// DIR/retired/*/ (the retired CAs), sorted, each checked to be a
// directory of ours that no one else may write to (as records/): whoever
// could plant a CA there could have its CRL taken for the CA's. Empty
// when there is no DIR/retired.
std::vector<std::filesystem::path> retired_ca_directories(const CaDirectory& ca);

// The new certificate of reissue_ak(), and the record written for it.
struct ReissuedAk {
    X509Cert certificate;
    AkRecord record;
    AkRecord previous;  // the record of the certificate it replaces
};

// A new AK certificate, under the CA's current key, for `old`: an AK
// certificate a retired CA of `ca` issued, recorded (serial and SHA-256),
// neither expired at `now` nor revoked, of a TPM no record bars. The same
// AK key, TPM attributes and end of validity; the permanentIdentifier and
// EK binding from the record, or, for a record written before the EK
// identifier was kept, from `ek_certificate`, whose SHA-256 must be the
// record's. Writes the new record before it returns. Throws Error
// "WHAT: refused: ..." otherwise, changing nothing. Hold a CaLock.
ReissuedAk reissue_ak(const CaDirectory& ca, X509* old, X509* ek_certificate, const std::string& what, std::time_t now);

}  // namespace tpmkey
