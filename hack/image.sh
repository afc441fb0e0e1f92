#!/usr/bin/env bash
# Build muster's container image without a container daemon, with crane (go-containerregistry):
#
#   hack/image.sh           build target/image/muster-<version>.tar; prints its path on stdout
#   hack/image.sh crane     only build crane (cached); print its path
#
# The archive is a docker-style image tarball (the `docker save` layout: manifest.json, the
# config, one gzipped layer), the format `crane push`, `crane export -`, `docker load`,
# `podman load`, `ctr images import` and `kind load image-archive` read. It is tagged
# $IMAGE_TAG (default muster:<version>, as the Helm chart names it).
#
# The image: one layer on an empty base, with
#   /usr/local/bin/muster         the release binary (cargo build --release -p muster, or $MUSTER_BIN),
#                                 its debug info stripped (a debug build shrinks from ~500 to ~120 MB)
#   the dynamic loader and the shared libraries it needs, at the paths PT_INTERP and ldd name
#   /etc/passwd, /etc/group       root and nonroot (65532), /home/nonroot
#   /etc/nsswitch.conf            hosts: files dns
#   /tmp                          empty, mode 1777
# config: User 65532:65532, Entrypoint ["/usr/local/bin/muster"], the OCI labels title, version,
# revision (the commit muster --version names), created, licenses.
#
# Why glibc and not static: a static glibc binary still dlopen()s NSS modules for getaddrinfo and
# getpwnam (they must then match the exact glibc it was linked with, and glibc warns against it),
# and musl's resolver differs from glibc's (search domains, ndots in resolv.conf, which a
# Kubernetes pod relies on). Shipping the binary with the libraries it was linked against is
# exact and a few MB.
#
# NSS: glibc >= 2.34 has the `files` and `dns` modules built into libc.so.6, so name lookups (the
# PostgreSQL store's host, a kubeconfig's server) need no libnss_*.so; nsswitch.conf makes the
# order explicit (the kubelet-managed /etc/hosts first, then resolv.conf's servers).
# CA certificates: none are shipped. In a pod, kube-client trusts the cluster CA from the
# ServiceAccount mount (or a kubeconfig's certificate-authority-data) and nothing else; the
# webhook serves its own certificate; the store connects without TLS. Only a kubeconfig with no CA
# data, for an apiserver with a publicly trusted certificate, would fall back to the system roots:
# mount a bundle and set SSL_CERT_FILE then.
#
# Environment: MUSTER_BIN (package this binary instead of building), IMAGE_TAG, IMAGE_DIR (where
# the archive goes; default <cargo target dir>/image), SOURCE_DATE_EPOCH (file times in the layer
# and the created label; default now: `SOURCE_DATE_EPOCH=$(git log -1 --format=%ct)` makes the
# archive reproducible, and is also the date build.rs stamps into the binary).
# How crane is built and used without a registry: hack/image-lib.sh.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
umask 022
shopt -s inherit_errexit  # crane_bin runs in $(...)

. "$hack_dir/image-lib.sh"

case ${1:-} in
  crane) crane_bin; exit ;;
  "") ;;
  *) die "usage: hack/image.sh [crane]" ;;
esac

command -v python3 >/dev/null || die "python3 not found"
command -v readelf >/dev/null || die "readelf not found (binutils)"
command -v strip >/dev/null || die "strip not found (binutils)"
command -v ldd >/dev/null || die "ldd not found"

target=$(cd "$repo_dir" && cargo metadata --no-deps --format-version 1 2>/dev/null |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])') || target=$repo_dir/target
if [[ -z ${MUSTER_BIN:-} ]]; then
  log "building muster (cargo build --release -p muster)"
  t0=$(date +%s)
  (cd "$repo_dir" && cargo build -q --release -p muster) || die "cargo build --release -p muster failed"
  log "muster built in $(( $(date +%s) - t0 ))s"
  MUSTER_BIN=$target/release/muster
fi
[[ -x $MUSTER_BIN ]] || die "no muster binary at $MUSTER_BIN"

# Version and commit from the binary itself: "muster 0.1.0 (commit 1a2b3c4d5e6f, built 2026-11-24)".
version_line=$("$MUSTER_BIN" --version) || die "$MUSTER_BIN --version failed"
[[ $version_line =~ ^muster\ ([^ ]+)\ \(commit\ ([^,]+),\ built\ ([0-9-]+)\)$ ]] ||
  die "unexpected '$MUSTER_BIN --version': $version_line"
version=${BASH_REMATCH[1]} commit=${BASH_REMATCH[2]}
IMAGE_TAG=${IMAGE_TAG:-muster:$version}
IMAGE_DIR=${IMAGE_DIR:-$target/image}
epoch=${SOURCE_DATE_EPOCH:-$(date +%s)}
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)

arch=$(image_arch)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/muster-image.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# --- the root file system ---
root=$tmp/rootfs
mkdir -p "$root/usr/local/bin" "$root/etc" "$root/tmp" "$root/home/nonroot"
chmod 0755 "$root" "$root/usr" "$root/usr/local" "$root/usr/local/bin" "$root/etc" "$root/home"
chmod 1777 "$root/tmp"
chmod 0700 "$root/home/nonroot"
strip --strip-debug -o "$root/usr/local/bin/muster" "$MUSTER_BIN" || die "strip --strip-debug $MUSTER_BIN failed"
chmod 0755 "$root/usr/local/bin/muster"

# copy_lib PATH: the file PATH resolves to, at PATH in the image (parent directories 0755).
copy_lib() {
  local src=$1 dst=$root$1
  [[ -e $src ]] || die "missing library $src"
  install -d -m 0755 "$(dirname "$dst")"
  cp -L "$src" "$dst"; chmod 0755 "$dst"
}
interp=$(readelf -l "$MUSTER_BIN" | sed -n 's/.*\[Requesting program interpreter: \(.*\)\]/\1/p')
if [[ -n $interp ]]; then
  copy_lib "$interp"
  # "libgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x...)"; the loader's own line and
  # linux-vdso (no file) carry no "=> /path".
  libs=$(ldd "$MUSTER_BIN" | sed -n 's/.*=> \(\/[^ ]*\) (0x[0-9a-f]*)$/\1/p')
  ldd "$MUSTER_BIN" | grep -q 'not found' && die "ldd: a library of $MUSTER_BIN is not found"
  for lib in $libs; do copy_lib "$lib"; done
  log "libraries: $interp ${libs//$'\n'/ }"
else
  log "$MUSTER_BIN is static: no libraries to copy"
fi

cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
EOF
cat >"$root/etc/group" <<'EOF'
root:x:0:
nonroot:x:65532:
EOF
cat >"$root/etc/nsswitch.conf" <<'EOF'
passwd: files
group: files
hosts: files dns
EOF
chmod 0644 "$root/etc/passwd" "$root/etc/group" "$root/etc/nsswitch.conf"

layer_from_root "$root" "$tmp/layer.tar" "$epoch"
mkdir -p "$IMAGE_DIR"
archive=$IMAGE_DIR/muster-$version.tar
image_from_layer "$tmp/layer.tar" "$archive" "$IMAGE_TAG" \
  --set-platform "linux/$arch" \
  --user 65532:65532 \
  --entrypoint /usr/local/bin/muster \
  -l org.opencontainers.image.title=muster \
  -l org.opencontainers.image.description="All-or-nothing batch queue and gang scheduler for Kubernetes" \
  -l org.opencontainers.image.version="$version" \
  -l org.opencontainers.image.revision="$commit" \
  -l org.opencontainers.image.created="$created" \
  -l org.opencontainers.image.licenses=Apache-2.0

size=$(stat -c %s "$archive")
log "image $IMAGE_TAG (commit $commit, linux/$arch): $archive, $(awk -v b="$size" 'BEGIN { printf "%.1f MB (%d bytes)", b / 1e6, b }')"
echo "$archive"
