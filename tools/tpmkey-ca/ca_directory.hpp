// The CA directory of tpmkey-ca (--ca DIR; docs/attestation.md, "The CA"):
//
//   ca.key    the CA's private key: EC P-256, PKCS#8 PEM, mode 0600
//   ca.crt    its self-signed root certificate (what verifiers trust)
//   pending/  one file per outstanding challenge, named by the AK's name
//             and the challenge's id in hex, holding the request and the
//             secret (0600); issue-ak consumes it, so a proof works once
//
// Whoever can write the directory or pending/ can plant a challenge for a
// software key and get it certified (the EK chain is checked only when the
// challenge is made): every command refuses a directory or pending/ that is
// not ours alone, and a pending file that is not ours with mode 0600.
#pragma once

#include "core/attestation/exchange_file.hpp"
#include "core/base/owned.hpp"

#include <cstdint>
#include <ctime>
#include <filesystem>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>

namespace tpmkey {

// What someone who may write a directory of the CA could do, for the
// messages of check_private_directory().
inline constexpr const char* plant_challenge_risk =
    "plant a challenge and get an AK certificate for a key outside any TPM";

// Throws Error, naming the chmod or chown that fixes it and `risk`, unless
// `dir` is a directory (lstat: not a symbolic link) of the effective user
// that no one else may write to.
void check_private_directory(const std::filesystem::path& dir, const char* risk = plant_challenge_risk);
// mkdir DIR 0700 unless it is there; it must then pass
// check_private_directory().
void make_private_directory(const std::filesystem::path& dir, const char* risk = plant_challenge_risk);

// "644" for mode 0644.
std::string octal_mode(mode_t mode);

// $XDG_DATA_HOME/tpmkey-ca, else ~/.local/share/tpmkey-ca.
std::filesystem::path default_ca_directory();

struct CaDirectory {
    std::filesystem::path dir;

    std::filesystem::path key_file() const { return dir / "ca.key"; }
    std::filesystem::path certificate_file() const { return dir / "ca.crt"; }
    std::filesystem::path pending_dir() const { return dir / "pending"; }
    // pending/<the AK's name in hex>.<the challenge's id in hex>
    std::filesystem::path pending_file(std::span<const std::uint8_t> ak_name,
                                       std::span<const std::uint8_t> challenge_id) const;
};

// Throws Error, naming the chmod or chown that fixes it, unless the CA
// directory and pending/ are directories (not symbolic links) of the
// effective user that no one else may write to.
void check_ca_directory(const CaDirectory& ca);

// Makes the CA: the directory (0700) and pending/ if missing, a new key
// and a self-signed certificate named `name` (CN), valid for `days`.
// Throws Error, changing nothing, when DIR/ca.key exists or an existing
// directory fails check_ca_directory().
void init_ca(const CaDirectory& ca, const std::string& name, int days);

// A new CA key (EC P-256, PKCS#8 PEM) and its self-signed certificate
// (PEM) named `name` (CN), valid for `days`: what init_ca() and rotate
// write.
struct CaPem {
    std::string key, certificate;
};
CaPem new_ca_pem(const std::string& name, int days);

// The CA's key and certificate, checked to belong together. Throws Error
// for a directory without a CA, one that fails check_ca_directory(), or a
// key others may read.
struct CaKeys {
    X509Cert certificate;
    EvpPkey key;
};
CaKeys load_ca(const CaDirectory& ca);
// The key and certificate in `dir` (ca.key, ca.crt; a retired CA's too,
// rotation.hpp), checked as load_ca() checks them; the directory is the
// caller's to check.
CaKeys load_ca_in(const std::filesystem::path& dir);

// A pending file (exchange_file.hpp, ak_pending_file): the request's
// fields plus what only the CA knows, the secret of the challenge and when
// it was made.
// A challenge's secret, which only the TPM can recover from the
// credential, is its id (challenge_id_size random bytes: the pending file's
// name) followed by challenge_key_size random bytes. The id picks the
// challenge a proof answers; no one but the CA and that TPM knows it, so
// no one else can aim a proof at the challenge, let alone use it up, and a
// second challenge for the same AK is a file of its own.
constexpr std::size_t challenge_id_size = 16;
constexpr std::size_t challenge_key_size = 16;
constexpr std::size_t challenge_secret_size = challenge_id_size + challenge_key_size;

// How long a challenge may wait for its proof: a secret kept forever is a
// secret with forever to leak.
constexpr int pending_days = 7;

// How many outstanding challenges one AK keeps: making another removes
// the oldest beyond these. A machine answers the challenge it was just
// given; an older one is still wanted only while its proof is on the way
// (a retry, a second operator, a request someone else handed in for the
// same AK, which anyone may: it takes that many newer ones to push the
// machine's out). Eight covers those, and bounds what `challenge` run in a
// loop leaves in pending/ for one AK to eight files of about 4 KiB.
constexpr std::size_t max_pending_per_ak = 8;

// Keeps the challenge `pending` (the AK's name, the challenge's id) in
// pending/ (0600; never replacing one) or in the database store.
void add_pending(const CaDirectory& ca, std::span<const std::uint8_t> ak_name, std::span<const std::uint8_t> id,
                 const ExchangeFile& pending, std::time_t created);

// Tidies pending/ before a new challenge for the AK named `ak_name` is
// written: removes every challenge (of any AK) whose created time is more
// than pending_days before `now` or does not parse (take_pending() would
// refuse it), then of this AK's the oldest beyond `keep` (by created time,
// then the file's mtime). Judges only what take_pending() would read: a
// regular file of ours with mode 0600 whose name is a pending file's and
// which parses; anything else is left for take_pending()'s refusal to
// name. Returns how many it removed.
std::size_t prune_pending(const CaDirectory& ca, std::span<const std::uint8_t> ak_name, std::size_t keep,
                          std::time_t now);

// `time` as "YYYY-MM-DDTHH:MM:SSZ" (UTC).
std::string utc_text(std::time_t time);
// The inverse of utc_text(); nullopt for anything utc_text() would not
// have written.
std::optional<std::time_t> parse_utc_text(const std::string& text);

// The outstanding challenge of the AK named `ak_name` whose id begins
// `secret` (a proof's), used up: it is removed before it is returned (one
// proof per challenge, and one guess); the caller compares the secrets.
// Throws Error, naming `what` (the proof), changing nothing, when the
// secret has not the size of a challenge's or there is no such challenge,
// or when the file is not a regular file of ours with mode 0600 (left in
// place); after removing it, when its created time does not parse or is
// more than pending_days before `now`.
ExchangeFile take_pending(const CaDirectory& ca, std::span<const std::uint8_t> ak_name,
                          std::span<const std::uint8_t> secret, const std::string& what, std::time_t now);

}  // namespace tpmkey
