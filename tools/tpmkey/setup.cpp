// tpmkey setup: the TCG standard storage key (SRK) persisted at 0x81000001,
// so that no login pays a TPM2_CreatePrimary (docs/performance.md).

#include "cli.hpp"
#include "core/attestation/ek_certificate.hpp"
#include "core/base/printable.hpp"
#include "core/files/config.hpp"
#include "core/files/file_read.hpp"
#include "core/pin/prompt.hpp"
#include "core/tpm/tpm.hpp"
#include "core/tpm/tpm_keys.hpp"
#include "core/tpm/tpm_queries.hpp"
#include "core/trust/endorsement.hpp"
#include "core/trust/known_parents.hpp"
#include "core/trust/owner_srk.hpp"

#include <iostream>
#include <string>

namespace tpmkey::cli {

namespace {

constexpr CommandSpec setup_spec{"setup",
                                 "persist the standard storage key (SRK) at 0x81000001",
                                 "tpmkey setup [--owner-auth-file FILE] [--ek-cert FILE]",
                                 "Makes the TCG standard storage key (the ECC P-256 SRK: the key parent\n"
                                 "0x40000001 re-creates on every use) and persists it at 0x81000001, where\n"
                                 "tpmkey-keygen then puts new keys: a login then reads the key\n"
                                 "(TPM2_ReadPublic) instead of re-creating it (TPM2_CreatePrimary, tens of\n"
                                 "milliseconds to seconds on a real TPM). Pins it as tpmkey-keygen pins a\n"
                                 "parent. Changes nothing when 0x81000001 holds anything else; says so and\n"
                                 "exits 0 when it holds the standard SRK already.\n"
                                 "\n"
                                 "  --owner-auth-file FILE  the password of the TPM's owner hierarchy, from\n"
                                 "                     the first line of FILE (asked on the terminal if the\n"
                                 "                     hierarchy has one and no FILE is given)\n"
                                 "  --ek-cert FILE     instead: this TPM's EK certificate (PEM or DER), for a\n"
                                 "                     TPM that keeps none in NV (tpmkey doctor says where\n"
                                 "                     its maker publishes it). Checked (the EK-certificate\n"
                                 "                     rule, the chain to the trusted EK roots, its key the\n"
                                 "                     EK this TPM re-creates), then kept in\n"
                                 "                     $XDG_CONFIG_HOME/tpmkey/ek-certificates, where every\n"
                                 "                     proof of a storage key finds it. Persists nothing\n"
                                 "                     in the TPM\n",
                                 {"--owner-auth-file", "--ek-cert", nullptr},
                                 {nullptr},
                                 0};

// setup --ek-cert FILE: the certificate checked and kept; the pins of
// this TPM whose EK it certifies say so from now on.
int supply_ek_cert(const std::string& file) {
    KnownParents known = KnownParents::load();
    const Config config = load_config();
    Tpm tpm(config.tpm);
    const Bytes data = read_regular_file(file, 64 * 1024).data;
    SuppliedEk ek;
    try {
        ek = supply_ek_certificate(tpm, data, default_ek_roots());
    } catch (const Error& e) {
        throw Error(file + ": " + e.what() + "; nothing was changed");
    }
    std::cout << "Checked " << printable(file) << ": the " << ek.algorithm << " EK certificate of this TPM, issued by "
              << printable(ek.issuer) << ", chain verified; kept in "
              << printable(supplied_ek_certificates_path().string()) << ".\n";
    // A pin keeps the EK that proved it; one trusted on first use is not
    // rewritten here (the certificate may be of another template's EK than
    // the one that proved it): forgetting it makes the next use prove the
    // parent by the certified EK, with no first use to trust.
    const std::string& id = tpm.address().identity();
    bool uncertified = false;
    for (const ParentPin& pin : known.pins_of(id))
        uncertified = uncertified || !pin.certified();
    if (uncertified)
        std::cout << "This TPM's pins in " << printable(KnownParents::file_path().string())
                  << " name its EK trusted on first use: run tpmkey forget-tpm, and the next use "
                     "(tpmkey-keygen, the module) proves and pins its storage key by the certified EK.\n";
    return 0;
}

// The owner hierarchy's password: none when it has none, else from the
// file or the terminal.
Secret owner_password(Tpm& tpm, const Parsed& p) {
    const std::string file = p.value("--owner-auth-file");
    if (!owner_auth_set(tpm)) {
        if (p.has_value("--owner-auth-file"))
            std::cerr << "tpmkey setup: the TPM's owner hierarchy has no password: " << file << " is not used\n";
        return Secret();
    }
    Secret password;
    if (p.has_value("--owner-auth-file")) {
        password = read_pin_file(file);
        if (password.empty())
            throw Error(file +
                        ": the file is empty, and the TPM's owner hierarchy has a password; nothing was changed");
        return password;
    }
    try {
        password = read_pin_from_terminal("Password of the TPM's owner hierarchy: ");
    } catch (const Error& e) {
        throw Error(std::string("the TPM's owner hierarchy has a password: give it with --owner-auth-file FILE or "
                                "on a terminal (") +
                    e.what() + "); nothing was changed");
    }
    if (password.empty())
        throw Error("no password given for the TPM's owner hierarchy; nothing was changed");
    return password;
}

// Proves and pins the storage key at 0x81000001 (load_verified_parent),
// and says what was found; false when it could not be proven or pinned.
bool prove_and_pin(Tpm& tpm, KnownParents& known) {
    try {
        ParentCheck check;
        (void)load_verified_parent(tpm, standard_srk, known, &check);
        if (!check.not_recorded.empty()) {
            std::cerr << "tpmkey setup: the storage key at 0x81000001 was not pinned: " << check.not_recorded << "\n";
            return false;
        }
        std::cout << (check.proven_now ? "Pinned it in " : "It matches its pin in ")
                  << KnownParents::file_path().string() << ": its name is " << check.name_hex << " ("
                  << parent_check_text(standard_srk, check)
                  << "; compare the name with one from a trusted source: docs/security.md).\n";
        return true;
    } catch (const UnverifiedParent& e) {
        // Persisted, but nothing will be salted to it: keygen and the
        // module check it again and refuse it the same way.
        std::cerr << "tpmkey setup: the storage key at 0x81000001 is not proven, so no key will use it: "
                  << diagnosis_line(diagnose_untrusted_parent(e)) << "\n";
        return false;
    }
}

int cmd_setup(const Parsed& p) {
    if (p.has_value("--ek-cert"))
        return supply_ek_cert(p.value("--ek-cert"));
    KnownParents known = KnownParents::load();
    if (known.problem())
        throw Error(*known.problem() + ": the pinned storage keys cannot be trusted, so the new one could not be "
                                       "pinned; nothing was changed");
    const Config config = load_config();
    Tpm tpm(config.tpm);

    const PersistentSrk present = inspect_persistent_srk(tpm);
    using State = PersistentSrk::State;
    if (present.state == State::standard) {
        std::cout << "0x81000001 holds the TCG standard storage key (SRK) already: nothing to do.\n";
        return prove_and_pin(tpm, known) ? 0 : 1;
    }
    if (present.state == State::other_storage_key)
        throw Error("0x81000001 holds " + present.detail +
                    ", perhaps another program's (tpm2-pkcs11's primary): not touched, nothing was changed. "
                    "New keys can use it on purpose with tpmkey-keygen --parent 0x81000001");
    if (present.state == State::unfit)
        throw Error("0x81000001 holds a key that must not be a parent (" + present.detail +
                    "): not touched, nothing was changed");

    const Secret password = owner_password(tpm, p);
    try {
        // Its handle is closed before it is read again: ESAPI keeps one
        // object per persistent handle.
        (void)persist_standard_srk(tpm, password, [&](const TpmObject& made) {
            // Before it is persisted: the key must not contradict a pin (but
            // may replace one of a key the TPM's clear evicted: check_owner_srk_pin).
            check_owner_srk_pin(tpm, loaded_name_hex(tpm, made), known);
        });
        std::cout << "Made the TCG standard storage key (SRK) and persisted it at 0x81000001: new keys use it, and "
                     "their logins read it instead of re-creating it.\n";
        if (!prove_and_pin(tpm, known))
            return 1;
    } catch (const TpmError& e) {
        if (e.is(TPM2_RC_AUTH_FAIL) || e.is(TPM2_RC_BAD_AUTH))
            throw Error("the TPM refused the password of its owner hierarchy; nothing was changed");
        throw;
    } catch (const ParentMismatch& e) {
        throw Error(std::string(e.what()) + "; the new storage key was not persisted, nothing was changed");
    }
    return 0;
}

}  // namespace

const Command setup_command{&setup_spec, cmd_setup};

}  // namespace tpmkey::cli
