// tpmkey-test-ek: the steps of the EK proof (core/trust/endorsement.hpp)
// behind a command line, so that ek-cross-check.sh can hold each against
// tools we did not write (openssl verify, tpm2_createek,
// tpm2_makecredential, tpm2_activatecredential). Test-only, never installed.
//
//   tpmkey-test-ek chain CERT.der DIR...     "ok" (exit 0) or why not (exit 1)
//   tpmkey-test-ek ek-public INDEX OUT       the EK of the template whose certificate is at
//                                            NV INDEX, re-created: its TPM2B_PUBLIC (tpm2-tools' "tss")
//   tpmkey-test-ek parent-name OUT           the name of the parent 0x40000001 (binary)
//   tpmkey-test-ek make-credential EKPUB NAME SECRET OUT
//                                            our software TPM2_MakeCredential, written as
//                                            tpm2_makecredential writes it
//   tpmkey-test-ek prove DIR...             prove_parent() for the parent 0x40000001 with the EK
//                                            roots in DIR...: what it found, one field a line
//   tpmkey-test-ek activate INDEX CRED       TPM2_ActivateCredential of CRED (tpm2-tools' format)
//                                            for the parent 0x40000001 with that EK: the secret, hex
//
// The TPM is the one TPMKEY_TCTI names, and only if it is a simulator.
#include "core/base/error.hpp"
#include "core/keys/key_parts.hpp"
#include "core/keys/public_key.hpp"
#include "core/tpm/tpm_keys.hpp"
#include "core/trust/endorsement.hpp"
#include "simulator_tcti.hpp"
#include "tool_files.hpp"

#include <tss2/tss2_mu.h>

#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

namespace {

using namespace tpmkey;
using test::read_all;
using test::write_all;

void append_u16(Bytes& out, std::size_t v) {
    out.push_back(static_cast<std::uint8_t>(v >> 8));
    out.push_back(static_cast<std::uint8_t>(v));
}

std::uint16_t u16(const Bytes& b, std::size_t at) {
    if (at + 2 > b.size())
        throw Error("credential file is truncated");
    return static_cast<std::uint16_t>(b[at] << 8 | b[at + 1]);
}

const EkTemplate& template_at(const std::string& index) {
    const EkTemplate* t = find_ek_template(static_cast<std::uint32_t>(std::stoul(index, nullptr, 0)));
    if (!t)
        throw Error("no EK template for NV index " + index);
    return *t;
}

int run(const std::vector<std::string>& args) {
    const std::string& command = args.at(0);
    if (command == "chain") {
        EkRoots roots;
        for (std::size_t i = 2; i < args.size(); ++i)
            roots.dirs.emplace_back(args[i]);
        const std::string problem = ek_chain_problem(read_all(args.at(1)), roots);
        std::cout << (problem.empty() ? "ok" : problem) << "\n";
        return problem.empty() ? 0 : 1;
    }
    if (command == "make-credential") {
        TPM2B_PUBLIC ek{};
        const Bytes ek_file = read_all(args.at(1));
        check_rc(Tss2_MU_TPM2B_PUBLIC_Unmarshal(ek_file.data(), ek_file.size(), nullptr, &ek), "reading EKPUB");
        const Credential cred = make_credential(ek.publicArea, read_all(args.at(2)), read_all(args.at(3)));
        Bytes out = {0xba, 0xdc, 0xc0, 0xde, 0, 0, 0, 1};
        append_u16(out, cred.blob.size());
        out.insert(out.end(), cred.blob.begin(), cred.blob.end());
        append_u16(out, cred.encrypted_seed.size());
        out.insert(out.end(), cred.encrypted_seed.begin(), cred.encrypted_seed.end());
        write_all(args.at(4), out);
        return 0;
    }
    Tpm tpm(test::simulator_address());
    if (command == "ek-public") {
        TPM2B_PUBLIC pub{};
        const TpmObject ek = create_ek(tpm, template_at(args.at(1)), pub.publicArea);
        Bytes out(sizeof(TPM2B_PUBLIC));
        size_t size = 0;
        check_rc(Tss2_MU_TPM2B_PUBLIC_Marshal(&pub, out.data(), out.size(), &size), "marshalling the EK");
        out.resize(size);
        write_all(args.at(2), out);
        return 0;
    }
    const TpmObject parent = load_parent(tpm, owner_hierarchy);
    if (command == "parent-name") {
        EsysPtr<TPM2B_NAME> name;
        check_rc(Esys_TR_GetName(tpm.esys(), parent.handle(), out_ptr(name)), "Esys_TR_GetName");
        write_all(args.at(1), Bytes(name->name, name->name + name->size));
        return 0;
    }
    if (command == "prove") {
        EsysPtr<TPM2B_PUBLIC> pub;
        check_rc(Esys_ReadPublic(tpm.esys(), parent.handle(), ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, out_ptr(pub),
                                 nullptr, nullptr),
                 "TPM2_ReadPublic");
        EkRoots roots;
        for (std::size_t i = 1; i < args.size(); ++i)
            roots.dirs.emplace_back(args[i]);
        const EndorsementKey ek = prove_parent(tpm, parent, *pub, roots);
        std::cout << "certified " << (ek.certified ? "yes" : "no") << "\npin " << ek.pin << "\nnv_index 0x" << std::hex
                  << ek.nv_index << std::dec << "\nalgorithm " << ek.algorithm << "\nissuer " << ek.issuer
                  << "\nwhy_not_certified " << ek.why_not_certified << "\n";
        return 0;
    }
    if (command == "activate") {
        const Bytes file = read_all(args.at(2));
        if (file.size() < 12 ||
            !std::equal(file.begin(), file.begin() + 8, Bytes{0xba, 0xdc, 0xc0, 0xde, 0, 0, 0, 1}.begin()))
            throw Error("not a tpm2_makecredential file");
        const std::size_t blob = u16(file, 8);
        const std::size_t seed = u16(file, 10 + blob);
        if (12 + blob + seed != file.size())
            throw Error("credential file has the wrong size");
        const Credential cred{Bytes(file.begin() + 10, file.begin() + 10 + static_cast<long>(blob)),
                              Bytes(file.begin() + 12 + static_cast<long>(blob), file.end())};
        const EkTemplate& t = template_at(args.at(1));
        TPMT_PUBLIC ek_public{};
        const TpmObject ek = create_ek(tpm, t, ek_public);
        std::cout << hex(activate_credential(tpm, parent, ek, t, cred)) << "\n";
        return 0;
    }
    throw Error("unknown command " + command);
}

}  // namespace

int main(int argc, char** argv) {
    if (!tpmkey::test::simulator_tcti()) {
        std::cerr << "tpmkey-test-ek: " << tpmkey::test::refusal << "\n";
        return 2;
    }
    if (argc < 2) {
        std::cerr << "usage: see test/tpm/ek_tool.cpp\n";
        return 2;
    }
    try {
        return run(std::vector<std::string>(argv + 1, argv + argc));
    } catch (const std::exception& e) {
        std::cerr << "tpmkey-test-ek: " << e.what() << "\n";
        return 1;
    }
}
