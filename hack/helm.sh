#!/usr/bin/env bash
# helm, built once from its Go module helm.sh/helm/v3 at HELM_VERSION (hack/versions.env) into
# $MUSTER_CACHE/helm-<version>/, with the stamps helm's own Makefile sets (its version, and the
# Kubernetes version of its client-go, which `helm template` and `helm lint` assume without a
# cluster). Prints the binary's path.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
shopt -s inherit_errexit

HELM_DIR=${HELM_DIR:-$MUSTER_CACHE/helm-$HELM_VERSION}
[[ -x $HELM_DIR/helm ]] && { echo "$HELM_DIR/helm"; exit 0; }
mkdir -p "$MUSTER_CACHE"
module=helm.sh/helm/v3
gomod=$(cd "$MUSTER_CACHE" && GOTOOLCHAIN=local GOFLAGS='' go mod download -json "$module@v$HELM_VERSION" \
  | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
[[ -f $gomod ]] || die "cannot download $module@v$HELM_VERSION"
# client-go v0.MINOR.x is Kubernetes 1.MINOR.
k8s_minor=$(sed -n 's/^[[:space:]]*k8s.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "$gomod")
[[ -n $k8s_minor ]] || die "no k8s.io/client-go in $gomod"
ldflags="-s -w -X $module/internal/version.version=v$HELM_VERSION"
for pkg in pkg/lint/rules pkg/chartutil; do
  ldflags+=" -X $module/$pkg.k8sVersionMajor=1 -X $module/$pkg.k8sVersionMinor=$k8s_minor"
done
go_tool helm "$module/cmd/helm" "$HELM_VERSION" "$HELM_DIR" "$ldflags"
