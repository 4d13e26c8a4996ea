// The CA's inventory of the attestation keys it certified (docs/
// attestation.md, "Records and revocation"): DIR/records/, one file per
// AK certificate, named by its serial in upper-case hex, in the exchange-
// file format (kind ak-record, text fields only). issue-ak writes one for
// every certificate it issues, revoke adds when and why it was revoked;
// list shows them, verify --ca names the machine from them, and the CA
// script takes the SSH certificate's -I and -n from there, not from the
// requester.
//
// The records say who a key's machine is: whoever could write them could
// have a certificate issued for another identity. So records/ is checked
// as pending/ is (a directory of ours no one else may write, not a link)
// and each record must be a regular file of ours, mode 0600.
#pragma once

#include "ca_directory.hpp"

#include <openssl/x509.h>

#include <ctime>
#include <optional>
#include <string>
#include <vector>

namespace tpmkey {

struct AkRecord {
    std::string serial;                 // the AK certificate's serial, upper-case hex (as verify prints it)
    std::string ak_certificate_sha256;  // SHA-256 of the AK certificate (DER), hex
    std::string ak_name;                // the AK's TPM name, hex
    std::string ek_certificate_sha256;  // SHA-256 of the EK certificate (DER), hex
    std::string ek_certificate_issuer;  // its issuer, on one line
    std::string ek_certificate_serial;  // its serial, upper-case hex
    std::string ek_identifier;          // the EK's permanentIdentifier (urn:ek:sha256:...); empty in old records
    std::string tpm_manufacturer, tpm_model, tpm_version;  // from the EK certificate's subjectAltName
    std::string machine;                                   // the name the operator gave (issue-ak --machine)
    std::string principals;                                // issue-ak --principals: comma-separated
    std::string issued, not_after;                         // utc_text()
    std::string revoked;                                   // utc_text(), empty while not revoked
    std::string revocation_reason;                         // one of revocation_reasons, with revoked
    // utc_text() of 'tpmkey-ca reinstate': the operator trusts the TPM
    // again; the certificate stays revoked. Only with revoked.
    std::string reinstated;
};

// A revoked AK certificate bars its TPM (every certificate for it through
// the webhook, and its enrolment) until the operator reinstates the TPM.
inline bool bars_tpm(const AkRecord& record) { return !record.revoked.empty() && record.reinstated.empty(); }

// Whether `record` is of the TPM named by `ek_identifier` or, for a record
// written before the identifier was kept, enrolled with the EK certificate
// of SHA-256 `ek_certificate_sha256` (may be empty: then not).
bool is_of_tpm(const AkRecord& record, const std::string& ek_identifier, const std::string& ek_certificate_sha256);

// The records that bar that TPM (as is_of_tpm()), oldest first.
std::vector<AkRecord> barring_records(const CaDirectory& ca, const std::string& ek_identifier,
                                      const std::string& ek_certificate_sha256);

// The records of that TPM (as is_of_tpm()), oldest first: one indexed
// look-up in the database store.
std::vector<AkRecord> records_of_tpm(const CaDirectory& ca, const std::string& ek_identifier,
                                     const std::string& ek_certificate_sha256);

// The columns a revoke or a decision looks records up by (each indexed in
// the database store).
enum class RecordKey { ek_identifier, ak_name, ek_certificate_sha256 };
// The records whose `key` is `value`, oldest first.
std::vector<AkRecord> records_with(const CaDirectory& ca, RecordKey key, const std::string& value);

// The revoked records (what a CRL lists), oldest first.
std::vector<AkRecord> revoked_records(const CaDirectory& ca);

// Makes the directory store's index of the records (DIR/index/: the
// serials of each TPM and the revoked ones), by reading every record once,
// unless it is there or the CA has a database store. Hold a CaLock; CaLock
// calls it. From then on write_record() keeps it, and a decision and a CRL
// read only what it lists.
void build_record_index(const CaDirectory& ca);

// Throws Error "WHAT: refused: not a record ..." unless `record`'s serial,
// machine, principals and times are as tpmkey-ca writes them (the machine
// and principals go to ssh-keygen).
void check_record(const AkRecord& record, const std::string& what);

// Throws Error "WHAT: refused: ..." when a record bars the TPM of
// `ek_certificate` (challenge and issue-ak: no new AK certificate for it).
void refuse_barred_tpm(const CaDirectory& ca, X509* ek_certificate, const std::string& what);

// DIR/records
std::filesystem::path records_dir(const CaDirectory& ca);
// Where the records are, for messages: DIR/records, or "the database of
// DIR/database".
std::string records_place(const CaDirectory& ca);

// A machine name (--machine) or one principal: 1 to 64 of A-Z a-z 0-9 . _
// @ -, not starting with '-' (it goes to ssh-keygen -I and -n).
bool is_record_name(const std::string& text);
// A comma-separated list of 1 to 32 such names (--principals).
bool is_principal_list(const std::string& text);

// Writes `record` to records/<serial> atomically, 0600, making records/
// (0700) if missing. With Replace::no, refuses a serial already recorded.
void write_record(const CaDirectory& ca, const AkRecord& record, bool replace);

// The record of the AK certificate with serial `serial` (upper-case hex),
// or nullopt when there is none. Throws Error for a records/ or a record
// file that fails the checks above, or one that does not parse.
std::optional<AkRecord> read_record(const CaDirectory& ca, const std::string& serial);

// Every record, sorted by issued time. Throws Error as read_record().
std::vector<AkRecord> all_records(const CaDirectory& ca);

// The record of `ak_certificate` in `ca`: the one of its serial, and the
// certificate's SHA-256 must be the recorded one. Throws Error "REFUSED:
// ..." when there is none or it is another certificate's.
AkRecord record_of_certificate(const CaDirectory& ca, X509* ak_certificate);

// Upper-case hex of a certificate's serial (what verify prints as AK:).
std::string serial_hex(X509* certificate);
// Hex of the SHA-256 of a certificate's DER.
std::string certificate_sha256(X509* certificate);

}  // namespace tpmkey
