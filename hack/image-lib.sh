# Shared by the scripts that build container images without a daemon (hack/image.sh for
# muster's image, hack/node-image.sh for the pod image of real nodes). Source after lib.sh.
#
# crane is built once from its Go module at CRANE_VERSION (hack/versions.env) into
# $MUSTER_CACHE/crane-<version>/. It cannot change the config of an image held in a file, so an
# image passes once through `crane registry serve` on 127.0.0.1 (an in-memory registry on an
# ephemeral port, stopped when the image is written): append the layer, then mutate the config
# into the tarball.

CRANE_DIR=${CRANE_DIR:-$MUSTER_CACHE/crane-$CRANE_VERSION}

crane_bin() {
  go_tool crane github.com/google/go-containerregistry/cmd/crane "$CRANE_VERSION" "$CRANE_DIR"
}

# image_arch: this machine's architecture as an image platform names it (amd64, arm64).
image_arch() {
  case $(uname -m) in
    x86_64) echo amd64 ;;
    aarch64) echo arm64 ;;
    *) uname -m ;;
  esac
}

# layer_from_root ROOT LAYER EPOCH: ROOT's contents as an uncompressed tar LAYER, entries sorted,
# every time EPOCH, owned by root but for /home/nonroot (65532), so the same inputs give the same
# bytes (and digest).
layer_from_root() {
  python3 - "$1" "$2" "$3" <<'PY'
import os, sys, tarfile
root, out, epoch = sys.argv[1], sys.argv[2], int(sys.argv[3])
def norm(ti):
    ti.mtime = epoch
    ti.uname = ti.gname = ""
    ti.uid = ti.gid = 65532 if ti.name == "home/nonroot" or ti.name.startswith("home/nonroot/") else 0
    return ti
with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
    for top in sorted(os.listdir(root)):
        tar.add(f"{root}/{top}", arcname=top, recursive=True, filter=norm)
PY
}

# image_from_layer LAYER ARCHIVE TAG [CRANE-MUTATE-ARGS...]: a one-layer image on an empty base,
# its config set by the `crane mutate` arguments, written to ARCHIVE as a docker-style image
# tarball tagged TAG (what `ctr images import` and `docker load` read).
image_from_layer() (
  local layer=$1 archive=$2 tag=$3; shift 3
  local crane work registry_pid port="" staging
  crane=$(crane_bin)
  work=$(mktemp -d "${TMPDIR:-/tmp}/muster-crane.XXXXXX")
  "$crane" registry serve --address 127.0.0.1:0 2>"$work/registry.log" &
  registry_pid=$!
  trap 'kill "$registry_pid" 2>/dev/null || true; wait "$registry_pid" 2>/dev/null || true; rm -rf "$work"' EXIT
  for _ in $(seq 100); do
    port=$(sed -n 's/.*serving on port \([0-9]*\).*/\1/p' "$work/registry.log")
    [[ -n $port ]] && break
    kill -0 "$registry_pid" 2>/dev/null || die "crane registry serve exited: $(cat "$work/registry.log")"
    sleep 0.1
  done
  [[ -n $port ]] || die "crane registry serve did not start: $(cat "$work/registry.log")"
  staging=127.0.0.1:$port/image:staging
  "$crane" append --oci-empty-base -f "$layer" -t "$staging" >/dev/null 2>"$work/crane.log" ||
    die "crane append failed: $(cat "$work/crane.log")"
  "$crane" mutate "$staging" "$@" -t "$tag" -o "$archive.tmp" >/dev/null 2>"$work/crane.log" ||
    die "crane mutate failed: $(cat "$work/crane.log")"
  mv "$archive.tmp" "$archive"
)
