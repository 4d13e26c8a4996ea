// A small HTTPS/1.1 server for tpmkey-ca webhook (docs/attestation.md,
// "step-ca"): OpenSSL's SSL server API over one listening TCP socket, one
// connection at a time, one request per connection (Connection: close).
// Every request is bounded: its head and body in size, the connection in
// time; anything else is answered with an error status and dropped.
#pragma once

#include <openssl/ssl.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <string>

namespace tpmkey {

struct HttpRequest {
    std::string method, target;
    std::map<std::string, std::string> headers;  // names in lower case
    std::string body;
    std::string peer;  // the client's address, for messages
};

struct HttpResponse {
    int status = 200;
    std::string body;  // sent as application/json
};

struct HttpsLimits {
    std::size_t max_head = 8 * 1024;
    std::size_t max_body = 64 * 1024;
    std::chrono::seconds connection_time{10};
};

class HttpsServer {
public:
    // Listens on ADDRESS:PORT (an IPv4 address, or an IPv6 one in
    // brackets; port 0 picks a free one) with the certificate chain and key
    // of the PEM files. Throws Error when it cannot.
    HttpsServer(const std::string& listen, const std::string& certificate_file, const std::string& key_file,
                HttpsLimits limits = {});
    ~HttpsServer();
    HttpsServer(const HttpsServer&) = delete;
    HttpsServer& operator=(const HttpsServer&) = delete;

    // The address and port it listens on ("127.0.0.1:8443").
    std::string address() const { return address_; }

    // Serves forever: each well-formed request goes to `handle`; what goes
    // wrong with one connection is written to standard error, and the next
    // is served.
    [[noreturn]] void serve(const std::function<HttpResponse(const HttpRequest&)>& handle);

private:
    void serve_one(int fd, const std::string& peer, const std::function<HttpResponse(const HttpRequest&)>& handle);
    HttpsLimits limits_;
    SSL_CTX* ctx_ = nullptr;
    int listener_ = -1;
    std::string address_;
};

}  // namespace tpmkey
