#include "core/pin/refused_record.hpp"

#include "core/base/error.hpp"
#include "core/base/log.hpp"
#include "core/files/atomic_file.hpp"
#include "core/files/file_read.hpp"
#include "core/tpm/tpm_queries.hpp"

#include <cstring>
#include <sstream>
#include <vector>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <tss2/tss2_mu.h>
#include <unistd.h>

namespace tpmkey {

namespace {

// One line per record: "v1 SOURCE RECORD", each 64 hex digits. A file of
// more than this is not ours: no record.
constexpr std::size_t max_file_size = 64 * 1024;
constexpr const char* version = "v1";
// What the TPM's HMAC covers, before the key's blobs and the PIN: a record
// of another kind or version can never match.
constexpr const char* domain = "tpmkey refused source PIN v1";

RefusedPinRecords::Digest sha256(const std::vector<std::uint8_t>& data) {
    RefusedPinRecords::Digest out{};
    unsigned int n = 0;
    if (!EVP_Digest(data.data(), data.size(), out.data(), &n, EVP_sha256(), nullptr) || n != out.size())
        throw Error("SHA-256 failed (OpenSSL)");
    return out;
}

std::string hex(const RefusedPinRecords::Digest& d) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    for (const std::uint8_t b : d) {
        out += digits[b >> 4];
        out += digits[b & 15];
    }
    return out;
}

std::optional<RefusedPinRecords::Digest> from_hex(const std::string& s) {
    RefusedPinRecords::Digest out{};
    if (s.size() != 2 * out.size())
        return std::nullopt;
    const auto nibble = [](char c) -> int {
        if (c >= '0' && c <= '9')
            return c - '0';
        if (c >= 'a' && c <= 'f')
            return c - 'a' + 10;
        return -1;
    };
    for (std::size_t i = 0; i < out.size(); ++i) {
        const int hi = nibble(s[2 * i]), lo = nibble(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return std::nullopt;
        out[i] = static_cast<std::uint8_t>(hi << 4 | lo);
    }
    return out;
}

using Records = std::vector<std::pair<RefusedPinRecords::Digest, RefusedPinRecords::Digest>>;

// The records of the file; none when it is missing, not a regular file,
// not the user's, or writable by others (who could then make the module
// refuse a right PIN). A line that does not parse is skipped.
Records read_records(const std::filesystem::path& file) {
    Records out;
    if (file.empty())
        return out;
    std::optional<FileRead> read;
    try {
        read = read_regular_file_if_present(file, max_file_size, false);
    } catch (const Error& e) {
        log_debug(std::string("refused PIN records not read: ") + e.what());
        return out;
    }
    if (!read || read->owner != ::geteuid() || (read->mode & 022) != 0)
        return out;
    std::istringstream lines(std::string(read->data.begin(), read->data.end()));
    for (std::string line; std::getline(lines, line);) {
        std::istringstream fields(line);
        std::string v, source, record, extra;
        if (!(fields >> v >> source >> record) || (fields >> extra) || v != version)
            continue;
        const auto s = from_hex(source);
        const auto r = from_hex(record);
        if (s && r)
            out.emplace_back(*s, *r);
    }
    return out;
}

}  // namespace

std::filesystem::path RefusedPinRecords::default_file() {
    const std::filesystem::path log = state_log_path();
    return log.empty() ? log : log.parent_path() / "refused-pins";
}

RefusedPinRecords::Digest RefusedPinRecords::source_id(const std::string& key_name, const std::string& source) {
    std::vector<std::uint8_t> data(key_name.begin(), key_name.end());
    data.push_back(0);
    data.insert(data.end(), source.begin(), source.end());
    return sha256(data);
}

std::optional<RefusedPinRecords::Digest> RefusedPinRecords::find(const Digest& source) const {
    for (const auto& [s, r] : read_records(file_))
        if (s == source)
            return r;
    return std::nullopt;
}

void RefusedPinRecords::store(const Digest& source, const std::optional<Digest>& record) const {
    if (file_.empty())
        return;
    Records records = read_records(file_);
    std::erase_if(records, [&](const auto& entry) { return entry.first == source; });
    if (record)
        records.emplace_back(source, *record);
    // The directory as the state log makes it: the user's, 0700.
    const std::filesystem::path dir = file_.parent_path();
    std::error_code ec;
    if (!std::filesystem::exists(dir, ec) && std::filesystem::create_directories(dir, ec))
        std::filesystem::permissions(dir, std::filesystem::perms::owner_all, ec);
    std::string contents;
    for (const auto& [s, r] : records)
        contents += std::string(version) + " " + hex(s) + " " + hex(r) + "\n";
    write_file_atomically(file_, contents, 0600, Replace::yes);
}

RefusedPinRecords::Digest RefusedPinRecords::compute(Tpm& tpm, const TpmObject& salt_key, const KeyBlobs& blobs,
                                                     const Secret& pin) {
    // A wrong owner password would count against the lockout: never guessed.
    if (owner_auth_set(tpm))
        throw Error("the TPM's owner hierarchy has a password, so tpmkey cannot make the key that records a "
                    "refused PIN; it is remembered only while the process runs");

    // The record key: an HMAC key the TPM derives from its owner seed and
    // this template, the same at every call (TPM 2.0 Part 1, 27.3, primary
    // keys); `unique` sets it apart from any other HMAC primary.
    TPM2B_PUBLIC in_public{};
    TPMT_PUBLIC& area = in_public.publicArea;
    area.type = TPM2_ALG_KEYEDHASH;
    area.nameAlg = TPM2_ALG_SHA256;
    area.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN |
                            TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA | TPMA_OBJECT_SIGN_ENCRYPT;
    area.parameters.keyedHashDetail.scheme.scheme = TPM2_ALG_HMAC;
    area.parameters.keyedHashDetail.scheme.details.hmac.hashAlg = TPM2_ALG_SHA256;
    const std::string label = "tpmkey refused source PIN records";
    const Digest unique = sha256(std::vector<std::uint8_t>(label.begin(), label.end()));
    area.unique.keyedHash.size = static_cast<UINT16>(unique.size());
    std::memcpy(area.unique.keyedHash.buffer, unique.data(), unique.size());

    const TPM2B_SENSITIVE_CREATE sensitive{};
    const TPM2B_DATA outside_info{};
    const TPML_PCR_SELECTION pcrs{};
    ESYS_TR handle = ESYS_TR_NONE;
    check_rc(Esys_CreatePrimary(tpm.esys(), ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &sensitive,
                                &in_public, &outside_info, &pcrs, &handle, nullptr, nullptr, nullptr, nullptr),
             "TPM2_CreatePrimary of the key that records refused PINs");
    const TpmObject key(tpm, handle, TpmObject::Kind::transient);

    // What is MACed: the domain, a digest of the key's blobs (a new PIN set
    // with tpmkey passwd makes new blobs, so an old record no longer
    // matches), and the PIN.
    std::vector<std::uint8_t> blob_bytes(sizeof(TPM2B_PUBLIC) + sizeof(TPM2B_PRIVATE));
    std::size_t offset = 0;
    check_rc(Tss2_MU_TPM2B_PUBLIC_Marshal(&blobs.pub, blob_bytes.data(), blob_bytes.size(), &offset),
             "marshalling a public area");
    check_rc(Tss2_MU_TPM2B_PRIVATE_Marshal(&blobs.priv, blob_bytes.data(), blob_bytes.size(), &offset),
             "marshalling a private area");
    blob_bytes.resize(offset);
    const Digest blob_digest = sha256(blob_bytes);

    TPM2B_MAX_BUFFER data{};
    const std::size_t domain_size = std::strlen(domain) + 1;
    if (domain_size + blob_digest.size() + pin.size() > sizeof data.buffer)
        throw Error("a PIN too long to record");
    std::memcpy(data.buffer, domain, domain_size);
    std::memcpy(data.buffer + domain_size, blob_digest.data(), blob_digest.size());
    if (!pin.empty())
        std::memcpy(data.buffer + domain_size + blob_digest.size(), pin.data(), pin.size());
    data.size = static_cast<UINT16>(domain_size + blob_digest.size() + pin.size());

    // The PIN travels only encrypted, in a session salted with the parent.
    const Authorization auth = Authorization::for_secret(tpm, salt_key, true);
    EsysPtr<TPM2B_DIGEST> out;
    const TSS2_RC rc = Esys_HMAC(tpm.esys(), key.handle(), auth.session(), ESYS_TR_NONE, ESYS_TR_NONE, &data,
                                 TPM2_ALG_SHA256, out_ptr(out));
    OPENSSL_cleanse(&data, sizeof data);
    check_rc(rc, "TPM2_HMAC of a refused PIN");
    Digest record{};
    if (out->size != record.size())
        throw Error("TPM2_HMAC: a digest of " + std::to_string(out->size) + " bytes, not 32");
    std::memcpy(record.data(), out->buffer, record.size());
    return record;
}

}  // namespace tpmkey
