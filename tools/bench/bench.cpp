// tpmkey-bench: the in-process timings of tools/bench/run (docs/performance.md).
//
//   tpmkey-bench pkcs11 MODULE.so TOKEN_LABEL ecdsa|rsa [--pin PIN] [-n N]
//       Loads any PKCS#11 module, times C_Initialize .. the first C_Sign
//       (split into initialize+find, login, first signature), then N more
//       signatures (C_SignInit + C_Sign each), as OpenSSH signs: CKM_ECDSA
//       over a SHA-256 hash, CKM_RSA_PKCS over a SHA-256 DigestInfo.
//   tpmkey-bench esys TCTI KEYFILE [--pin PIN] [-n N]
//       The floor: the key loaded once with ESAPI (tpmkey's core), then N
//       Esys_Sign calls on it, with the authorization the module uses for
//       that key (password session without a PIN, salted HMAC session with
//       parameter encryption with one).
//   tpmkey-bench model ecdsa|rsa COMMAND...
//       The modelled TPM time of a counted command sequence (names as
//       count-tpm-commands prints them) with a key of that type, on each
//       reference chip (tools/bench/login_cost.hpp, the model `tpmkey bench`
//       uses too): one line per chip, "MS<TAB>NOT_PRICED<TAB>CHIP", where
//       NOT_PRICED counts the commands without a published figure.
//   tpmkey-bench chips
//       The reference chips' figures: "CHIP<TAB>COMMAND<TAB>MS<TAB>SOURCE".
//
// Prints one line of key=value pairs (times in milliseconds) for the
// driver, e.g. "first_ms=12.3 ... sign_median_ms=1.2 sign_p90_ms=...".
// Measures only; it judges nothing.
#include "core/base/error.hpp"
#include "core/keys/algorithms.hpp"
#include "core/keys/key_file.hpp"
#include "core/keys/public_key.hpp"
#include "core/tpm/tpm.hpp"
#include "core/tpm/tpm_keys.hpp"
#include "login_cost.hpp"

#include <p11-kit/pkcs11.h>

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

struct Options {
    std::string pin;
    bool has_pin = false;
    int n = 200;
};

// Reads --pin PIN and -n N after the positional arguments.
Options parse_options(int argc, char** argv, int first) {
    Options o;
    for (int i = first; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--pin" && i + 1 < argc) {
            o.pin = argv[++i];
            o.has_pin = true;
        } else if (arg == "-n" && i + 1 < argc) {
            o.n = std::stoi(argv[++i]);
        } else {
            throw std::runtime_error("unknown argument: " + arg);
        }
    }
    return o;
}

// median, p90 (nearest rank), min, max of the samples, as key=value pairs.
// How long each of `n` runs of `f` took, in ms.
template <class F>
std::vector<double> time_each(int n, F&& f) {
    std::vector<double> samples;
    samples.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
        const auto t = Clock::now();
        f();
        samples.push_back(ms_since(t));
    }
    return samples;
}

std::string stats(const std::string& name, std::vector<double> samples) {
    if (samples.empty())
        return "";
    std::sort(samples.begin(), samples.end());
    const auto rank = [&](double q) {
        const auto k = static_cast<std::size_t>(q * static_cast<double>(samples.size()) + 0.999999);
        return samples[std::min(samples.size(), std::max<std::size_t>(k, 1)) - 1];
    };
    const std::size_t m = samples.size();
    const double median = m % 2 ? samples[m / 2] : (samples[m / 2 - 1] + samples[m / 2]) / 2;
    char buf[256];
    std::snprintf(buf, sizeof buf, " %s_n=%zu %s_median_ms=%.3f %s_p90_ms=%.3f %s_min_ms=%.3f %s_max_ms=%.3f",
                  name.c_str(), m, name.c_str(), median, name.c_str(), rank(0.9), name.c_str(), samples.front(),
                  name.c_str(), samples.back());
    return buf;
}

// A fixed SHA-256 value: what is signed does not change the TPM's work.
const std::vector<std::uint8_t> sha256_of_something(32, 0x5a);

// ---------------------------------------------------------------- PKCS#11

void check(CK_RV rv, const char* what) {
    if (rv != CKR_OK) {
        char buf[128];
        std::snprintf(buf, sizeof buf, "%s failed: CK_RV 0x%lx", what, static_cast<unsigned long>(rv));
        throw std::runtime_error(buf);
    }
}

std::string trimmed_label(const CK_UTF8CHAR (&label)[32]) {
    std::string s(reinterpret_cast<const char*>(label), sizeof label);
    s.erase(s.find_last_not_of(' ') + 1);
    return s;
}

int run_pkcs11(const std::string& module_path, const std::string& token_label, const std::string& type,
               const Options& o) {
    const bool ec = type == "ecdsa";
    if (!ec && type != "rsa")
        throw std::runtime_error("key type must be ecdsa or rsa");
    void* lib = ::dlopen(module_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        throw std::runtime_error(std::string("dlopen: ") + ::dlerror());
    CK_C_GetFunctionList get_list = nullptr;
    void* sym = ::dlsym(lib, "C_GetFunctionList");
    std::memcpy(&get_list, &sym, sizeof get_list);
    if (!get_list)
        throw std::runtime_error("no C_GetFunctionList in " + module_path);
    CK_FUNCTION_LIST_PTR f = nullptr;
    check(get_list(&f), "C_GetFunctionList");

    // What OpenSSH signs: a SHA-256 hash (ECDSA) or its DigestInfo (RSA).
    std::vector<std::uint8_t> data;
    if (!ec)
        data.assign(tpmkey::digest_info::sha256, std::end(tpmkey::digest_info::sha256));
    for (std::uint8_t b : sha256_of_something)
        data.push_back(b);
    CK_MECHANISM mech{ec ? CKM_ECDSA : CKM_RSA_PKCS, nullptr, 0};

    const auto t0 = Clock::now();
    check(f->C_Initialize(nullptr), "C_Initialize");
    CK_ULONG nslots = 0;
    check(f->C_GetSlotList(CK_TRUE, nullptr, &nslots), "C_GetSlotList");
    std::vector<CK_SLOT_ID> slots(nslots);
    check(f->C_GetSlotList(CK_TRUE, slots.data(), &nslots), "C_GetSlotList");
    CK_SLOT_ID slot = 0;
    bool found_slot = false;
    CK_TOKEN_INFO info{};
    for (CK_ULONG i = 0; i < nslots && !found_slot; ++i) {
        check(f->C_GetTokenInfo(slots[i], &info), "C_GetTokenInfo");
        if (trimmed_label(info.label) == token_label) {
            slot = slots[i];
            found_slot = true;
        }
    }
    if (!found_slot)
        throw std::runtime_error("no token labelled '" + token_label + "'");
    CK_SESSION_HANDLE session = 0;
    check(f->C_OpenSession(slot, CKF_SERIAL_SESSION, nullptr, nullptr, &session), "C_OpenSession");
    const double init_ms = ms_since(t0);

    const auto t1 = Clock::now();
    if (o.has_pin) {
        std::vector<CK_UTF8CHAR> pin(o.pin.begin(), o.pin.end());
        check(f->C_Login(session, CKU_USER, pin.data(), pin.size()), "C_Login");
    }
    const double login_ms = ms_since(t1);

    const auto t2 = Clock::now();
    CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
    CK_KEY_TYPE kt = ec ? CKK_EC : CKK_RSA;
    CK_ATTRIBUTE tmpl[] = {{CKA_CLASS, &cls, sizeof cls}, {CKA_KEY_TYPE, &kt, sizeof kt}};
    check(f->C_FindObjectsInit(session, tmpl, 2), "C_FindObjectsInit");
    CK_OBJECT_HANDLE key = 0;
    CK_ULONG nfound = 0;
    check(f->C_FindObjects(session, &key, 1, &nfound), "C_FindObjects");
    check(f->C_FindObjectsFinal(session), "C_FindObjectsFinal");
    if (nfound != 1)
        throw std::runtime_error("no " + type + " private key in token '" + token_label + "'");

    std::vector<CK_BYTE> sig(1024);
    const auto sign_once = [&] {
        CK_ULONG len = sig.size();
        check(f->C_SignInit(session, &mech, key), "C_SignInit");
        check(f->C_Sign(session, data.data(), data.size(), sig.data(), &len), "C_Sign");
    };
    sign_once();
    const double first_sign_ms = ms_since(t2);
    const double first_ms = ms_since(t0);

    const std::vector<double> samples = time_each(o.n, sign_once);
    check(f->C_CloseSession(session), "C_CloseSession");
    check(f->C_Finalize(nullptr), "C_Finalize");
    std::printf("first_ms=%.3f init_ms=%.3f login_ms=%.3f first_sign_ms=%.3f%s\n", first_ms, init_ms, login_ms,
                first_sign_ms, stats("sign", samples).c_str());
    // No dlclose: some modules leave threads or atexit handlers behind.
    return 0;
}

// ---------------------------------------------------------------- ESAPI floor

int run_esys(const std::string& tcti, const std::string& key_path, const Options& o) {
    using namespace tpmkey;
    const KeyFile key_file = read_key_file(key_path);
    Tpm tpm(TpmAddress(tcti, TpmAddress::Source::command_line, "the TCTI argument", std::nullopt));
    const TpmObject parent = load_parent(tpm, key_file.parent);
    const Secret pin(o.pin);
    const Authorization auth = Authorization::for_secret(tpm, parent, o.has_pin);
    const TpmObject key = load_key(tpm, parent, auth, key_file.blobs);
    const AuthValue auth_value(tpm, key, pin);

    // The core's TPM2_Sign: no hashing, no PKCS#11, the TPM's time alone.
    const PublicKey pub(key_file.blobs.pub.publicArea);
    const auto sign_once = [&] {
        (void)sign_digest(tpm, key, auth, pub.algorithm().scheme, TPM2_ALG_SHA256, sha256_of_something,
                          pub.ec_field_size());
    };
    sign_once();  // not counted: a fresh swtpm self-tests the algorithm here
    const std::vector<double> samples = time_each(o.n, sign_once);
    std::printf("%s\n", stats("sign", samples).c_str() + 1);
    return 0;
}

int run_model(const std::string& key, const std::vector<std::string>& commands) {
    if (key != "ecdsa" && key != "rsa")
        throw std::runtime_error("model: key type '" + key + "' is neither ecdsa nor rsa");
    const tpmkey::KeyAlgorithm algorithm = key == "rsa" ? tpmkey::KeyAlgorithm::rsa : tpmkey::KeyAlgorithm::ecdsa;
    for (const tpmkey::ReferenceChip& chip : tpmkey::reference_chips()) {
        const tpmkey::LoginCost cost = tpmkey::login_cost(commands, algorithm, chip.times);
        std::printf("%.1f\t%zu\t%s\n", cost.ms, cost.unpriced.size(), chip.name.c_str());
    }
    return 0;
}

int run_chips() {
    for (const tpmkey::ReferenceChip& chip : tpmkey::reference_chips())
        for (const auto& [command, ms] : chip.times)
            std::printf("%s\t%s\t%.3f\t%s\n", chip.name.c_str(), command.c_str(), ms, chip.source.c_str());
    return 0;
}

int usage() {
    std::fputs("usage: tpmkey-bench pkcs11 MODULE.so TOKEN_LABEL ecdsa|rsa [--pin PIN] [-n N]\n"
               "       tpmkey-bench esys TCTI KEYFILE [--pin PIN] [-n N]\n"
               "       tpmkey-bench model ecdsa|rsa COMMAND...\n"
               "       tpmkey-bench chips\n",
               stderr);
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        const std::string cmd = argc > 1 ? argv[1] : "";
        if (cmd == "pkcs11" && argc >= 5)
            return run_pkcs11(argv[2], argv[3], argv[4], parse_options(argc, argv, 5));
        if (cmd == "esys" && argc >= 4)
            return run_esys(argv[2], argv[3], parse_options(argc, argv, 4));
        if (cmd == "model" && argc >= 3)
            return run_model(argv[2], std::vector<std::string>(argv + 3, argv + argc));
        if (cmd == "chips" && argc == 2)
            return run_chips();
        return usage();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "tpmkey-bench: %s\n", e.what());
        return 1;
    }
}
