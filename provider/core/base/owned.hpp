// What the C libraries we use hand out, owned by exactly one C++ object: one
// deleter template for every free function (OpenSSL's, ESAPI's), an
// out-pointer adapter for functions that return through `T**`, DER
// encoding without a manual free, and one file descriptor owner.
#pragma once

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <new>
#include <vector>

namespace tpmkey {

// The deleter that calls `free_fn`: Owned<X509, X509_free>.
template <auto free_fn>
struct FreeWith {
    template <class T>
    void operator()(T* p) const noexcept {
        free_fn(p);
    }
};
template <class T, auto free_fn>
using Owned = std::unique_ptr<T, FreeWith<free_fn>>;

// OPENSSL_free is a macro; this is the function behind Owned<T, openssl_free>.
inline void openssl_free(void* p) noexcept { OPENSSL_free(p); }

// The ones used in more than one file.
using Bio = Owned<BIO, BIO_free>;
using EvpMdCtx = Owned<EVP_MD_CTX, EVP_MD_CTX_free>;
using EvpPkey = Owned<EVP_PKEY, EVP_PKEY_free>;
using X509Cert = Owned<X509, X509_free>;
using X509Store = Owned<X509_STORE, X509_STORE_free>;
using X509StoreCtx = Owned<X509_STORE_CTX, X509_STORE_CTX_free>;
inline void free_x509_stack(STACK_OF(X509)* stack) noexcept { sk_X509_pop_free(stack, X509_free); }
using X509Stack = Owned<STACK_OF(X509), free_x509_stack>;

// For a function that hands out what it allocates through `T**`:
//   EsysPtr<TPM2B_PUBLIC> pub;  Esys_ReadPublic(..., out_ptr(pub), ...);
// The owner takes the pointer at the end of the full expression, also when
// that expression throws.
template <class Owner>
class OutPtr {
public:
    explicit OutPtr(Owner& owner) noexcept : owner_(owner) {}
    ~OutPtr() { owner_.reset(raw_); }
    OutPtr(const OutPtr&) = delete;
    OutPtr& operator=(const OutPtr&) = delete;
    operator typename Owner::pointer *() noexcept { return &raw_; }

private:
    Owner& owner_;
    typename Owner::pointer raw_ = nullptr;
};
template <class Owner>
OutPtr<Owner> out_ptr(Owner& owner) noexcept {
    return OutPtr<Owner>(owner);
}

// The DER encoding of `value` through OpenSSL's i2d_TYPE function: measured
// first, then written into the vector (nothing to free). Empty when OpenSSL
// cannot encode it.
template <class T>
std::vector<std::uint8_t> to_der(int (*i2d)(const T*, unsigned char**), const T* value) {
    const int size = i2d(value, nullptr);
    if (size <= 0)
        return {};
    std::vector<std::uint8_t> out(static_cast<std::size_t>(size));
    unsigned char* p = out.data();
    if (i2d(value, &p) != size)
        return {};
    return out;
}

// A file descriptor, closed when this goes away.
class UniqueFd {
public:
    UniqueFd() noexcept = default;
    explicit UniqueFd(int fd) noexcept : fd_(fd) {}
    UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
    UniqueFd& operator=(UniqueFd&& other) noexcept {
        reset(other.release());
        return *this;
    }
    UniqueFd(const UniqueFd&) = delete;
    UniqueFd& operator=(const UniqueFd&) = delete;
    ~UniqueFd() { reset(); }

    int get() const noexcept { return fd_; }
    explicit operator bool() const noexcept { return fd_ >= 0; }
    int release() noexcept {
        const int fd = fd_;
        fd_ = -1;
        return fd;
    }
    void reset(int fd = -1) noexcept {
        if (fd_ >= 0)
            ::close(fd_);
        fd_ = fd;
    }
    // Closes now and says whether that worked: after writing a file, a
    // failed close can mean lost data.
    bool close() noexcept { return ::close(release()) == 0; }

private:
    int fd_ = -1;
};

}  // namespace tpmkey
