// Withdrawing attestation keys (docs/attestation.md, "Records and
// revocation"): the CA's CRL, DIR/crl.pem (X.509 v2 CRL, PEM, signed by
// ca.key), which every AK certificate names in its CRL distribution point
// (the URL given to init --crl-url, else DIR/crl.pem as a file: URI), and
// the check of an AK certificate against it that tpmkey-ca verify makes.
#pragma once

#include "ca_directory.hpp"

#include <openssl/x509.h>

#include <ctime>
#include <filesystem>
#include <optional>
#include <string>

namespace tpmkey {

// RFC 5280, 5.3.1 CRLReason: the ones that fit an AK (a stolen or lost
// machine, one enrolled again, one retired).
struct RevocationReason {
    const char* name;  // revoke --reason
    int code;          // CRLReason; 0 (unspecified) is left out of the CRL entry
};
inline constexpr RevocationReason revocation_reasons[] = {
    {"unspecified", 0}, {"key-compromise", 1}, {"superseded", 4}, {"cessation-of-operation", 5}};
const RevocationReason* revocation_reason(const std::string& name);

// How long a CRL is current (its nextUpdate) unless crl --days says: a
// verifier refuses every AK of the CA once it is out of date, so it must
// be signed again before then ('tpmkey-ca crl', e.g. weekly from cron).
inline constexpr int default_crl_days = 30;

// The largest crl.pem read back (revoke, crl, verify, rotate): about a
// million entries of ~65 bytes (PEM). It was 4 MiB, about 63,000: at
// 100,000 revoked AKs revoke, crl and verify failed (issue 37, item 3).
inline constexpr std::size_t max_crl_file_size = 64 * 1024 * 1024;

std::filesystem::path crl_file(const CaDirectory& ca);      // DIR/crl.pem
std::filesystem::path crl_url_file(const CaDirectory& ca);  // DIR/crl-url: init --crl-url
// DIR/crl-number: the number of the newest CRL signed (decimal), kept
// apart from crl.pem, which an older copy could replace.
std::filesystem::path crl_number_file(const CaDirectory& ca);

// An http://, https:// or file:/// URL of at most 512 printable ASCII
// characters without spaces, quotes or commas.
bool is_crl_url(const std::string& url);
// file:// and the absolute path, percent-encoded.
std::string file_url(const std::filesystem::path& path);

// What AK certificates name as their CRL: DIR/crl-url's URL, else the
// file: URL of DIR/crl.pem.
std::string crl_distribution_point(const CaDirectory& ca);

// An exclusive lock on the CA directory (flock), held while records and
// the CRL change: two revokes at once both end up in the CRL. With a
// database store (ca_store.hpp), also its advisory lock: on every host.
class CaStore;
class CaLock {
public:
    explicit CaLock(const CaDirectory& ca);
    ~CaLock();
    CaLock(const CaLock&) = delete;
    CaLock& operator=(const CaLock&) = delete;

private:
    int fd_ = -1;
    CaStore* store_ = nullptr;
};

// Signs a new CRL with every revoked record of `ca` (all_records()) whose
// certificate has not expired at `now`:
// thisUpdate `now`, nextUpdate `days` later, its CRL number one more than
// the newest the CA signed (DIR/crl-number, or the current crl.pem's if
// larger), the CA's key identifier; writes that number to DIR/crl-number,
// then the CRL to DIR/crl.pem, each atomically (0644). Returns how many AKs
// it lists. Hold a CaLock.
int publish_crl(const CaDirectory& ca, const CaKeys& keys, std::time_t now, int days);
// The same for the CA of `keys` whose crl.pem and crl-number are in `dir`
// (a retired CA's, rotation.hpp). Its CRL lists every revoked record too:
// the serials are random, so another CA's serials in it revoke nothing of
// its own, and none of its own is left off.
int publish_crl_in(const CaDirectory& ca, const CaKeys& keys, const std::filesystem::path& dir, std::time_t now,
                   int days);
// publish_crl_in() for each retired CA, with its own key: the AK
// certificates it issued stay revocable until they expire. Returns how
// many CRLs it signed.
int publish_retired_crls(const CaDirectory& ca, std::time_t now, int days);

// Why `ak` may not be used by `crl`'s account, or empty when it may:
// the CRL is `issuer`'s (its name, and its signature verifies with
// issuer's key), current at `now` (thisUpdate at most 5 minutes ahead,
// nextUpdate after now) and does not list `ak`'s serial.
std::string ak_revocation_problem(X509* ak, X509* issuer, X509_CRL* crl, std::time_t now);

// tpmkey-ca verify's revocation check of `ak` (already verified against
// `roots_file`): the CRL is `crl_path` if given, else the --ca
// directory's crl.pem, else the file: URL of the AK certificate's CRL
// distribution point; an http(s) one is not fetched (verify goes on no
// network): the message says to fetch it and give it with --crl. Returns
// the line verify prints; throws Error "REFUSED: ..." for a revoked AK,
// a CRL that is not current or not the CA's, or one that cannot be read.
// With `ca` also for an AK its record says is revoked (whatever the CRL
// lists), and for a CRL older than the newest `ca` signed (a lower CRL
// number, or none).
// An AK certificate a retired CA of `ca` issued is checked against that
// CA's CRL and record (rotation.hpp).
// An AK certificate that names no CRL (not tpmkey-ca's) is "not checked"
// unless a CRL is given.
std::string check_ak_not_revoked(X509* ak, const std::string& roots_file, const std::optional<std::string>& crl_path,
                                 const std::optional<CaDirectory>& ca, std::time_t now);

}  // namespace tpmkey
