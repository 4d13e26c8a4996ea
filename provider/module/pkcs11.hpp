// The PKCS#11 2.40 declarations (p11-kit's header) and the one error type
// the module throws: a CK_RV to hand back to the caller.
#pragma once

#include <p11-kit/pkcs11.h>

#include <stdexcept>

namespace tpmkey::pkcs11 {

class Pkcs11Error : public std::exception {
public:
    explicit Pkcs11Error(CK_RV rv) noexcept : rv_(rv) {}
    CK_RV rv() const noexcept { return rv_; }
    const char* what() const noexcept override { return "PKCS#11 error"; }

private:
    CK_RV rv_;
};

// Throws Pkcs11Error(rv) unless `condition` holds.
inline void require(bool condition, CK_RV rv) {
    if (!condition)
        throw Pkcs11Error(rv);
}

// Copies `text` into a blank-padded, not NUL-terminated PKCS#11 text field.
template <std::size_t N>
void pad_copy(CK_UTF8CHAR (&field)[N], std::string_view text) {
    std::size_t n = std::min(text.size(), N);
    // Do not cut a UTF-8 sequence in half.
    while (n < text.size() && n > 0 && (static_cast<unsigned char>(text[n]) & 0xc0) == 0x80)
        --n;
    for (std::size_t i = 0; i < N; ++i)
        field[i] = i < n ? static_cast<CK_UTF8CHAR>(text[i]) : ' ';
}

}  // namespace tpmkey::pkcs11
