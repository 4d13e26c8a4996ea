#include "core/tpm/tcti_timeout.hpp"

#include "core/base/log.hpp"

#include <tss2/tss2_tctildr.h>
#include <tss2/tss2_tpm2_types.h>

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <set>

namespace tpmkey {

namespace {

// "TCTI", so that a context of ours is told apart from tpm2-tss's.
constexpr std::uint64_t magic = 0x74706d6b65795443;

bool generates_key(const uint8_t* command, size_t size) {
    if (size < 10)
        return false;
    const TPM2_CC code = TPM2_CC(command[6]) << 24 | TPM2_CC(command[7]) << 16 | TPM2_CC(command[8]) << 8 | command[9];
    return code == TPM2_CC_Create || code == TPM2_CC_CreatePrimary || code == TPM2_CC_CreateLoaded;
}

// The inner context's function table. tpm2-tss's Tss2_Tcti_* macros do
// the same with C casts; Tss2_TctiLdr_Initialize always makes a version 2
// context with every function set.
const TSS2_TCTI_CONTEXT_COMMON_V2& table(TSS2_TCTI_CONTEXT* context) {
    return *reinterpret_cast<const TSS2_TCTI_CONTEXT_COMMON_V2*>(context);
}

// The socket descriptors this process has open (none if that cannot be
// read: this runs under a C caller, nothing may throw).
std::set<int> open_sockets() noexcept try {
    std::set<int> sockets;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
        const std::string name = entry.path().filename().string();
        int fd = -1;
        struct stat st {};
        if (std::from_chars(name.data(), name.data() + name.size(), fd).ec == std::errc() && ::fstat(fd, &st) == 0 &&
            S_ISSOCK(st.st_mode))
            sockets.insert(fd);
    }
    return sockets;
} catch (...) {
    return {};
}

using Deadline = std::chrono::steady_clock::time_point;

// What poll() is given: the milliseconds until `deadline`, at least 0.
int ms_until(Deadline deadline) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    return static_cast<int>(std::max<std::chrono::milliseconds::rep>(left.count(), 0));
}

// Waits, at most until `deadline`, for the rest of an answer whose first
// bytes are readable on `fd`. The inner TCTI reads the rest with blocking
// reads of its own (tcti-swtpm, tcti-tabrmd: the 10-byte header, then as
// many bytes as it says), which half an answer, or one sent a byte at a
// time, would hold without end. On a socket that carries the TPM's answer
// as it is (swtpm, tpm2-abrmd) the header's size says when it is whole.
// Anything else is the inner receive's to read and report: a device (its
// read returns a whole answer), another framing, an answer cut short by a
// closed connection, a size no answer can have (diagnosis.cpp names it).
bool rest_of_answer_within(int fd, Deadline deadline) {
    std::array<std::uint8_t, TPM2_MAX_RESPONSE_SIZE> head{};
    for (;;) {
        const ssize_t n = ::recv(fd, head.data(), head.size(), MSG_PEEK | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if ((n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) || n == 0)
            return true;
        if (n >= 6) {
            if (head[0] != 0x80 || (head[1] != 0x01 && head[1] != 0x02))  // TPM_ST_NO_SESSIONS, TPM_ST_SESSIONS
                return true;
            const std::uint32_t size =
                std::uint32_t(head[2]) << 24 | std::uint32_t(head[3]) << 16 | std::uint32_t(head[4]) << 8 | head[5];
            if (size < 10 || size > head.size() || static_cast<std::uint32_t>(n) >= size)
                return true;
        }
        const int left = ms_until(deadline);
        if (left == 0)
            return false;
        // poll() cannot wait for more than is there already: look again
        // shortly, or as soon as the other end closes.
        pollfd closed{.fd = fd, .events = POLLRDHUP, .revents = 0};
        if (::poll(&closed, 1, std::min(left, 10)) > 0)
            return true;
    }
}

}  // namespace

TimeoutTcti::TimeoutTcti(TSS2_TCTI_CONTEXT* inner, std::string tcti, std::optional<std::chrono::seconds> bound)
    : inner_(inner), tcti_(std::move(tcti)), setting_(bound) {
    table_.common.v1.magic = magic;
    table_.common.v1.version = 2;
    table_.common.v1.transmit = transmit;
    table_.common.v1.receive = receive;
    table_.common.v1.finalize = finalize;
    table_.common.v1.cancel = cancel;
    table_.common.v1.getPollHandles = get_poll_handles;
    table_.common.v1.setLocality = set_locality;
    table_.common.makeSticky = make_sticky;
    table_.self = this;
}

TimeoutTcti::~TimeoutTcti() { Tss2_TctiLdr_Finalize(&inner_); }

TimeoutTcti& TimeoutTcti::of(TSS2_TCTI_CONTEXT* context) noexcept { return *reinterpret_cast<Table*>(context)->self; }

TSS2_RC TimeoutTcti::transmit(TSS2_TCTI_CONTEXT* context, size_t size, const uint8_t* command) {
    TimeoutTcti& t = of(context);
    if (t.gone_)
        return TSS2_TCTI_RC_IO_ERROR;
    t.bound_ = t.setting_                     ? *t.setting_
               : generates_key(command, size) ? default_key_generation_timeout
                                              : default_tpm_timeout;
    t.waited_ = false;
    t.new_socket_ = -1;
    // tcti-swtpm opens a new connection in every transmit and offers no
    // poll handle: the one socket that appears during transmit is where
    // its answer will come. (Another thread opening a socket meanwhile
    // makes it ambiguous; then only the inner TCTI's own timeout applies.)
    size_t handles = 0;
    const bool pollable =
        table(t.inner_).v1.getPollHandles(t.inner_, nullptr, &handles) == TSS2_RC_SUCCESS && handles > 0;
    const std::set<int> before = pollable ? std::set<int>() : open_sockets();
    const TSS2_RC rc = table(t.inner_).v1.transmit(t.inner_, size, command);
    if (!pollable && rc == TSS2_RC_SUCCESS) {
        std::set<int> added;
        for (int fd : open_sockets())
            if (!before.count(fd))
                added.insert(fd);
        if (added.size() == 1)
            t.new_socket_ = *added.begin();
    }
    return rc;
}

// Waits until the whole answer can be read, at most the bound. The TCTIs of
// tpm2-tss 3.2.1 differ: tcti-device (poll on the fd) and tcti-mssim
// (socket_poll) honour the receive timeout and offer poll handles, as does
// tpm2-abrmd's tcti-tabrmd; tcti-swtpm ignores the timeout ("Asynchronous
// I/O not actually implemented") and blocks in recv. Polling here covers
// them all; the bound is also passed to the inner receive.
bool TimeoutTcti::wait_for_answer() const {
    std::array<TSS2_TCTI_POLL_HANDLE, 4> fds{};
    size_t count = fds.size();
    if (table(inner_).v1.getPollHandles(inner_, fds.data(), &count) != TSS2_RC_SUCCESS || count == 0) {
        if (new_socket_ < 0)
            return true;  // nothing to wait on: the inner TCTI's timeout is all we have
        fds[0] = pollfd{.fd = new_socket_, .events = 0, .revents = 0};
        count = 1;
    }
    for (size_t i = 0; i < count; ++i)
        fds[i].events = POLLIN;
    const Deadline deadline = std::chrono::steady_clock::now() + bound_;
    for (;;) {
        const int left = ms_until(deadline);
        if (left == 0)
            return false;
        const int n = ::poll(fds.data(), count, left);
        if (n > 0)
            break;
        if (n == 0)
            return false;
        if (errno != EINTR)
            return true;  // let the inner receive report the failure
    }
    for (size_t i = 0; i < count; ++i)
        if (fds[i].revents & POLLIN)
            return rest_of_answer_within(fds[i].fd, deadline);
    return true;
}

TSS2_RC TimeoutTcti::timed_out() {
    gone_ = true;
    log_error("the TPM did not answer within " + std::to_string(bound_.count()) + " s (TCTI '" +
              (tcti_.empty() ? std::string("the tpm2-tss default") : tcti_) +
              "'): it is hung or very busy. Restart it (or the machine), or if it is only slow allow it more "
              "time: TPMKEY_TPM_TIMEOUT=SECONDS or a 'timeout SECONDS' line in the config file");
    return TSS2_TCTI_RC_IO_ERROR;
}

TSS2_RC TimeoutTcti::receive(TSS2_TCTI_CONTEXT* context, size_t* size, uint8_t* response, int32_t timeout) {
    TimeoutTcti& t = of(context);
    if (t.gone_)
        return TSS2_TCTI_RC_IO_ERROR;
    const auto bound_ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.bound_).count();
    // A caller's own shorter timeout (asynchronous ESAPI) is its business.
    if (timeout != TSS2_TCTI_TIMEOUT_BLOCK && timeout < bound_ms)
        return table(t.inner_).v1.receive(t.inner_, size, response, timeout);
    if (!t.waited_ && !t.wait_for_answer())
        return t.timed_out();
    t.waited_ = true;  // a second receive (size first, then data) must not wait for more
    const TSS2_RC rc = table(t.inner_).v1.receive(t.inner_, size, response, static_cast<int32_t>(bound_ms));
    return rc == TSS2_TCTI_RC_TRY_AGAIN ? t.timed_out() : rc;
}

TSS2_RC TimeoutTcti::exchange(const uint8_t* command, size_t size, uint8_t* answer, size_t* answer_size) {
    const TSS2_RC rc = transmit(context(), size, command);
    return rc != TSS2_RC_SUCCESS ? rc : receive(context(), answer_size, answer, TSS2_TCTI_TIMEOUT_BLOCK);
}

void TimeoutTcti::finalize(TSS2_TCTI_CONTEXT*) {
    // Nothing: the owner of this object finalizes the inner TCTI (~TimeoutTcti).
}

TSS2_RC TimeoutTcti::cancel(TSS2_TCTI_CONTEXT* context) {
    TSS2_TCTI_CONTEXT* inner = of(context).inner_;
    return table(inner).v1.cancel(inner);
}

TSS2_RC TimeoutTcti::get_poll_handles(TSS2_TCTI_CONTEXT* context, TSS2_TCTI_POLL_HANDLE* handles, size_t* count) {
    TSS2_TCTI_CONTEXT* inner = of(context).inner_;
    return table(inner).v1.getPollHandles(inner, handles, count);
}

TSS2_RC TimeoutTcti::set_locality(TSS2_TCTI_CONTEXT* context, uint8_t locality) {
    TSS2_TCTI_CONTEXT* inner = of(context).inner_;
    return table(inner).v1.setLocality(inner, locality);
}

TSS2_RC TimeoutTcti::make_sticky(TSS2_TCTI_CONTEXT* context, TPM2_HANDLE* handle, uint8_t sticky) {
    TSS2_TCTI_CONTEXT* inner = of(context).inner_;
    return table(inner).makeSticky(inner, handle, sticky);
}

}  // namespace tpmkey
