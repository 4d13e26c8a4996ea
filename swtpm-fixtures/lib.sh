# shellcheck shell=bash
# The fixtures' helpers (fx_die, fx_pids_of, fx_tpm_answers, fx_descendants,
# ...) are those of the installed helper tools/tpmkey-swtpm: one
# implementation. Sourced by the scripts here and by test/lib/sshd.sh.
# shellcheck source=../tools/tpmkey-swtpm
. "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../tools/tpmkey-swtpm"
