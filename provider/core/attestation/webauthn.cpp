#include "core/attestation/webauthn.hpp"

#include "core/attestation/exchange_file.hpp"
#include "core/base/base64.hpp"
#include "core/keys/algorithms.hpp"
#include "core/keys/public_key.hpp"

#include <openssl/evp.h>
#include <tss2/tss2_mu.h>

namespace tpmkey {

namespace {

// COSE (RFC 9052, 7; RFC 9053, 2.1, 7.1; RFC 8230, 4): key parameters.
constexpr std::int64_t cose_kty = 1, cose_alg = 3;
constexpr std::int64_t cose_ec2_crv = -1, cose_ec2_x = -2, cose_ec2_y = -3;
constexpr std::int64_t cose_rsa_n = -1, cose_rsa_e = -2;
constexpr std::int64_t cose_kty_ec2 = 2, cose_kty_rsa = 3;

constexpr std::uint8_t flag_user_present = 0x01, flag_attested_data = 0x40, flag_extension_data = 0x80;

Bytes sha256(std::span<const std::uint8_t> data) { return digest_of(EVP_sha256(), {data}); }

std::span<const std::uint8_t> bytes_of(std::string_view s) {
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

const cbor::Item& field(const cbor::Item& map, const char* name, cbor::Item::Type type, const char* what) {
    const cbor::Item* value = map.find(std::string_view(name));
    if (!value)
        throw Error(std::string(what) + ": no " + name);
    if (value->type != type)
        throw Error(std::string(what) + ": " + name + " has the wrong type");
    return *value;
}

}  // namespace

Bytes cose_key(const TPMT_PUBLIC& area) {
    Bytes out;
    if (area.type == TPM2_ALG_ECC) {
        const CurveAlgorithm* curve = find_curve(area.parameters.eccDetail.curveID);
        if (!curve)
            throw Error("a COSE key for this curve is not supported");
        // COSE's curve identifiers (RFC 9053, 7.1): P-256 1, P-384 2, P-521 3.
        const std::int64_t crv = curve->bits == 256 ? 1 : curve->bits == 384 ? 2 : 3;
        cbor::put_map(out, 5);
        cbor::put_int(out, cose_kty);
        cbor::put_int(out, cose_kty_ec2);
        cbor::put_int(out, cose_alg);
        cbor::put_int(out, curve->cose_alg);
        cbor::put_int(out, cose_ec2_crv);
        cbor::put_int(out, crv);
        cbor::put_int(out, cose_ec2_x);
        cbor::put_bytes(out, std::span(area.unique.ecc.x.buffer, area.unique.ecc.x.size));
        cbor::put_int(out, cose_ec2_y);
        cbor::put_bytes(out, std::span(area.unique.ecc.y.buffer, area.unique.ecc.y.size));
    } else if (area.type == TPM2_ALG_RSA) {
        // The TPM's exponent 0 means 65537.
        const std::uint32_t e = area.parameters.rsaDetail.exponent ? area.parameters.rsaDetail.exponent : 65537;
        Bytes exponent;
        for (int shift = 24; shift >= 0; shift -= 8)
            if (!exponent.empty() || (e >> shift) & 0xff)
                exponent.push_back(static_cast<std::uint8_t>(e >> shift));
        cbor::put_map(out, 4);
        cbor::put_int(out, cose_kty);
        cbor::put_int(out, cose_kty_rsa);
        cbor::put_int(out, cose_alg);
        cbor::put_int(out, cose_rs256);
        cbor::put_int(out, cose_rsa_n);
        cbor::put_bytes(out, std::span(area.unique.rsa.buffer, area.unique.rsa.size));
        cbor::put_int(out, cose_rsa_e);
        cbor::put_bytes(out, exponent);
    } else {
        throw Error("a COSE key of this key type is not supported");
    }
    return out;
}

std::string client_data_json(std::span<const std::uint8_t> challenge) {
    if (challenge.size() < min_challenge_size || challenge.size() > max_challenge_size)
        throw Error("a challenge is " + std::to_string(min_challenge_size) + " to " +
                    std::to_string(max_challenge_size) + " bytes, not " + std::to_string(challenge.size()));
    return std::string(R"({"type":"webauthn.create","challenge":")") + base64url(challenge) +
           R"(","origin":"tpmkey:"})";
}

Bytes auth_data(std::span<const std::uint8_t> credential_id, std::span<const std::uint8_t> cose_key) {
    if (credential_id.size() > 0xffff)
        throw Error("a credential ID is at most 65535 bytes");
    Bytes out = sha256(bytes_of(webauthn_rp_id));
    out.push_back(flag_user_present | flag_attested_data);
    out.insert(out.end(), 4, 0);   // signCount
    out.insert(out.end(), 16, 0);  // AAGUID: none
    out.push_back(static_cast<std::uint8_t>(credential_id.size() >> 8));
    out.push_back(static_cast<std::uint8_t>(credential_id.size()));
    out.insert(out.end(), credential_id.begin(), credential_id.end());
    out.insert(out.end(), cose_key.begin(), cose_key.end());
    return out;
}

AuthData parse_auth_data(std::span<const std::uint8_t> data) {
    // rpIdHash 32, flags 1, signCount 4, AAGUID 16, credentialIdLength 2.
    constexpr std::size_t fixed = 32 + 1 + 4 + 16 + 2;
    if (data.size() < fixed)
        throw Error("authData: shorter than its fixed part");
    AuthData out;
    out.rp_id_hash.assign(data.begin(), data.begin() + 32);
    out.flags = data[32];
    out.sign_count = static_cast<std::uint32_t>(data[33] << 24 | data[34] << 16 | data[35] << 8 | data[36]);
    out.aaguid.assign(data.begin() + 37, data.begin() + 53);
    if (!(out.flags & flag_attested_data))
        throw Error("authData: no attested credential data (flag AT)");
    if (out.flags & flag_extension_data)
        throw Error("authData: extensions (flag ED) are not expected");
    const std::size_t id_size = static_cast<std::size_t>(data[53] << 8 | data[54]);
    if (id_size > data.size() - fixed)
        throw Error("authData: the credential ID is longer than what is left");
    out.credential_id.assign(data.begin() + fixed, data.begin() + static_cast<std::ptrdiff_t>(fixed + id_size));
    const auto key = data.subspan(fixed + id_size);
    (void)cbor::decode(key, "authData's credential public key");  // one CBOR item, nothing after it
    out.credential_public_key.assign(key.begin(), key.end());
    return out;
}

Bytes certify_extra_data(std::span<const std::uint8_t> auth_data, std::string_view client_data_json) {
    const Bytes client_data_hash = sha256(bytes_of(client_data_json));
    return digest_of(EVP_sha256(), {auth_data, client_data_hash});
}

void put_tpm_att_stmt(Bytes& out, std::int64_t alg, std::span<const std::uint8_t> sig, const std::vector<Bytes>& x5c,
                      std::span<const std::uint8_t> pub_area, std::span<const std::uint8_t> cert_info) {
    cbor::put_map(out, 6);
    cbor::put_text(out, "alg");
    cbor::put_int(out, alg);
    cbor::put_text(out, "sig");
    cbor::put_bytes(out, sig);
    cbor::put_text(out, "ver");
    cbor::put_text(out, "2.0");
    cbor::put_text(out, "x5c");
    cbor::put_array(out, x5c.size());
    for (const Bytes& cert : x5c)
        cbor::put_bytes(out, cert);
    cbor::put_text(out, "pubArea");
    cbor::put_bytes(out, pub_area);
    cbor::put_text(out, "certInfo");
    cbor::put_bytes(out, cert_info);
}

Bytes attestation_object(const TpmAttestation& a) {
    // Keys in CTAP2's canonical order: shorter first, then bytewise.
    Bytes out;
    cbor::put_map(out, 3);
    cbor::put_text(out, "fmt");
    cbor::put_text(out, "tpm");
    cbor::put_text(out, "attStmt");
    put_tpm_att_stmt(out, a.alg, a.sig, a.x5c, a.pub_area, a.cert_info);
    cbor::put_text(out, "authData");
    cbor::put_bytes(out, a.auth_data);
    return out;
}

TpmAttestation parse_attestation_object(std::span<const std::uint8_t> data) {
    using Type = cbor::Item::Type;
    constexpr const char* what = attestation_file::attestation_object;  // the field it is read from
    const cbor::Item object = cbor::decode(data, what);
    if (object.type != Type::map || object.entries.size() != 3)
        throw Error(std::string(what) + ": not a map of fmt, attStmt and authData");
    if (field(object, "fmt", Type::text, what).text != "tpm")
        throw Error(std::string(what) + ": its format is not \"tpm\"");
    const cbor::Item& statement = field(object, "attStmt", Type::map, what);
    TpmAttestation out;
    out.auth_data = field(object, "authData", Type::bytes, what).bytes;
    constexpr const char* in_statement = "attestation-object's attStmt";
    if (statement.entries.size() != 6)
        throw Error(std::string(in_statement) + ": not exactly ver, alg, x5c, sig, certInfo and pubArea");
    if (field(statement, "ver", Type::text, in_statement).text != "2.0")
        throw Error(std::string(in_statement) + ": ver is not \"2.0\"");
    out.alg = field(statement, "alg", Type::integer, in_statement).integer;
    for (const cbor::Item& cert : field(statement, "x5c", Type::array, in_statement).items) {
        if (cert.type != Type::bytes)
            throw Error(std::string(in_statement) + ": x5c holds something other than certificates");
        out.x5c.push_back(cert.bytes);
    }
    if (out.x5c.empty())
        throw Error(std::string(in_statement) + ": x5c is empty (no AK certificate)");
    out.sig = field(statement, "sig", Type::bytes, in_statement).bytes;
    out.cert_info = field(statement, "certInfo", Type::bytes, in_statement).bytes;
    out.pub_area = field(statement, "pubArea", Type::bytes, in_statement).bytes;
    return out;
}

CertifyInfo parse_certify_info(std::span<const std::uint8_t> data) {
    TPMS_ATTEST attest{};
    size_t offset = 0;
    if (Tss2_MU_TPMS_ATTEST_Unmarshal(data.data(), data.size(), &offset, &attest) != TSS2_RC_SUCCESS)
        throw Error("certInfo: not a TPMS_ATTEST");
    if (offset != data.size())
        throw Error("certInfo: " + std::to_string(data.size() - offset) + " bytes after the TPMS_ATTEST");
    // TPM 2.0 Part 2, 10.12.8: only the TPM signs a structure that starts
    // with TPM_GENERATED_VALUE, so a restricted key never signed a
    // look-alike that someone else made.
    if (attest.magic != TPM2_GENERATED_VALUE)
        throw Error("certInfo: its magic is not TPM_GENERATED_VALUE (not made by a TPM)");
    if (attest.type != TPM2_ST_ATTEST_CERTIFY)
        throw Error("certInfo: not the result of TPM2_Certify (type TPM_ST_ATTEST_CERTIFY)");
    const TPMS_CERTIFY_INFO& certify = attest.attested.certify;
    CertifyInfo out;
    out.extra_data.assign(attest.extraData.buffer, attest.extraData.buffer + attest.extraData.size);
    out.attested_name.assign(certify.name.name, certify.name.name + certify.name.size);
    out.qualified_name.assign(certify.qualifiedName.name, certify.qualifiedName.name + certify.qualifiedName.size);
    return out;
}

TPMT_PUBLIC parse_public_area(std::span<const std::uint8_t> data) {
    TPMT_PUBLIC area{};
    size_t offset = 0;
    if (Tss2_MU_TPMT_PUBLIC_Unmarshal(data.data(), data.size(), &offset, &area) != TSS2_RC_SUCCESS)
        throw Error("pubArea: not a TPMT_PUBLIC");
    if (offset != data.size())
        throw Error("pubArea: " + std::to_string(data.size() - offset) + " bytes after the TPMT_PUBLIC");
    return area;
}

Bytes public_area_bytes(const TPMT_PUBLIC& area) {
    Bytes out(sizeof(TPMT_PUBLIC));
    size_t offset = 0;
    if (Tss2_MU_TPMT_PUBLIC_Marshal(&area, out.data(), out.size(), &offset) != TSS2_RC_SUCCESS)
        throw Error("cannot marshal a public area");
    out.resize(offset);
    return out;
}

}  // namespace tpmkey
