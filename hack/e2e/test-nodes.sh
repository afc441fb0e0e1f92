#!/usr/bin/env bash
# e2e: the KWOK nodes of a cluster description are all there and Ready, with the
# capacities, labels, taints and schedulability the description gives them.
#   test-nodes.sh CLUSTER_FILE
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cluster_file=$1
echo "test-nodes ($(basename "$cluster_file"))" >&2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

"$hack_dir/cluster-nodes.sh" --print "$cluster_file" > "$tmp/desired.json"
k get nodes -o json > "$tmp/live.json"
python3 - "$cluster_file" "$tmp/desired.json" "$tmp/live.json" <<'PY'
import json, re, sys, yaml

def qty(s):
    """Kubernetes quantity -> number (enough of the grammar for node capacities)."""
    s = str(s)
    m = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", s)
    if not m:
        raise ValueError(s)
    n, u = float(m.group(1)), m.group(2)
    mult = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
            "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}[u]
    return round(n * mult, 3)

def same_res(a, b):
    return set(a) == set(b) and all(qty(a[k]) == qty(b[k]) for k in a)

desc = yaml.safe_load(open(sys.argv[1]))
desired = {n["metadata"]["name"]: n for n in json.load(open(sys.argv[2]))["items"]}
live = {n["metadata"]["name"]: n for n in json.load(open(sys.argv[3]))["items"]}
bad = []
def ok(cond, what):
    if not cond:
        bad.append(what)

# 1. Independently of `muster cluster nodes`: every class's nodes exist with its capacity.
total = 0
for c in desc["nodeClasses"]:
    for i in range(c["count"]):
        name = f"{c['name']}-{i}"
        total += 1
        n = live.get(name)
        if n is None:
            bad.append(f"node {name} missing"); continue
        cap = n["status"].get("capacity", {})
        for r, v in c["capacity"].items():
            ok(r in cap and qty(cap[r]) == qty(v), f"{name}: capacity {r}={cap.get(r)} want {v}")
        for lk, lv in (c.get("labels") or {}).items():
            ok(n["metadata"].get("labels", {}).get(lk) == str(lv), f"{name}: label {lk}")
        ok(n["metadata"]["labels"].get("kubernetes.io/hostname") == name, f"{name}: hostname label")
        taints = {(t["key"], t.get("value", ""), t["effect"]) for t in n["spec"].get("taints") or []}
        for t in c.get("taints") or []:
            ok((t["key"], str(t.get("value", "")), t["effect"]) in taints, f"{name}: taint {t['key']}")
        ok(bool(n["spec"].get("unschedulable")) == bool(c.get("unschedulable")), f"{name}: unschedulable")
fake = [n for n in live.values() if (n["metadata"].get("annotations") or {}).get("kwok.x-k8s.io/node") == "fake"]
ok(len(fake) == total, f"{len(fake)} KWOK nodes, description has {total}")

# 2. Exactly what `muster cluster nodes` asked for: labels (topology included), resources.
for name, d in desired.items():
    n = live.get(name)
    if n is None:
        bad.append(f"node {name} missing"); continue
    for lk, lv in (d["metadata"].get("labels") or {}).items():
        ok(n["metadata"]["labels"].get(lk) == lv, f"{name}: label {lk}={lv}")
    ok(same_res(d["status"]["capacity"], n["status"]["capacity"]), f"{name}: capacity")
    ok(same_res(d["status"].get("allocatable") or d["status"]["capacity"], n["status"]["allocatable"]), f"{name}: allocatable")

# 3. Ready, as kwok reports it.
for n in fake:
    ready = [c for c in n["status"].get("conditions") or [] if c["type"] == "Ready"]
    ok(ready and ready[0]["status"] == "True", f"{n['metadata']['name']}: not Ready")

if bad:
    print("\n".join("  " + b for b in bad[:20]), file=sys.stderr)
    sys.exit(1)
print(f"  ok   {total} KWOK nodes Ready with the described capacities, labels and taints", file=sys.stderr)
PY
