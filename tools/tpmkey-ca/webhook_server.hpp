// The HTTPS server of tpmkey-ca webhook (docs/design.md, "The webhook's
// HTTPS server"): libmicrohttpd, event-driven (one internal thread on
// epoll), TLS through GnuTLS. An idle or slow client holds a connection
// slot, never the thread: the webhook answers others meanwhile. Bounded:
// connections at once, each connection's time until its request is whole
// (the TLS handshake too), the head (memory limit) and the body of a
// request. SIGTERM or SIGINT stops it gracefully; SIGHUP reloads its
// certificate (and, through the caller, its secrets) with no gap: a second
// daemon on the same listening socket, the first one quiesced.
#pragma once

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
    // Set when the server refuses the request itself (its body is over the
    // limit): the status to answer and why; the handler only records it.
    int refusal_status = 0;
    std::string refusal;
};

struct HttpResponse {
    int status = 200;
    std::string body;  // sent as application/json
};

struct HttpsLimits {
    std::size_t max_body = 64 * 1024;
    // Memory for a connection's head and buffers (libmicrohttpd's
    // MHD_OPTION_CONNECTION_MEMORY_LIMIT): bounds the request's head.
    std::size_t connection_memory = 32 * 1024;
    unsigned max_connections = 512;
    // From a connection's start, or its last answer, until its next request
    // is whole: a client that trickles a byte now and then is cut here.
    std::chrono::seconds request_time{10};
    // On SIGTERM: how long answers in flight may take before it exits.
    std::chrono::seconds shutdown_time{10};
};

// On SIGHUP, in the main thread: reads again and checks what `handle` uses
// (the webhook's secrets), throwing Error when it is not good; returns what
// puts it in use. That is called only once the certificate read again
// serves, and with no request being handled; on any error nothing changes.
using HttpsReload = std::function<std::function<void()>()>;

// Listens on ADDRESS:PORT (an IPv4 address, or an IPv6 one in brackets;
// port 0 picks a free one) with the certificate chain and key of the PEM
// files, calls `ready` with the address and port it listens on, and serves:
// each request goes to `handle` (one at a time). On SIGHUP it reads the
// PEM files again and calls `reload`: when all is good the new certificate
// serves new connections at once, while those begun are answered as
// before; otherwise it logs why and nothing changes. Returns when SIGTERM
// or SIGINT came and the answers in flight are sent. Throws Error when it
// cannot start.
void serve_https(const std::string& listen, const std::string& certificate_file, const std::string& key_file,
                 const HttpsLimits& limits, const std::function<void(const std::string&)>& ready,
                 const std::function<HttpResponse(const HttpRequest&)>& handle, const HttpsReload& reload);

}  // namespace tpmkey
