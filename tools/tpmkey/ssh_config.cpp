#include "ssh_config.hpp"

#include "cli.hpp"
#include "core/base/printable.hpp"
#include "core/files/atomic_file.hpp"
#include "core/files/config.hpp"
#include "core/files/file_read.hpp"
#include "core/keys/key_discovery.hpp"
#include "core/tpm/tpm.hpp"
#include "core/tpm/tpm_queries.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <optional>
#include <sstream>

namespace tpmkey::cli {

ModuleLocation find_module() {
    std::error_code ec;
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        const std::filesystem::path next_to = exe.parent_path() / TPMKEY_MODULE_FROM_BINDIR;
        const std::filesystem::path found = std::filesystem::canonical(next_to, ec);
        if (!ec && std::filesystem::is_regular_file(found, ec))
            return {found.string(), "installed next to " + exe.string()};
    }
    return {TPMKEY_MODULE_PATH, "not found next to this tpmkey: where 'cmake --install' puts it"};
}

std::filesystem::path ssh_config_path() { return home_directory() / ".ssh" / "config"; }

std::string read_ssh_config(const std::filesystem::path& p) {
    const std::optional<FileRead> file = read_regular_file_if_present(p, max_ssh_config_size);
    return file ? std::string(file->data.begin(), file->data.end()) : std::string();
}

std::vector<ConfigLine> config_lines(const std::string& text, const std::string& wanted) {
    std::vector<ConfigLine> out;
    std::istringstream in(text);
    std::string line, block;
    bool all_hosts = true;
    int line_no = 0;
    while (std::getline(in, line)) {
        ++line_no;
        std::size_t i = line.find_first_not_of(" \t\r");
        if (i == std::string::npos || line[i] == '#')
            continue;
        const std::size_t key_end = line.find_first_of(" \t\r=", i);
        std::string keyword = line.substr(i, key_end == std::string::npos ? std::string::npos : key_end - i);
        std::transform(keyword.begin(), keyword.end(), keyword.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        std::string value;
        if (key_end != std::string::npos) {
            std::size_t v = line.find_first_not_of(" \t", key_end);
            if (v != std::string::npos && line[v] == '=')
                v = line.find_first_not_of(" \t", v + 1);
            if (v != std::string::npos)
                value = line.substr(v);
        }
        while (!value.empty() && (value.back() == ' ' || value.back() == '\t' || value.back() == '\r'))
            value.pop_back();
        if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
            value = value.substr(1, value.size() - 2);
        if (keyword == "host" || keyword == "match") {
            block = line.substr(i);
            all_hosts = (keyword == "host" && value == "*") || (keyword == "match" && value == "all");
        } else if (keyword == wanted) {
            out.push_back({line_no, value, block, all_hosts});
        }
    }
    return out;
}

bool is_tpmkey_module(const std::string& path) { return std::filesystem::path(path).filename() == "tpmkey-pkcs11.so"; }

namespace {

// True when one of the keys the module serves is RSA and the TPM cannot
// sign SHA-512 (false when the TPM cannot be asked: nothing to say then).
bool rsa_keys_need_sha256(const Config& config) {
    const std::vector<FoundKeyFile> found = find_keys(config);
    if (std::none_of(found.begin(), found.end(),
                     [](const FoundKeyFile& f) { return f.key && f.key->public_key.kind() == KeyKind::rsa; }))
        return false;
    try {
        Tpm tpm(config.tpm);
        return tpm_lacks_sha512(tpm);
    } catch (const Error&) {
        return false;
    }
}

constexpr CommandSpec ssh_config_spec{"ssh-config",
                                      "the ~/.ssh/config lines for the module (--apply adds them)",
                                      "tpmkey ssh-config [--apply]",
                                      "Prints the lines ~/.ssh/config needs so that ssh uses your TPM keys.\n"
                                      "\n"
                                      "  --apply   also add them to ~/.ssh/config, after showing them: at the top\n"
                                      "            of the file (ssh uses the first PKCS11Provider it reads, and\n"
                                      "            lines below a 'Host' line apply to that host only). The rest\n"
                                      "            of the file is kept; run twice, it adds them once. A\n"
                                      "            ~/.ssh/config that is a link is written through only when\n"
                                      "            it leads to a file within ~/.ssh.\n",
                                      {nullptr},
                                      {"--apply", nullptr},
                                      0};

int cmd_ssh_config(const Parsed& p) {
    const ModuleLocation module = find_module();
    const Config config = load_config();
    const bool sha256_only = rsa_keys_need_sha256(config);
    const std::string provider_lines =
        "# SSH keys held in the TPM (tpmkey; the module " + module.how + ")\n" + "PKCS11Provider " + module.path + "\n";
    const std::string rsa_lines = sha256_only ? "# This TPM cannot sign SHA-512: RSA keys sign with rsa-sha2-256\n" +
                                                    std::string(no_rsa_sha2_512_line) + "\n"
                                              : "";
    if (!p.has_flag("--apply")) {
        std::cout << provider_lines << rsa_lines;
        return 0;
    }
    const std::filesystem::path dir = home_directory() / ".ssh";
    std::filesystem::path file = dir / "config";
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
        throw Error(dir.string() + ": cannot create: " + std::strerror(errno));
    // A ~/.ssh/config that is a link stays a link, but only a link within
    // ~/.ssh is written through: one to elsewhere (planted, or a mistake)
    // would have us rewrite any file of the user's, ~/.bashrc as well.
    std::error_code ec;
    if (std::filesystem::is_symlink(file, ec)) {
        const std::filesystem::path target = std::filesystem::weakly_canonical(file, ec);
        const std::filesystem::path real_dir = std::filesystem::canonical(dir);
        const bool within =
            !ec &&
            std::mismatch(real_dir.begin(), real_dir.end(), target.begin(), target.end()).first == real_dir.end();
        if (!within)
            throw Error(file.string() + " is a symbolic link to " + (ec ? std::string("nowhere") : target.string()) +
                        ", outside " + real_dir.string() +
                        ": not written through. Add the lines 'tpmkey ssh-config' prints at the top of the file "
                        "yourself, or make " +
                        file.string() + " a file or a link within " + real_dir.string());
        file = target;
    }
    const std::string text = read_ssh_config(file);
    const std::vector<ConfigLine> existing = config_lines(text, "pkcs11provider");
    const auto first_global =
        std::find_if(existing.begin(), existing.end(), [](const ConfigLine& l) { return l.all_hosts; });
    const bool have_provider = first_global != existing.end() && is_tpmkey_module(first_global->value);
    const std::vector<ConfigLine> algorithms = config_lines(text, "pubkeyacceptedalgorithms");
    const bool have_rsa_line =
        !algorithms.empty() && algorithms.front().all_hosts && algorithms.front().value.find("-rsa-sha2-512") == 0;
    const std::string lines = (have_provider ? "" : provider_lines) + (have_rsa_line ? "" : rsa_lines);
    if (lines.empty()) {
        std::cout << printable(file.string()) << " already has, on line " << first_global->line_no << ":\n"
                  << "PKCS11Provider " << first_global->value << "\nNothing changed.\n";
        return 0;
    }
    std::cout << "Adding these lines to the top of " << printable(file.string()) << ":\n" << lines;
    struct stat st {};
    const mode_t mode = ::stat(file.c_str(), &st) == 0 ? (st.st_mode & 0777) : 0600;
    write_file_atomically(file, lines + (text.empty() ? "" : "\n" + text), mode, Replace::yes);
    std::cout << "Done.\n";
    if (!have_provider && first_global != existing.end())
        std::cout << "Note: ssh now uses this module instead of " << first_global->value << " (line "
                  << first_global->line_no + std::count(lines.begin(), lines.end(), '\n') + 1
                  << "): it reads only the first PKCS11Provider.\n";
    return 0;
}

}  // namespace

const Command ssh_config_command{&ssh_config_spec, cmd_ssh_config};

}  // namespace tpmkey::cli
