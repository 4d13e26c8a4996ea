// Where tpmkey-ca keeps what every host and webhook replica of one CA must
// agree on (docs/design.md, "tpmkey-ca's shared state"): the AK records,
// their revocations and the outstanding challenges. One interface, two
// stores behind it:
//
//   the directory store   DIR/records/ and DIR/pending/ (ak_records.hpp,
//                         ca_directory.hpp): one host, the default;
//   the database store    PostgreSQL through libpq, when DIR/database
//                         names one (a libpq connection string, in a file
//                         of ours, mode 0600: it may hold a password).
//                         Any number of CA hosts and webhook replicas,
//                         each with a copy of the CA directory's keys and
//                         the same DIR/database, share one truth.
//
// The commands do not choose: the functions of ak_records.hpp and
// ca_directory.hpp (write_record, read_record, take_pending, CaLock, ...)
// go to the CA's store.
#pragma once

#include "ak_records.hpp"
#include "ca_directory.hpp"

#include <cstddef>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

namespace tpmkey {

class CaStore {
public:
    virtual ~CaStore() = default;
    CaStore() = default;
    CaStore(const CaStore&) = delete;
    CaStore& operator=(const CaStore&) = delete;

    // The record of that serial, or nullopt.
    virtual std::optional<AkRecord> record(const std::string& serial) = 0;
    // The records whose `key` is `value`, sorted by issued time, then serial.
    virtual std::vector<AkRecord> records_with(RecordKey key, const std::string& value) = 0;
    // Every record, sorted as above.
    virtual std::vector<AkRecord> all_records() = 0;
    // The revoked records (what a CRL lists), sorted as above.
    virtual std::vector<AkRecord> revoked_records() = 0;
    // With replace false, refuses (Error) a serial already recorded, by
    // any host.
    virtual void write_record(const AkRecord& record, bool replace) = 0;

    // Outstanding challenges, by the AK's name and the challenge's id (hex).
    virtual void add_pending(const std::string& ak_name, const std::string& id, const std::string& text,
                             std::time_t created) = 0;
    // The challenge, removed: of two takers at once, one gets it, the other
    // nullopt.
    virtual std::optional<std::string> take_pending(const std::string& ak_name, const std::string& id) = 0;
    // Removes challenges created before `expired_before`, and the AK's
    // oldest beyond `keep`. Returns how many it removed.
    virtual std::size_t prune_pending(const std::string& ak_name, std::size_t keep, std::time_t expired_before) = 0;

    // The number of the newest CRL any host signed for the CA whose
    // certificate has SHA-256 `ca` (hex), or nullopt; set_crl_number()
    // never lowers it. Under CaLock.
    virtual std::optional<std::string> crl_number(const std::string& ca) = 0;
    virtual void set_crl_number(const std::string& ca, const std::string& number) = 0;

    // The CA-wide lock of CaLock, across every host of the CA.
    virtual void lock() = 0;
    virtual void unlock() noexcept = 0;

    // What to name in messages: "DIR/records" or "the database of DIR/database".
    virtual std::string where() const = 0;
};

// DIR/database
std::filesystem::path database_file(const CaDirectory& ca);

// The database store of `ca` when DIR/database exists (connected on first
// use, and again after the connection is lost), else null: the directory
// store. One per process and CA directory. Throws Error for a DIR/database
// that is not a regular file of ours, mode 0600.
CaStore* database_store(const CaDirectory& ca);

}  // namespace tpmkey
