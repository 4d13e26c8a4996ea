// A TPM that says no: dictionary-attack lockout and the token flags, a TPM
// that goes away and comes back, a TPM whose object memory is full, and
// TPM_RC_RETRY answered by resending. docs/security.md lists what each
// proves.
#include "security.hpp"

#include <chrono>
#include <regex>
#include <set>
#include <sstream>

using namespace mt;
using namespace st;

namespace {

// The three flags PKCS#11 2.40 (3.2, CK_TOKEN_INFO) has for a user PIN
// that is about to run out of tries, as "LOW FINAL LOCKED" (- when unset).
std::string pin_flags(CK_SLOT_ID slot) {
    const CK_FLAGS f = token_flags(slot);
    return std::string(f & CKF_USER_PIN_COUNT_LOW ? "LOW" : "-") + " " + (f & CKF_USER_PIN_FINAL_TRY ? "FINAL" : "-") +
           " " + (f & CKF_USER_PIN_LOCKED ? "LOCKED" : "-");
}

std::string tcti_arg() { return " -T " + shell_quote(swtpm_tcti()); }

void set_da(int max_tries, int recovery, int lockout_recovery) {
    run_ok("tpm2_dictionarylockout -c" + tcti_arg() + " && tpm2_dictionarylockout -s -n " + std::to_string(max_tries) +
           " -t " + std::to_string(recovery) + " -l " + std::to_string(lockout_recovery) + tcti_arg());
}

// Signs `data` with `k` through a session of its own: the CK_RV of C_Sign
// (C_SignInit must succeed), and on success the signature is verified.
CK_RV try_sign(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE priv, const TestKey& k, const std::string& text) {
    const Bytes data = bytes(text);
    CK_MECHANISM m{k.rsa ? CKM_SHA256_RSA_PKCS : CKM_ECDSA_SHA256, nullptr, 0};
    REQUIRE_RV(p11()->C_SignInit(s, &m, priv), CKR_OK);
    Bytes sig(512);
    CK_ULONG n = sig.size();
    const CK_RV rv = p11()->C_Sign(s, const_cast<CK_BYTE_PTR>(data.data()), data.size(), sig.data(), &n);
    if (rv == CKR_OK) {
        sig.resize(n);
        CHECK(
            (k.rsa ? verify_rsa_message(k, "SHA256", false, data, sig) : verify_ecdsa_message(k, "SHA256", data, sig)));
    }
    return rv;
}

std::set<std::string> transient_handles() {
    std::set<std::string> out;
    std::istringstream lines(run_ok("tpm2_getcap" + tcti_arg() + " handles-transient"));
    for (std::string line; std::getline(lines, line);)
        if (line.rfind("- ", 0) == 0)
            out.insert(line.substr(2));
    return out;
}

// Another process (tpm2-tools, no resource manager) takes `n` of the TPM's
// transient object slots and keeps them; returns their handles.
std::set<std::string> occupy_slots(int n) {
    const std::set<std::string> before = transient_handles();
    for (int i = 0; i < n; ++i)
        run_ok("tpm2_createprimary -Q -C o -G ecc -c " +
               shell_quote((key_dir() / ("occupier-" + std::to_string(i) + ".ctx")).string()) + tcti_arg());
    std::set<std::string> taken;
    for (const std::string& h : transient_handles())
        if (!before.count(h))
            taken.insert(h);
    REQUIRE(taken.size() == static_cast<std::size_t>(n));
    return taken;
}

void release_slots(const std::set<std::string>& handles) {
    for (const std::string& h : handles)
        run_ok("tpm2_flushcontext " + h + tcti_arg());
}

bool mentions(const std::string& log, const std::string& regex) {
    return std::regex_search(log, std::regex(regex, std::regex::icase));
}

}  // namespace

TEST_CASE("DA lockout: token flags follow the TPM's counter; CKR_PIN_LOCKED says how long", "[lockout]") {
    const TestKey& k = key("ec384");
    // 3 tries; a failure is forgotten after 60 s, the lockout lasts 60 s:
    // long enough not to change during the test.
    set_da(3, 60, 60);
    LogCapture log("lockout");
    {
        Initialized init;
        const CK_SLOT_ID slot = slot_of(k.name);
        Session s(slot);
        // Listing stays TPM-free: nothing about the PIN before the TPM is open.
        CHECK(pin_flags(slot) == "- - -");
        login(s, k);  // opens the TPM
        REQUIRE_RV(p11()->C_Logout(s), CKR_OK);
        CHECK(pin_flags(slot) == "- - -");

        CHECK_RV(login_with(s, "wrong-1"), CKR_PIN_INCORRECT);
        CHECK(pin_flags(slot) == "LOW - -");
        // A typed PIN gets the tries the TPM gives but the last one.
        CHECK_RV(login_with(s, "wrong-2"), CKR_PIN_INCORRECT);
        CHECK(pin_flags(slot) == "LOW FINAL -");
        // One more wrong PIN would leave the TPM no try: the module sends no
        // PIN (docs/design.md, "PINs, keys and the TPM's lockout").
        CHECK_RV(login_with(s, "wrong-3"), CKR_PIN_LOCKED);
        CHECK(pin_flags(slot) == "LOW FINAL -");
        // Others may spend the TPM's tries; the flags follow its counter
        // (2 counted): with 2 tries the TPM is in lockout.
        run_ok("tpm2_dictionarylockout -s -n 2 -t 60 -l 60" + tcti_arg());
        CHECK(pin_flags(slot).ends_with("LOCKED"));
        CHECK_RV(login_with(s, "wrong-4"), CKR_PIN_LOCKED);
        CHECK_RV(login_with(s, k.pin), CKR_PIN_LOCKED);  // even the right PIN
        CHECK(pin_flags(slot).ends_with("LOCKED"));
    }
    const std::string text = log.text();
    INFO("module log:\n" << text);
    // One line that names the lockout and says when it ends (60 s here).
    CHECK(mentions(text, "lockout[^\n]*([0-9]+ ?(s|sec|second|seconds|min|minute|minutes)\\b)"));
    CHECK_FALSE(mentions(text, "0x9[0-9a-f]{2}\\b"));  // no raw TPM code instead of words

    // The administrator clears the lockout: the same token works again,
    // and the flags say so.
    set_da(32, 1, 1);
    Initialized init;
    const CK_SLOT_ID slot = slot_of(k.name);
    Session s(slot);
    login(s, k);
    CHECK(pin_flags(slot) == "- - -");
    CHECK(try_sign(s, find_one(s, CKO_PRIVATE_KEY), k, "after the lockout") == CKR_OK);
}

TEST_CASE("C_GetTokenInfo sends no TPM command before the TPM is needed", "[lockout]") {
    const std::filesystem::path pcap = key_dir() / "token-info.pcap";
    std::filesystem::remove(pcap);
    ScopedEnv tcti("TPMKEY_TCTI", "pcap:" + swtpm_tcti());
    ScopedEnv file("TCTI_PCAP_FILE", pcap.string());
    Initialized init;
    for (const TestKey& k : keys())
        (void)token_flags(slot_of(k.name));
    CHECK_FALSE(std::filesystem::exists(pcap));  // the pcap TCTI was never even opened
}

TEST_CASE("the TPM goes away: CKR_DEVICE_ERROR within seconds, a clear message; back, the same process signs",
          "[gone]") {
    const TestKey& plain = key("ec256");
    const TestKey& pin = key("ec384");
    const std::string dir = swtpm_dir();
    std::string port = read_text(std::filesystem::path(dir) / "port");
    while (!port.empty() && (port.back() == '\n' || port.back() == ' '))
        port.pop_back();
    REQUIRE_FALSE(port.empty());
    LogCapture log("gone");
    Initialized init;
    Session s(slot_of(plain.name));
    const CK_OBJECT_HANDLE priv = find_one(s, CKO_PRIVATE_KEY);
    REQUIRE(try_sign(s, priv, plain, "before") == CKR_OK);
    Session p(slot_of(pin.name));
    login(p, pin);
    const CK_OBJECT_HANDLE pin_priv = find_one(p, CKO_PRIVATE_KEY);

    run_ok(shell_quote(fixture("swtpm-stop")) + " " + shell_quote(dir));
    for (int round = 0; round < 2; ++round) {
        INFO("signature attempt " << round << " with the TPM gone");
        const auto t0 = std::chrono::steady_clock::now();
        const CK_RV rv = try_sign(s, priv, plain, "TPM gone");
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        CHECK((rv == CKR_DEVICE_ERROR || rv == CKR_DEVICE_REMOVED));
        CHECK(seconds < 10.0);  // no hang
        // Already the first failure says what happened, in words (not
        // only "TPM2_Sign failed (tcti:IO failure)").
        const std::string text = log.text();
        INFO("module log:\n" << text);
        CHECK(mentions(text, "cannot reach the TPM at TCTI '" + swtpm_tcti()));
    }
    {
        // A PIN key: a dead TPM is not a wrong PIN.
        const CK_RV rv = try_sign(p, pin_priv, pin, "TPM gone");
        CHECK((rv == CKR_DEVICE_ERROR || rv == CKR_DEVICE_REMOVED || rv == CKR_USER_NOT_LOGGED_IN));
        CHECK(rv != CKR_PIN_INCORRECT);
    }
    run_ok(shell_quote(fixture("swtpm-start")) + " --port " + port + " " + shell_quote(dir) + " >/dev/null");
    CHECK(try_sign(s, priv, plain, "TPM back") == CKR_OK);
    CK_RV pin_rv = try_sign(p, pin_priv, pin, "TPM back");
    if (pin_rv == CKR_USER_NOT_LOGGED_IN) {  // the module may have logged the token out
        login(p, pin);
        pin_rv = try_sign(p, find_one(p, CKO_PRIVATE_KEY), pin, "TPM back, logged in again");
    }
    CHECK(pin_rv == CKR_OK);

    // A TPM reset between two calls: the contexts the module saved in the
    // process (the parent's, the PIN-less key's) no longer load; it makes
    // the parent again, verifies it and loads the key from its file, in
    // the same call.
    run_ok(shell_quote(fixture("swtpm-restart")) + " --orderly " + shell_quote(dir) + " >/dev/null");
    CHECK(try_sign(s, priv, plain, "after a reset") == CKR_OK);
    CHECK(try_sign(p, find_one(p, CKO_PRIVATE_KEY), pin, "PIN key after a reset") == CKR_OK);
    CHECK(try_sign(s, priv, plain, "after a reset, again") == CKR_OK);
}

TEST_CASE("a full TPM: the module holds nothing between calls, else a clear error; nothing leaks", "[full]") {
    const TestKey& ec = key("ec256");
    const TestKey& rsa = key("rsa2048");
    REQUIRE(tpm_transient_objects() == 0);
    LogCapture log("full");
    {
        Initialized init;
        Session a(slot_of(ec.name));
        Session b(slot_of(rsa.name));
        const CK_OBJECT_HANDLE ec_priv = find_one(a, CKO_PRIVATE_KEY);
        const CK_OBJECT_HANDLE rsa_priv = find_one(b, CKO_PRIVATE_KEY);
        REQUIRE(try_sign(a, ec_priv, ec, "one") == CKR_OK);
        // The swtpm has no resource manager: nothing of ours stays loaded
        // between calls (TpmConnection::may_hold_objects).
        REQUIRE(tpm_transient_objects() == 0);
        // swtpm has 3 object slots; another process takes one. Each
        // signature needs two (the parent and the key), for the call only.
        const std::set<std::string> taken = occupy_slots(1);
        CHECK(try_sign(b, rsa_priv, rsa, "one slot taken") == CKR_OK);
        CHECK(try_sign(a, ec_priv, ec, "and the other key") == CKR_OK);
        CHECK(tpm_transient_objects() == 1);  // the other process's
        CHECK(tpm_loaded_sessions() == 0);
        release_slots(taken);
    }
    CHECK(tpm_transient_objects() == 0);

    // Every slot taken by someone else: nothing to give back.
    const std::set<std::string> taken = occupy_slots(3);
    Initialized init;
    Session a(slot_of(ec.name));
    const CK_OBJECT_HANDLE ec_priv = find_one(a, CKO_PRIVATE_KEY);
    const CK_RV rv = try_sign(a, ec_priv, ec, "no room");
    CHECK((rv == CKR_DEVICE_MEMORY || rv == CKR_DEVICE_ERROR));
    const std::string text = log.text();
    {
        INFO("module log:\n" << text);
        // Words a person can act on: the TPM is full, of objects.
        CHECK(mentions(text, "(full|out of memory|no room|memory)"));
        CHECK(mentions(text, "object"));
    }
    CHECK(transient_handles() == taken);  // nothing of ours left behind
    CHECK(tpm_loaded_sessions() == 0);
    release_slots(taken);
    CHECK(try_sign(a, ec_priv, ec, "room again") == CKR_OK);  // same process, no restart
}

TEST_CASE("TPM_RC_RETRY from the TPM: the command is sent again, at most 5 times", "[retry]") {
    // A key with a PIN: see the end of the test.
    const TestKey& k = key("ec384");
    const std::filesystem::path pcap = key_dir() / "retry.pcap";
    std::filesystem::remove(pcap);
    {
        ScopedEnv tcti("TPMKEY_TCTI", "pcap:" + swtpm_tcti());
        ScopedEnv file("TCTI_PCAP_FILE", pcap.string());
        Initialized init;
        Session s(slot_of(k.name));
        login(s, k);
        const CK_OBJECT_HANDLE priv = find_one(s, CKO_PRIVATE_KEY);
        for (int i = 0; i < 3; ++i)
            CHECK(try_sign(s, priv, k, "retry " + std::to_string(i)) == CKR_OK);
    }
    const std::vector<TpmPacket> packets = read_pcap(pcap);
    REQUIRE(packets.size() >= 2);
    // TPM 2.0 Part 2, 6.6.3: TPM_RC_RETRY 0x922, TPM_RC_YIELDED 0x908, TPM_RC_TESTING 0x90A.
    const std::set<std::uint32_t> retry_codes{0x922, 0x908, 0x90a};
    int retried = 0, longest = 1, run_length = 1;
    for (std::size_t i = 0; i + 1 < packets.size(); ++i) {
        if (packets[i].command || !retry_codes.count(packets[i].code))
            continue;
        ++retried;
        // The response answers packets[i-1]; the next command is the same bytes.
        REQUIRE(i >= 1);
        REQUIRE(packets[i - 1].command);
        REQUIRE(packets[i + 1].command);
        CHECK(packets[i + 1].bytes == packets[i - 1].bytes);
        run_length = (i >= 3 && packets[i - 2].code == packets[i].code && !packets[i - 2].command) ? run_length + 1 : 2;
        longest = std::max(longest, run_length);
    }
    INFO(retried << " RETRY/YIELDED/TESTING answers in " << packets.size() << " packets");
    // A fresh swtpm answers the first authorization of a DA-protected object
    // with TPM_RC_RETRY (observed; the ESAPI resends, see docs/security.md),
    // so the retry path really ran. Keys without a PIN are noDA and never
    // draw it: hence a key with a PIN.
    CHECK(retried >= 1);
    // tpm2-tss 3.2.1, esys_int.h: _ESYS_MAX_SUBMISSIONS 5.
    CHECK(longest <= 5);
}
