#!/usr/bin/env bash
# The image test (make image-test): build the image (hack/image.sh), or take an archive, and check
# it as a runtime would see it, without a daemon:
#
#   hack/image-test.sh [ARCHIVE]
#
#   - crane validates the archive (every digest) and flattens it (`crane export -`) into a
#     temporary root file system;
#   - the config runs muster as the non-root user 65532:65532, entrypoint /usr/local/bin/muster;
#   - the layer holds nothing owned by a user but root, except /home/nonroot, and no setuid file;
#     user 65532 cannot write to / or to the binary, and can to /tmp;
#   - `chroot --userspec=65532:65532 ROOTFS /usr/local/bin/muster --version` runs on the image's own
#     loader and libraries and names the commit `git rev-parse --short=12 HEAD` names, as does the
#     revision label; `muster cluster describe` runs there on a real file;
#   - the compressed layers and config add up to under IMAGE_MAX_MB (default 40) MB.
# Needs root (chroot). Any failed check exits non-zero with what was expected and found.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

max_mb=${IMAGE_MAX_MB:-40}
max_bytes=$((max_mb * 1000 * 1000))
(( EUID == 0 )) || die "image-test needs root (it runs the image's binary under chroot)"

t0=$(date +%s)
if (( $# )); then
  archive=$1
else
  archive=$("$hack_dir/image.sh")
fi
[[ -f $archive ]] || die "no image archive at $archive"
crane=$("$hack_dir/image.sh" crane)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/muster-image-test.XXXXXX")
chmod 0711 "$tmp"  # user 65532 must reach the unpacked root below to be refused by its modes
trap 'rm -rf "$tmp"' EXIT
fail() { printf 'image-test: FAIL: %s\n' "$*" >&2; exit 1; }
pass() { printf 'image-test: ok: %s\n' "$*" >&2; }

"$crane" validate --tarball "$archive" >"$tmp/validate.log" 2>&1 || fail "crane validate --tarball $archive: $(cat "$tmp/validate.log")"
pass "crane validates $archive"

# The config and the compressed sizes, read from the docker-style archive: manifest.json names the
# config file and the (gzipped) layer files.
python3 - "$archive" "$tmp" <<'EOF' || fail "cannot read the archive's manifest.json and config"
import json, sys, tarfile
archive, tmp = sys.argv[1], sys.argv[2]
with tarfile.open(archive) as tar:
    manifest = json.load(tar.extractfile("manifest.json"))
    if len(manifest) != 1:
        sys.exit(f"{len(manifest)} images in the archive, expected 1")
    m = manifest[0]
    config = json.load(tar.extractfile(m["Config"]))
    sizes = [tar.getmember(name).size for name in [m["Config"], *m["Layers"]]]
json.dump({"tags": m.get("RepoTags") or [], "config": config, "bytes": sum(sizes), "layers": len(m["Layers"])},
          open(f"{tmp}/image.json", "w"))
EOF
q() { python3 -c 'import json, sys; v = eval(sys.argv[2], {}, {"j": json.load(open(sys.argv[1]))}); print(v if isinstance(v, str) else json.dumps(v))' "$tmp/image.json" "$1"; }

user=$(q 'j["config"]["config"].get("User", "")')
[[ $user == 65532:65532 ]] || fail "config User is '$user', expected 65532:65532 (non-root)"
pass "config User $user (non-root)"
entrypoint=$(q 'j["config"]["config"].get("Entrypoint")')
[[ $entrypoint == '["/usr/local/bin/muster"]' ]] || fail "config Entrypoint is $entrypoint, expected [\"/usr/local/bin/muster\"]"
pass "config Entrypoint $entrypoint"
platform=$(q 'j["config"].get("os", "") + "/" + j["config"].get("architecture", "")')
[[ $platform == linux/* && $platform != linux/ ]] || fail "config platform is '$platform', expected linux/<arch>"
pass "config platform $platform, tags $(q 'j["tags"]')"

# The root file system, as crane flattens it (read from stdin: crane's tarball reader).
"$crane" export - "$tmp/rootfs.tar" <"$archive" 2>"$tmp/export.log" || fail "crane export - <$archive: $(cat "$tmp/export.log")"
python3 - "$tmp/rootfs.tar" <<'EOF' || fail "the layer's ownership and modes are wrong (above)"
import stat, sys, tarfile
bad = []
with tarfile.open(sys.argv[1]) as tar:
    for ti in tar:
        name = ti.name.lstrip("./")
        mine = name == "home/nonroot" or name.startswith("home/nonroot/")
        if (ti.uid, ti.gid) != ((65532, 65532) if mine else (0, 0)):
            bad.append(f"{name}: owned by {ti.uid}:{ti.gid}")
        if ti.mode & (stat.S_ISUID | stat.S_ISGID):
            bad.append(f"{name}: setuid/setgid")
        if ti.mode & stat.S_IWOTH and not (ti.isdir() and ti.mode & stat.S_ISVTX):
            bad.append(f"{name}: writable by anyone (mode {ti.mode:o})")
for b in bad:
    print(f"  {b}", file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
pass "every file root-owned but /home/nonroot; no setuid, no world-writable file"
root=$tmp/rootfs
mkdir -m 0755 "$root"
tar --numeric-owner -xpf "$tmp/rootfs.tar" -C "$root" || fail "cannot unpack the exported root file system"

as_user() { setpriv --reuid=65532 --regid=65532 --clear-groups "$@"; }
as_user test -w "$root" && fail "user 65532 can write to the image's /"
as_user test -w "$root/usr/local/bin/muster" && fail "user 65532 can write to /usr/local/bin/muster"
as_user test -w "$root/tmp" || fail "user 65532 cannot write to the image's /tmp"
pass "user 65532 cannot write / or the binary, can write /tmp"

head=$(git -C "$repo_dir" rev-parse --short=12 HEAD) || fail "git rev-parse HEAD failed"
out=$(chroot --userspec=65532:65532 "$root" /usr/local/bin/muster --version 2>&1) ||
  fail "muster --version under chroot as 65532 failed: $out"
[[ $out == *"(commit $head, "* ]] || fail "muster --version in the image says '$out'; HEAD is $head"
pass "in the image, as 65532: $out"
revision=$(q 'j["config"]["config"].get("Labels", {}).get("org.opencontainers.image.revision", "")')
[[ $revision == "$head" ]] || fail "label org.opencontainers.image.revision is '$revision'; HEAD is $head"
pass "label org.opencontainers.image.revision $revision"

# More than --version: parse a cluster file (a copy in the scratch root) on the image's libraries.
cp "$repo_dir/scenarios/match/cluster.yaml" "$root/tmp/cluster.yaml"
out=$(chroot --userspec=65532:65532 "$root" /usr/local/bin/muster cluster describe /tmp/cluster.yaml 2>&1) ||
  fail "muster cluster describe in the image failed: $out"
[[ $out == *"nodes: 24"* ]] || fail "muster cluster describe in the image: expected 'nodes: 24', got: $out"
pass "muster cluster describe runs in the image"

bytes=$(q 'j["bytes"]')
human=$(awk -v b="$bytes" 'BEGIN { printf "%.1f MB", b / 1e6 }')
(( bytes < max_bytes )) || fail "the image is $human ($bytes bytes compressed), over the $max_mb MB limit"
pass "compressed size $human ($bytes bytes: config + $(q 'j["layers"]') layer), under $max_mb MB; archive $(stat -c %s "$archive") bytes"
echo "image-test: passed in $(( $(date +%s) - t0 ))s: $archive" >&2
