#!/bin/bash
# build.sh DIR: builds step-ca (smallstep's certificates, the version in
# ./version) unmodified from the Go module proxy under DIR, the build
# tree's test/go, and prints the binary's path. The module cache (DIR/mod,
# shared with attest-go) and the binary are kept there: the binary is named
# by the hash of ./version and this script, so CI rebuilds it only when the
# version changes. Needs the Go toolchain step-ca's go.mod names or newer
# (PATH, else /usr/local/go/bin); GOTOOLCHAIN=local: none is downloaded.
# Modules come from the Go module proxy (GOPROXY as set, else Go's default).
set -euo pipefail
out=${1:?usage: build.sh DIR}
src=$(cd "$(dirname "$0")" && pwd)
version=$(cat "$src/version")
go=$(command -v go || true)
[ -n "$go" ] || [ ! -x /usr/local/go/bin/go ] || go=/usr/local/go/bin/go
if [ -z "$go" ]; then
    echo "step-ca: no Go toolchain (go in PATH or /usr/local/go/bin): install Go 1.25 or newer" >&2
    exit 1
fi
mkdir -p "$out"
key=$(cat "$src/version" "$src/build.sh" | sha256sum | cut -c1-16)
bin=$out/step-ca-$key
(
    flock 9
    if [ ! -x "$bin" ]; then
        # go install PACKAGE@VERSION: step-ca's own go.mod and go.sum, as
        # released; no module of ours around it. main.Version as its
        # release build sets it (`step-ca version` prints it), and -w (no
        # DWARF) as its release build links it.
        # The build tags that step-ca's dependencies honour to leave out
        # what the tests do not use (its source is not changed): the Azure
        # and TPM KMS for the CA's own keys (go.step.sm/crypto/kms), and
        # the databases other than bbolt and PostgreSQL (smallstep/nosql;
        # step-ca's CHANGELOG, 0.18.2; PostgreSQL, pgx, for the fleet test:
        # two step-ca on one database, test/lib/fleet.sh). Not noawskms, nocloudkms: in go.step.sm/crypto
        # v0.77.1 they leave files without the tag that no longer compile;
        # not nosshagentkms: step-ca's authority package uses that KMS's
        # types. Cold, this saves about a quarter of the CPU time and of
        # the disk (docs/hacking.md).
        rm -rf "$out/step-ca-bin" && mkdir -p "$out/step-ca-bin"
        (cd "$out" &&
            GOTOOLCHAIN=local GOFLAGS="-modcacherw" GOMODCACHE="$out/mod" GOCACHE="$out/cache" \
                GOPATH="$out/gopath" GOBIN="$out/step-ca-bin" CGO_ENABLED=0 \
                "$go" install -trimpath -tags noazurekms,notpmkms,nobadger,nomysql \
                -ldflags "-w -X main.Version=${version#v}" "github.com/smallstep/certificates/cmd/step-ca@$version" >&2) ||
            { echo "step-ca: cannot build $version with $go ($("$go" version)); is the Go module proxy reachable?" >&2; exit 1; }
        find "$out" -maxdepth 1 -name 'step-ca-*' -type f -delete  # older builds
        mv "$out/step-ca-bin/step-ca" "$bin"
        rmdir "$out/step-ca-bin"
    fi
) 9>"$out/step-ca.lock"
echo "$bin"
