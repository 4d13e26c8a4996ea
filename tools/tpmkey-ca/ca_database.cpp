// The database store (ca_store.hpp): PostgreSQL through libpq.
//
// Correctness under concurrent writers rests on the database, not on this
// process (docs/design.md, "tpmkey-ca's shared state"):
// - a record's serial is the primary key: a second INSERT of it fails, so
//   no certificate is recorded twice;
// - a challenge is taken by one DELETE ... RETURNING: of two issue-ak that
//   race on one proof, PostgreSQL lets one delete the row, and the other's
//   DELETE returns nothing;
// - what CaLock guards on one host (a barred-TPM check and the record
//   written after it, a revocation and its CRL) is guarded across hosts by
//   a session advisory lock, which PostgreSQL also releases when a holder's
//   connection dies;
// - every read is one statement on the primary: no copy, no cache, so a
//   decision sees every revocation committed before it.
// A failed statement throws Error: the webhook refuses, a command fails.

#include "ca_store.hpp"

#include "core/base/error.hpp"
#include "core/files/file_read.hpp"

#include <libpq-fe.h>
#include <openssl/crypto.h>

#include <unistd.h>

#include <map>
#include <memory>

namespace tpmkey {

namespace {

// pg_advisory_lock keys: "tpmk" "ca  " as two 32-bit halves, for CaLock
// and for making the schema.
constexpr const char* ca_lock_key = "1953525099";
constexpr const char* schema_lock_key = "1953525100";

constexpr const char* schema = R"sql(
CREATE TABLE IF NOT EXISTS tpmkey_ak_records (
    serial text PRIMARY KEY,
    ak_certificate_sha256 text NOT NULL,
    ak_name text NOT NULL,
    ek_certificate_sha256 text NOT NULL,
    ek_certificate_issuer text NOT NULL,
    ek_certificate_serial text NOT NULL,
    ek_identifier text NOT NULL DEFAULT '',
    tpm_manufacturer text NOT NULL,
    tpm_model text NOT NULL,
    tpm_version text NOT NULL,
    machine text NOT NULL,
    principals text NOT NULL,
    issued text NOT NULL,
    not_after text NOT NULL,
    revoked text NOT NULL DEFAULT '',
    revocation_reason text NOT NULL DEFAULT '',
    reinstated text NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS tpmkey_ak_records_ek_identifier ON tpmkey_ak_records (ek_identifier);
CREATE INDEX IF NOT EXISTS tpmkey_ak_records_ak_name ON tpmkey_ak_records (ak_name);
CREATE INDEX IF NOT EXISTS tpmkey_ak_records_ek_sha256 ON tpmkey_ak_records (ek_certificate_sha256);
CREATE INDEX IF NOT EXISTS tpmkey_ak_records_revoked ON tpmkey_ak_records (serial) WHERE revoked <> '';
CREATE TABLE IF NOT EXISTS tpmkey_pending (
    ak_name text NOT NULL,
    id text NOT NULL,
    body text NOT NULL,
    created bigint NOT NULL,
    PRIMARY KEY (ak_name, id));
CREATE INDEX IF NOT EXISTS tpmkey_pending_created ON tpmkey_pending (created);
CREATE TABLE IF NOT EXISTS tpmkey_crl_numbers (
    ca text PRIMARY KEY,
    number numeric NOT NULL);
)sql";

constexpr const char* columns =
    "serial, ak_certificate_sha256, ak_name, ek_certificate_sha256, ek_certificate_issuer, ek_certificate_serial, "
    "ek_identifier, tpm_manufacturer, tpm_model, tpm_version, machine, principals, issued, not_after, revoked, "
    "revocation_reason, reinstated";
constexpr const char* order = " ORDER BY issued, serial";

using Connection = Owned<PGconn, PQfinish>;
using Result = Owned<PGresult, PQclear>;

class DatabaseStore final : public CaStore {
public:
    DatabaseStore(std::string conninfo, std::string file) : conninfo_(std::move(conninfo)), file_(std::move(file)) {}
    // The connection string may hold a password.
    ~DatabaseStore() override {
        unlock();
        OPENSSL_cleanse(conninfo_.data(), conninfo_.size());
    }

    std::optional<AkRecord> record(const std::string& serial) override {
        std::vector<AkRecord> found =
            select(std::string("SELECT ") + columns + " FROM tpmkey_ak_records WHERE serial = $1", {serial});
        if (found.empty())
            return std::nullopt;
        return std::move(found.front());
    }
    std::vector<AkRecord> records_with(RecordKey key, const std::string& value) override {
        const char* column = key == RecordKey::ek_identifier ? "ek_identifier"
                             : key == RecordKey::ak_name     ? "ak_name"
                                                             : "ek_certificate_sha256";
        return select(std::string("SELECT ") + columns + " FROM tpmkey_ak_records WHERE " + column + " = $1" + order,
                      {value});
    }
    std::vector<AkRecord> all_records() override {
        return select(std::string("SELECT ") + columns + " FROM tpmkey_ak_records" + order, {});
    }
    std::vector<AkRecord> revoked_records() override {
        return select(std::string("SELECT ") + columns + " FROM tpmkey_ak_records WHERE revoked <> ''" + order, {});
    }
    void write_record(const AkRecord& r, bool replace) override {
        const std::vector<std::string> values = {r.serial,
                                                 r.ak_certificate_sha256,
                                                 r.ak_name,
                                                 r.ek_certificate_sha256,
                                                 r.ek_certificate_issuer,
                                                 r.ek_certificate_serial,
                                                 r.ek_identifier,
                                                 r.tpm_manufacturer,
                                                 r.tpm_model,
                                                 r.tpm_version,
                                                 r.machine,
                                                 r.principals,
                                                 r.issued,
                                                 r.not_after,
                                                 r.revoked,
                                                 r.revocation_reason,
                                                 r.reinstated};
        std::string sql = std::string("INSERT INTO tpmkey_ak_records (") + columns +
                          ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)";
        if (replace)
            sql += " ON CONFLICT (serial) DO UPDATE SET revoked = EXCLUDED.revoked, revocation_reason = "
                   "EXCLUDED.revocation_reason, reinstated = EXCLUDED.reinstated, machine = EXCLUDED.machine, "
                   "principals = EXCLUDED.principals";
        else
            sql += " ON CONFLICT (serial) DO NOTHING";
        const Result result = exec(sql, values, PGRES_COMMAND_OK);
        if (!replace && std::string(PQcmdTuples(result.get())) != "1")
            throw Error("AK certificate serial " + r.serial + " is recorded already in " + where() +
                        ": not recorded again (a certificate is recorded once)");
    }

    void add_pending(const std::string& ak_name, const std::string& id, const std::string& text,
                     std::time_t created) override {
        (void)exec("INSERT INTO tpmkey_pending (ak_name, id, body, created) VALUES ($1, $2, $3, $4)",
                   {ak_name, id, text, std::to_string(created)}, PGRES_COMMAND_OK);
    }
    std::optional<std::string> take_pending(const std::string& ak_name, const std::string& id) override {
        const Result result = exec("DELETE FROM tpmkey_pending WHERE ak_name = $1 AND id = $2 RETURNING body",
                                   {ak_name, id}, PGRES_TUPLES_OK);
        if (PQntuples(result.get()) != 1)
            return std::nullopt;
        return std::string(PQgetvalue(result.get(), 0, 0));
    }
    std::size_t prune_pending(const std::string& ak_name, std::size_t keep, std::time_t expired_before) override {
        const Result expired =
            exec("DELETE FROM tpmkey_pending WHERE created < $1", {std::to_string(expired_before)}, PGRES_COMMAND_OK);
        const Result beyond = exec("DELETE FROM tpmkey_pending WHERE ak_name = $1 AND id NOT IN (SELECT id FROM "
                                   "tpmkey_pending WHERE ak_name = $1 ORDER BY created DESC, id LIMIT $2)",
                                   {ak_name, std::to_string(keep)}, PGRES_COMMAND_OK);
        return std::stoul(std::string("0") + PQcmdTuples(expired.get())) +
               std::stoul(std::string("0") + PQcmdTuples(beyond.get()));
    }

    std::optional<std::string> crl_number(const std::string& ca) override {
        const Result result = exec("SELECT number::text FROM tpmkey_crl_numbers WHERE ca = $1", {ca}, PGRES_TUPLES_OK);
        if (PQntuples(result.get()) != 1)
            return std::nullopt;
        return std::string(PQgetvalue(result.get(), 0, 0));
    }
    void set_crl_number(const std::string& ca, const std::string& number) override {
        (void)exec("INSERT INTO tpmkey_crl_numbers (ca, number) VALUES ($1, $2::numeric) ON CONFLICT (ca) DO UPDATE "
                   "SET number = GREATEST(tpmkey_crl_numbers.number, EXCLUDED.number)",
                   {ca, number}, PGRES_COMMAND_OK);
    }

    void lock() override {
        (void)exec(std::string("SELECT pg_advisory_lock(") + ca_lock_key + ")", {}, PGRES_TUPLES_OK);
        locked_ = true;
    }
    void unlock() noexcept override {
        if (!locked_)
            return;
        locked_ = false;
        if (connection_ && PQstatus(connection_.get()) == CONNECTION_OK)
            PQclear(PQexec(connection_.get(), (std::string("SELECT pg_advisory_unlock(") + ca_lock_key + ")").c_str()));
    }

    std::string where() const override { return "the database of " + file_; }

private:
    // Connected, with the schema made. A lost connection is made again for
    // the next statement, never for one under a lock (the lock went with it).
    PGconn* connection() {
        if (connection_ && PQstatus(connection_.get()) == CONNECTION_OK)
            return connection_.get();
        if (locked_)
            throw Error(where() + ": the connection was lost while the CA was locked: nothing more is done; run the "
                                  "command again");
        // connect_timeout first: the connection string may set its own.
        const char* keywords[] = {"connect_timeout", "dbname", nullptr};
        const char* values[] = {"5", conninfo_.c_str(), nullptr};
        connection_.reset(PQconnectdbParams(keywords, values, /*expand_dbname=*/1));
        if (!connection_ || PQstatus(connection_.get()) != CONNECTION_OK) {
            const std::string why = connection_ ? PQerrorMessage(connection_.get()) : "out of memory";
            connection_.reset();
            throw Error(where() + ": cannot connect to PostgreSQL (" + one_line(why) +
                        "): nothing was decided; check that the database runs and that " + file_ +
                        " names it (a libpq connection string)");
        }
        // Concurrent CREATE ... IF NOT EXISTS can still collide: one at a time.
        (void)exec(std::string("SET client_min_messages TO warning; BEGIN; SELECT pg_advisory_xact_lock(") +
                       schema_lock_key + "); " + schema + " COMMIT;",
                   {}, PGRES_COMMAND_OK, /*plain=*/true);
        return connection_.get();
    }

    static std::string one_line(std::string text) {
        for (char& c : text)
            if (c == '\n' || c == '\r')
                c = ' ';
        while (!text.empty() && text.back() == ' ')
            text.pop_back();
        return text;
    }

    Result exec(const std::string& sql, const std::vector<std::string>& params, ExecStatusType expected,
                bool plain = false) {
        PGconn* conn = plain ? connection_.get() : connection();
        std::vector<const char*> values;
        for (const std::string& p : params)
            values.push_back(p.c_str());
        Result result(plain ? PQexec(conn, sql.c_str())
                            : PQexecParams(conn, sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(),
                                           nullptr, nullptr, 0));
        if (!result || PQresultStatus(result.get()) != expected) {
            const std::string why = result ? PQresultErrorMessage(result.get()) : PQerrorMessage(conn);
            if (plain)
                connection_.reset();
            throw Error(where() + ": the database refused or failed (" + one_line(why) + "): nothing was decided");
        }
        return result;
    }

    std::vector<AkRecord> select(const std::string& sql, const std::vector<std::string>& params) {
        const Result result = exec(sql, params, PGRES_TUPLES_OK);
        std::vector<AkRecord> out;
        const int rows = PQntuples(result.get());
        out.reserve(static_cast<std::size_t>(rows));
        for (int i = 0; i < rows; ++i) {
            const auto v = [&](int column) { return std::string(PQgetvalue(result.get(), i, column)); };
            AkRecord r{v(0), v(1),  v(2),  v(3),  v(4),  v(5),  v(6),  v(7), v(8),
                       v(9), v(10), v(11), v(12), v(13), v(14), v(15), v(16)};
            check_record(r, where() + ": the record of serial " + r.serial);
            out.push_back(std::move(r));
        }
        return out;
    }

    std::string conninfo_, file_;
    Connection connection_;
    bool locked_ = false;
};

}  // namespace

std::filesystem::path database_file(const CaDirectory& ca) { return ca.dir / "database"; }

CaStore* database_store(const CaDirectory& ca) {
    // One per CA directory for the process's life: its connection is kept.
    static std::map<std::filesystem::path, std::unique_ptr<CaStore>> stores;
    const std::filesystem::path file = database_file(ca);
    if (const auto it = stores.find(file); it != stores.end())
        return it->second.get();
    if (!std::filesystem::exists(std::filesystem::symlink_status(file)))
        return nullptr;
    FileRead read = read_regular_file(file, 4096, /*follow_links=*/false);
    std::string text(read.data.begin(), read.data.end());
    OPENSSL_cleanse(read.data.data(), read.data.size());
    if (read.owner != ::geteuid() || (read.mode & 0077)) {
        OPENSSL_cleanse(text.data(), text.size());
        throw Error(file.string() + ": others may read or write it, or it is not ours (mode " + octal_mode(read.mode) +
                    "): refused, it may hold the database's password and says where the records are; chmod 600 it");
    }
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' '))
        text.pop_back();
    if (text.empty() || text.find('\n') != std::string::npos)
        throw Error(file.string() + ": not a libpq connection string on one line (e.g. 'host=db.example.com "
                                    "dbname=tpmkey user=tpmkey sslmode=verify-full')");
    auto store = std::make_unique<DatabaseStore>(std::move(text), file.string());
    return stores.emplace(file, std::move(store)).first->second.get();
}

}  // namespace tpmkey
