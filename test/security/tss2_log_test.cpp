// tpm2-tss's own log (TSS2_LOG): quiet inside the host by default without
// leaving TSS2_LOG in the host's environment, where everything the host
// starts would inherit it; a TSS2_LOG the user set still wins. Each case
// needs a process of its own: tpm2-tss keeps a source file's log level
// from that file's first message on.
#include "security.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

using namespace mt;
using namespace st;

namespace {

// Sends this process's stderr (fd 2, where tpm2-tss and the module write)
// to a file while alive.
class StderrCapture {
public:
    explicit StderrCapture(const std::string& name) : path_(key_dir() / (name + ".stderr")) {
        std::fflush(stderr);
        saved_ = ::dup(2);
        const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        REQUIRE(saved_ >= 0);
        REQUIRE(fd >= 0);
        ::dup2(fd, 2);
        ::close(fd);
    }
    ~StderrCapture() { restore(); }
    StderrCapture(const StderrCapture&) = delete;
    StderrCapture& operator=(const StderrCapture&) = delete;
    // Ends the capture; what was written.
    std::string text() {
        restore();
        return read_text(path_);
    }

private:
    void restore() {
        if (saved_ < 0)
            return;
        std::fflush(stderr);
        ::dup2(saved_, 2);
        ::close(saved_);
        saved_ = -1;
    }
    std::filesystem::path path_;
    int saved_ = -1;
};

// C_Initialize, a wrong PIN (the TPM answers TPM_RC_AUTH_FAIL, which
// tpm2-tss logs as an error), C_Finalize.
void wrong_pin() {
    const TestKey& k = key("ec384");
    Initialized init;
    Session s(slot_of(k.name));
    std::string pin = "not the PIN";
    CHECK_RV(p11()->C_Login(s, CKU_USER, reinterpret_cast<CK_UTF8CHAR_PTR>(pin.data()), pin.size()), CKR_PIN_INCORRECT);
}

std::string child_sees() { return run("echo \"[${TSS2_LOG-unset}]\""); }

}  // namespace

TEST_CASE("tpm2-tss's log: quiet, and no TSS2_LOG in the host's environment afterwards", "[tss2-log]") {
    REQUIRE(std::getenv("TSS2_LOG") == nullptr);
    StderrCapture err("tss2-log");
    wrong_pin();
    const std::string text = err.text();
    INFO(text);
    CHECK(std::getenv("TSS2_LOG") == nullptr);
    CHECK(child_sees() == "[unset]\n");
    CHECK(text.find("tpmkey: wrong PIN") != std::string::npos);  // the module's own line
    // tpm2-tss's lines look like "ERROR:esys:src/tss2-esys/api/...".
    CHECK(text.find(":src/tss2-") == std::string::npos);
}

TEST_CASE("tpm2-tss's log: a TSS2_LOG the user set wins and stays as it was", "[tss2-log-user]") {
    ScopedEnv user("TSS2_LOG", "all+ERROR");
    StderrCapture err("tss2-log-user");
    wrong_pin();
    const std::string text = err.text();
    INFO(text);
    CHECK(std::string(std::getenv("TSS2_LOG")) == "all+ERROR");
    CHECK(child_sees() == "[all+ERROR]\n");
    CHECK(text.find("ERROR:esys:src/tss2-esys/") != std::string::npos);
}
