#include "core/keys/key_file.hpp"

#include "core/base/error.hpp"
#include "core/base/owned.hpp"
#include "core/files/file_read.hpp"
#include "core/keys/der.hpp"
#include "core/keys/tpm_policy.hpp"

#include <openssl/asn1.h>
#include <openssl/err.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <tss2/tss2_mu.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tpmkey {

namespace {

constexpr const char* pem_label = "TSS2 PRIVATE KEY";
constexpr const char* loadable_key_oid = "2.23.133.10.1.3";
constexpr const char* old_loadable_key_oid = "2.23.133.10.2";  // openssl_tpm2_engine before v2
constexpr const char* importable_key_oid = "2.23.133.10.1.4";
constexpr const char* sealed_data_oid = "2.23.133.10.1.5";

using Asn1Type = Owned<ASN1_TYPE, ASN1_TYPE_free>;

// Walks the elements of one DER SEQUENCE. Every value is decoded by
// OpenSSL (ASN1_get_object for headers, d2i_ASN1_TYPE for primitives);
// this class only keeps the position and turns failures into messages.
class DerReader {
public:
    DerReader(const unsigned char* data, long size, const std::string& name)
        : pos_(data), end_(data + size), name_(name) {}

    bool at_end() const noexcept { return pos_ == end_; }

    struct Header {
        int tag = 0;
        int cls = 0;
        bool constructed = false;
        const unsigned char* content = nullptr;
        long length = 0;
    };

    Header peek() const { return peek_or("more of the key"); }
    Header peek_or(const std::string& what) const {
        if (at_end())
            fail("the key ends too early (expected " + what + ")");
        Header h;
        const unsigned char* p = pos_;
        long length = 0;
        const int ret = ASN1_get_object(&p, &length, &h.tag, &h.cls, end_ - pos_);
        if (ret & 0x80)
            fail("the key is truncated or its encoding is damaged");
        if (ret == 0x21)
            fail("the key uses an indefinite length, which DER forbids");
        h.constructed = (ret & V_ASN1_CONSTRUCTED) != 0;
        h.content = p;
        h.length = length;
        // DER has one encoding of each length; with it, a file is written
        // back byte for byte.
        // (A length fits an int: it is checked against the input, at most
        // max_key_file_size.)
        if (ASN1_object_size(0, static_cast<int>(length), h.tag) != (p - pos_) + length)
            fail("a length is not in its shortest form, which DER requires");
        return h;
    }

    // The contents of the next element, which must be a SEQUENCE
    // (cls V_ASN1_UNIVERSAL) or the [tag] EXPLICIT (V_ASN1_CONTEXT_SPECIFIC)
    // that `what` names.
    DerReader enter(int tag, int cls, const std::string& what) {
        const Header h = peek_or(what);
        if (h.tag != tag || h.cls != cls || !h.constructed)
            fail("expected " + what);
        skip(h);
        return DerReader(h.content, h.length, name_);
    }
    bool next_is_tag(int tag) const {
        if (at_end())
            return false;
        const Header h = peek();
        return h.cls == V_ASN1_CONTEXT_SPECIFIC && h.tag == tag;
    }
    void expect_end(const std::string& what) const {
        if (!at_end())
            fail("unexpected data after " + what);
    }

    // Steps over the element that peek() described.
    void skip(const Header& h) { pos_ = h.content + h.length; }
    // The whole element that peek() described (header and content), as DER.
    std::vector<std::uint8_t> raw(const Header& h) const { return {pos_, h.content + h.length}; }

    // Decodes the next element, which must be a universal `type`.
    Asn1Type take(int type, const char* what) {
        const unsigned char* p = pos_;
        Asn1Type value(d2i_ASN1_TYPE(nullptr, &p, end_ - pos_));
        if (!value || value->type != type) {
            ERR_clear_error();
            fail(std::string("expected ") + what);
        }
        pos_ = p;
        return value;
    }

    [[noreturn]] void fail(const std::string& problem) const {
        throw FileError(name_, "not a valid TSS2 PRIVATE KEY: " + problem);
    }

private:
    const unsigned char* pos_;
    const unsigned char* end_;
    const std::string& name_;
};

template <class T>
T unmarshal(const ASN1_OCTET_STRING* octets, TSS2_RC (*fn)(const uint8_t*, size_t, size_t*, T*),
            const DerReader& reader, const char* what) {
    T out{};
    size_t offset = 0;
    const auto size = static_cast<size_t>(octets->length);
    if (fn(octets->data, size, &offset, &out) != TSS2_RC_SUCCESS || offset != size)
        reader.fail(std::string("its ") + what + " is damaged");
    return out;
}

// TPMPolicy ::= SEQUENCE { commandCode [0] EXPLICIT INTEGER,
//                          commandPolicy [1] EXPLICIT OCTET STRING }
PolicyCommand read_policy_command(DerReader& list) {
    DerReader command = list.enter(V_ASN1_SEQUENCE, V_ASN1_UNIVERSAL, "a policy command (a SEQUENCE)");
    DerReader code = command.enter(0, V_ASN1_CONTEXT_SPECIFIC, "a policy command's code [0]");
    const Asn1Type code_value = code.take(V_ASN1_INTEGER, "a policy command's code to be an INTEGER");
    code.expect_end("a policy command's code");
    std::uint64_t value = 0;
    if (!ASN1_INTEGER_get_uint64(&value, code_value->value.integer) || value > 0xffffffff) {
        ERR_clear_error();
        code.fail("a policy command's code is not a TPM command code");
    }
    DerReader body = command.enter(1, V_ASN1_CONTEXT_SPECIFIC, "a policy command's parameters [1]");
    const Asn1Type octets = body.take(V_ASN1_OCTET_STRING, "a policy command's parameters to be an OCTET STRING");
    body.expect_end("a policy command's parameters");
    command.expect_end("a policy command");
    const ASN1_OCTET_STRING* s = octets->value.octet_string;
    return {static_cast<TPM2_CC>(value), Bytes(s->data, s->data + s->length)};
}

// SEQUENCE OF TPMPolicy
std::vector<PolicyCommand> read_policy(DerReader& field) {
    DerReader list = field.enter(V_ASN1_SEQUENCE, V_ASN1_UNIVERSAL, "a policy (a SEQUENCE of commands)");
    std::vector<PolicyCommand> commands;
    while (!list.at_end())
        commands.push_back(read_policy_command(list));
    return commands;
}

// TPMAuthPolicy ::= SEQUENCE { name [0] EXPLICIT UTF8String OPTIONAL,
//                              policy [1] EXPLICIT SEQUENCE OF TPMPolicy }
SignedPolicy read_signed_policy(DerReader& list) {
    DerReader entry = list.enter(V_ASN1_SEQUENCE, V_ASN1_UNIVERSAL, "a signed policy (a SEQUENCE)");
    SignedPolicy policy;
    if (entry.next_is_tag(0)) {
        DerReader name = entry.enter(0, V_ASN1_CONTEXT_SPECIFIC, "a signed policy's name [0]");
        const Asn1Type text = name.take(V_ASN1_UTF8STRING, "a signed policy's name to be a UTF8String");
        name.expect_end("a signed policy's name");
        const ASN1_STRING* s = text->value.utf8string;
        policy.name.assign(reinterpret_cast<const char*>(s->data), static_cast<size_t>(s->length));
    }
    DerReader commands = entry.enter(1, V_ASN1_CONTEXT_SPECIFIC, "a signed policy's commands [1]");
    policy.commands = read_policy(commands);
    commands.expect_end("a signed policy's commands");
    entry.expect_end("a signed policy");
    return policy;
}

std::string oid_text(const ASN1_OBJECT* oid) {
    char buf[128];
    const int n = OBJ_obj2txt(buf, sizeof buf, oid, 1);
    if (n <= 0 || static_cast<size_t>(n) >= sizeof buf)
        return {};
    return buf;
}

void check_public(const TPMT_PUBLIC& area, const DerReader& reader, KeyFileKind kind) {
    if (kind == KeyFileKind::pin_object) {
        // Its template is check_pin_object's (core/tpm/pin_object.hpp).
        if (area.type != TPM2_ALG_KEYEDHASH || (area.objectAttributes & TPMA_OBJECT_SIGN_ENCRYPT))
            reader.fail("not a PIN object (a keyedhash data object)");
        return;
    }
    if (area.type != TPM2_ALG_RSA && area.type != TPM2_ALG_ECC)
        reader.fail("only RSA and ECC keys are supported");
    if (!(area.objectAttributes & TPMA_OBJECT_SIGN_ENCRYPT))
        reader.fail("the key cannot sign (no 'sign' attribute)");
    if (area.objectAttributes & TPMA_OBJECT_RESTRICTED)
        reader.fail("the key is restricted: it signs only TPM-made digests");
}

}  // namespace

bool is_printable_utf8(std::string_view text) {
    for (std::size_t i = 0; i < text.size();) {
        const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
        const unsigned char lead = byte(i);
        std::size_t length = 0;
        char32_t c = 0;
        if (lead < 0x80) {
            length = 1, c = lead;
        } else if (lead >= 0xc2 && lead <= 0xdf) {
            length = 2, c = lead & 0x1fu;
        } else if (lead >= 0xe0 && lead <= 0xef) {
            length = 3, c = lead & 0x0fu;
        } else if (lead >= 0xf0 && lead <= 0xf4) {
            length = 4, c = lead & 0x07u;
        } else {
            return false;
        }
        if (i + length > text.size())
            return false;
        for (std::size_t k = 1; k < length; ++k) {
            if ((byte(i + k) & 0xc0) != 0x80)
                return false;
            c = (c << 6) | (byte(i + k) & 0x3fu);
        }
        // Overlong forms, surrogates, beyond Unicode; control characters
        // (C0, DEL, C1) would move a terminal's cursor or end a .pub line.
        const char32_t shortest[] = {0, 0, 0x80, 0x800, 0x10000};
        if (c < shortest[length] || (c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff || c < 0x20 || (c >= 0x7f && c < 0xa0))
            return false;
        i += length;
    }
    return true;
}

KeyFile parse_key_file(std::span<const std::uint8_t> pem, const std::string& name, KeyFileKind kind) {
    if (pem.size() > max_key_file_size)
        throw FileError(name, "too large for a key file (" + std::to_string(pem.size()) + " bytes)");
    // BIO_new_mem_buf() refuses a NULL buffer, which an empty span may have.
    static const std::uint8_t nothing = 0;
    Bio bio(BIO_new_mem_buf(pem.empty() ? &nothing : pem.data(), static_cast<int>(pem.size())));
    if (!bio)
        throw std::bad_alloc();
    Owned<char, openssl_free> label, header;
    Owned<unsigned char, openssl_free> der;
    long der_size = 0;
    const int ok = PEM_read_bio(bio.get(), out_ptr(label), out_ptr(header), out_ptr(der), &der_size);
    ERR_clear_error();
    if (!ok) {
        // PEM_read_bio() fails alike for a file cut short (no END line, a
        // partial base64 line) and for one that never was a key file.
        const std::string_view text(reinterpret_cast<const char*>(pem.data()), pem.size());
        if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
            throw FileError(name, "the file is empty: it was truncated, or is not a key file");
        if (text.find(std::string("-----BEGIN ") + pem_label + "-----") != std::string_view::npos)
            throw FileError(name, std::string("the file is truncated or damaged: its ") + pem_label +
                                      " block has no END line, or broken base64");
        throw FileError(name, std::string("not a key file (no '-----BEGIN ") + pem_label + "-----' line)");
    }
    if (std::strcmp(label.get(), pem_label) != 0)
        throw FileError(name, std::string("holds a '") + label.get() + "', not a " + pem_label);
    if (header && header.get()[0] != '\0')
        throw FileError(name, std::string("PEM headers (encryption) are not allowed in a ") + pem_label);

    DerReader outer(der.get(), der_size, name);
    const DerReader::Header seq = outer.peek();
    if (seq.tag != V_ASN1_SEQUENCE || seq.cls != V_ASN1_UNIVERSAL || !seq.constructed)
        outer.fail("expected a SEQUENCE");
    outer.skip(seq);
    if (!outer.at_end())
        outer.fail("trailing data after the key");

    DerReader r(seq.content, seq.length, name);
    KeyFile key;
    const std::string type = oid_text(r.take(V_ASN1_OBJECT, "the key type (an OID)")->value.object);
    if (type == importable_key_oid)
        r.fail("it is an importable key (2.23.133.10.1.4); only loadable keys are supported");
    if (type == sealed_data_oid)
        r.fail("it is sealed data (2.23.133.10.1.5), not a key");
    if (type != loadable_key_oid && type != old_loadable_key_oid)
        r.fail("unknown key type " + (type.empty() ? std::string("OID") : type));

    // Optional [n] EXPLICIT fields, in increasing tag order; unknown ones
    // are skipped so that later versions of the format still load.
    int last_tag = -1;
    while (true) {
        const DerReader::Header h = r.peek();
        if (h.cls != V_ASN1_CONTEXT_SPECIFIC)
            break;
        if (!h.constructed || h.tag <= last_tag)
            r.fail("optional fields are malformed or out of order");
        last_tag = h.tag;
        DerReader inner(h.content, h.length, name);
        switch (h.tag) {
        case 0: key.empty_auth = inner.take(V_ASN1_BOOLEAN, "emptyAuth to be a BOOLEAN")->value.boolean != 0; break;
        case 1: key.policy = read_policy(inner); break;
        case 3: {
            DerReader list = inner.enter(V_ASN1_SEQUENCE, V_ASN1_UNIVERSAL, "authPolicy to be a SEQUENCE");
            while (!list.at_end())
                key.signed_policies.push_back(read_signed_policy(list));
            break;
        }
        case 4: {
            const Asn1Type text = inner.take(V_ASN1_UTF8STRING, "the description to be a UTF8String");
            const ASN1_STRING* s = text->value.utf8string;
            key.description.assign(reinterpret_cast<const char*>(s->data), static_cast<size_t>(s->length));
            // It ends up in a .pub line and on the terminal (tpmkey info).
            if (!is_printable_utf8(key.description))
                r.fail("the description is not printable UTF-8 text");
            break;
        }
        default:
            inner.skip(inner.peek());  // secret [2], rsaParent [5], future tags
            break;
        }
        if (!inner.at_end())
            r.fail("optional field [" + std::to_string(h.tag) + "] has trailing data");
        if (h.tag != 0 && h.tag != 1 && h.tag != 3 && h.tag != 4)
            key.other_fields.push_back(r.raw(h));
        r.skip(h);
    }

    const Asn1Type parent = r.take(V_ASN1_INTEGER, "the parent handle (an INTEGER)");
    std::uint64_t parent_value = 0;
    if (!ASN1_INTEGER_get_uint64(&parent_value, parent->value.integer) || parent_value > 0xffffffff) {
        ERR_clear_error();
        r.fail("the parent handle is not a 32-bit handle");
    }
    key.parent = static_cast<std::uint32_t>(parent_value);

    const Asn1Type pub = r.take(V_ASN1_OCTET_STRING, "the public part (an OCTET STRING)");
    const Asn1Type priv = r.take(V_ASN1_OCTET_STRING, "the private part (an OCTET STRING)");
    if (!r.at_end())
        r.fail("unexpected fields after the private part");
    key.blobs.pub = unmarshal(pub->value.octet_string, Tss2_MU_TPM2B_PUBLIC_Unmarshal, r, "public part");
    key.blobs.priv = unmarshal(priv->value.octet_string, Tss2_MU_TPM2B_PRIVATE_Unmarshal, r, "private part");
    if (key.blobs.priv.size == 0)
        r.fail("the private part is empty");
    check_public(key.blobs.pub.publicArea, r, kind);
    return key;
}

namespace {

template <class T>
std::vector<std::uint8_t> marshal(const T& value, TSS2_RC (*fn)(const T*, uint8_t*, size_t, size_t*)) {
    std::vector<std::uint8_t> out(sizeof(T));
    size_t offset = 0;
    check_rc(fn(&value, out.data(), out.size(), &offset), "marshalling the key");
    out.resize(offset);
    return out;
}

Bytes explicit_tag(int tag, const Bytes& value) { return der::constructed(tag, V_ASN1_CONTEXT_SPECIFIC, value); }

Bytes policy_der(const std::vector<PolicyCommand>& commands) {
    Bytes list;
    for (const PolicyCommand& command : commands) {
        Bytes fields = explicit_tag(0, der::unsigned_integer(command.code));
        der::append(fields, explicit_tag(1, der::octet_string(command.body)));
        der::append(list, der::sequence(fields));
    }
    return der::sequence(list);
}

Bytes signed_policies_der(const std::vector<SignedPolicy>& policies) {
    Bytes list;
    for (const SignedPolicy& policy : policies) {
        Bytes fields;
        if (!policy.name.empty())
            fields = explicit_tag(0, der::utf8_string(policy.name));
        der::append(fields, explicit_tag(1, policy_der(policy.commands)));
        der::append(list, der::sequence(fields));
    }
    return der::sequence(list);
}

// secret [2] is the only other field that comes before authPolicy [3] (and
// description [4]).
bool before_auth_policy(const std::vector<std::uint8_t>& field) {
    return field.front() == (V_ASN1_CONTEXT_SPECIFIC | V_ASN1_CONSTRUCTED | 2);
}

}  // namespace

Bytes format_policy(const std::vector<PolicyCommand>& policy) { return policy_der(policy); }

std::vector<PolicyCommand> parse_policy(std::span<const std::uint8_t> der, const std::string& name) {
    if (der.size() > max_key_file_size)
        throw FileError(name, "too large for a policy");
    DerReader reader(der.data(), static_cast<long>(der.size()), name);
    std::vector<PolicyCommand> policy = read_policy(reader);
    reader.expect_end("the policy");
    return policy;
}

std::string format_key_file(const KeyFile& key) {
    Bytes body = der::object_identifier(loadable_key_oid);
    if (key.empty_auth.has_value())
        der::append(body, explicit_tag(0, der::boolean(*key.empty_auth)));
    if (!key.policy.empty())
        der::append(body, explicit_tag(1, policy_der(key.policy)));
    for (const auto& field : key.other_fields)
        if (before_auth_policy(field))
            der::append(body, field);
    if (!key.signed_policies.empty())
        der::append(body, explicit_tag(3, signed_policies_der(key.signed_policies)));
    if (!key.description.empty()) {
        if (!is_printable_utf8(key.description))
            throw Error("a key's description must be printable UTF-8 text");
        der::append(body, explicit_tag(4, der::utf8_string(key.description)));
    }
    for (const auto& field : key.other_fields)
        if (!before_auth_policy(field))
            der::append(body, field);
    der::append(body, der::unsigned_integer(key.parent));
    der::append(body, der::octet_string(marshal(key.blobs.pub, Tss2_MU_TPM2B_PUBLIC_Marshal)));
    der::append(body, der::octet_string(marshal(key.blobs.priv, Tss2_MU_TPM2B_PRIVATE_Marshal)));
    const Bytes der = der::sequence(body);

    Bio bio(BIO_new(BIO_s_mem()));
    if (!bio || !PEM_write_bio(bio.get(), pem_label, "", der.data(), static_cast<long>(der.size())))
        throw Error("cannot encode the key file as PEM");
    char* text = nullptr;
    const long size = BIO_get_mem_data(bio.get(), &text);
    return std::string(text, static_cast<size_t>(size));
}

namespace {

// Throws Error unless tpmkey runs `command` (and its parameters are well
// formed): policy_digest() takes exactly the commands we run.
void check_runnable(const PolicyCommand& command) {
    switch (command.code) {
    case TPM2_CC_PolicyAuthValue:
    case TPM2_CC_PolicyPCR:
    case TPM2_CC_PolicyAuthorize:
    case TPM2_CC_PolicySecret:  // the PIN object's (pin_object.hpp)
        (void)policy_digest(std::span(&command, 1));
        return;
    default: throw Error("the key's policy uses " + policy_command_text(command.code) + ", which tpmkey does not run");
    }
}

}  // namespace

void check_runnable(const SignedPolicy& policy) {
    const std::string which =
        policy.name.empty() ? "a signed policy of the key" : "the key's signed policy '" + policy.name + "'";
    if (policy.commands.empty() || policy.commands.back().code != TPM2_CC_PolicyAuthorize)
        throw Error(which + " does not end with its signature (TPM2_PolicyAuthorize)");
    for (std::size_t i = 0; i < policy.commands.size(); ++i) {
        if (i + 1 < policy.commands.size() && policy.commands[i].code == TPM2_CC_PolicyAuthorize)
            throw Error(which + " uses TPM2_PolicyAuthorize before its end, which tpmkey does not run");
        if (policy.commands[i].code == TPM2_CC_PolicySecret)
            throw Error(which + " uses TPM2_PolicySecret, which tpmkey runs only in a key's own policy");
        check_runnable(policy.commands[i]);
    }
}

namespace {

void check_runnable(const KeyFile& key) {
    if (key.policy.empty())
        throw Error("the key can only be used through a TPM policy, and its file has none");
    for (std::size_t i = 0; i < key.policy.size(); ++i) {
        const PolicyCommand& command = key.policy[i];
        if (command.code == TPM2_CC_PolicyAuthorize && i != 0)
            throw Error("the key's policy uses TPM2_PolicyAuthorize (0x16a) after its first command, which tpmkey does "
                        "not run");
        check_runnable(command);
    }
    if (!key.has_signed_policies())
        return;
    if (key.signed_policies.empty())
        throw Error(
            "the key needs a signed policy (its policy starts with TPM2_PolicyAuthorize), and its file has none");
    // As the engine does, the first signed policy that works is used; one
    // we cannot run is skipped, so one we can run is enough.
    std::optional<Error> first_problem;
    for (const SignedPolicy& policy : key.signed_policies) {
        try {
            check_runnable(policy);
            return;
        } catch (const Error& e) {
            if (!first_problem)
                first_problem = e;
        }
    }
    throw *first_problem;
}

}  // namespace

void check_usable(const KeyFile& key, const std::string& name) {
    // Without userWithAuth only a policy session may use the key (TPM 2.0
    // Part 1, 19.7.4); with it, the auth value (the PIN) is enough.
    if (key.blobs.pub.publicArea.objectAttributes & TPMA_OBJECT_USERWITHAUTH)
        return;
    try {
        check_runnable(key);
    } catch (const Error& e) {
        throw FileError(name, e.what());
    }
}

KeyFile read_key_file(const std::filesystem::path& path, KeyFileKind kind) {
    // A key file may be a link (dotfile managers); what it points to must be
    // a regular file that no one else can replace (the public key in it is
    // what ssh-keygen -D prints, and a PIN typed for it goes to that key).
    const FileRead file = read_regular_file(path, max_key_file_size);
    check_not_replaceable(path, file);
    return parse_key_file(file.data, path.string(), kind);
}

}  // namespace tpmkey
