#include "http_client.hpp"

#include "core/attestation/ek_certificate.hpp"
#include "core/base/error.hpp"
#include "core/base/owned.hpp"
#include "core/files/file_read.hpp"

#include <curl/curl.h>
#include <openssl/pem.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <memory>

namespace tpmkey::enroll {

namespace {

constexpr std::size_t max_ca_root_size = 256 * 1024;
constexpr std::size_t max_header_bytes = 64 * 1024;

using CurlEasy = Owned<CURL, curl_easy_cleanup>;
using CurlList = Owned<curl_slist, curl_slist_free_all>;

struct Transfer {
    HttpResponse response;
    std::size_t header_bytes = 0;
    bool body_too_large = false;
    bool headers_too_large = false;
};

std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const std::size_t n = size * count;
    if (t->response.body.size() + n > HttpClient::max_body) {
        t->body_too_large = true;
        return 0;  // curl stops: CURLE_WRITE_ERROR
    }
    t->response.body.append(data, n);
    return n;
}

std::string trimmed(std::string s) {
    const auto space = [](unsigned char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
    while (!s.empty() && space(static_cast<unsigned char>(s.back())))
        s.pop_back();
    std::size_t start = 0;
    while (start < s.size() && space(static_cast<unsigned char>(s[start])))
        ++start;
    return s.substr(start);
}

std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const std::size_t n = size * count;
    t->header_bytes += n;
    if (t->header_bytes > max_header_bytes) {
        t->headers_too_large = true;
        return 0;
    }
    const std::string line(data, n);
    if (line.rfind("HTTP/", 0) == 0) {
        // A new response (after a 100 Continue): its headers only.
        t->response.headers.clear();
        return n;
    }
    const auto colon = line.find(':');
    if (colon == std::string::npos || colon == 0)
        return n;
    std::string name = line.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    t->response.headers[name] = trimmed(line.substr(colon + 1));
    return n;
}

// The text of a libcurl failure: its own words for this transfer when it
// has them, else the code's.
std::string curl_reason(CURLcode rc, const char* detail) {
    if (detail && *detail)
        return detail;
    return curl_easy_strerror(rc);
}

template <class T>
void set(CURL* curl, CURLoption option, T value) {
    if (curl_easy_setopt(curl, option, value) != CURLE_OK)
        throw Error("libcurl: cannot set option " + std::to_string(static_cast<int>(option)) +
                    " (libcurl too old or built without it)");
}

}  // namespace

HttpClient::HttpClient(std::filesystem::path ca_root) : ca_root_(std::move(ca_root)) {
    const std::vector<X509Cert> roots = certificates_in(read_regular_file(ca_root_, max_ca_root_size).data);
    if (roots.empty())
        throw Error(ca_root_.string() + ": no certificate in it (the CA's root certificate, PEM or DER)");
    const Bio pem(BIO_new(BIO_s_mem()));
    for (const X509Cert& root : roots)
        if (!pem || PEM_write_bio_X509(pem.get(), root.get()) != 1)
            throw Error("OpenSSL: cannot write " + ca_root_.string() + " as PEM");
    char* text = nullptr;
    const long size = BIO_get_mem_data(pem.get(), &text);
    ca_pem_.assign(text, static_cast<std::size_t>(size));
    static const CURLcode global = curl_global_init(CURL_GLOBAL_DEFAULT);
    if (global != CURLE_OK)
        throw Error(std::string("libcurl: cannot start: ") + curl_easy_strerror(global));
}

HttpResponse HttpClient::get(const std::string& url, std::chrono::milliseconds timeout) {
    return perform(url, nullptr, nullptr, timeout);
}

HttpResponse HttpClient::post(const std::string& url, const std::string& content_type, const std::string& body,
                              std::chrono::milliseconds timeout) {
    return perform(url, &content_type, &body, timeout);
}

HttpResponse HttpClient::perform(const std::string& url, const std::string* content_type, const std::string* body,
                                 std::chrono::milliseconds timeout) {
    if (url.rfind("https://", 0) != 0)
        throw Error(url + ": not an https URL (tpmkey talks to a CA only over https)");
    const CurlEasy curl(curl_easy_init());
    if (!curl)
        throw Error("libcurl: cannot make a transfer");
    CURL* c = curl.get();
    char detail[CURL_ERROR_SIZE] = {};
    Transfer t;
    set(c, CURLOPT_ERRORBUFFER, detail);
    set(c, CURLOPT_URL, url.c_str());
    set(c, CURLOPT_PROTOCOLS_STR, "https");
    set(c, CURLOPT_REDIR_PROTOCOLS_STR, "https");
    set(c, CURLOPT_FOLLOWLOCATION, 0L);
    set(c, CURLOPT_NOSIGNAL, 1L);
    set(c, CURLOPT_CONNECTTIMEOUT, connect_timeout_seconds);
    set(c, CURLOPT_TIMEOUT_MS,
        static_cast<long>(
            std::clamp<std::chrono::milliseconds::rep>(timeout.count(), 1, total_timeout_seconds * 1000)));
    // No proxy: one named in the environment (https_proxy, ALL_PROXY, ...)
    // would be reached over TLS checked against the system's store, which
    // tpmkey never trusts (docs/security.md).
    set(c, CURLOPT_PROXY, "");
    set(c, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(max_body));
    // TLS: the peer and its name checked against the user's root only. The
    // built-in bundle and directory are switched off (NULL), and the
    // system's native store is not asked for.
    set(c, CURLOPT_SSL_VERIFYPEER, 1L);
    set(c, CURLOPT_SSL_VERIFYHOST, 2L);
    set(c, CURLOPT_CAINFO, static_cast<const char*>(nullptr));
    set(c, CURLOPT_CAPATH, static_cast<const char*>(nullptr));
    curl_blob blob{ca_pem_.data(), ca_pem_.size(), CURL_BLOB_NOCOPY};
    set(c, CURLOPT_CAINFO_BLOB, &blob);
    set(c, CURLOPT_SSLVERSION, static_cast<long>(CURL_SSLVERSION_TLSv1_2));
    set(c, CURLOPT_USERAGENT, "tpmkey");
    set(c, CURLOPT_WRITEFUNCTION, on_body);
    set(c, CURLOPT_WRITEDATA, &t);
    set(c, CURLOPT_HEADERFUNCTION, on_header);
    set(c, CURLOPT_HEADERDATA, &t);
    CurlList headers;
    if (body) {
        headers.reset(curl_slist_append(nullptr, ("Content-Type: " + *content_type).c_str()));
        if (!headers)
            throw std::bad_alloc();
        set(c, CURLOPT_HTTPHEADER, headers.get());
        set(c, CURLOPT_POST, 1L);
        set(c, CURLOPT_POSTFIELDS, body->data());
        set(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body->size()));
    }
    const CURLcode rc = curl_easy_perform(c);
    if (t.body_too_large || rc == CURLE_FILESIZE_EXCEEDED)
        throw Error(url + ": the answer is larger than " + std::to_string(max_body / 1024) + " KiB; refused");
    if (t.headers_too_large)
        throw Error(url + ": the answer's headers are larger than " + std::to_string(max_header_bytes / 1024) +
                    " KiB; refused");
    if (rc != CURLE_OK) {
        std::string reason = curl_reason(rc, detail);
        if (rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CACERT_BADFILE || rc == CURLE_SSL_CONNECT_ERROR)
            reason += " (is " + ca_root_.string() + " the root of this CA?)";
        throw Error(url + ": " + reason);
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &t.response.status);
    return std::move(t.response);
}

}  // namespace tpmkey::enroll
