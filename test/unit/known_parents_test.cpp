// Pinned parents (known_parents.hpp): the file's format, which pin applies
// to which TPM, and systemd's SRK pin.
#include "error.hpp"
#include "tpm_keys.hpp"
#include "known_parents.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace tpmkey;

namespace {

const std::string name_a = "000b" + std::string(64, 'a');
const std::string name_b = "000b" + std::string(64, 'b');

}  // namespace

TEST_CASE("tpm_identity: the TCTI, with the default named and pcap: dropped") {
    CHECK(tpm_identity("") == "default");
    CHECK(tpm_identity("device:/dev/tpmrm0") == "device:/dev/tpmrm0");
    CHECK(tpm_identity("pcap:swtpm:host=127.0.0.1,port=2321") == "swtpm:host=127.0.0.1,port=2321");
    CHECK(tpm_identity("pcap:") == "default");
}

TEST_CASE("known_parents: a pin is per TPM and per handle; bad lines are skipped with a warning") {
    const KnownParents known = KnownParents::parse("# comment\n"
                                                   "0x40000001 " + name_a + " default\n"
                                                   "0x81000001 " + name_b + " default\n"
                                                   "0x40000001 " + name_b + " swtpm:port=2321\n"
                                                   "0x40000001 " + name_b + "\n"
                                                   "40000001 " + name_b + " default\n"
                                                   "0x40000001 000B" + std::string(64, 'C') + " other\n"
                                                   "0x40000001 " + name_b + " default trailing\n",
                                                   std::nullopt);
    CHECK(known.expected("default", owner_hierarchy) == name_a);
    CHECK(known.expected("default", standard_srk) == name_b);
    CHECK(known.expected("swtpm:port=2321", owner_hierarchy) == name_b);
    CHECK_FALSE(known.expected("swtpm:port=2321", standard_srk));
    CHECK_FALSE(known.expected("other", owner_hierarchy));
    CHECK(known.warnings().size() == 4);
}

TEST_CASE("systemd's SRK pin applies to the machine's own TPM only, and only where it is that key") {
    TPM2B_PUBLIC srk = storage_key_template();
    srk.publicArea.unique.ecc.x.size = 32;
    srk.publicArea.unique.ecc.y.size = 32;
    srk.publicArea.unique.ecc.x.buffer[0] = 7;
    const std::string srk_name = name_hex_of(srk);
    const KnownParents known = KnownParents::parse("", srk);
    CHECK(known.expected("default", standard_srk) == srk_name);
    CHECK(known.expected("device:/dev/tpmrm0", standard_srk) == srk_name);
    CHECK(known.expected("tabrmd", owner_hierarchy) == srk_name);  // the H-2 template: the same key
    CHECK_FALSE(known.expected("swtpm:port=2321", standard_srk));  // a simulator is another TPM
    // The user's own pin wins.
    const KnownParents both = KnownParents::parse("0x81000001 " + name_a + " default\n", srk);
    CHECK(both.expected("default", standard_srk) == name_a);
    // An RSA SRK is not what 0x40000001 (ECC) re-creates.
    TPM2B_PUBLIC rsa = storage_key_template(TPM2_ALG_RSA);
    rsa.publicArea.unique.rsa.size = 256;
    const KnownParents rsa_known = KnownParents::parse("", rsa);
    CHECK(rsa_known.expected("default", standard_srk) == name_hex_of(rsa));
    CHECK_FALSE(rsa_known.expected("default", owner_hierarchy));
}

TEST_CASE("check_storage_key: exactly the storage attributes, userWithAuth and noDA allowed") {
    TPMT_PUBLIC area = storage_key_template().publicArea;
    CHECK_NOTHROW(check_storage_key(area, standard_srk));
    area.objectAttributes &= ~(TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA);
    CHECK_NOTHROW(check_storage_key(area, standard_srk));
    for (const TPMA_OBJECT missing : {TPMA_OBJECT_FIXEDTPM, TPMA_OBJECT_FIXEDPARENT, TPMA_OBJECT_SENSITIVEDATAORIGIN,
                                      TPMA_OBJECT_RESTRICTED, TPMA_OBJECT_DECRYPT}) {
        TPMT_PUBLIC bad = storage_key_template().publicArea;
        bad.objectAttributes &= ~missing;
        INFO(attributes_text(missing));
        CHECK_THROWS_WITH(check_storage_key(bad, standard_srk), Catch::Contains("lacks " + attributes_text(missing)) &&
                                                                    Catch::Contains("0x81000001"));
    }
    for (const TPMA_OBJECT extra : {TPMA_OBJECT_SIGN_ENCRYPT, TPMA_OBJECT_ADMINWITHPOLICY, TPMA_OBJECT_STCLEAR,
                                    TPMA_OBJECT_ENCRYPTEDDUPLICATION}) {
        TPMT_PUBLIC bad = storage_key_template().publicArea;
        bad.objectAttributes |= extra;
        INFO(attributes_text(extra));
        CHECK_THROWS_WITH(check_storage_key(bad, standard_srk), Catch::Contains("also has " + attributes_text(extra)));
    }
}
