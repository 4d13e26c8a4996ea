#include "webhook_server.hpp"

#include "core/base/error.hpp"
#include "core/base/owned.hpp"
#include "core/base/secret.hpp"
#include "core/files/file_read.hpp"

#include <microhttpd.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

namespace tpmkey {

namespace {

using Clock = std::chrono::steady_clock;

std::string openssl_error() {
    const unsigned long code = ERR_get_error();
    ERR_clear_error();
    if (code == 0)
        return "no detail from OpenSSL";
    char text[256];
    ERR_error_string_n(code, text, sizeof text);
    return text;
}

std::string address_text(const sockaddr* addr) {
    char host[INET6_ADDRSTRLEN] = "?";
    if (addr && addr->sa_family == AF_INET) {
        const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
        ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        return std::string(host) + ":" + std::to_string(ntohs(in->sin_port));
    }
    if (addr && addr->sa_family == AF_INET6) {
        const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
        ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        return "[" + std::string(host) + "]:" + std::to_string(ntohs(in6->sin6_port));
    }
    return "?";
}

// The PEM files as GnuTLS (in libmicrohttpd) takes them, checked first
// with OpenSSL for messages that name the file.
struct TlsFiles {
    std::string certificate;
    Secret key;          // NUL-terminated
    std::string serial;  // the leaf's, hex, for the log of a reload
};

TlsFiles read_tls_files(const std::string& certificate_file, const std::string& key_file) {
    const FileRead cert = read_regular_file(certificate_file, 1024 * 1024);
    FileRead key = read_regular_file(key_file, 1024 * 1024);
    TlsFiles files{std::string(cert.data.begin(), cert.data.end()),
                   Secret(std::span<const std::uint8_t>(key.data.data(), key.data.size())),
                   {}};
    OPENSSL_cleanse(key.data.data(), key.data.size());
    const Owned<BIO, BIO_free> cert_bio(BIO_new_mem_buf(files.certificate.data(), static_cast<int>(cert.data.size())));
    const Owned<X509, X509_free> leaf(cert_bio ? PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr)
                                               : nullptr);
    if (!leaf)
        throw Error("--tls-cert " + certificate_file + ": not a PEM certificate chain: " + openssl_error());
    const Owned<BIO, BIO_free> key_bio(BIO_new_mem_buf(files.key.data(), static_cast<int>(files.key.size())));
    const Owned<EVP_PKEY, EVP_PKEY_free> pkey(
        key_bio ? PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, const_cast<char*>("")) : nullptr);
    if (!pkey)
        throw Error("--tls-key " + key_file + ": not a PEM private key: " + openssl_error());
    if (X509_check_private_key(leaf.get(), pkey.get()) != 1) {
        ERR_clear_error();
        throw Error("--tls-key " + key_file + " is not the key of --tls-cert " + certificate_file);
    }
    const Owned<BIGNUM, BN_free> serial(ASN1_INTEGER_to_BN(X509_get0_serialNumber(leaf.get()), nullptr));
    char* hex = serial ? BN_bn2hex(serial.get()) : nullptr;
    files.serial = hex ? hex : "?";
    OPENSSL_free(hex);
    // GnuTLS wants C strings.
    // (Grown in place: Secret's allocator wipes the buffer it leaves.)
    files.key.push_back('\0');
    return files;
}

int listening_socket(const std::string& listen, std::string& address) {
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
    const int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    const int one = 1;
    if (fd < 0 || ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        ::bind(fd, found->ai_addr, found->ai_addrlen) != 0 || ::listen(fd, 128) != 0) {
        const int error = errno;
        if (fd >= 0)
            ::close(fd);
        throw Error("cannot listen on " + listen + ": " + std::strerror(error));
    }
    sockaddr_storage bound{};
    socklen_t size = sizeof bound;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &size) != 0) {
        const int error = errno;
        ::close(fd);
        throw Error("cannot listen on " + listen + ": " + std::strerror(error));
    }
    address = address_text(reinterpret_cast<const sockaddr*>(&bound));
    return fd;
}

// A connection as the server tracks it: its socket, and when its present
// request's time began (the connection's start, or its last answer).
struct Tracked {
    int fd;
    std::string peer;
    Clock::time_point since;
    bool cut = false;
};

// What the callbacks of one libmicrohttpd daemon share. They run in its
// one thread; the connections' table is read by the main thread too, hence
// its mutex. After a reload two daemons run for a while (the new one, and
// the old one finishing its connections): `handling` is theirs together,
// so that the handler still sees one request at a time.
struct Server {
    const HttpsLimits& limits;
    const std::function<HttpResponse(const HttpRequest&)>& handle;
    std::mutex& handling;
    std::mutex mutex;
    std::map<MHD_Connection*, Tracked> connections;
    unsigned in_flight = 0;  // requests begun, not yet answered and done
    bool retiring = false;   // replaced by a reload: its answers close their connection
};

// One request being read.
struct Reading {
    HttpRequest request;
    bool too_large = false;
};

// libmicrohttpd's own printf format and arguments (its MHD_OPTION_EXTERNAL_LOGGER).
__attribute__((format(printf, 2, 0))) void log_from_library(void*, const char* format, va_list args) {
    char text[512];
    std::vsnprintf(text, sizeof text, format, args);
    std::string line = text;
    while (!line.empty() && line.back() == '\n')
        line.pop_back();
    std::cerr << "tpmkey-ca webhook: libmicrohttpd: " << line << "\n";
}

void on_connection(void* cls, MHD_Connection* connection, void**, MHD_ConnectionNotificationCode code) {
    auto& server = *static_cast<Server*>(cls);
    const std::lock_guard<std::mutex> lock(server.mutex);
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        server.connections.erase(connection);
        return;
    }
    const MHD_ConnectionInfo* fd = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    const MHD_ConnectionInfo* peer = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (fd)
        server.connections[connection] = {fd->connect_fd, address_text(peer ? peer->client_addr : nullptr),
                                          Clock::now()};
}

MHD_Result send_answer(Server& server, MHD_Connection* connection, const HttpResponse& answer) {
    MHD_Response* response = MHD_create_response_from_buffer(answer.body.size(), const_cast<char*>(answer.body.data()),
                                                             MHD_RESPMEM_MUST_COPY);
    if (!response)
        return MHD_NO;
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    bool retiring;
    {
        const std::lock_guard<std::mutex> lock(server.mutex);
        retiring = server.retiring;
    }
    // A daemon a reload replaced: the client's next request goes on a new
    // connection, to the new daemon (step-ca's Go client keeps connections
    // alive otherwise).
    if (retiring)
        MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
    const MHD_Result queued = MHD_queue_response(connection, static_cast<unsigned>(answer.status), response);
    MHD_destroy_response(response);
    return queued;
}

MHD_Result collect_header(void* cls, MHD_ValueKind, const char* name, const char* value) {
    auto& headers = *static_cast<std::map<std::string, std::string>*>(cls);
    std::string lower = name ? name : "";
    for (char& c : lower)
        if (c >= 'A' && c <= 'Z')
            c = static_cast<char>(c - 'A' + 'a');
    headers.emplace(lower, value ? value : "");
    return MHD_YES;
}

HttpResponse handled(Server& server, const HttpRequest& request) {
    const std::lock_guard<std::mutex> lock(server.handling);
    try {
        return server.handle(request);
    } catch (const std::exception& e) {
        std::cerr << "tpmkey-ca webhook: " << request.peer << ": " << e.what() << "\n";
        return {500, R"({"allow":false})"};
    }
}

MHD_Result on_request(void* cls, MHD_Connection* connection, const char* url, const char* method, const char*,
                      const char* upload_data, std::size_t* upload_data_size, void** request_state) {
    auto& server = *static_cast<Server*>(cls);
    auto* reading = static_cast<Reading*>(*request_state);
    if (!reading) {
        // The head is whole: the first call.
        reading = new Reading;
        *request_state = reading;
        {
            const std::lock_guard<std::mutex> lock(server.mutex);
            ++server.in_flight;
        }
        HttpRequest& request = reading->request;
        request.method = method ? method : "";
        request.target = url ? url : "";
        MHD_get_connection_values(connection, MHD_HEADER_KIND, collect_header, &request.headers);
        const MHD_ConnectionInfo* peer = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        request.peer = address_text(peer ? peer->client_addr : nullptr);
        const auto length = request.headers.find("content-length");
        std::size_t size = 0;
        if (length != request.headers.end()) {
            const std::string& text = length->second;
            const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), size);
            if (error != std::errc() || end != text.data() + text.size() || size > server.limits.max_body) {
                // Answered before the body is read: libmicrohttpd closes
                // the connection after the answer.
                request.refusal_status = 413;
                request.refusal = "its body is over " + std::to_string(server.limits.max_body) + " bytes";
                return send_answer(server, connection, handled(server, request));
            }
        }
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        // A chunked body has no Content-Length: the same bound, as it comes.
        if (reading->request.body.size() + *upload_data_size > server.limits.max_body)
            reading->too_large = true;
        else
            reading->request.body.append(upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (reading->too_large) {
        reading->request.refusal_status = 413;
        reading->request.refusal = "its body is over " + std::to_string(server.limits.max_body) + " bytes";
        reading->request.body.clear();
    }
    return send_answer(server, connection, handled(server, reading->request));
}

void on_completed(void* cls, MHD_Connection* connection, void** request_state, MHD_RequestTerminationCode) {
    auto& server = *static_cast<Server*>(cls);
    const std::lock_guard<std::mutex> lock(server.mutex);
    if (*request_state) {
        delete static_cast<Reading*>(*request_state);
        *request_state = nullptr;
        --server.in_flight;
    }
    // The next request on this connection has its own time.
    const auto tracked = server.connections.find(connection);
    if (tracked != server.connections.end())
        tracked->second.since = Clock::now();
}

// Cuts each connection whose request took longer than the limit: shut
// down, not closed, so libmicrohttpd sees its end and closes the socket
// itself (the table's mutex keeps the socket open meanwhile: it is closed
// only after its CLOSED notice).
void cut_slow_connections(Server& server) {
    const std::lock_guard<std::mutex> lock(server.mutex);
    const Clock::time_point now = Clock::now();
    for (auto& [connection, tracked] : server.connections)
        if (!tracked.cut && now - tracked.since > server.limits.request_time) {
            tracked.cut = true;
            ::shutdown(tracked.fd, SHUT_RDWR);
            std::cerr << "tpmkey-ca webhook: " << tracked.peer << ": dropped the connection: no whole request within "
                      << server.limits.request_time.count() << " s (TLS handshake or request too slow, or idle)\n";
        }
}

// One libmicrohttpd daemon with the certificate it serves: the present
// one, or one a reload replaced, quiesced (it accepts no connection) until
// its connections are done.
struct Instance {
    Instance(TlsFiles files, const HttpsLimits& limits, const std::function<HttpResponse(const HttpRequest&)>& handle,
             std::mutex& handling)
        : tls(std::move(files)), server{limits, handle, handling, {}, {}, 0, false} {}
    ~Instance() {
        // Quiesced first: a daemon stopped otherwise closes its listening
        // socket itself; then the socket, its own duplicate, is closed here.
        if (daemon) {
            MHD_quiesce_daemon(daemon);
            MHD_stop_daemon(daemon);
            ::close(socket);
        }
    }
    Instance(const Instance&) = delete;
    Instance& operator=(const Instance&) = delete;

    // Whether it has no connection left: it may be stopped.
    bool drained() {
        const std::lock_guard<std::mutex> lock(server.mutex);
        return server.connections.empty() && server.in_flight == 0;
    }

    TlsFiles tls;  // kept while the daemon runs: it was given their memory
    Server server;
    MHD_Daemon* daemon = nullptr;
    int socket = -1;  // its duplicate of the listening socket
    Clock::time_point retired{};
};

// Starts a daemon on a duplicate of `listener`, which another daemon may
// listen on too (that one is quiesced next: the socket stays open, so no
// connection is refused meanwhile). Its own duplicate because
// libmicrohttpd closes the socket it was given when it fails to start
// (0.9.75: a certificate chain GnuTLS refuses, no thread): the serving
// daemon's socket must survive a reload that fails so. Throws Error.
std::unique_ptr<Instance> start_instance(int listener, const std::string& address, TlsFiles files,
                                         const HttpsLimits& limits,
                                         const std::function<HttpResponse(const HttpRequest&)>& handle,
                                         std::mutex& handling) {
    auto instance = std::make_unique<Instance>(std::move(files), limits, handle, handling);
    Server& server = instance->server;
    const int socket = ::fcntl(listener, F_DUPFD_CLOEXEC, 0);
    if (socket < 0)
        throw Error("cannot serve HTTPS on " + address + ": " + std::strerror(errno));
    instance->daemon = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_TLS | MHD_USE_ITC | MHD_USE_ERROR_LOG, 0, nullptr,
        nullptr, on_request, &server, MHD_OPTION_EXTERNAL_LOGGER, log_from_library, nullptr, MHD_OPTION_LISTEN_SOCKET,
        socket, MHD_OPTION_HTTPS_MEM_CERT, instance->tls.certificate.c_str(), MHD_OPTION_HTTPS_MEM_KEY,
        reinterpret_cast<const char*>(instance->tls.key.data()), MHD_OPTION_CONNECTION_LIMIT, limits.max_connections,
        MHD_OPTION_CONNECTION_TIMEOUT, static_cast<unsigned>(limits.request_time.count()),
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, limits.connection_memory, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
        &server, MHD_OPTION_NOTIFY_CONNECTION, on_connection, &server, MHD_OPTION_END);
    // When it did not start, the duplicate is left alone: libmicrohttpd
    // may have closed it already, and its number may be another file's
    // by now (one descriptor lost per failed start at most).
    if (!instance->daemon)
        throw Error("cannot serve HTTPS on " + address +
                    ": libmicrohttpd did not start (its message above says why; GnuTLS may refuse --tls-cert or "
                    "--tls-key)");
    instance->socket = socket;
    return instance;
}

}  // namespace

void serve_https(const std::string& listen, const std::string& certificate_file, const std::string& key_file,
                 const HttpsLimits& limits, const std::function<void(const std::string&)>& ready,
                 const std::function<HttpResponse(const HttpRequest&)>& handle, const HttpsReload& reload) {
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES || MHD_is_feature_supported(MHD_FEATURE_POLL) != MHD_YES)
        throw Error("this libmicrohttpd has no TLS or no poll support: install Debian's libmicrohttpd12");
    TlsFiles tls = read_tls_files(certificate_file, key_file);
    std::string address;
    const int listener = listening_socket(listen, address);

    // SIGTERM and SIGINT (stop) and SIGHUP (reload) are taken by
    // sigtimedwait() below: blocked before libmicrohttpd's threads start,
    // so that they inherit the mask.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    std::mutex handling;
    std::unique_ptr<Instance> serving;
    try {
        serving = start_instance(listener, address, std::move(tls), limits, handle, handling);
    } catch (const Error&) {
        ::close(listener);
        throw;
    }
    std::list<std::unique_ptr<Instance>> retired;
    ready(address);

    const timespec second{1, 0};
    while (true) {
        const int signal = sigtimedwait(&signals, nullptr, &second);
        if (signal == SIGTERM || signal == SIGINT)
            break;
        if (signal == SIGHUP) {
            // Everything read and checked, and the new daemon started,
            // before anything changes: a bad file leaves all as it was.
            try {
                const std::function<void()> use = reload ? reload() : std::function<void()>();
                std::unique_ptr<Instance> next = start_instance(
                    listener, address, read_tls_files(certificate_file, key_file), limits, handle, handling);
                {
                    const std::lock_guard<std::mutex> lock(handling);
                    if (use)
                        use();
                }
                MHD_quiesce_daemon(serving->daemon);
                {
                    const std::lock_guard<std::mutex> lock(serving->server.mutex);
                    serving->server.retiring = true;
                }
                serving->retired = Clock::now();
                retired.push_back(std::move(serving));
                serving = std::move(next);
                std::cerr << "tpmkey-ca webhook: reloaded (SIGHUP): serving the certificate of --tls-cert "
                          << certificate_file << " (serial " << serving->tls.serial
                          << "); the connections begun before are answered with the previous one\n";
            } catch (const std::exception& e) {
                std::cerr << "tpmkey-ca webhook: reload (SIGHUP) refused, still serving the previous certificate "
                             "and secrets: "
                          << e.what() << "\n";
            }
        }
        cut_slow_connections(serving->server);
        // A replaced daemon stops once its connections are done: idle ones
        // are cut as always (request_time), and a request begun is given
        // shutdown_time more to be answered. Not in its first second: a
        // connection it accepted just before the quiesce is in its table
        // only after the TLS set-up (libmicrohttpd notifies it then).
        for (auto old = retired.begin(); old != retired.end();) {
            cut_slow_connections((*old)->server);
            const Clock::duration since = Clock::now() - (*old)->retired;
            if ((since > std::chrono::seconds(1) && (*old)->drained()) ||
                since > limits.request_time + limits.shutdown_time)
                old = retired.erase(old);
            else
                ++old;
        }
    }
    // Graceful: no new connection; the requests begun are answered.
    std::cerr << "tpmkey-ca webhook: stopping: answering the requests in flight\n";
    MHD_quiesce_daemon(serving->daemon);
    retired.push_back(std::move(serving));
    const Clock::time_point until = Clock::now() + limits.shutdown_time;
    while (Clock::now() < until) {
        bool answered = true;
        for (const auto& instance : retired) {
            const std::lock_guard<std::mutex> lock(instance->server.mutex);
            answered = answered && instance->server.in_flight == 0;
        }
        if (answered)
            break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    retired.clear();
    // Quiesced daemons leave the listening socket to its owner.
    ::close(listener);
}

}  // namespace tpmkey
