// HTTPS for the enrolment commands (tpmkey enroll, tpmkey ssh-cert): one
// request at a time through libcurl, https only, the server's certificate
// checked against the one root the user gave (never the system's store),
// no redirects, bounded in time and size. Every answer is hostile: the
// caller parses it.
#pragma once

#include "core/base/bytes.hpp"

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <map>
#include <string>

namespace tpmkey::enroll {

struct HttpResponse {
    long status = 0;
    std::map<std::string, std::string> headers;  // names lower-cased; a repeated header keeps its last value
    std::string body;
};

class HttpClient {
public:
    // The largest body accepted; a longer answer is refused.
    static constexpr std::size_t max_body = 1024 * 1024;
    static constexpr long connect_timeout_seconds = 10;
    static constexpr long total_timeout_seconds = 60;

    // Reads `ca_root` (PEM or DER; a hostile file: regular, bounded, it
    // must hold a certificate) once; throws Error naming it.
    explicit HttpClient(std::filesystem::path ca_root);

    // Throws Error naming the URL and curl's reason (TLS, connection,
    // timeout, an answer too large). Any HTTP status is returned. The
    // request takes at most `timeout` (and never more than
    // total_timeout_seconds): a caller with a deadline passes its time left.
    HttpResponse get(const std::string& url,
                     std::chrono::milliseconds timeout = std::chrono::seconds{total_timeout_seconds});
    HttpResponse post(const std::string& url, const std::string& content_type, const std::string& body,
                      std::chrono::milliseconds timeout = std::chrono::seconds{total_timeout_seconds});

private:
    HttpResponse perform(const std::string& url, const std::string* content_type, const std::string* body,
                         std::chrono::milliseconds timeout);

    std::filesystem::path ca_root_;
    // The certificates of `ca_root` as PEM written by OpenSSL: libcurl reads
    // only PEM from a blob, and the file may be DER.
    std::string ca_pem_;
};

}  // namespace tpmkey::enroll
