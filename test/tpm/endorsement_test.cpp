// The EK proof of a parent (core/trust/endorsement.hpp) against a swtpm.
// One program runs every case under one swtpm: with `--ek-cert`
// (swtpm_setup writes RSA 2048 and ECC P-384 EK certificates signed by a CA
// in $TPMKEY_SWTPM_DIR/ek-ca) the cases tagged [ek-cert]; without, those
// tagged [no-ek-cert]. Every TpmObject lives in a scope: with-swtpm fails
// the run if anything stays loaded.
#include "core/base/error.hpp"
#include "core/keys/key_parts.hpp"
#include "core/keys/public_key.hpp"
#include "core/tpm/tpm.hpp"
#include "core/tpm/tpm_keys.hpp"
#include "core/trust/endorsement.hpp"
#include "simulator_tcti.hpp"

#include <catch2/catch.hpp>
#include <openssl/rand.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

using namespace tpmkey;

namespace {

std::string tcti() { return tpmkey::test::simulator_tcti().value(); }

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
    check_rc(Esys_CreatePrimary(tpm.esys(), ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE,
                                &sensitive, &tmpl, &outside, &pcrs, &handle, nullptr, nullptr, nullptr, nullptr),
             "TPM2_CreatePrimary");
    return TpmObject(tpm, handle, TpmObject::Kind::transient);
}

// A storage key the TPM made under `parent` without fixedTPM and
// fixedParent: duplicable, so its private part can leave the TPM.
TpmObject duplicable_storage_key(Tpm& tpm, const TpmObject& parent) {
    TPM2B_PUBLIC tmpl = storage_key_template();
    tmpl.publicArea.objectAttributes &= ~(TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT);
    tmpl.publicArea.unique = {};
    const TPM2B_SENSITIVE_CREATE sensitive{};
    const TPM2B_DATA outside{};
    const TPML_PCR_SELECTION pcrs{};
    EsysPtr<TPM2B_PRIVATE> priv;
    EsysPtr<TPM2B_PUBLIC> pub;
    check_rc(Esys_Create(tpm.esys(), parent.handle(), ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &sensitive,
                         &tmpl, &outside, &pcrs, out_ptr(priv), out_ptr(pub), nullptr, nullptr, nullptr),
             "TPM2_Create");
    ESYS_TR handle = ESYS_TR_NONE;
    check_rc(Esys_Load(tpm.esys(), parent.handle(), ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, priv.get(),
                       pub.get(), &handle),
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

}  // namespace

TEST_CASE("a certified EK proves the real parent", "[ek-cert]") {
    Tpm tpm(tcti(), std::nullopt);
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
    Tpm tpm(tcti(), std::nullopt);
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
    Tpm tpm(tcti(), std::nullopt);
    const TpmObject parent = load_parent(tpm, owner_hierarchy);
    const TPM2B_PUBLIC claimed = public_of(tpm, parent);
    const TpmObject decoy = other_primary(tpm);
    CHECK_THROWS_AS(prove_parent(tpm, decoy, claimed, swtpm_ca()), ParentProofFailed);
    // The decoy's own public area proves the decoy (a genuine key too).
    CHECK_NOTHROW(prove_parent(tpm, decoy, public_of(tpm, decoy), swtpm_ca()));
}

TEST_CASE("a key that can leave the TPM is refused, though the TPM would activate it", "[ek-cert][no-ek-cert]") {
    Tpm tpm(tcti(), std::nullopt);
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
    CHECK(activate_credential(tpm, duplicable, ek, t, make_credential(ek_public, tpm_name(pub.publicArea), secret)) ==
          secret);
}

TEST_CASE("a parent usable by policy in the ADMIN role is refused before any TPM command", "[ek-cert][no-ek-cert]") {
    // TPM2_LoadExternal of a public area alone takes fixedTPM|fixedParent
    // (nothing secret is loaded); such an object has no auth value, but
    // with adminWithPolicy a policy could stand for it in the ADMIN role
    // TPM2_ActivateCredential asks of the parent.
    Tpm tpm(tcti(), std::nullopt);
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
    Tpm tpm(tcti(), std::nullopt);
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
    Tpm tpm(tcti(), std::nullopt);
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
    Tpm tpm(tcti(), std::nullopt);
    const TpmObject parent = load_parent(tpm, owner_hierarchy);
    const Bytes name = tpm_name(public_of(tpm, parent).publicArea);
    for (const EkTemplate& t : ek_templates()) {
        INFO(t.label);
        TPMT_PUBLIC ek_public{};
        const TpmObject ek = create_ek(tpm, t, ek_public);
        const Bytes secret = random_secret();
        CHECK(activate_credential(tpm, parent, ek, t, make_credential(ek_public, name, secret)) == secret);
    }
}

TEST_CASE("what sits where an EK certificate belongs but is none fails the proof", "[ek-cert][no-ek-cert]") {
    // An owner can define an index in the TCG range; its contents are
    // hostile input like any other answer of the TPM. 0x01C0000A (ECC
    // P-256, the first one tpmkey looks at) filled with zeros.
    Tpm tpm(tcti(), std::nullopt);
    TPM2B_NV_PUBLIC nv_public{};
    nv_public.nvPublic.nvIndex = 0x01C0000A;
    nv_public.nvPublic.nameAlg = TPM2_ALG_SHA256;
    nv_public.nvPublic.attributes = TPMA_NV_OWNERWRITE | TPMA_NV_OWNERREAD | TPMA_NV_AUTHREAD | TPMA_NV_AUTHWRITE;
    nv_public.nvPublic.dataSize = 600;
    const TPM2B_AUTH empty{};
    ESYS_TR nv = ESYS_TR_NONE;
    check_rc(Esys_NV_DefineSpace(tpm.esys(), ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &empty,
                                 &nv_public, &nv),
             "TPM2_NV_DefineSpace");
    TPM2B_MAX_NV_BUFFER zeros{};
    zeros.size = 600;
    check_rc(Esys_NV_Write(tpm.esys(), ESYS_TR_RH_OWNER, nv, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &zeros, 0),
             "TPM2_NV_Write");
    {
        const TpmObject parent = load_parent(tpm, owner_hierarchy);
        try {
            prove_parent(tpm, parent, public_of(tpm, parent), swtpm_ca());
            FAIL("the proof went on");
        } catch (const ParentProofFailed& e) {
            CHECK(std::string(e.what()) == "the EK certificate at NV index 0x01c0000a is not an X.509 certificate");
        }
    }
    // ESAPI hands out one ESYS_TR per TPM handle; the proof closed it.
    check_rc(Esys_TR_FromTPMPublic(tpm.esys(), 0x01C0000A, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &nv),
             "TPM2_NV_ReadPublic");
    check_rc(Esys_NV_UndefineSpace(tpm.esys(), ESYS_TR_RH_OWNER, nv, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE),
             "TPM2_NV_UndefineSpace");
}
