// tpmkey-test-keytool: the core's key file reader and signer behind a
// command line, so that shell tests can hold it against tools we did not
// write (tpm2-openssl, stock openssl, ssh-keygen): the core alone, without
// the module or the CLI (tpmkey has no command that signs); test-only,
// never installed.
//
//   tpmkey-test-keytool pubkey FILE        the OpenSSH public key, no comment
//   tpmkey-test-keytool info FILE          "parent 0x... pin yes|no"
//   tpmkey-test-keytool sign FILE IN OUT   SHA-256 of IN signed in the TPM:
//                                          ECDSA as DER (what openssl verifies),
//                                          RSA as PKCS#1 v1.5 (RSASSA)
//
// The PIN of a key that needs one comes from $TPMKEY_TEST_PIN. The TPM is
// the one TPMKEY_TCTI names, and only if it is a simulator.

#include "core/base/error.hpp"
#include "core/keys/key_file.hpp"
#include "core/keys/public_key.hpp"
#include "core/tpm/tpm_keys.hpp"
#include "simulator_tcti.hpp"
#include "tool_files.hpp"

#include <openssl/bn.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace tpmkey;
using test::read_all;
using test::write_all;

Bytes sha256(const Bytes& data) {
    Bytes digest(32);
    unsigned int size = 0;
    if (!EVP_Digest(data.data(), data.size(), digest.data(), &size, EVP_sha256(), nullptr) || size != 32)
        throw Error("SHA-256 failed");
    return digest;
}

// Raw r||s (what sign_digest returns for ECDSA) as an ECDSA-Sig-Value.
Bytes ecdsa_der(const Bytes& raw) {
    const std::size_t half = raw.size() / 2;
    std::unique_ptr<ECDSA_SIG, decltype(&ECDSA_SIG_free)> sig(ECDSA_SIG_new(), ECDSA_SIG_free);
    BIGNUM* r = BN_bin2bn(raw.data(), static_cast<int>(half), nullptr);
    BIGNUM* s = BN_bin2bn(raw.data() + half, static_cast<int>(half), nullptr);
    if (!sig || !r || !s || !ECDSA_SIG_set0(sig.get(), r, s)) {
        BN_free(r);
        BN_free(s);
        throw Error("cannot build the DER signature");
    }
    unsigned char* der = nullptr;
    const int size = i2d_ECDSA_SIG(sig.get(), &der);
    if (size <= 0)
        throw Error("cannot encode the DER signature");
    Bytes out(der, der + size);
    OPENSSL_free(der);
    return out;
}

int sign(const std::string& key_path, const std::string& in_path, const std::string& out_path) {
    const std::optional<std::string> tcti = test::simulator_tcti();
    if (!tcti)
        throw Error(test::refusal);
    const KeyFile key = read_key_file(key_path);
    const PublicKey pub(key.blobs.pub.publicArea);
    Secret pin;
    if (key.needs_pin()) {
        const char* text = std::getenv("TPMKEY_TEST_PIN");
        if (!text)
            throw Error(key_path + " needs a PIN: set TPMKEY_TEST_PIN");
        pin = Secret(std::string_view(text));
    }
    const Bytes digest = sha256(read_all(in_path));

    Tpm tpm(test::simulator_address());
    const TpmObject parent = load_parent(tpm, key.parent);
    const Authorization auth = Authorization::for_secret(tpm, parent, key.needs_pin());
    const TpmObject object = load_key(tpm, parent, auth, key.blobs);
    const AuthValue auth_value(tpm, object, pin);
    const Bytes signature =
        sign_digest(tpm, object, auth, pub.algorithm().scheme, TPM2_ALG_SHA256, digest, pub.ec_field_size());
    write_all(out_path, pub.kind() == KeyKind::rsa ? signature : ecdsa_der(signature));
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        const std::vector<std::string> args(argv + 1, argv + argc);
        if (args.size() == 2 && args[0] == "pubkey") {
            const KeyFile key = read_key_file(args[1]);
            std::cout << PublicKey(key.blobs.pub.publicArea).ssh_line("") << "\n";
            return 0;
        }
        if (args.size() == 2 && args[0] == "info") {
            const KeyFile key = read_key_file(args[1]);
            std::cout << "parent " << handle_text(key.parent) << " pin " << (key.needs_pin() ? "yes" : "no") << "\n";
            return 0;
        }
        if (args.size() == 4 && args[0] == "sign")
            return sign(args[1], args[2], args[3]);
        std::cerr << "usage: tpmkey-test-keytool pubkey FILE | info FILE | sign FILE IN OUT\n";
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "tpmkey-test-keytool: " << e.what() << "\n";
        return 1;
    }
}
