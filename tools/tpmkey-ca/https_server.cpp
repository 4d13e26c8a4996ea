#include "https_server.hpp"

#include "core/base/error.hpp"
#include "core/base/owned.hpp"

#include <openssl/err.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <iostream>

namespace tpmkey {

namespace {

std::string openssl_error() {
    const unsigned long code = ERR_get_error();
    ERR_clear_error();
    if (code == 0)
        return "no detail from OpenSSL";
    char text[256];
    ERR_error_string_n(code, text, sizeof text);
    return text;
}

std::string lower(std::string text) {
    for (char& c : text)
        if (c >= 'A' && c <= 'Z')
            c = static_cast<char>(c - 'A' + 'a');
    return text;
}

std::string trim(const std::string& text) {
    const std::size_t begin = text.find_first_not_of(" \t");
    if (begin == std::string::npos)
        return {};
    return text.substr(begin, text.find_last_not_of(" \t") + 1 - begin);
}

std::string address_text(const sockaddr_storage& addr) {
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (addr.ss_family == AF_INET) {
        const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
        ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        port = ntohs(in->sin_port);
        return std::string(host) + ":" + std::to_string(port);
    }
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    port = ntohs(in6->sin6_port);
    return "[" + std::string(host) + "]:" + std::to_string(port);
}

const char* reason_phrase(int status) {
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 431: return "Request Header Fields Too Large";
    default: return "Internal Server Error";
    }
}

// A request the connection cannot go on with: its status and why.
struct Refusal {
    int status;
    std::string why;
};

using Clock = std::chrono::steady_clock;

// After an SSL call on the non-blocking socket `fd` returned `ret`: waits
// until the socket is ready for what OpenSSL wants, at most until
// `deadline`. False for any other outcome, or when the time is up.
bool wait_for(SSL* ssl, int ret, int fd, Clock::time_point deadline) {
    const int error = SSL_get_error(ssl, ret);
    const short events = error == SSL_ERROR_WANT_READ ? POLLIN : error == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
    if (events == 0)
        return false;  // OpenSSL's error queue says why
    while (true) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0)
            return false;
        pollfd p{fd, events, 0};
        const int ready = ::poll(&p, 1, static_cast<int>(left));
        if (ready >= 0 || errno != EINTR)
            return ready == 1;
    }
}

// One connection, every step of it (the TLS handshake too) within one
// deadline: a client that sends a byte now and then cannot hold the
// server longer.
class Connection {
public:
    Connection(SSL* ssl, int fd, Clock::time_point deadline) : ssl_(ssl), fd_(fd), deadline_(deadline) {}

    bool handshake() {
        int ret;
        while ((ret = SSL_accept(ssl_)) != 1)
            if (!wait_for(ssl_, ret, fd_, deadline_))
                return false;
        return true;
    }

    // Up to `max` more bytes into `out`; false at the end of the stream.
    bool read_some(std::string& out, std::size_t max) {
        char buffer[4096];
        std::size_t got = 0;
        int ret;
        while ((ret = SSL_read_ex(ssl_, buffer, std::min(max, sizeof buffer), &got)) != 1) {
            if (SSL_get_error(ssl_, ret) == SSL_ERROR_ZERO_RETURN) {
                ERR_clear_error();
                return false;
            }
            if (!wait_for(ssl_, ret, fd_, deadline_)) {
                ERR_clear_error();
                throw Refusal{408, "the request took too long, or the client went away"};
            }
        }
        out.append(buffer, got);
        return true;
    }

    // The client that went away or stopped reading gets no more.
    void write(const std::string& data) {
        std::size_t written = 0;
        int ret;
        while ((ret = SSL_write_ex(ssl_, data.data(), data.size(), &written)) != 1)
            if (!wait_for(ssl_, ret, fd_, deadline_)) {
                ERR_clear_error();
                return;
            }
    }

    void shutdown() {
        // One try: the answer is sent; a client that does not answer the
        // close_notify does not hold the server.
        (void)SSL_shutdown(ssl_);
        ERR_clear_error();
        // A request refused before it was read whole leaves bytes unread:
        // closing now would reset the connection, and the client could
        // lose the answer. Read what comes for at most a second (RFC 9112
        // 9.6, tear-down).
        ::shutdown(fd_, SHUT_WR);
        const Clock::time_point until = std::min(deadline_, Clock::now() + std::chrono::seconds(1));
        char sink[4096];
        std::size_t drained = 0;
        while (drained < 1024 * 1024) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
            pollfd p{fd_, POLLIN, 0};
            if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) != 1)
                return;
            const ssize_t got = ::recv(fd_, sink, sizeof sink, 0);
            if (got <= 0)
                return;
            drained += static_cast<std::size_t>(got);
        }
    }

private:
    SSL* ssl_;
    int fd_;
    Clock::time_point deadline_;
};

HttpRequest read_request(Connection& connection, const HttpsLimits& limits) {
    std::string data;
    std::size_t head_end;
    while ((head_end = data.find("\r\n\r\n")) == std::string::npos) {
        if (data.size() > limits.max_head)
            throw Refusal{431, "its head is over " + std::to_string(limits.max_head) + " bytes"};
        if (!connection.read_some(data, limits.max_head + 4 - data.size()))
            throw Refusal{400, "it ended before its head did"};
    }
    HttpRequest request;
    std::string head = data.substr(0, head_end);
    std::size_t line_end = head.find("\r\n");
    const std::string request_line = head.substr(0, line_end);
    const std::size_t space1 = request_line.find(' ');
    const std::size_t space2 = request_line.rfind(' ');
    if (space1 == std::string::npos || space2 == space1 || request_line.substr(space2 + 1) != "HTTP/1.1")
        throw Refusal{400, "not an HTTP/1.1 request line"};
    request.method = request_line.substr(0, space1);
    request.target = request_line.substr(space1 + 1, space2 - space1 - 1);
    while (line_end != std::string::npos) {
        const std::size_t start = line_end + 2;
        line_end = head.find("\r\n", start);
        const std::string line =
            head.substr(start, line_end == std::string::npos ? std::string::npos : line_end - start);
        const std::size_t colon = line.find(':');
        if (colon == std::string::npos || colon == 0 || line.find_first_of(" \t") < colon)
            throw Refusal{400, "a header line without a name"};
        const std::string name = lower(line.substr(0, colon));
        if (request.headers.count(name))
            throw Refusal{400, "the header " + name + " twice"};
        request.headers[name] = trim(line.substr(colon + 1));
    }
    if (request.headers.count("transfer-encoding"))
        throw Refusal{411, "a body without Content-Length"};
    std::size_t length = 0;
    if (request.headers.count("content-length")) {
        const std::string& text = request.headers["content-length"];
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), length);
        if (error != std::errc() || end != text.data() + text.size() || text.empty())
            throw Refusal{400, "a Content-Length that is not a number"};
        if (length > limits.max_body)
            throw Refusal{413, "a body over " + std::to_string(limits.max_body) + " bytes"};
    }
    request.body = data.substr(head_end + 4);
    while (request.body.size() < length)
        if (!connection.read_some(request.body, length - request.body.size()))
            throw Refusal{400, "it ended before its body did"};
    if (request.body.size() != length)
        throw Refusal{400, "more bytes than its Content-Length"};
    return request;
}

void respond(Connection& connection, const HttpResponse& response) {
    connection.write("HTTP/1.1 " + std::to_string(response.status) + " " + reason_phrase(response.status) +
                     "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(response.body.size()) +
                     "\r\nConnection: close\r\n\r\n" + response.body);
}

}  // namespace

HttpsServer::HttpsServer(const std::string& listen, const std::string& certificate_file, const std::string& key_file,
                         HttpsLimits limits)
    : limits_(limits) {
    const std::size_t colon = listen.rfind(':');
    std::string host = colon == std::string::npos ? std::string() : listen.substr(0, colon);
    const std::string port = colon == std::string::npos ? std::string() : listen.substr(colon + 1);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']')
        host = host.substr(1, host.size() - 2);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV;
    addrinfo* found = nullptr;
    if (host.empty() || port.empty() || ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0)
        throw Error("--listen " + listen + ": not an IP address and port (e.g. 127.0.0.1:8443, [::1]:8443)");
    const Owned<addrinfo, ::freeaddrinfo> owner(found);

    ctx_ = SSL_CTX_new(TLS_server_method());
    if (!ctx_ || SSL_CTX_set_min_proto_version(ctx_, TLS1_2_VERSION) != 1)
        throw Error("cannot make a TLS context: " + openssl_error());
    if (SSL_CTX_use_certificate_chain_file(ctx_, certificate_file.c_str()) != 1)
        throw Error("--tls-cert " + certificate_file + ": not a PEM certificate chain: " + openssl_error());
    if (SSL_CTX_use_PrivateKey_file(ctx_, key_file.c_str(), SSL_FILETYPE_PEM) != 1)
        throw Error("--tls-key " + key_file + ": not a PEM private key: " + openssl_error());
    if (SSL_CTX_check_private_key(ctx_) != 1)
        throw Error("--tls-key " + key_file + " is not the key of --tls-cert " + certificate_file);

    listener_ = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    if (listener_ < 0 || ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        ::bind(listener_, found->ai_addr, found->ai_addrlen) != 0 || ::listen(listener_, 16) != 0)
        throw Error("cannot listen on " + listen + ": " + std::strerror(errno));
    sockaddr_storage bound{};
    socklen_t size = sizeof bound;
    if (::getsockname(listener_, reinterpret_cast<sockaddr*>(&bound), &size) != 0)
        throw Error("cannot listen on " + listen + ": " + std::strerror(errno));
    address_ = address_text(bound);
}

HttpsServer::~HttpsServer() {
    if (listener_ >= 0)
        ::close(listener_);
    SSL_CTX_free(ctx_);
}

void HttpsServer::serve(const std::function<HttpResponse(const HttpRequest&)>& handle) {
    while (true) {
        sockaddr_storage peer{};
        socklen_t size = sizeof peer;
        const int fd = ::accept4(listener_, reinterpret_cast<sockaddr*>(&peer), &size, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EINTR && errno != ECONNABORTED)
                std::cerr << "tpmkey-ca webhook: accept: " << std::strerror(errno) << "\n";
            continue;
        }
        serve_one(fd, address_text(peer), handle);
        ::close(fd);
    }
}

void HttpsServer::serve_one(int fd, const std::string& peer,
                            const std::function<HttpResponse(const HttpRequest&)>& handle) {
    const int flags = ::fcntl(fd, F_GETFL);
    const Owned<SSL, SSL_free> ssl(SSL_new(ctx_));
    if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0 || !ssl || SSL_set_fd(ssl.get(), fd) != 1) {
        std::cerr << "tpmkey-ca webhook: " << peer << ": cannot start TLS: " << openssl_error() << "\n";
        return;
    }
    Connection connection(ssl.get(), fd, Clock::now() + limits_.connection_time);
    if (!connection.handshake()) {
        std::cerr << "tpmkey-ca webhook: " << peer << ": TLS handshake failed or took too long: " << openssl_error()
                  << "\n";
        return;
    }
    HttpResponse response;
    try {
        HttpRequest request = read_request(connection, limits_);
        request.peer = peer;
        response = handle(request);
    } catch (const Refusal& refusal) {
        std::cerr << "tpmkey-ca webhook: " << peer << ": refused a request: " << refusal.why << "\n";
        response = {refusal.status, R"({"allow":false})"};
    } catch (const std::exception& e) {
        std::cerr << "tpmkey-ca webhook: " << peer << ": " << e.what() << "\n";
        response = {500, R"({"allow":false})"};
    }
    respond(connection, response);
    connection.shutdown();
}

}  // namespace tpmkey
