#include "policy_signer.hpp"

#include "atomic_file.hpp"
#include "config.hpp"
#include "error.hpp"
#include "file_read.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>

#include <sys/stat.h>

#include <string>
#include <string_view>
#include <vector>

namespace tpmkey {

namespace {

constexpr std::size_t max_signer_file_size = 16 * 1024;

// An OpenSSH public key line (a .pub) or a PEM public key.
bool is_public_key(const std::vector<std::uint8_t>& data) {
    const std::string_view text(reinterpret_cast<const char*>(data.data()), data.size());
    if (text.starts_with("ssh-") || text.starts_with("ecdsa-sha2-") || text.starts_with("sk-"))
        return true;
    const Bio bio(BIO_new_mem_buf(data.data(), static_cast<int>(data.size())));
    const EvpPkey pub(bio ? PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr) : nullptr);
    ERR_clear_error();
    return static_cast<bool>(pub);
}

}  // namespace

std::filesystem::path default_policy_signer_path() {
    return config_file_path().parent_path() / "policy-signer.pem";
}

EvpPkey read_policy_signer(const std::filesystem::path& path) {
    const std::string name = path.string();
    const FileRead file = read_regular_file(path, max_signer_file_size);
    check_not_replaceable(path, file);
    // What the file is comes first: "chmod 600" is no advice for a file
    // that is not the signer (a .pub given by mistake).
    const Bio bio(BIO_new_mem_buf(file.data.data(), static_cast<int>(file.data.size())));
    EvpPkey key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
    ERR_clear_error();
    if (!key) {
        if (is_public_key(file.data))
            throw Error(name + ": a public key, not the policy signer: give its private key (PEM), e.g. " +
                        default_policy_signer_path().string());
        throw Error(name + ": not a PEM private key");
    }
    // Whoever reads it can sign a policy that lets the key be used in any
    // boot state (the PIN, if any, is still needed).
    if (file.mode & (S_IRGRP | S_IROTH))
        throw Error(name + ": the policy signer is readable by others; chmod 600 " + name);
    return key;
}

EvpPkey generate_policy_signer() {
    EvpPkey key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
    if (!key)
        throw Error("OpenSSL cannot make a P-256 key");
    return key;
}

void write_policy_signer(const std::filesystem::path& path, EVP_PKEY* signer) {
    const Bio bio(BIO_new(BIO_s_mem()));
    if (!bio || PEM_write_bio_PrivateKey(bio.get(), signer, nullptr, nullptr, 0, nullptr, nullptr) != 1)
        throw Error("cannot encode the policy signer as PEM");
    char* text = nullptr;
    const long size = BIO_get_mem_data(bio.get(), &text);
    std::error_code ec;
    if (std::filesystem::create_directories(path.parent_path(), ec))
        ::chmod(path.parent_path().c_str(), 0700);
    write_file_atomically(path, std::string(text, static_cast<std::size_t>(size)), 0600, Replace::no);
}

}  // namespace tpmkey
