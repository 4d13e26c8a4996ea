#include "core/pin/source.hpp"

#include "core/base/owned.hpp"
#include "core/files/file_read.hpp"

#include <fcntl.h>
#include <linux/keyctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace tpmkey {

namespace {

constexpr const char* how_to = " (docs/unattended-keys.md)";

std::string octal_mode(mode_t mode) {
    char text[16];
    std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
    return text;
}

// Drops one trailing "\n" or "\r\n"; an empty PIN or a long one is refused.
Secret finish(SecretBytes& bytes, std::size_t size, const std::string& what) {
    if (size > max_source_pin_size)
        throw PinSourceError(what + ": longer than " + std::to_string(max_source_pin_size) + " bytes; not a PIN" +
                             how_to);
    if (size > 0 && bytes[size - 1] == '\n')
        --size;
    if (size > 0 && bytes[size - 1] == '\r')
        --size;
    if (size == 0)
        throw PinSourceError(what + ": empty; the key has a PIN" + how_to);
    return Secret(std::span<const std::uint8_t>(bytes.data(), size));
}

Secret read_credential(const std::string& name) {
    const std::string what = "systemd credential '" + name + "'";
    // systemd passes the directory, never the secret, in the environment
    // (systemd.exec(5), "Credentials").
    const char* dir = std::getenv("CREDENTIALS_DIRECTORY");
    if (!dir || dir[0] != '/')
        throw PinSourceError(what + ": $CREDENTIALS_DIRECTORY is not set" +
                             std::string(dir && *dir ? " to an absolute path" : "") +
                             ": the process was not started by systemd with LoadCredentialEncrypted=" + name +
                             ":FILE (or LoadCredential=) in its unit" + how_to);
    const std::filesystem::path path = std::filesystem::path(dir) / name;
    const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY));
    if (!fd) {
        const int err = errno;
        throw PinSourceError(path.string() + ": cannot read the " + what + ": " + std::strerror(err) +
                             (err == ENOENT ? "; the unit needs LoadCredentialEncrypted=" + name + ":FILE" : "") +
                             how_to);
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0)
        throw PinSourceError(path.string() + ": cannot check the " + what + ": " + std::strerror(errno));
    if (!S_ISREG(st.st_mode))
        throw PinSourceError(path.string() + ": the " + what + " is not a regular file; refusing it" + how_to);
    // What systemd makes: 0400, the service user's (or root's). A PIN
    // others can read is no secret; one others can write is not the user's.
    if (st.st_mode & (S_IRWXG | S_IRWXO))
        throw PinSourceError(path.string() + ": the " + what + " is readable or writable by others (mode " +
                             octal_mode(st.st_mode) + "); refusing it: a PIN must be its owner's alone (chmod 0400 " +
                             path.string() + ")" + how_to);
    try {
        check_not_replaceable(path, FileRead{{}, st.st_uid, st.st_mode}, what, "the PIN");
    } catch (const Error& e) {
        throw PinSourceError(std::string(e.what()) + how_to);
    }
    SecretBytes bytes(max_source_pin_size + 1);
    std::size_t size = 0;
    while (size < bytes.size()) {
        const ssize_t n = ::read(fd.get(), bytes.data() + size, bytes.size() - size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            throw PinSourceError(path.string() + ": cannot read the " + what + ": " + std::strerror(errno));
        if (n == 0)
            break;
        size += static_cast<std::size_t>(n);
    }
    return finish(bytes, size, path.string() + ": the " + what);
}

long keyctl(int operation, unsigned long a, unsigned long b = 0, unsigned long c = 0, unsigned long d = 0) {
    return ::syscall(SYS_keyctl, operation, a, b, c, d);
}

std::string keyring_error(const std::string& name, int err) {
    const std::string what = "kernel keyring key '" + name + "'";
    switch (err) {
    case ENOKEY:
        return what + ": no such key in the session or user keyring (keyctl add user '" + name +
               "' PIN @u, as the user the key signs for; a key that expired a while ago is gone too)";
    case EKEYEXPIRED: return what + ": the key has expired (keyctl timeout); add it again";
    case EKEYREVOKED: return what + ": the key was revoked; add it again";
    case EACCES: return what + ": the key may not be read by this user (keyctl setperm KEY 0x3f010000)";
    case ENOSYS:
    case EPERM:
        return what + ": the kernel keyring cannot be used here (" + std::strerror(err) +
               "; a seccomp filter, as in some containers, blocks keyctl)";
    default: return what + ": " + std::strerror(err);
    }
}

Secret read_keyring(const std::string& name) {
    const std::string what = "kernel keyring key '" + name + "'";
    // The session keyring (and what it links, usually the user keyring),
    // then the user keyring itself: a service of its own session keyring
    // (systemd's KeyringMode=private) still finds a key added with @u.
    long id = -1;
    int err = 0;
    for (const long keyring : {static_cast<long>(KEY_SPEC_SESSION_KEYRING), static_cast<long>(KEY_SPEC_USER_KEYRING)}) {
        id = keyctl(KEYCTL_SEARCH, static_cast<unsigned long>(keyring), reinterpret_cast<unsigned long>("user"),
                    reinterpret_cast<unsigned long>(name.c_str()), 0);
        if (id >= 0)
            break;
        if (err == 0 || err == ENOKEY)
            err = errno;
    }
    if (id < 0)
        throw PinSourceError(keyring_error(name, err) + how_to);
    // "type;uid;gid;perm;description" (keyctl_describe(3)).
    char description[512] = {};
    const long described = keyctl(KEYCTL_DESCRIBE, static_cast<unsigned long>(id),
                                  reinterpret_cast<unsigned long>(description), sizeof description - 1);
    if (described < 0)
        throw PinSourceError(keyring_error(name, errno) + how_to);
    unsigned long uid = 0, gid = 0, perm = 0;
    if (std::sscanf(description, "%*[^;];%lu;%lu;%lx;", &uid, &gid, &perm) != 3)
        throw PinSourceError(what + ": the kernel described it as nothing tpmkey knows");
    if (uid != ::geteuid())
        throw PinSourceError(what + ": the key belongs to another user (uid " + std::to_string(uid) +
                             "), who could have put a PIN of theirs in it; refusing it" + how_to);
    // Group and others may view it at most: read gives them the PIN; write,
    // link and setattr let them put wrong PINs in it (each a try of the
    // TPM's lockout counter) or revoke it; search lets them find it.
    constexpr unsigned long group_other_read = 0x00000202, group_other_beyond_view = 0x0000fefe;
    if (perm & group_other_beyond_view) {
        char hex[24];
        std::snprintf(hex, sizeof hex, "%08lx", perm);
        throw PinSourceError(what + ": the key is " +
                             ((perm & group_other_read) ? "readable by others" : "changeable by others") +
                             " (permissions " + std::string(hex) + "); refusing it (keyctl setperm " +
                             std::to_string(id) + " 0x3f010000)" + how_to);
    }
    SecretBytes bytes(max_source_pin_size + 1);
    const long size = keyctl(KEYCTL_READ, static_cast<unsigned long>(id), reinterpret_cast<unsigned long>(bytes.data()),
                             bytes.size());
    if (size < 0)
        throw PinSourceError(keyring_error(name, errno) + how_to);
    return finish(bytes, static_cast<std::size_t>(size), what);
}

}  // namespace

std::string describe(const PinSource& source) {
    return (source.kind == PinSource::Kind::credential ? "systemd credential '" : "kernel keyring key '") +
           source.name + "'";
}

Secret read_pin(const PinSource& source) {
    return source.kind == PinSource::Kind::credential ? read_credential(source.name) : read_keyring(source.name);
}

}  // namespace tpmkey
