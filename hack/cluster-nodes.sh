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
import json, re, sys
work = sys.argv[1]
desired = json.load(open(f"{work}/desired.json"))
current = json.load(open(f"{work}/current.json"))
if desired.get("kind") != "List" or not isinstance(desired.get("items"), list):
    sys.exit("node description is not a v1 List")
FAKE = "kwok.x-k8s.io/node"

def qty(s):
    """A Kubernetes quantity as a number, so that "1000" equals the stored "1k"."""
    m = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", str(s))
    if not m:
        return str(s)
    mult = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
            "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}.get(m.group(2))
    return str(s) if mult is None else round(float(m.group(1)) * mult, 3)

def shape(n):
    md, spec, st = n.get("metadata", {}), n.get("spec", {}), n.get("status", {})
    return json.dumps({
        "labels": md.get("labels") or {},
        "taints": sorted(json.dumps(t, sort_keys=True) for t in (spec.get("taints") or [])
                         if not t.get("key", "").startswith("node.kubernetes.io/")),
        "unschedulable": bool(spec.get("unschedulable")),
        "capacity": {k: qty(v) for k, v in (st.get("capacity") or {}).items()},
        "allocatable": {k: qty(v) for k, v in (st.get("allocatable") or st.get("capacity") or {}).items()},
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
# kubectl sends one request per object and throttles itself to ~5 per second after a
# burst of 10: create in chunks of 10, several kubectl processes at a time.
for i in range(0, len(create), 10):
    json.dump({"apiVersion": "v1", "kind": "List", "items": create[i:i + 10]},
              open(f"{work}/create-{i // 10:05d}.json", "w"))
print(f"{len(want)} nodes wanted: {len(create)} to create, {len(delete)} to delete", file=sys.stderr)
EOF

# kubectl waits for objects one at a time; poll the whole set instead.
# poll SECONDS WHAT CMD...: until CMD succeeds
poll() {
  local deadline=$(( $(date +%s) + $1 )) what=$2; shift 2
  until "$@"; do
    (( $(date +%s) < deadline )) || die "$what; see $MUSTER_CLUSTER_DIR/logs/kwok.log"
    sleep 0.3
  done
}
node_names() { "${KUBECTL[@]}" get nodes -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}'; }
deleted() { ! node_names | grep -qxFf "$work/delete.txt"; }
if [[ -s $work/delete.txt ]]; then
  xargs -n 10 -P 8 "${KUBECTL[@]}" delete node --wait=false < "$work/delete.txt" >/dev/null
  poll 120 "nodes were not deleted" deleted
fi
if compgen -G "$work/create-*.json" >/dev/null; then
  printf '%s\n' "$work"/create-*.json | xargs -n 1 -P 8 "${KUBECTL[@]}" create >/dev/null -f
fi
n=$(python3 -c "import json; print(len(json.load(open('$work/desired.json'))['items']))")
python3 -c "import json; print('\n'.join(x['metadata']['name'] for x in json.load(open('$work/desired.json'))['items']))" > "$work/want.txt"
all_ready() {
  "${KUBECTL[@]}" get nodes -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
    awk '$2 == "True" {print $1}' | sort > "$work/ready.txt"
  [[ -z $(comm -23 <(sort "$work/want.txt") "$work/ready.txt") ]]
}
poll 120 "nodes did not all become Ready" all_ready
log "$n KWOK nodes Ready (from $(basename "$cluster_file"))"
