#!/usr/bin/env bash
# A krew plugin release of `kubectl muster`: the archive krew installs and the manifest that names
# it. muster is the plugin binary itself (run as kubectl-muster, its usage says `kubectl muster`).
#
#   hack/krew.sh URI_BASE      e.g. https://downloads.example.org/muster/v0.1.0
#
# Writes target/krew/muster-<version>-linux-amd64.tar.gz (kubectl-muster and the LICENSE note)
# and target/krew/muster.yaml, whose uri is URI_BASE/<archive> and whose sha256 is the archive's.
# Upload the archive there, then `kubectl krew install --manifest=target/krew/muster.yaml`, or
# offer the manifest to a krew index. Builds the release binary (cargo build --release -p muster)
# unless MUSTER_BIN names one; linux/amd64 only (the build host's platform).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
[[ $# -eq 1 ]] || die "usage: hack/krew.sh URI_BASE"
uri_base=${1%/}
[[ $(uname -sm) == "Linux x86_64" ]] || die "builds linux/amd64 only; this host is $(uname -sm)"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo_dir/Cargo.toml" | head -n 1)
bin=${MUSTER_BIN:-}
if [[ -z $bin ]]; then
  (cd "$repo_dir" && cargo build --release -q -p muster) || die "cargo build --release -p muster failed"
  bin=$(cd "$repo_dir" && cargo metadata --no-deps --format-version 1 |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')/release/muster
fi
out=$repo_dir/target/krew
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
strip --strip-debug -o "$stage/kubectl-muster" "$bin" || die "strip --strip-debug $bin failed"
chmod 0755 "$stage/kubectl-muster"
printf 'muster %s, Apache-2.0. Source and documentation: the muster repository (README.md).\n' "$version" >"$stage/LICENSE"
mkdir -p "$out"
archive=muster-$version-linux-amd64.tar.gz
# Reproducible: fixed owner, order and times.
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@"${SOURCE_DATE_EPOCH:-0}" -C "$stage" -cf - kubectl-muster LICENSE |
  gzip -n >"$out/$archive"
sha=$(sha256sum "$out/$archive" | cut -d' ' -f1)
cat >"$out/muster.yaml" <<YAML
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: muster
spec:
  version: v$version
  shortDescription: Show muster's gang-scheduling queue and why a job waits
  description: |
    muster is an all-or-nothing batch queue and gang scheduler for Kubernetes. This plugin shows
    its queue and explains one job: kubectl muster queue lists the waiting groups by queue and
    position with their estimated starts, then the running ones; kubectl muster why JOB says where
    a job is, why, when it is expected to start and on which nodes.
  caveats: |
    Needs muster installed in the cluster (its Helm chart) and the right to read its Groups and
    Queues (groups.muster.dev, queues.muster.dev).
  platforms:
  - selector:
      matchLabels: {os: linux, arch: amd64}
    uri: $uri_base/$archive
    sha256: $sha
    bin: kubectl-muster
    files:
    - {from: kubectl-muster, to: .}
    - {from: LICENSE, to: .}
YAML
log "wrote $out/$archive and $out/muster.yaml (sha256 $sha)"
echo "$out/muster.yaml"
