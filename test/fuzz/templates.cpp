// Fuzz target: the module's template handling, through its own function
// list (C_GetFunctionList) with the module's sources linked in:
// C_FindObjectsInit/C_FindObjects/C_FindObjectsFinal with any template,
// C_GetAttributeValue with any template on any handle, C_GetObjectSize,
// and C_SignInit with any mechanism and parameters followed by the size
// query (never a real C_Sign: nothing here may reach the TPM).
//
// Keys: test/data and test/fuzz/keys (which adds a certificate object).
// TPMKEY_TCTI points at a closed port, and every CK_RV is checked: a
// CKR_DEVICE_ERROR (the module tried the TPM) or CKR_GENERAL_ERROR (an
// exception the module did not expect) is a crash.
//
// Properties beyond "no crash, no leak, no UB":
//  - C_GetAttributeValue follows PKCS#11 2.40, 5.7: a value is written only
//    into a buffer big enough for it, and its length is returned; every
//    attribute that fails gets CK_UNAVAILABLE_INFORMATION; CKR_OK only if
//    none failed; a private key's secret attributes never have a value.
//  - What C_GetAttributeValue returns, used as a C_FindObjectsInit
//    template, finds that object (matching is consistent with reading).
//  - C_FindObjects hands out only handles that exist, each at most once.
#include "fuzz.hpp"

#include <p11-kit/pkcs11.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <set>
#include <vector>

extern "C" CK_RV C_GetFunctionList(CK_FUNCTION_LIST_PTR_PTR list);

namespace {

CK_FUNCTION_LIST* p11 = nullptr;

struct KnownObject {
    CK_SLOT_ID slot;
    CK_OBJECT_HANDLE handle;
    CK_OBJECT_CLASS object_class;
};
// Filled once by LLVMFuzzerInitialize; plain pointers, so no global
// constructor or exit-time destructor.
std::vector<CK_SLOT_ID>* slots = nullptr;
std::vector<KnownObject>* objects = nullptr;

constexpr CK_ATTRIBUTE_TYPE attribute_types[] = {
    CKA_CLASS,
    CKA_TOKEN,
    CKA_PRIVATE,
    CKA_LABEL,
    CKA_APPLICATION,
    CKA_VALUE,
    CKA_CERTIFICATE_TYPE,
    CKA_ISSUER,
    CKA_SERIAL_NUMBER,
    CKA_TRUSTED,
    CKA_CERTIFICATE_CATEGORY,
    CKA_KEY_TYPE,
    CKA_SUBJECT,
    CKA_ID,
    CKA_SENSITIVE,
    CKA_ENCRYPT,
    CKA_DECRYPT,
    CKA_WRAP,
    CKA_UNWRAP,
    CKA_SIGN,
    CKA_SIGN_RECOVER,
    CKA_VERIFY,
    CKA_VERIFY_RECOVER,
    CKA_DERIVE,
    CKA_START_DATE,
    CKA_END_DATE,
    CKA_MODULUS,
    CKA_MODULUS_BITS,
    CKA_PUBLIC_EXPONENT,
    CKA_PRIVATE_EXPONENT,
    CKA_PRIME_1,
    CKA_PRIME_2,
    CKA_EXPONENT_1,
    CKA_EXPONENT_2,
    CKA_COEFFICIENT,
    CKA_PUBLIC_KEY_INFO,
    CKA_EXTRACTABLE,
    CKA_LOCAL,
    CKA_NEVER_EXTRACTABLE,
    CKA_ALWAYS_SENSITIVE,
    CKA_KEY_GEN_MECHANISM,
    CKA_MODIFIABLE,
    CKA_COPYABLE,
    CKA_DESTROYABLE,
    CKA_EC_PARAMS,
    CKA_EC_POINT,
    CKA_ALWAYS_AUTHENTICATE,
    CKA_WRAP_WITH_TRUSTED,
    CKA_WRAP_TEMPLATE,
    CKA_ALLOWED_MECHANISMS,
    CKA_VENDOR_DEFINED,
};

// A private key's parts: they exist, but never have a value for the caller.
constexpr CK_ATTRIBUTE_TYPE secret_types[] = {
    CKA_VALUE, CKA_PRIVATE_EXPONENT, CKA_PRIME_1, CKA_PRIME_2, CKA_EXPONENT_1, CKA_EXPONENT_2, CKA_COEFFICIENT,
};

constexpr CK_MECHANISM_TYPE mechanism_types[] = {
    CKM_RSA_PKCS,     CKM_SHA1_RSA_PKCS,       CKM_SHA256_RSA_PKCS,     CKM_SHA384_RSA_PKCS,     CKM_SHA512_RSA_PKCS,
    CKM_RSA_PKCS_PSS, CKM_SHA256_RSA_PKCS_PSS, CKM_SHA384_RSA_PKCS_PSS, CKM_SHA512_RSA_PKCS_PSS, CKM_ECDSA,
    CKM_ECDSA_SHA1,   CKM_ECDSA_SHA256,        CKM_ECDSA_SHA384,        CKM_ECDSA_SHA512,        CKM_RSA_X_509,
    CKM_SHA256,
};

// Any CK_RV but these means the module misbehaved or touched the TPM.
void check_rv(CK_RV rv) {
    if (rv == CKR_DEVICE_ERROR || rv == CKR_GENERAL_ERROR || rv == CKR_HOST_MEMORY || rv == CKR_FUNCTION_FAILED ||
        rv == CKR_CRYPTOKI_NOT_INITIALIZED) {
        std::fprintf(stderr, "unexpected CK_RV 0x%lx\n", rv);
        FUZZ_CHECK(false);
    }
}

CK_ATTRIBUTE_TYPE pick_type(fuzz::Reader& in) {
    const std::uint8_t b = in.byte();
    constexpr std::size_t n = std::size(attribute_types);
    if (b < n)
        return attribute_types[b];
    if (b == 0xff)
        return in.number();  // any type at all
    return attribute_types[b % n];
}

// Caller-owned attribute buffers, each its own heap block of exactly the
// size the template claims, so ASan sees any write past it.
struct Template {
    std::vector<CK_ATTRIBUTE> attributes;
    std::vector<std::unique_ptr<std::uint8_t[]>> buffers;
    std::vector<CK_ULONG> sizes;  // what the caller said, before the call

    void add(CK_ATTRIBUTE_TYPE type, const std::uint8_t* value, CK_ULONG len, bool null_value) {
        CK_ATTRIBUTE a{type, nullptr, len};
        if (!null_value) {
            buffers.push_back(std::make_unique<std::uint8_t[]>(len == 0 ? 1 : len));
            if (value)
                std::copy(value, value + len, buffers.back().get());
            a.pValue = buffers.back().get();
        }
        attributes.push_back(a);
        sizes.push_back(len);
    }
    CK_ATTRIBUTE* data() { return attributes.empty() ? nullptr : attributes.data(); }
    CK_ULONG count() const { return attributes.size(); }
};

// A template for C_FindObjectsInit: values from the input, or a CK_ULONG
// or CK_BBOOL (the shapes most attributes have), or a NULL value.
Template find_template(fuzz::Reader& in) {
    Template t;
    const std::size_t n = in.byte() % 6;
    for (std::size_t i = 0; i < n; ++i) {
        const CK_ATTRIBUTE_TYPE type = pick_type(in);
        const std::uint8_t shape = in.byte() % 8;
        if (shape == 0) {
            const CK_ULONG v = in.byte();
            t.add(type, reinterpret_cast<const std::uint8_t*>(&v), sizeof v, false);
        } else if (shape == 1) {
            const CK_BBOOL v = in.flag() ? CK_TRUE : CK_FALSE;
            t.add(type, &v, sizeof v, false);
        } else if (shape == 2) {
            t.add(type, nullptr, in.byte() % 4, true);  // NULL with a length > 0: CKR_ARGUMENTS_BAD
        } else {
            const std::vector<std::uint8_t> v = in.bytes(in.byte() % 72);
            t.add(type, v.data(), static_cast<CK_ULONG>(v.size()), false);
        }
    }
    return t;
}

// The handles C_FindObjects returns for `t`; checks the find calls' rules.
std::vector<CK_OBJECT_HANDLE> find(CK_SESSION_HANDLE s, Template& t, fuzz::Reader& in, CK_RV* init_rv) {
    std::vector<CK_OBJECT_HANDLE> found;
    *init_rv = p11->C_FindObjectsInit(s, t.data(), t.count());
    check_rv(*init_rv);
    if (*init_rv != CKR_OK)
        return found;
    while (true) {
        const CK_ULONG max = 1 + in.byte() % 4;
        CK_OBJECT_HANDLE out[4];
        CK_ULONG count = 99;
        const CK_RV rv = p11->C_FindObjects(s, out, max, &count);
        FUZZ_CHECK(rv == CKR_OK);
        FUZZ_CHECK(count <= max);
        if (count == 0)
            break;
        found.insert(found.end(), out, out + count);
        FUZZ_CHECK(found.size() <= objects->size());
    }
    FUZZ_CHECK(p11->C_FindObjectsFinal(s) == CKR_OK);
    const std::set<CK_OBJECT_HANDLE> unique(found.begin(), found.end());
    FUZZ_CHECK(unique.size() == found.size());
    for (CK_OBJECT_HANDLE h : found)
        FUZZ_CHECK(std::any_of(objects->begin(), objects->end(), [h](const KnownObject& o) { return o.handle == h; }));
    return found;
}

const KnownObject* known(CK_OBJECT_HANDLE h) {
    for (const KnownObject& o : *objects)
        if (o.handle == h)
            return &o;
    return nullptr;
}

void get_attributes(CK_SESSION_HANDLE s, CK_SLOT_ID slot, fuzz::Reader& in) {
    const std::uint8_t which = in.byte();
    CK_OBJECT_HANDLE h = which == 0xff ? in.number() : (*objects)[which % objects->size()].handle;
    const KnownObject* object = known(h);

    Template t;
    const std::size_t n = in.byte() % 10;
    for (std::size_t i = 0; i < n; ++i) {
        const CK_ATTRIBUTE_TYPE type = pick_type(in);
        const std::uint8_t shape = in.byte();
        if (shape < 64)
            t.add(type, nullptr, in.number(), true);  // size query: any length in
        else
            t.add(type, nullptr, shape % 4 == 0 ? in.byte() : shape % 80, false);
    }
    const CK_RV rv = p11->C_GetAttributeValue(s, h, t.data(), t.count());
    check_rv(rv);
    if (!object || object->slot != slot) {
        FUZZ_CHECK(rv == CKR_OBJECT_HANDLE_INVALID);
        return;
    }
    if (rv == CKR_OBJECT_HANDLE_INVALID || rv == CKR_ARGUMENTS_BAD)
        return;
    FUZZ_CHECK(rv == CKR_OK || rv == CKR_ATTRIBUTE_TYPE_INVALID || rv == CKR_ATTRIBUTE_SENSITIVE ||
               rv == CKR_BUFFER_TOO_SMALL);

    bool any_failed = false;
    Template found_by;  // the values read, as a search template
    for (std::size_t i = 0; i < t.attributes.size(); ++i) {
        const CK_ATTRIBUTE& a = t.attributes[i];
        if (a.ulValueLen == CK_UNAVAILABLE_INFORMATION) {
            any_failed = true;
            continue;
        }
        if (object->object_class == CKO_PRIVATE_KEY)
            FUZZ_CHECK(std::find(std::begin(secret_types), std::end(secret_types), a.type) == std::end(secret_types));
        if (a.pValue) {
            FUZZ_CHECK(a.ulValueLen <= t.sizes[i]);
            // The last value of a type wins in a search template as well.
            found_by.add(a.type, static_cast<const std::uint8_t*>(a.pValue), a.ulValueLen, false);
        }
    }
    FUZZ_CHECK((rv == CKR_OK) == !any_failed);

    CK_RV init_rv = CKR_OK;
    const std::vector<CK_OBJECT_HANDLE> hits = find(s, found_by, in, &init_rv);
    FUZZ_CHECK(init_rv == CKR_OK);
    FUZZ_CHECK(std::find(hits.begin(), hits.end(), h) != hits.end());
}

void sign_init(CK_SESSION_HANDLE s, fuzz::Reader& in) {
    const std::uint8_t which = in.byte();
    CK_MECHANISM m{which == 0xff ? in.number() : mechanism_types[which % std::size(mechanism_types)], nullptr, 0};
    std::vector<std::uint8_t> parameter;
    const std::uint8_t shape = in.byte() % 4;
    if (shape == 1) {
        // The PSS parameters' shape, with fuzzed values.
        CK_RSA_PKCS_PSS_PARAMS pss{in.flag() ? CKM_SHA256 : in.number(), in.flag() ? CKG_MGF1_SHA256 : in.number(),
                                   in.flag() ? 32 : in.number()};
        parameter.assign(reinterpret_cast<const std::uint8_t*>(&pss),
                         reinterpret_cast<const std::uint8_t*>(&pss) + sizeof pss);
    } else if (shape == 2) {
        parameter = in.bytes(in.byte() % 40);
    }
    std::unique_ptr<std::uint8_t[]> parameter_buffer;
    if (!parameter.empty()) {
        parameter_buffer = std::make_unique<std::uint8_t[]>(parameter.size());
        std::copy(parameter.begin(), parameter.end(), parameter_buffer.get());
        m.pParameter = parameter_buffer.get();
        m.ulParameterLen = parameter.size();
    }
    const std::uint8_t key = in.byte();
    const CK_OBJECT_HANDLE h = key == 0xff ? in.number() : (*objects)[key % objects->size()].handle;
    const CK_RV rv = p11->C_SignInit(s, &m, h);
    check_rv(rv);
    if (rv != CKR_OK)
        return;
    // Only what needs no TPM: updates, and the size query.
    CK_ULONG size = 0;
    for (std::uint8_t updates = in.byte() % 3; updates > 0; --updates) {
        const std::vector<std::uint8_t> data = in.bytes(in.byte());
        const CK_RV u =
            p11->C_SignUpdate(s, const_cast<std::uint8_t*>(data.data()), static_cast<CK_ULONG>(data.size()));
        check_rv(u);
        if (u != CKR_OK)
            return;  // the operation ended
    }
    CK_BYTE data[64] = {};
    const CK_RV q =
        in.flag() ? p11->C_SignFinal(s, nullptr, &size) : p11->C_Sign(s, data, in.byte() % 65, nullptr, &size);
    check_rv(q);
    if (q == CKR_OK)
        FUZZ_CHECK(size >= 64 && size <= 512);  // an ECDSA r||s or an RSA modulus
    // The operation may still be active: closing the session ends it.
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    // Only our test keys, no config file, and a TPM nobody answers on.
    setenv("TPMKEY_KEYS", TPMKEY_FUZZ_KEYS, 1);
    setenv("TPMKEY_TCTI", "swtpm:host=127.0.0.1,port=1", 1);
    setenv("XDG_CONFIG_HOME", "/nonexistent", 1);
    unsetenv("TPMKEY_LOG");
    unsetenv("TPMKEY_LOG_FILE");
    FUZZ_CHECK(C_GetFunctionList(&p11) == CKR_OK);
    FUZZ_CHECK(p11->C_Initialize(nullptr) == CKR_OK);

    slots = new std::vector<CK_SLOT_ID>(8);
    CK_ULONG n = slots->size();
    FUZZ_CHECK(p11->C_GetSlotList(CK_TRUE, slots->data(), &n) == CKR_OK);
    slots->resize(n);
    FUZZ_CHECK(n >= 4);  // the keys of test/data and test/fuzz/keys

    objects = new std::vector<KnownObject>;
    for (CK_SLOT_ID slot : *slots) {
        CK_SESSION_HANDLE s = 0;
        FUZZ_CHECK(p11->C_OpenSession(slot, CKF_SERIAL_SESSION, nullptr, nullptr, &s) == CKR_OK);
        FUZZ_CHECK(p11->C_FindObjectsInit(s, nullptr, 0) == CKR_OK);
        CK_OBJECT_HANDLE h[16];
        CK_ULONG count = 0;
        FUZZ_CHECK(p11->C_FindObjects(s, h, 16, &count) == CKR_OK);
        FUZZ_CHECK(p11->C_FindObjectsFinal(s) == CKR_OK);
        for (CK_ULONG i = 0; i < count; ++i) {
            CK_OBJECT_CLASS c = 0;
            CK_ATTRIBUTE a{CKA_CLASS, &c, sizeof c};
            FUZZ_CHECK(p11->C_GetAttributeValue(s, h[i], &a, 1) == CKR_OK);
            objects->push_back({slot, h[i], c});
        }
        FUZZ_CHECK(p11->C_CloseSession(s) == CKR_OK);
    }
    FUZZ_CHECK(std::any_of(objects->begin(), objects->end(),
                           [](const KnownObject& o) { return o.object_class == CKO_CERTIFICATE; }));
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    fuzz::Reader in({data, size});
    const CK_SLOT_ID slot = (*slots)[in.byte() % slots->size()];
    CK_SESSION_HANDLE s = 0;
    FUZZ_CHECK(p11->C_OpenSession(slot, CKF_SERIAL_SESSION | (in.flag() ? CKF_RW_SESSION : 0), nullptr, nullptr, &s) ==
               CKR_OK);
    for (int op = 0; op < 16 && !in.empty(); ++op) {
        switch (in.byte() % 4) {
        case 0: {
            Template t = find_template(in);
            CK_RV rv = CKR_OK;
            const std::vector<CK_OBJECT_HANDLE> hits = find(s, t, in, &rv);
            FUZZ_CHECK(rv == CKR_OK || rv == CKR_ARGUMENTS_BAD);
            for (CK_OBJECT_HANDLE h : hits)
                FUZZ_CHECK(known(h)->slot == slot);
            break;
        }
        case 1: get_attributes(s, slot, in); break;
        case 2: {
            const std::uint8_t which = in.byte();
            const CK_OBJECT_HANDLE h = which == 0xff ? in.number() : (*objects)[which % objects->size()].handle;
            CK_ULONG object_size = 0;
            const CK_RV rv = p11->C_GetObjectSize(s, h, &object_size);
            check_rv(rv);
            const KnownObject* o = known(h);
            FUZZ_CHECK((rv == CKR_OK) == (o != nullptr && o->slot == slot));
            break;
        }
        default: sign_init(s, in); break;
        }
    }
    FUZZ_CHECK(p11->C_CloseSession(s) == CKR_OK);
    return 0;
}
