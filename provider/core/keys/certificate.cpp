#include "core/keys/certificate.hpp"

#include "core/base/error.hpp"
#include "core/base/log.hpp"
#include "core/base/owned.hpp"
#include "core/files/file_read.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <string>

namespace tpmkey {

namespace {

constexpr std::size_t max_certificate_size = 64 * 1024;

}  // namespace

std::optional<Bytes> read_certificate_next_to(const std::filesystem::path& key_path) {
    const std::filesystem::path stem = key_path.parent_path() / key_path.stem();
    for (const std::string suffix : {".crt", "-cert.pem"}) {
        std::filesystem::path cert_path = stem;
        cert_path += suffix;
        std::optional<FileRead> file;
        try {
            file = read_regular_file_if_present(cert_path, max_certificate_size);
        } catch (const Error& e) {
            log_error(std::string(e.what()) + "; certificate ignored");
            continue;
        }
        if (!file)
            continue;
        const std::string data(file->data.begin(), file->data.end());
        if (data.find("-----BEGIN CERTIFICATE-----") == std::string::npos)
            return Bytes(data.begin(), data.end());  // DER
        const Bio bio(BIO_new_mem_buf(data.data(), static_cast<int>(data.size())));
        const X509Cert cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
        ERR_clear_error();
        if (!cert) {
            log_error(cert_path.string() + ": ignored: not a readable PEM certificate");
            continue;
        }
        Bytes der = to_der(i2d_X509, cert.get());
        if (!der.empty())
            return der;
    }
    return std::nullopt;
}

}  // namespace tpmkey
