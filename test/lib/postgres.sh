# test/lib/postgres.sh: a private PostgreSQL 15 for a test (Debian's
# postgresql-15; tpmkey-ca's database store, docs/design.md). Source it after
# common.sh.
#
#   postgres_start   initdb a cluster in a fresh directory and start it on a
#                    Unix socket there (no TCP port, trust for the one user
#                    "tpmkey"); sets POSTGRES_CONNINFO (a libpq connection
#                    string) and POSTGRES_DIR. Stopped, and removed, when the
#                    test exits.
#   postgres_stop    stop it (fast shutdown); its data stay
#   postgres_restart start it again on the same data, after postgres_stop
#   postgres_sql SQL run SQL with psql, printing the rows unaligned
#
# PostgreSQL refuses to run as root, and the CI runs as root: then the
# server runs as user nobody (setpriv), its directory nobody's, outside
# TEST_DIR (0700, root's), which nobody could not enter.

POSTGRES_BIN=${POSTGRES_BIN:-/usr/lib/postgresql/15/bin}

postgres_as_owner() {
    if [ "$(id -u)" = 0 ]; then
        (cd / && setpriv --reuid=nobody --regid=nogroup --clear-groups "$@")
    else
        (cd / && "$@")
    fi
}

postgres_start() {
    [ -x "$POSTGRES_BIN/postgres" ] || fail "no PostgreSQL in $POSTGRES_BIN (Debian: apt-get install postgresql-15)"
    # Under /tmp unless TMPDIR is one the server's user may enter.
    local parent=${TMPDIR:-/tmp}
    postgres_as_owner test -x "$parent" 2>/dev/null || parent=/tmp
    POSTGRES_DIR=$(mktemp -d "$parent/tpmkey-postgres.XXXXXX")
    # rm -rf as the last thing, after the stop (cleanup runs in reverse).
    on_exit "rm -rf '$POSTGRES_DIR'"
    [ "$(id -u)" != 0 ] || chown nobody:nogroup "$POSTGRES_DIR"
    postgres_as_owner "$POSTGRES_BIN/initdb" -D "$POSTGRES_DIR/data" -U tpmkey --auth=trust -E UTF8 \
        >"$POSTGRES_DIR/initdb.log" 2>&1 || { cat "$POSTGRES_DIR/initdb.log" >&2; fail "initdb failed"; }
    on_exit "postgres_stop"
    postgres_restart
    POSTGRES_CONNINFO="host=$POSTGRES_DIR user=tpmkey dbname=postgres"
}

postgres_restart() {
    # fsync off: a test's data need not survive a power cut.
    postgres_as_owner "$POSTGRES_BIN/pg_ctl" -D "$POSTGRES_DIR/data" -w -t 60 -l "$POSTGRES_DIR/server.log" \
        -o "-c listen_addresses='' -c unix_socket_directories='$POSTGRES_DIR' -c fsync=off" start >/dev/null ||
        { cat "$POSTGRES_DIR/server.log" >&2; fail "PostgreSQL did not start"; }
}

postgres_stop() {
    [ -f "$POSTGRES_DIR/data/postmaster.pid" ] || return 0
    postgres_as_owner "$POSTGRES_BIN/pg_ctl" -D "$POSTGRES_DIR/data" -w -t 60 -m fast stop >/dev/null
}

postgres_sql() {
    psql -X -q -A -t -v ON_ERROR_STOP=1 "$POSTGRES_CONNINFO" -c "$1"
}
