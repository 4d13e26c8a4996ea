#include "core/tpm/pin_object.hpp"

#include "core/base/error.hpp"
#include "core/files/atomic_file.hpp"
#include "core/files/config.hpp"
#include "core/keys/key_parts.hpp"
#include "core/keys/tpm_policy.hpp"
#include "core/tpm/tpm_keys.hpp"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace tpmkey {

std::filesystem::path pin_object_path() {
    const std::filesystem::path config = config_file_path();
    return config.empty() ? config : config.parent_path() / "pin-object";
}

TPM2B_PUBLIC pin_object_template() {
    TPM2B_PUBLIC pub{};
    TPMT_PUBLIC& area = pub.publicArea;
    area.type = TPM2_ALG_KEYEDHASH;
    area.nameAlg = TPM2_ALG_SHA256;
    area.objectAttributes = pin_object_attributes;
    area.parameters.keyedHashDetail.scheme.scheme = TPM2_ALG_NULL;
    return pub;
}

void check_pin_object(const TPMT_PUBLIC& area, const std::string& name) {
    if (area.type != TPM2_ALG_KEYEDHASH || area.nameAlg != TPM2_ALG_SHA256 ||
        area.objectAttributes != pin_object_attributes || area.authPolicy.size != 0 ||
        area.parameters.keyedHashDetail.scheme.scheme != TPM2_ALG_NULL)
        throw Error(name + ": not a tpmkey PIN object (a keyedhash data object with the attributes " +
                    attributes_text(pin_object_attributes) + " and no policy)");
}

KeyFile create_pin_object(Tpm& tpm, const TpmObject& parent, std::uint32_t parent_handle, const Secret& pin) {
    if (pin.empty())
        throw Error("a PIN object needs a PIN");
    const TPM2B_PUBLIC in_public = pin_object_template();
    TPM2B_SENSITIVE_CREATE sensitive{};
    fill_auth(sensitive.sensitive.userAuth, pin);
    // A data object's data comes from the caller (sensitiveDataOrigin must
    // be clear), and the TPM refuses an empty one: 16 random bytes, which
    // nothing ever reads. The name's uniqueness is the TPM's seed's.
    sensitive.sensitive.data.size = 16;
    if (RAND_bytes(sensitive.sensitive.data.buffer, sensitive.sensitive.data.size) != 1)
        throw Error("OpenSSL cannot make random bytes");
    const TPM2B_DATA outside_info{};
    const TPML_PCR_SELECTION pcrs{};
    const Authorization auth = Authorization::for_secret(tpm, parent, true);
    EsysPtr<TPM2B_PRIVATE> priv;
    EsysPtr<TPM2B_PUBLIC> pub;
    const TSS2_RC rc =
        Esys_Create(tpm.esys(), parent.handle(), auth.session(), ESYS_TR_NONE, ESYS_TR_NONE, &sensitive, &in_public,
                    &outside_info, &pcrs, out_ptr(priv), out_ptr(pub), nullptr, nullptr, nullptr);
    OPENSSL_cleanse(&sensitive, sizeof sensitive);
    check_rc(rc, "TPM2_Create of the PIN object");
    KeyFile file;
    file.empty_auth = false;
    file.parent = parent_handle;
    file.blobs = KeyBlobs{*pub, *priv};
    return file;
}

std::optional<KeyFile> read_pin_object() {
    const std::filesystem::path path = pin_object_path();
    std::error_code ec;
    if (path.empty() || !std::filesystem::exists(std::filesystem::symlink_status(path, ec)))
        return std::nullopt;
    KeyFile file = read_key_file(path, KeyFileKind::pin_object);
    check_pin_object(file.blobs.pub.publicArea, path.string());
    return file;
}

void write_pin_object(const KeyFile& pin_object, bool replace) {
    const std::filesystem::path path = pin_object_path();
    if (path.empty())
        throw Error("no home directory: nowhere to keep the PIN object");
    if (::mkdir(path.parent_path().c_str(), 0700) != 0 && errno != EEXIST)
        throw Error(path.parent_path().string() + ": cannot create: " + std::strerror(errno));
    write_file_atomically(path, format_key_file(pin_object), 0600, replace ? Replace::yes : Replace::no);
}

Bytes shared_pin_name(const KeyFile& key) {
    for (const PolicyCommand& command : key.policy)
        if (command.code == TPM2_CC_PolicySecret)
            return policy_secret_name(command);
    return {};
}

KeyFile pin_object_for(const KeyFile& key) {
    const std::string path = pin_object_path().string();
    std::optional<KeyFile> file = read_pin_object();
    if (!file)
        throw Error("the key's PIN is the shared PIN, and its PIN object " + path +
                    " is missing: restore it from a backup (no other file opens the key)");
    if (pin_object_name(*file) != shared_pin_name(key))
        throw Error("the key's PIN is the shared PIN of another PIN object than " + path +
                    " (the key was made under another account or before that file was replaced): restore that one");
    return *std::move(file);
}

Bytes pin_object_name(const KeyFile& pin_object) { return tpm_name(pin_object.blobs.pub.publicArea); }

void run_policy_secret(Tpm& tpm, ESYS_TR policy_session, const TpmObject& pin_object, const Authorization& auth) {
    check_rc(Esys_PolicySecret(tpm.esys(), pin_object.handle(), policy_session, auth.session(), ESYS_TR_NONE,
                               ESYS_TR_NONE, nullptr, nullptr, nullptr, 0, nullptr, nullptr),
             "TPM2_PolicySecret with the PIN object", TpmStep::use_key);
}

}  // namespace tpmkey
