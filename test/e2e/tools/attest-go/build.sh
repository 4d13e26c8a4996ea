#!/bin/bash
# build.sh DIR: builds attest-go (go-webauthn and crypto/x509 as judges of
# tpmkey's attestations, docs/hacking.md; acme.go: an ACME client that
# hands them to step-ca) under DIR, the build tree's
# test/go, and prints the binary's path. The module cache (DIR/mod) and the
# binary are kept there: the binary is named by the hash of *.go, go.mod
# and go.sum, so it is rebuilt only when they change (go-webauthn's version
# is go.mod's). Needs the Go toolchain go.mod names or newer (PATH, else
# /usr/local/go/bin); GOTOOLCHAIN=local: none is downloaded. Modules come
# from the Go module proxy (GOPROXY as set, else Go's default).
set -euo pipefail
out=${1:?usage: build.sh DIR}
src=$(cd "$(dirname "$0")" && pwd)
go=$(command -v go || true)
[ -n "$go" ] || [ ! -x /usr/local/go/bin/go ] || go=/usr/local/go/bin/go
if [ -z "$go" ]; then
    echo "attest-go: no Go toolchain (go in PATH or /usr/local/go/bin): install Go $(sed -n 's/^go //p' "$src/go.mod") or newer" >&2
    exit 1
fi
mkdir -p "$out"
key=$(cat "$src"/*.go "$src/go.mod" "$src/go.sum" | sha256sum | cut -c1-16)
bin=$out/attest-go-$key
(
    flock 9
    if [ ! -x "$bin" ]; then
        # Built from a copy: -mod=mod may rewrite go.mod and go.sum, never
        # the source tree's.
        rm -rf "$out/src" && mkdir -p "$out/src" && cp "$src"/*.go "$src/go.mod" "$src/go.sum" "$out/src/"
        (cd "$out/src" &&
            GOTOOLCHAIN=local GOFLAGS="-mod=mod -modcacherw" GOMODCACHE="$out/mod" GOCACHE="$out/cache" \
                GOPATH="$out/gopath" CGO_ENABLED=0 "$go" build -trimpath -o "$bin.tmp" . >&2) ||
            { echo "attest-go: cannot build it with $go ($("$go" version)); is the Go module proxy reachable?" >&2; exit 1; }
        find "$out" -maxdepth 1 -name 'attest-go-*' ! -name "attest-go-$key.tmp" -delete  # older builds
        mv "$bin.tmp" "$bin"
    fi
) 9>"$out/lock"
echo "$bin"
