#!/usr/bin/env bash
# e2e: `kubectl muster` through krew. hack/krew.sh writes the plugin archive and its manifest; the
# real krew (built from sigs.k8s.io/krew at KREW_VERSION) installs it from them into a private
# KREW_ROOT, checking the archive's sha256 against the manifest; the installed plugin runs and
# introduces itself as `kubectl muster`. Needs no cluster.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
echo "test-krew" >&2
krew=$(go_tool krew sigs.k8s.io/krew/cmd/krew "$KREW_VERSION" "$MUSTER_CACHE/krew-$KREW_VERSION" \
  "-s -w -X sigs.k8s.io/krew/internal/version.gitTag=v$KREW_VERSION")
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
manifest=$("$hack_dir/krew.sh" "https://downloads.invalid/muster")
archive=$(dirname "$manifest")/$(sed -n 's|^    uri: .*/||p' "$manifest")
check "the manifest names the archive's sha256" \
  grep -q "sha256: $(sha256sum "$archive" | cut -d' ' -f1)" "$manifest"
check "krew installs the plugin from the manifest and the archive" \
  bash -c "KREW_ROOT='$root' '$krew' install --manifest='$manifest' --archive='$archive' >'$root/install.log' 2>&1"
plugin=$root/bin/kubectl-muster
check "the plugin is on krew's PATH" test -x "$plugin"
check "it introduces itself as kubectl muster" bash -c "'$plugin' --help | grep -q 'Usage: kubectl muster'"
# (krew list needs its index, a git clone this machine cannot make; the receipt is what it reads.)
check "krew keeps its receipt of the installed version" grep -q "version: v" "$root/receipts/muster.yaml"
cp "$archive" "$root/tampered.tar.gz"; printf x >>"$root/tampered.tar.gz"
refused "an archive that does not match the manifest's sha256" "checksum does not match" \
  env KREW_ROOT="$root/other" "$krew" install --manifest="$manifest" --archive="$root/tampered.tar.gz"
