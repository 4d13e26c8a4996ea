// The EK proof of a parent (core/trust/endorsement.hpp) against a swtpm.
// One program runs every case under one swtpm: with `--ek-cert`
// (swtpm_setup writes RSA 2048 and ECC P-384 EK certificates signed by a CA
// in $TPMKEY_SWTPM_DIR/ek-ca) the cases tagged [ek-cert]; without, those
// tagged [no-ek-cert]. Every TpmObject lives in a scope: with-swtpm fails
// the run if anything stays loaded.
#include "core/trust/endorsement.hpp"
#include "core/base/error.hpp"
#include "core/keys/key_parts.hpp"
#include "core/keys/public_key.hpp"
#include "core/tpm/tpm.hpp"
#include "core/tpm/tpm_keys.hpp"
#include "simulator_tcti.hpp"

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

using namespace tpmkey;

namespace {

TpmAddress address() { return tpmkey::test::simulator_address(); }

std::filesystem::path swtpm_dir() {
    const char* dir = std::getenv("TPMKEY_SWTPM_DIR");
    REQUIRE(dir != nullptr);
    return dir;
}

// The CA swtpm_setup used: its root and the issuer below it.
EkRoots swtpm_ca() { return {{swtpm_dir() / "ek-ca"}}; }

TPM2B_PUBLIC public_of(Tpm& tpm, const TpmObject& object) {
    EsysPtr<TPM2B_PUBLIC> pub;
    check_rc(Esys_ReadPublic(tpm.esys(), object.handle(), ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, out_ptr(pub),
                             nullptr, nullptr),
             "TPM2_ReadPublic");
    return *pub;
}

// A primary storage key of the owner hierarchy other than the parent:
// the same template with another unique.
TpmObject other_primary(Tpm& tpm) {
    TPM2B_PUBLIC tmpl = storage_key_template();
    tmpl.publicArea.unique.ecc.x.size = 1;
    tmpl.publicArea.unique.ecc.x.buffer[0] = 0x5a;
    const TPM2B_SENSITIVE_CREATE sensitive{};
    const TPM2B_DATA outside{};
    const TPML_PCR_SELECTION pcrs{};
    ESYS_TR handle = ESYS_TR_NONE;
    check_rc(Esys_CreatePrimary(tpm.esys(), ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &sensitive,
                                &tmpl, &outside, &pcrs, &handle, nullptr, nullptr, nullptr, nullptr),
             "TPM2_CreatePrimary");
    return TpmObject(tpm, handle, TpmObject::Kind::transient);
}

// A storage key the TPM made under `parent` without fixedTPM and
// fixedParent: duplicable, so its private part can leave the TPM. With
// `auth`, one that keeps fixedTPM and fixedParent but has an auth value.
TpmObject duplicable_storage_key(Tpm& tpm, const TpmObject& parent, std::string_view auth = {}) {
    TPM2B_PUBLIC tmpl = storage_key_template();
    if (auth.empty())
        tmpl.publicArea.objectAttributes &= ~(TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT);
    tmpl.publicArea.unique = {};
    TPM2B_SENSITIVE_CREATE sensitive{};
    sensitive.sensitive.userAuth.size = static_cast<UINT16>(auth.size());
    std::copy(auth.begin(), auth.end(), sensitive.sensitive.userAuth.buffer);  // memcpy's source may not be null
    const TPM2B_DATA outside{};
    const TPML_PCR_SELECTION pcrs{};
    EsysPtr<TPM2B_PRIVATE> priv;
    EsysPtr<TPM2B_PUBLIC> pub;
    check_rc(Esys_Create(tpm.esys(), parent.handle(), ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &sensitive, &tmpl,
                         &outside, &pcrs, out_ptr(priv), out_ptr(pub), nullptr, nullptr, nullptr),
             "TPM2_Create");
    ESYS_TR handle = ESYS_TR_NONE;
    check_rc(Esys_Load(tpm.esys(), parent.handle(), ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, priv.get(), pub.get(),
                       &handle),
             "TPM2_Load");
    return TpmObject(tpm, handle, TpmObject::Kind::transient);
}

Bytes random_secret() {
    Bytes secret(32);
    REQUIRE(RAND_bytes(secret.data(), 32) == 1);
    return secret;
}

std::filesystem::path empty_dir() {
    const std::filesystem::path dir = swtpm_dir() / "no-roots";
    std::filesystem::create_directories(dir);
    return dir;
}

// An NV index in the EK certificate range holding `contents`, defined by
// the owner (as anyone with the owner hierarchy's empty auth value may) or
// by the platform (as a manufacturer defines its EK certificates:
// TPMA_NV_PLATFORMCREATE). Undefined again at the end of its scope.
class NvIndex {
public:
    NvIndex(Tpm& tpm, std::uint32_t index, ESYS_TR hierarchy, const Bytes& contents)
        : tpm_(tpm), index_(index), hierarchy_(hierarchy) {
        TPM2B_NV_PUBLIC nv_public{};
        nv_public.nvPublic.nvIndex = index;
        nv_public.nvPublic.nameAlg = TPM2_ALG_SHA256;
        nv_public.nvPublic.attributes =
            TPMA_NV_AUTHREAD | TPMA_NV_AUTHWRITE | TPMA_NV_OWNERREAD |
            (hierarchy == ESYS_TR_RH_PLATFORM ? TPMA_NV_PPWRITE | TPMA_NV_PPREAD | TPMA_NV_PLATFORMCREATE
                                              : TPMA_NV_OWNERWRITE);
        nv_public.nvPublic.dataSize = static_cast<UINT16>(contents.size());
        const TPM2B_AUTH empty{};
        ESYS_TR nv = ESYS_TR_NONE;
        check_rc(Esys_NV_DefineSpace(tpm.esys(), hierarchy, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &empty,
                                     &nv_public, &nv),
                 "TPM2_NV_DefineSpace");
        for (std::size_t offset = 0; offset < contents.size(); offset += 512) {
            TPM2B_MAX_NV_BUFFER piece{};
            piece.size = static_cast<UINT16>(std::min<std::size_t>(512, contents.size() - offset));
            std::memcpy(piece.buffer, contents.data() + offset, piece.size);
            check_rc(Esys_NV_Write(tpm.esys(), nv, nv, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &piece,
                                   static_cast<UINT16>(offset)),
                     "TPM2_NV_Write");
        }
        check_rc(Esys_TR_Close(tpm.esys(), &nv), "Esys_TR_Close");
    }
    NvIndex(const NvIndex&) = delete;
    NvIndex& operator=(const NvIndex&) = delete;
    ~NvIndex() {
        // ESAPI hands out one ESYS_TR per TPM handle; the proof closed its own.
        ESYS_TR nv = ESYS_TR_NONE;
        if (Esys_TR_FromTPMPublic(tpm_.esys(), index_, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &nv) ==
            TSS2_RC_SUCCESS)
            CHECK(Esys_NV_UndefineSpace(tpm_.esys(), hierarchy_, nv, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE) ==
                  TSS2_RC_SUCCESS);
    }

private:
    Tpm& tpm_;
    std::uint32_t index_;
    ESYS_TR hierarchy_;
};

// A self-signed certificate of a key of OpenSSL's (DER): the certificate
// of no EK, the root of no EK.
Bytes self_signed_certificate() {
    const EvpPkey key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
    X509Cert cert(X509_new());
    REQUIRE((key && cert));
    X509_set_version(cert.get(), 2);
    X509_NAME_add_entry_by_txt(X509_get_subject_name(cert.get()), "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("no EK"), -1, -1, 0);
    X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get()));
    X509_gmtime_adj(X509_getm_notBefore(cert.get()), 0);
    X509_gmtime_adj(X509_getm_notAfter(cert.get()), 3600);
    X509_set_pubkey(cert.get(), key.get());
    REQUIRE(X509_sign(cert.get(), key.get(), EVP_sha256()) > 0);
    const int size = i2d_X509(cert.get(), nullptr);
    Bytes der(static_cast<std::size_t>(size));
    unsigned char* p = der.data();
    REQUIRE(i2d_X509(cert.get(), &p) == size);
    return der;
}

// The EK certificate the swtpm's platform wrote at `index`.
Bytes nv_contents(Tpm& tpm, std::uint32_t index) {
    ESYS_TR nv = ESYS_TR_NONE;
    check_rc(Esys_TR_FromTPMPublic(tpm.esys(), index, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &nv),
             "TPM2_NV_ReadPublic");
    const TpmObject owned(tpm, nv, TpmObject::Kind::persistent);
    EsysPtr<TPM2B_NV_PUBLIC> pub;
    check_rc(Esys_NV_ReadPublic(tpm.esys(), nv, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, out_ptr(pub), nullptr),
             "TPM2_NV_ReadPublic");
    Bytes out;
    while (out.size() < pub->nvPublic.dataSize) {
        EsysPtr<TPM2B_MAX_NV_BUFFER> piece;
        const auto size = static_cast<UINT16>(std::min<std::size_t>(512, pub->nvPublic.dataSize - out.size()));
        check_rc(Esys_NV_Read(tpm.esys(), nv, nv, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, size,
                              static_cast<UINT16>(out.size()), out_ptr(piece)),
                 "TPM2_NV_Read");
        out.insert(out.end(), piece->buffer, piece->buffer + piece->size);
    }
    return out;
}

// Sets the endorsement hierarchy's auth value (as `tpm2_changeauth -c e
// NEWPASS` does) for as long as it lives.
class EndorsementPassword {
public:
    explicit EndorsementPassword(Tpm& tpm) : tpm_(tpm) {
        TPM2B_AUTH password{};
        password.size = 7;
        std::memcpy(password.buffer, "NEWPASS", 7);
        check_rc(Esys_HierarchyChangeAuth(tpm.esys(), ESYS_TR_RH_ENDORSEMENT, ESYS_TR_PASSWORD, ESYS_TR_NONE,
                                          ESYS_TR_NONE, &password),
                 "TPM2_HierarchyChangeAuth");
        // ESAPI uses the new value for the hierarchy from now on; the code
        // under test must not have it.
        const TPM2B_AUTH empty{};
        check_rc(Esys_TR_SetAuth(tpm.esys(), ESYS_TR_RH_ENDORSEMENT, &empty), "Esys_TR_SetAuth");
    }
    EndorsementPassword(const EndorsementPassword&) = delete;
    EndorsementPassword& operator=(const EndorsementPassword&) = delete;
    ~EndorsementPassword() {
        TPM2B_AUTH password{};
        password.size = 7;
        std::memcpy(password.buffer, "NEWPASS", 7);
        const TPM2B_AUTH empty{};
        CHECK(Esys_TR_SetAuth(tpm_.esys(), ESYS_TR_RH_ENDORSEMENT, &password) == TSS2_RC_SUCCESS);
        CHECK(Esys_HierarchyChangeAuth(tpm_.esys(), ESYS_TR_RH_ENDORSEMENT, ESYS_TR_PASSWORD, ESYS_TR_NONE,
                                       ESYS_TR_NONE, &empty) == TSS2_RC_SUCCESS);
    }

private:
    Tpm& tpm_;
};

}  // namespace

TEST_CASE("a certified EK proves the real parent", "[ek-cert]") {
    Tpm tpm(address());
    const TpmObject parent = load_parent(tpm, owner_hierarchy);
    const EndorsementKey ek = prove_parent(tpm, parent, public_of(tpm, parent), swtpm_ca());
    CHECK(ek.certified);
    CHECK(ek.why_not_certified.empty());
    // ECC is preferred: swtpm's P-384 certificate (template H-3), not its RSA one.
    CHECK(ek.nv_index == 0x01C00016);
    CHECK(ek.algorithm == "ECC P-384");
    CHECK(ek.issuer.find("swtpm-localca") != std::string::npos);
    REQUIRE(ek.pin.size() == 5 + 64);
    CHECK(ek.pin.starts_with("cert:"));
    // The same proof again pins the same.
    CHECK(prove_parent(tpm, parent, public_of(tpm, parent), swtpm_ca()).pin == ek.pin);
}

TEST_CASE("without a trusted root the EK still proves the parent, and is pinned by its name", "[ek-cert]") {
    Tpm tpm(address());
    const TpmObject parent = load_parent(tpm, owner_hierarchy);
    const EndorsementKey ek = prove_parent(tpm, parent, public_of(tpm, parent), EkRoots{{empty_dir()}});
    CHECK_FALSE(ek.certified);
    CHECK(ek.why_not_certified.starts_with("no trusted root: no trusted EK root certificate in "));
    CHECK(ek.nv_index == 0x01C00016);
    TPMT_PUBLIC ek_public{};
    const TpmObject h3 = create_ek(tpm, *find_ek_template(0x01C00016), ek_public);
    CHECK(ek.pin == "ek:" + hex(tpm_name(ek_public)));
}

TEST_CASE("a credential for a name the loaded object does not have fails", "[ek-cert][no-ek-cert]") {
    // The interposer's move: claim the real parent's public area (so its
    // name) while the object the TPM holds is another. The credential is
    // for the claimed name; the TPM checks it against the object's own.
    Tpm tpm(address());
    const TpmObject parent = load_parent(tpm, owner_hierarchy);
    const TPM2B_PUBLIC claimed = public_of(tpm, parent);
    const TpmObject decoy = other_primary(tpm);
    CHECK_THROWS_AS(prove_parent(tpm, decoy, claimed, swtpm_ca()), ParentProofFailed);
    // The decoy's own public area proves the decoy (a genuine key too).
    CHECK_NOTHROW(prove_parent(tpm, decoy, public_of(tpm, decoy), swtpm_ca()));
}

TEST_CASE("a key that can leave the TPM is refused, though the TPM would activate it", "[ek-cert][no-ek-cert]") {
    Tpm tpm(address());
    const TpmObject parent = load_parent(tpm, owner_hierarchy);
    const TpmObject duplicable = duplicable_storage_key(tpm, parent);
    const TPM2B_PUBLIC pub = public_of(tpm, duplicable);
    CHECK_THROWS_AS(prove_parent(tpm, duplicable, pub, swtpm_ca()), ParentProofFailed);
    // Why the attributes must be checked: ActivateCredential works for any
    // loaded object, this one included.
    const EkTemplate& t = uncertified_ek_template();
    TPMT_PUBLIC ek_public{};
    const TpmObject ek = create_ek(tpm, t, ek_public);
    const Bytes secret = random_secret();
    CHECK(hex(activate_credential(tpm, duplicable, ek, t,
                                  make_credential(ek_public, tpm_name(pub.publicArea), secret))) == hex(secret));
}

TEST_CASE("a parent usable by policy in the ADMIN role is refused before any TPM command", "[ek-cert][no-ek-cert]") {
    // TPM2_LoadExternal of a public area alone takes fixedTPM|fixedParent
    // (nothing secret is loaded); such an object has no auth value, but
    // with adminWithPolicy a policy could stand for it in the ADMIN role
    // TPM2_ActivateCredential asks of the parent.
    Tpm tpm(address());
    const TpmObject parent = load_parent(tpm, owner_hierarchy);
    TPM2B_PUBLIC claimed = public_of(tpm, parent);
    claimed.publicArea.objectAttributes |= TPMA_OBJECT_ADMINWITHPOLICY;
    try {
        (void)prove_parent(tpm, parent, claimed, swtpm_ca());
        FAIL("a parent with adminWithPolicy was proven");
    } catch (const ParentProofFailed& e) {
        CHECK_THAT(e.what(), Catch::Contains("adminWithPolicy"));
    }
}

TEST_CASE("the TPM refuses a known private key that claims fixedTPM|fixedParent (TPM2_LoadExternal)",
          "[ek-cert][no-ek-cert]") {
    // The rule the proof rests on (TPM 2.0 Part 3, LoadExternal: with a
    // sensitive area, fixedTPM and fixedParent must be CLEAR).
    Tpm tpm(address());
    TPM2B_PUBLIC pub = storage_key_template();
    TPM2B_SENSITIVE sensitive{};
    sensitive.sensitiveArea.sensitiveType = TPM2_ALG_ECC;
    sensitive.sensitiveArea.sensitive.ecc.size = 32;
    std::memset(sensitive.sensitiveArea.sensitive.ecc.buffer, 0x11, 32);
    // Any point will do: the attributes are checked first.
    pub.publicArea.unique.ecc.x.size = pub.publicArea.unique.ecc.y.size = 32;
    pub.publicArea.objectAttributes &= ~TPMA_OBJECT_SENSITIVEDATAORIGIN;
    ESYS_TR handle = ESYS_TR_NONE;
    const TSS2_RC rc = Esys_LoadExternal(tpm.esys(), ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &sensitive, &pub,
                                         ESYS_TR_RH_NULL, &handle);
    if (rc == TSS2_RC_SUCCESS)
        (void)Esys_FlushContext(tpm.esys(), handle);
    CHECK(tpm_rc_base(rc) == TPM2_RC_ATTRIBUTES);
}

TEST_CASE("without an EK certificate the EK is trusted on first use", "[no-ek-cert]") {
    Tpm tpm(address());
    const TpmObject parent = load_parent(tpm, owner_hierarchy);
    const EndorsementKey ek = prove_parent(tpm, parent, public_of(tpm, parent), EkRoots{{empty_dir()}});
    CHECK_FALSE(ek.certified);
    CHECK(ek.nv_index == 0);
    CHECK(ek.issuer.empty());
    CHECK(ek.why_not_certified == "no EK certificate in the TPM");
    CHECK(ek.algorithm == "ECC P-256");
    TPMT_PUBLIC ek_public{};
    const TpmObject l2 = create_ek(tpm, uncertified_ek_template(), ek_public);
    CHECK(ek.pin == "ek:" + hex(tpm_name(ek_public)));
}

TEST_CASE("a credential made in software activates with the EK of every template the TPM can make",
          "[ek-cert][no-ek-cert]") {
    // RSA-OAEP and ECDH seeds, SHA-256/384/512 names, AES-128/256, policy A
    // and PolicyOR(A, C): what a real TPM's certificate may ask for.
    Tpm tpm(address());
    const TpmObject parent = load_parent(tpm, owner_hierarchy);
    const Bytes name = tpm_name(public_of(tpm, parent).publicArea);
    for (const EkTemplate& t : ek_templates()) {
        INFO(t.label);
        TPMT_PUBLIC ek_public{};
        const TpmObject ek = create_ek(tpm, t, ek_public);
        const Bytes secret = random_secret();
        CHECK(hex(activate_credential(tpm, parent, ek, t, make_credential(ek_public, name, secret))) == hex(secret));
    }
}

TEST_CASE("what the platform put where an EK certificate belongs but is none fails the proof",
          "[ek-cert][no-ek-cert]") {
    // The platform's NV is hostile input like any other answer of the TPM.
    // 0x01C0000A (ECC P-256, the first one tpmkey looks at) filled with zeros.
    Tpm tpm(address());
    const NvIndex zeros(tpm, 0x01C0000A, ESYS_TR_RH_PLATFORM, Bytes(600, 0));
    const TpmObject parent = load_parent(tpm, owner_hierarchy);
    try {
        prove_parent(tpm, parent, public_of(tpm, parent), swtpm_ca());
        FAIL("the proof went on");
    } catch (const ParentProofFailed& e) {
        CHECK(std::string(e.what()) == "the EK certificate at NV index 0x01c0000a is not an X.509 certificate");
    }
}

TEST_CASE("an index the owner defined in the EK certificate range is not the TPM's certificate", "[ek-cert]") {
    // Anyone with owner authorization (empty on most machines) may define
    // 0x01C0000A, the first index tpmkey looks at, and put a certificate
    // there: here the TPM's own RSA one, which is not the key of the EK
    // template L-2. Was: the proof took it, and failed ("... is not the key
    // of its certificate at 0x01c0000a"); with a certificate of its own for
    // the L-2 EK, the owner would choose what the EK is pinned by.
    Tpm tpm(address());
    const NvIndex owners(tpm, 0x01C0000A, ESYS_TR_RH_OWNER, nv_contents(tpm, 0x01C00002));
    const TpmObject parent = load_parent(tpm, owner_hierarchy);
    const EndorsementKey ek = prove_parent(tpm, parent, public_of(tpm, parent), swtpm_ca());
    CHECK(ek.certified);
    CHECK(ek.nv_index == 0x01C00016);
    const std::optional<EkCertificate> certificate = read_ek_certificate(tpm);
    REQUIRE(certificate);
    CHECK(certificate->index == 0x01C00016);
}

TEST_CASE("an index the owner defined in the EK certificate range does not stop the proof", "[no-ek-cert]") {
    // Was: "the EK certificate at NV index 0x01c00016 is not an X.509
    // certificate", for an index anyone with owner authorization can make.
    Tpm tpm(address());
    const NvIndex owners(tpm, 0x01C00016, ESYS_TR_RH_OWNER, Bytes(600, 0));
    const TpmObject parent = load_parent(tpm, owner_hierarchy);
    const EndorsementKey ek = prove_parent(tpm, parent, public_of(tpm, parent), EkRoots{{empty_dir()}});
    CHECK_FALSE(ek.certified);
    CHECK(ek.nv_index == 0);
    CHECK(ek.why_not_certified ==
          "no EK certificate in the TPM (ignored: NV index 0x01c00016, which the platform did not create)");
    TPMT_PUBLIC ek_public{};
    const TpmObject l2 = create_ek(tpm, uncertified_ek_template(), ek_public);
    CHECK(ek.pin == "ek:" + hex(tpm_name(ek_public)));
    CHECK_FALSE(read_ek_certificate(tpm));
    // With trusted roots, the refusal says what was passed over.
    const std::filesystem::path roots = swtpm_dir() / "some-root";
    std::filesystem::create_directories(roots);
    {
        const Bytes root = self_signed_certificate();
        std::FILE* f = std::fopen((roots / "root.der").c_str(), "wb");
        REQUIRE(f);
        CHECK(std::fwrite(root.data(), 1, root.size(), f) == root.size());
        CHECK(std::fclose(f) == 0);
    }
    try {
        prove_parent(tpm, parent, public_of(tpm, parent), EkRoots{{roots}});
        FAIL("trusted roots, and no certificate, yet the proof went on");
    } catch (const ParentProofFailed& e) {
        CHECK_THAT(e.what(), Catch::Contains("(no EK certificate in the TPM (ignored: NV index 0x01c00016, which "
                                             "the platform did not create))"));
    }
}

TEST_CASE("a platform certificate that is not its template's EK's is passed over for the next one", "[ek-cert]") {
    // The TPM's RSA certificate at 0x01C0000A, the index of the ECC P-256
    // EK (L-2): the next certificate, 0x01C00016 (H-3), is the TPM's.
    // Was: the proof failed at the first.
    Tpm tpm(address());
    const NvIndex misplaced(tpm, 0x01C0000A, ESYS_TR_RH_PLATFORM, nv_contents(tpm, 0x01C00002));
    const TpmObject parent = load_parent(tpm, owner_hierarchy);
    const EndorsementKey ek = prove_parent(tpm, parent, public_of(tpm, parent), swtpm_ca());
    CHECK(ek.certified);
    CHECK(ek.nv_index == 0x01C00016);
    CHECK(ek.algorithm == "ECC P-384");
}

TEST_CASE("a platform certificate that is no EK's the TPM makes fails the proof", "[no-ek-cert]") {
    // The only certificate is not the key of its template's EK: nothing
    // to pass over to.
    Tpm tpm(address());
    const NvIndex other(tpm, 0x01C0000A, ESYS_TR_RH_PLATFORM, self_signed_certificate());
    const TpmObject parent = load_parent(tpm, owner_hierarchy);
    try {
        prove_parent(tpm, parent, public_of(tpm, parent), EkRoots{{empty_dir()}});
        FAIL("the proof went on");
    } catch (const ParentProofFailed& e) {
        CHECK(std::string(e.what()) == "the parent's proof failed: the endorsement key the TPM re-created from "
                                       "template L-2 is not the key of its certificate at 0x01c0000a");
    }
}

TEST_CASE("an endorsement hierarchy with a password is said to have one, not taken for an impostor", "[no-ek-cert]") {
    // `tpm2_changeauth -c e NEWPASS`. tpmkey supports no password there.
    // Was: a TpmError with TPM_RC_BAD_AUTH re-creating the EK (which the
    // module counts as a wrong PIN), and, for an EK made before,
    // "... it is not the storage key it claims to be".
    Tpm tpm(address());
    const TpmObject parent = load_parent(tpm, owner_hierarchy);
    const TPM2B_PUBLIC pub = public_of(tpm, parent);
    const EkTemplate& t = uncertified_ek_template();
    TPMT_PUBLIC ek_public{};
    const TpmObject ek = create_ek(tpm, t, ek_public);
    const Credential credential = make_credential(ek_public, tpm_name(pub.publicArea), random_secret());
    const EndorsementPassword password(tpm);
    const std::string expected = "the endorsement hierarchy has a password";
    for (int step = 0; step < 2; ++step) {
        try {
            if (step == 0)
                prove_parent(tpm, parent, pub, EkRoots{{empty_dir()}});
            else
                activate_credential(tpm, parent, ek, t, credential);
            FAIL("the proof went on");
        } catch (const TpmError& e) {
            FAIL_CHECK("a TpmError: " << e.what());
        } catch (const ParentProofFailed& e) {
            FAIL_CHECK("taken for an impostor: " << e.what());
        } catch (const Error& e) {
            CHECK_THAT(e.what(), Catch::StartsWith(expected));
        }
    }
}

TEST_CASE("only a credential that does not open is CredentialRefused", "[no-ek-cert]") {
    // A name the object does not have: TPM_RC_INTEGRITY. The answers
    // that prove nothing (a full TPM, TPM_RC_RETRY) stay TpmErrors, so
    // that the module makes room and asks again.
    Tpm tpm(address());
    const TpmObject parent = load_parent(tpm, owner_hierarchy);
    const EkTemplate& t = uncertified_ek_template();
    TPMT_PUBLIC ek_public{};
    const TpmObject ek = create_ek(tpm, t, ek_public);
    Bytes other_name = tpm_name(public_of(tpm, parent).publicArea);
    other_name.back() ^= 1;
    try {
        activate_credential(tpm, parent, ek, t, make_credential(ek_public, other_name, random_secret()));
        FAIL("a credential for another name opened");
    } catch (const CredentialRefused& e) {
        CHECK(e.is(TPM2_RC_INTEGRITY));
    }
}

TEST_CASE("a refused authorisation of the parent is neither an impostor nor a wrong PIN", "[no-ek-cert]") {
    // TPM2_ActivateCredential asks the parent for the ADMIN role with its
    // (empty) auth value; a storage key with a password answers
    // TPM_RC_BAD_AUTH. That proves nothing about the key. Was: "... it is
    // not the storage key it claims to be"; as a bare TpmError with
    // BAD_AUTH the module would have counted it as a wrong PIN.
    Tpm tpm(address());
    const TpmObject parent = load_parent(tpm, owner_hierarchy);
    const TpmObject with_password = duplicable_storage_key(tpm, parent, "pw");
    try {
        prove_parent(tpm, with_password, public_of(tpm, with_password), EkRoots{{empty_dir()}});
        FAIL("proven without its auth value");
    } catch (const TpmError& e) {
        FAIL("a TpmError: " << e.what());
    } catch (const ParentProofFailed& e) {
        FAIL("taken for an impostor: " << e.what());
    } catch (const Error& e) {
        CHECK_THAT(e.what(), Catch::StartsWith("the TPM did not complete the parent's proof (TPM2_ActivateCredential "
                                               "failed (tpm:session(1):"));
        CHECK_THAT(e.what(), Catch::EndsWith("): this says nothing against the storage key, but it is not proven"));
    }
}
