# shellcheck shell=bash
# tools/bench/counts.sh: the TPM commands of each operation docs/performance.md
# counts, counted with tpm2-tss's pcap TCTI. Sourced (after
# test/lib/sshd.sh, inside with-swtpm) by tools/bench/run, which writes the
# counts into docs/performance.md, and by test/e2e/tools/performance-doc.sh,
# which counts the same operations again and compares them with what
# docs/performance.md states: one copy of what is counted and how.
#
# What it gives:
#   bench_make_keys DIR PIN  tpmkey's keys (below)
#   bench_created_config     a config dir whose known_parents has no pin for
#                            0x81000001 (BENCH_CREATED_CONFIG)
#   bench_count TRANSPORT TCTI ITEM...
#                            counts each ITEM on TCTI: "list-tpmkey",
#                            "list-tp11" (ssh-keygen -D), "login-KEY" (one
#                            direct ssh login; needs sshd_start), "sign-KEY"
#                            (in one process, 1 and 11 signatures); results
#                            "cmds.NAME-TRANSPORT N" in $R, the names of the
#                            commands in $TEST_DIR/cmds.NAME-TRANSPORT
#   BENCH_LOGINS, BENCH_SIGNS_COUNTED  tpmkey's KEYs of login- and sign- items
#   use_module MOD TCTI, put NAME VALUE, leftovers WHEN
# Needs: $R (results file), $BENCH (tpmkey-bench), $TPMKEY_MODULE, $TP11
# (tpm2-pkcs11's module, for tp11 items), $SWTPM_TCTI, $pin, $TEST_DIR/*.pub
# of tpm2-pkcs11's keys (tp11-ec, tp11-rsa).
#
# The keys. KEY = TYPE-[pcr-]PIN[-created]:
#   ec-pin, ec-nopin, rsa-pin, rsa-nopin   tpmkey-keygen's defaults: the first
#       persists the TCG standard SRK at 0x81000001 and pins it (design.md,
#       "Parent"), its file keeps 0x40000001; the others find the SRK there
#       and are made under 0x81000001. Either way a login reads it
#       (TPM2_ReadPublic): what a user gets.
#   *-created   --parent 0x40000001 --no-persist-srk, and logged in with a
#       known_parents that has no pin for 0x81000001 (bench_created_config):
#       what a TPM gives whose 0x81000001 holds another program's key (or
#       with an owner password): the parent re-created with
#       TPM2_CreatePrimary in each process, as budget.sh counts it.
#   ec-pcr-pin-created, ec-pcr-nopin-created   bound to PCR 7 (pcr-bound-keys.md),
#       under a re-created parent too, as budget.sh counts them.

BENCH_LOGINS=(ec-pin ec-nopin rsa-pin rsa-nopin ec-pin-created ec-nopin-created rsa-pin-created rsa-nopin-created
    ec-pcr-pin-created ec-pcr-nopin-created)
BENCH_SIGNS_COUNTED=(ec-pin ec-nopin rsa-pin rsa-nopin ec-pin-created ec-nopin-created rsa-pin-created
    rsa-nopin-created)

bench_make_keys() {  # bench_make_keys DIR PIN
    local dir=$1 p=$2 created=(--parent 0x40000001 --no-persist-srk)
    keygen "$dir/ec-pin.tpm" ecdsa 256 "$p"
    keygen "$dir/ec-nopin.tpm" ecdsa 256 ""
    keygen "$dir/rsa-pin.tpm" rsa 2048 "$p"
    keygen "$dir/rsa-nopin.tpm" rsa 2048 ""
    keygen "$dir/ec-pin-created.tpm" ecdsa 256 "$p" "${created[@]}"
    keygen "$dir/ec-nopin-created.tpm" ecdsa 256 "" "${created[@]}"
    keygen "$dir/rsa-pin-created.tpm" rsa 2048 "$p" "${created[@]}"
    keygen "$dir/rsa-nopin-created.tpm" rsa 2048 "" "${created[@]}"
    keygen "$dir/ec-pcr-pin-created.tpm" ecdsa 256 "$p" --pcr 7 "${created[@]}"
    keygen "$dir/ec-pcr-nopin-created.tpm" ecdsa 256 "" --pcr 7 "${created[@]}"
}

# The pins as they are, less 0x81000001's: the module then reads nothing
# there and re-creates 0x40000001 (design.md, "Parent": "Without such a pin
# it reads nothing there"). Call it after the last change to known_parents.
bench_created_config() {
    BENCH_CREATED_CONFIG=$TEST_DIR/config-created
    mkdir -p "$BENCH_CREATED_CONFIG/tpmkey"
    awk '$1 != "0x81000001"' "$XDG_CONFIG_HOME/tpmkey/known_parents" >"$BENCH_CREATED_CONFIG/tpmkey/known_parents"
}

put() { echo "$1 $2" >>"$R"; }

# use_module MOD TCTI: environment for module MOD (tpmkey|tp11) on TCTI;
# sets MOD_SO. With PCAP=NAME the module's TCTI goes through the pcap TCTI.
use_module() {
    local mod=$1 tcti=$2
    unset TCTI_PCAP_FILE
    if [ -n "${PCAP:-}" ]; then
        rm -f "$TEST_DIR/$PCAP.pcap"
        export TCTI_PCAP_FILE=$TEST_DIR/$PCAP.pcap
        tcti=pcap:$tcti
    fi
    if [ "$mod" = tpmkey ]; then
        export TPMKEY_TCTI=$tcti
        unset TPM2_PKCS11_TCTI
        MOD_SO=$TPMKEY_MODULE
    else
        export TPM2_PKCS11_TCTI=$tcti TPMKEY_TCTI=$SWTPM_TCTI
        MOD_SO=$TP11
    fi
}

# What each module leaves in the TPM (no resource manager on the swtpm
# path): reported, then flushed so that the next measurement has room.
leftovers() {  # leftovers WHEN
    local left
    left=$(tpm_leftovers | tr '\n' ' ')
    if [ -n "$left" ]; then
        echo "$1: $left" >>"$TEST_DIR/leftovers"
        flush_leftovers
    fi
}

# bench_count_one NAME: commands in capture NAME; also keeps their names.
bench_count_one() {
    put "cmds.$1" "$(pcap_count "$1")"
    pcap_commands "$1" >"$TEST_DIR/cmds.$1"
}

# bench_config KEY: the config dir the module reads for KEY.
bench_config() {
    case $1 in
    *-created) echo "$BENCH_CREATED_CONFIG" ;;
    *) echo "$XDG_CONFIG_HOME" ;;
    esac
}

bench_count() {  # bench_count TRANSPORT TCTI ITEM...
    local transport=$1 tcti=$2 item key mod pub a b args keys_dir=$TPMKEY_KEYS
    shift 2
    for item in "$@"; do
        key=${item#*-}
        case $item in
        list-*)
            askpass_pin
            PCAP=$item-$transport use_module "$key" "$tcti"
            ssh-keygen -D "$MOD_SO" >/dev/null 2>"$TEST_DIR/err" ||
                { show "$TEST_DIR/err"; fail "ssh-keygen -D with $key"; }
            bench_count_one "$item-$transport"
            leftovers "ssh-keygen -D, $key, $transport"
            ;;
        login-*)
            case $key in
            tp11-*) mod=tp11 pub=$TEST_DIR/$key.pub; askpass_pin "$pin" ;;
            *-nopin*) mod=tpmkey pub=$keys_dir/$key.pub; askpass_pin ;;
            *) mod=tpmkey pub=$keys_dir/$key.pub; askpass_pin "$pin" ;;
            esac
            cp "$pub" "$AUTH_KEYS"
            sshd_log_mark
            PCAP=$item-$transport use_module $mod "$tcti"
            TPMKEY_KEYS=$keys_dir/$key.tpm XDG_CONFIG_HOME=$(bench_config "$key") \
                login_ok "$key login ($transport)" -o "PKCS11Provider=$MOD_SO"
            bench_count_one "$item-$transport"
            leftovers "ssh login, $key, $transport"
            ;;
        sign-*)
            # Further signatures in one process: (11 signatures) - (1 signature), over 10.
            case $key in
            tp11-*) mod=tp11 args=(bench "${key#tp11-}" --pin "$pin") ;;
            *-nopin*) mod=tpmkey args=("$key" "${key%%-*}") ;;
            *) mod=tpmkey args=("$key" "${key%%-*}" --pin "$pin") ;;
            esac
            [ "${args[1]}" = ec ] && args[1]=ecdsa
            PCAP=sign1-$key-$transport use_module $mod "$tcti"
            XDG_CONFIG_HOME=$(bench_config "$key") "$BENCH" pkcs11 "$MOD_SO" "${args[@]}" -n 0 >/dev/null
            PCAP=sign11-$key-$transport use_module $mod "$tcti"
            XDG_CONFIG_HOME=$(bench_config "$key") "$BENCH" pkcs11 "$MOD_SO" "${args[@]}" -n 10 >/dev/null
            a=$(pcap_count "sign1-$key-$transport") b=$(pcap_count "sign11-$key-$transport")
            put "cmds.further-$key-$transport" "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%g", (b - a) / 10 }')"
            put "cmds.inproc1-$key-$transport" "$a"
            pcap_commands "sign1-$key-$transport" >"$TEST_DIR/cmds.inproc1-$key-$transport"
            leftovers "in-process signatures, $key, $transport"
            ;;
        *) fail "bench_count: no such item: $item" ;;
        esac
    done
    unset PCAP TCTI_PCAP_FILE
}

# bench_login_label KEY: how docs/performance.md names a login with KEY (a
# tpmkey key above, or tp11-ec, tp11-rsa): the lists of commands and the
# rows of the model are named so, and test/e2e/tools/performance-doc.sh
# finds them by it.
bench_login_label() {
    local key=$1 label
    case $key in
    tp11-ec) echo "tpm2-pkcs11, ECDSA P-256, PIN"; return ;;
    tp11-rsa) echo "tpm2-pkcs11, RSA 2048, PIN"; return ;;
    ec-*) label="tpmkey, ECDSA P-256" ;;
    rsa-*) label="tpmkey, RSA 2048" ;;
    esac
    case $key in
    *-nopin*) label+=", no PIN" ;;
    *) label+=", PIN" ;;
    esac
    case $key in *-pcr-*) label+=", bound to PCR 7" ;; esac
    case $key in *-created) label+=", parent re-created" ;; esac
    echo "$label"
}
# bench_login_type KEY: ecdsa or rsa, as tpmkey-bench model takes it.
bench_login_type() {
    case $1 in
    ec-* | tp11-ec) echo ecdsa ;;
    *) echo rsa ;;
    esac
}
