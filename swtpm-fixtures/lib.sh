# shellcheck shell=bash
# Helpers shared by the swtpm-fixtures scripts. Sourced, not executed.
#
# Files a running fixture keeps in its STATE_DIR:
#   swtpm.pid        written by swtpm itself (removed by swtpm on a clean exit)
#   swtpm.log        swtpm's log (appended to across restarts)
#   port             the TPM (server) port N; the control port is always N+1
#   tcti             the TCTI string, "swtpm:host=127.0.0.1,port=N"
#   tpm2-00.permall  the TPM's persistent state (NV, hierarchies, seeds)
#   .lock            swtpm's lock on the state dir
#
# The control port MUST be N+1: tpm2-tss's swtpm TCTI derives it that way
# (src/util/io.c: socket_connect(..., control=1) does port++).

# fx_die PROG MESSAGE...: print "PROG: MESSAGE" on stderr and exit 1.
fx_die() {
    local prog=$1
    shift
    echo "$prog: $*" >&2
    exit 1
}

# fx_abs_dir DIR: print DIR as an absolute, symlink-free path (DIR must exist).
fx_abs_dir() {
    (cd "$1" && pwd -P)
}

# fx_pids_of DIR: print the PIDs of live (non-zombie) swtpm processes that
# were started with "--tpmstate dir=DIR". Reads /proc directly, so it works
# even when the pid file is missing or stale, and needs no procps.
fx_pids_of() {
    local dir=$1 p pid arg stat
    local -a args
    for p in /proc/[0-9]*; do
        pid=${p#/proc/}
        # cmdline is NUL-separated; unreadable once the process is gone.
        mapfile -d '' -t args 2>/dev/null <"$p/cmdline" || continue
        [ "${#args[@]}" -gt 0 ] || continue
        [ "${args[0]##*/}" = swtpm ] || continue
        for arg in "${args[@]}"; do
            if [ "$arg" = "dir=$dir" ]; then
                # Field 3 of /proc/PID/stat is the state; a zombie ("Z") has
                # already exited and only waits to be reaped by its parent.
                read -r stat 2>/dev/null <"$p/stat" || continue
                stat=${stat##*) }
                [ "${stat%% *}" = Z ] || echo "$pid"
                break
            fi
        done
    done
}

# fx_port_in_use PORT: true if any IPv4/IPv6 TCP socket (listening, connected
# or TIME_WAIT) has PORT as its local port. Same information as `ss -tan`,
# read from /proc/net/tcp{,6} so no iproute2 is needed.
fx_port_in_use() {
    local hex
    hex=$(printf '%04X' "$1")
    awk -v p="$hex" 'FNR > 1 { n = split($2, a, ":"); if (a[n] == p) found = 1 }
                     END { exit !found }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# fx_tpm_answers TCTI: true if a TPM answers a GetCapability over TCTI.
fx_tpm_answers() {
    tpm2_getcap -T "$1" properties-fixed >/dev/null 2>&1
}

# fx_descendants PID: print the PIDs of all descendants of PID (children,
# grandchildren, ...), read from /proc/*/stat (field 4 is the parent PID).
fx_descendants() {
    local p line rest pid ppid
    local -A kids=()
    for p in /proc/[0-9]*/stat; do
        read -r line 2>/dev/null <"$p" || continue
        pid=${line%% *}
        rest=${line##*) }      # after "(comm) ": "STATE PPID ..."
        rest=${rest#* }
        ppid=${rest%% *}
        kids[$ppid]+=" $pid"
    done
    local -a todo=("$1")
    while [ ${#todo[@]} -gt 0 ]; do
        p=${todo[0]}
        todo=("${todo[@]:1}")
        for pid in ${kids[$p]:-}; do
            echo "$pid"
            todo+=("$pid")
        done
    done
}
