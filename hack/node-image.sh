#!/usr/bin/env bash
# Build the pod image of real nodes without a container daemon:
#
#   hack/node-image.sh ARCHIVE      write the image tarball to ARCHIVE
#
# One static program, /muster-pod (hack/k8s-build/cmd/muster-pod), in one layer on an empty base,
# tagged $NODE_IMAGE (lib.sh). Its entrypoint is `muster-pod pause`, so containerd runs it as every
# pod's sandbox; test pods run it as their workload with `command: [/muster-pod, run, SECONDS]`.
# No registry can be reached, so real nodes import this archive (hack/real-nodes.sh) and pods use
# imagePullPolicy: Never.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
umask 022
shopt -s inherit_errexit  # crane_bin runs in $(...)
. "$hack_dir/image-lib.sh"

(( $# == 1 )) || die "usage: hack/node-image.sh ARCHIVE"
archive=$1
pod_bin=$TOOLS_BIN/muster-pod
[[ -x $pod_bin ]] || die "no $pod_bin; run hack/cluster-build.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/muster-node-image.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/root"
install -m 0755 "$pod_bin" "$tmp/root/muster-pod"
# The layer's time is the program's, so an unchanged program gives the same digest.
layer_from_root "$tmp/root" "$tmp/layer.tar" "$(stat -c %Y "$pod_bin")"
image_from_layer "$tmp/layer.tar" "$archive" "$NODE_IMAGE" \
  --set-platform "linux/$(image_arch)" \
  --entrypoint /muster-pod --cmd pause \
  -l org.opencontainers.image.title=muster-pod
log "image $NODE_IMAGE: $archive"
