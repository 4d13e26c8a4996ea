#include "login_cost.hpp"

#include <sstream>

namespace tpmkey {

std::string priced_name(const std::string& command, KeyAlgorithm key) {
    // tpm2-pkcs11 signs CKM_RSA_PKCS (what OpenSSH asks for) with
    // TPM2_RSA_Decrypt of the block it pads itself (its src/lib/sign.c: "RSA
    // Decrypt is the RSA operation with the private key"): the private-key
    // operation of an RSA signature, and the very command wolfTPM's "RSA
    // 2048 Private" figure times.
    if (command == "RSA_Decrypt" && key == KeyAlgorithm::rsa)
        return "Sign RSA 2048";
    if (command != "Sign")
        return command;
    return key == KeyAlgorithm::rsa ? "Sign RSA 2048" : "Sign ECDSA P-256";
}

LoginCost login_cost(const std::vector<std::string>& commands, KeyAlgorithm key, const CommandTimes& times) {
    LoginCost cost;
    for (const std::string& command : commands) {
        const auto it = times.find(priced_name(command, key));
        if (it == times.end())
            cost.unpriced.push_back(command);
        else
            cost.ms += it->second;
    }
    return cost;
}

// wolfTPM's benchmark (examples/bench/bench.c), averages in ms as its
// README lists them per chip. What each of ours stands for:
//   CreatePrimary     "ECC 256 key gen": a P-256 key made under the
//                     storage key (the README: "using existing template
//                     from hierarchy seed"); ours makes the ECC P-256
//                     storage key, the same work (a scalar multiplication).
//   StartAuthSession  "ECDHE 256 agree": our sessions are salted with the
//                     P-256 storage key, which costs the TPM one ECDH.
//   Sign ECDSA P-256  "ECDSA 256 sign".
//   Sign RSA 2048     "RSA 2048 Private": a TPM2_RSA_Decrypt without padding
//                     (bench.c), the private-key operation of an RSASSA
//                     signature; what tpm2-pkcs11 sends to sign with RSA.
std::vector<ReferenceChip> reference_chips() {
    const std::string wolftpm = "https://github.com/wolfSSL/wolfTPM/blob/master/README.md#benchmarks";
    return {
        {"Infineon OPTIGA SLB9670 (SPI, 43 MHz)",
         wolftpm,
         {{"CreatePrimary", 231.350},
          {"StartAuthSession", 232.144},
          {"Sign ECDSA P-256", 68.865},
          {"Sign RSA 2048", 163.207}}},
        {"STMicroelectronics ST33TP (SPI, 33 MHz)",
         wolftpm,
         {{"CreatePrimary", 219.770},
          {"StartAuthSession", 247.085},
          {"Sign ECDSA P-256", 42.338},
          {"Sign RSA 2048", 247.752}}},
        {"Nuvoton NPCT750 (SPI, 43 MHz)",
         wolftpm,
         {{"CreatePrimary", 84.020},
          {"StartAuthSession", 29.402},
          {"Sign ECDSA P-256", 56.399},
          {"Sign RSA 2048", 70.261}}},
    };
}

namespace {

std::vector<std::string> words(const char* text) {
    std::istringstream in(text);
    std::vector<std::string> out;
    for (std::string w; in >> w;)
        out.push_back(w);
    return out;
}

}  // namespace

std::vector<std::string> login_commands(bool resource_manager, bool pin, ParentKind parent) {
    const bool owner = parent == ParentKind::created;
    // With a resource manager the module keeps the parent, the key and the
    // PIN's session loaded from C_Login to C_Finalize. A login with a PIN
    // first reads the TPM's lockout counter (GetCapability).
    if (resource_manager && pin)
        return words(owner ? "GetCapability CreatePrimary Load StartAuthSession ObjectChangeAuth Sign "
                             "FlushContext FlushContext FlushContext"
                           : "GetCapability ReadPublic Load StartAuthSession ObjectChangeAuth Sign "
                             "FlushContext FlushContext");
    if (resource_manager)
        return words(owner ? "CreatePrimary Load Sign FlushContext FlushContext" : "ReadPublic Load Sign FlushContext");
    // Without one it keeps nothing in the TPM between two calls: the parent
    // (and a key without PIN) stay as saved contexts in the process, loaded
    // again by each call (ContextLoad, no second CreatePrimary) and flushed
    // before it returns.
    if (pin)
        return words(owner ? "GetCapability CreatePrimary ContextSave Load StartAuthSession ObjectChangeAuth "
                             "FlushContext FlushContext FlushContext "
                             "ContextLoad Load StartAuthSession Sign "
                             "FlushContext FlushContext FlushContext"
                           : "GetCapability ReadPublic Load StartAuthSession ObjectChangeAuth "
                             "FlushContext FlushContext "
                             "Load StartAuthSession Sign "
                             "FlushContext FlushContext");
    return words(owner ? "CreatePrimary ContextSave Load ContextSave Sign FlushContext FlushContext"
                       : "ReadPublic Load ContextSave Sign FlushContext");
}

}  // namespace tpmkey
