#!/usr/bin/env bash
# Bring the KWOK nodes of the running harness cluster in line with a cluster description:
#
#   hack/cluster-nodes.sh CLUSTER_FILE
#   hack/cluster-nodes.sh --print CLUSTER_FILE   (only print the Node List it would apply)
#
# The Node objects come from `muster cluster nodes CLUSTER_FILE` (a v1 List of Nodes,
# annotated kwok.x-k8s.io/node=fake), run through `cargo run -q -p muster` unless
# $MUSTER_BIN names a built muster binary, or $MUSTER_NODES_JSON names a ready-made List.
# Nodes annotated for KWOK that the description lacks, or whose labels, taints,
# schedulability or capacity differ, are deleted; missing ones are created; then the
# script waits until every node is Ready.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

print_only=0
if [[ ${1:-} == --print ]]; then print_only=1; shift; fi
cluster_file=${1:?usage: cluster-nodes.sh [--print] CLUSTER_FILE}
[[ -f $cluster_file ]] || die "cluster description not found: $cluster_file"
kubeconfig=$MUSTER_CLUSTER_DIR/kubeconfig
KUBECTL=("$K8S_BIN/kubectl" --kubeconfig "$kubeconfig")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [[ -n ${MUSTER_NODES_JSON:-} ]]; then
  cp "$MUSTER_NODES_JSON" "$work/desired.json"
elif [[ -n ${MUSTER_BIN:-} ]]; then
  "$MUSTER_BIN" cluster nodes "$cluster_file" > "$work/desired.json" ||
    die "'$MUSTER_BIN cluster nodes $cluster_file' failed"
else
  command -v cargo >/dev/null || die "cargo not found: set MUSTER_BIN or MUSTER_NODES_JSON"
  (cd "$repo_dir" && cargo run -q -p muster -- cluster nodes "$cluster_file") > "$work/desired.json" ||
    die "'cargo run -p muster -- cluster nodes $cluster_file' failed"
fi
python3 -c '
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except ValueError as e:
    sys.exit(f"not JSON: {e}")
if d.get("kind") != "List" or not isinstance(d.get("items"), list):
    sys.exit("not a v1 List")
' "$work/desired.json" || die "the Node list for $cluster_file is not a JSON v1 List (from ${MUSTER_NODES_JSON:-${MUSTER_BIN:-cargo run -p muster}})"
if (( print_only )); then cat "$work/desired.json"; exit 0; fi
"${KUBECTL[@]}" get nodes -o json > "$work/current.json"

python3 - "$work" <<'EOF'
import json, sys
work = sys.argv[1]
desired = json.load(open(f"{work}/desired.json"))
current = json.load(open(f"{work}/current.json"))
if desired.get("kind") != "List" or not isinstance(desired.get("items"), list):
    sys.exit("node description is not a v1 List")
FAKE = "kwok.x-k8s.io/node"

def shape(n):
    md, spec, st = n.get("metadata", {}), n.get("spec", {}), n.get("status", {})
    return json.dumps({
        "labels": md.get("labels") or {},
        "taints": sorted(json.dumps(t, sort_keys=True) for t in (spec.get("taints") or [])
                         if not t.get("key", "").startswith("node.kubernetes.io/")),
        "unschedulable": bool(spec.get("unschedulable")),
        "capacity": st.get("capacity") or {},
        "allocatable": st.get("allocatable") or st.get("capacity") or {},
    }, sort_keys=True)

want = {}
for n in desired["items"]:
    if (n.get("metadata", {}).get("annotations") or {}).get(FAKE) != "fake":
        sys.exit(f"node {n['metadata'].get('name')} lacks the annotation {FAKE}=fake")
    want[n["metadata"]["name"]] = n
have = {n["metadata"]["name"]: n for n in current["items"]}

delete, create = [], []
for name, n in have.items():
    fake = (n["metadata"].get("annotations") or {}).get(FAKE) == "fake"
    if not fake:
        continue  # not ours: leave it alone
    if name not in want:
        delete.append(name)
    else:
        # Compare with the desired one as the apiserver would store it (labels it adds).
        d = json.loads(json.dumps(want[name]))
        d.setdefault("metadata", {}).setdefault("labels", {})
        extra = {k: v for k, v in (n["metadata"].get("labels") or {}).items()
                 if k not in d["metadata"]["labels"]
                 and (k.startswith("beta.kubernetes.io/") or k in ("kubernetes.io/os", "kubernetes.io/arch"))}
        d["metadata"]["labels"].update(extra)
        if shape(d) != shape(n):
            delete.append(name)
for name, n in want.items():
    if name not in have or name in delete:
        create.append(n)
open(f"{work}/delete.txt", "w").write("".join(f"{x}\n" for x in delete))
json.dump({"apiVersion": "v1", "kind": "List", "items": create}, open(f"{work}/create.json", "w"))
print(f"{len(want)} nodes wanted: {len(create)} to create, {len(delete)} to delete", file=sys.stderr)
EOF

if [[ -s $work/delete.txt ]]; then
  xargs "${KUBECTL[@]}" delete node --wait=true < "$work/delete.txt" >/dev/null
fi
if python3 -c "import json,sys; sys.exit(0 if json.load(open('$work/create.json'))['items'] else 1)"; then
  "${KUBECTL[@]}" create -f "$work/create.json" >/dev/null
fi
n=$(python3 -c "import json; print(len(json.load(open('$work/desired.json'))['items']))")
if (( n > 0 )); then
  "${KUBECTL[@]}" wait --for=condition=Ready nodes --all --timeout=120s >/dev/null ||
    die "nodes did not all become Ready; see $MUSTER_CLUSTER_DIR/logs/kwok.log"
fi
log "$n KWOK nodes Ready (from $(basename "$cluster_file"))"
