#!/usr/bin/env python3
"""A continuous over-commit checker for the e2e tests, written apart from muster's own code.

    overcommit.py --kubeconfig F [--interval 0.5] [--log FILE] [--state FILE] [--kubectl BIN]
    overcommit.py --self-test

Every INTERVAL seconds it lists the nodes and the pods bound to them (spec.nodeName set, phase
neither Succeeded nor Failed, also pods being deleted: they hold their resources until they are
gone) and checks, for every node and every resource, that the requests of its pods add up to at
most the node's status.allocatable. Each violation (node, resource, pods) is logged once when
first seen, with the sum, the allocatable and every pod's request; --state holds a JSON summary
(polls, errors, violations) rewritten after every poll. It runs until SIGTERM or SIGINT.

A pod's requests are counted as the kubelet admits pods and the scheduler fits them
(k8s.io/component-helpers/resource.PodRequests; the Kubernetes docs "Resource Management for
Pods and Containers", "Sidecar Containers" (KEP-753) and "Pod-level resources" (KEP-2837)):

  - the containers (spec.containers) are summed, and so are the native sidecars (init containers
    with restartPolicy: Always), which run beside them for the pod's whole life;
  - an ordinary init container runs alone, but beside the sidecars started before it: the pod
    needs at least, for each ordinary init container, its requests plus those of the sidecars
    declared before it (and, for a sidecar, the sidecars up to and including it), so per resource
    the pod takes the larger of that and the sum above;
  - pod-level requests (spec.resources.requests) replace the result for the resources they name;
  - spec.overhead (RuntimeClass) is added on top;
  - a limit stands in for a missing request (the API server's defaulting, for containers and for
    pod-level resources alike);
  - every pod counts 1 against the node's "pods".

Not counted: in-place resizes in progress (status.containerStatuses[].allocatedResources).
"""
import argparse
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from decimal import Decimal
from fractions import Fraction

SUFFIX = {
    "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 10**3), "": Fraction(1),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
    "P": Fraction(10**15), "E": Fraction(10**18),
    "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30), "Ti": Fraction(2**40),
    "Pi": Fraction(2**50), "Ei": Fraction(2**60),
}


def qty(s):
    """A Kubernetes quantity ("1.5", "500m", "2Gi", "1e3") as an exact Fraction."""
    s = str(s).strip()
    m = re.fullmatch(r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:[eE]([+-]?[0-9]+)|([a-zA-Z]*))", s)
    if not m or (m.group(3) or "") not in SUFFIX:
        raise ValueError(f"not a quantity: {s!r}")
    v = Fraction(Decimal(m.group(1)))
    if m.group(2) is not None:
        return v * Fraction(10) ** int(m.group(2))
    return v * SUFFIX[m.group(3) or ""]


def fmt(resource, v):
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        return f"{float(v) / 2**20:.6g}Mi"
    if resource == "cpu":
        return f"{float(v):.6g}"
    return f"{float(v):.6g}"


def add(into, other):
    for k, v in other.items():
        into[k] = into.get(k, Fraction(0)) + v


def max_into(into, other):
    for k, v in other.items():
        if v > into.get(k, Fraction(0)):
            into[k] = v


def requests_of(resources):
    """requests, with a limit standing in for each missing request."""
    resources = resources or {}
    req = {k: qty(v) for k, v in (resources.get("requests") or {}).items()}
    for k, v in (resources.get("limits") or {}).items():
        req.setdefault(k, qty(v))
    return req


def pod_requests(spec):
    reqs = {}
    for c in spec.get("containers") or []:
        add(reqs, requests_of(c.get("resources")))
    sidecars, init = {}, {}
    for c in spec.get("initContainers") or []:
        r = requests_of(c.get("resources"))
        if c.get("restartPolicy") == "Always":
            add(reqs, r)            # runs beside the containers for the pod's life
            add(sidecars, r)
            needs = dict(sidecars)  # while it starts: itself and the sidecars before it
        else:
            needs = dict(r)         # runs to completion beside the sidecars started before it
            add(needs, sidecars)
        max_into(init, needs)
    max_into(reqs, init)
    for k, v in requests_of(spec.get("resources")).items():
        reqs[k] = v                 # pod-level requests replace the sum for what they name
    add(reqs, {k: qty(v) for k, v in (spec.get("overhead") or {}).items()})
    reqs["pods"] = reqs.get("pods", Fraction(0)) + 1
    return reqs


def holds_resources(pod):
    return bool(pod.get("spec", {}).get("nodeName")) and \
        pod.get("status", {}).get("phase") not in ("Succeeded", "Failed")


def violations(nodes, pods):
    """[(node, resource, sum, allocatable, [(pod, request)])] for nodes over their allocatable."""
    alloc = {n["metadata"]["name"]: {k: qty(v) for k, v in
                                     ((n.get("status") or {}).get("allocatable") or {}).items()}
             for n in nodes}
    on = {}
    for p in pods:
        if not holds_resources(p):
            continue
        node = p["spec"]["nodeName"]
        if node not in alloc:
            continue  # a node that is gone: nothing to over-commit
        name = f'{p["metadata"].get("namespace", "")}/{p["metadata"]["name"]}'
        on.setdefault(node, []).append((name, pod_requests(p["spec"])))
    out = []
    for node, members in sorted(on.items()):
        total = {}
        for _, r in members:
            add(total, r)
        for res, v in sorted(total.items()):
            have = alloc[node].get(res, Fraction(0))
            if v > have:
                out.append((node, res, v, have,
                            sorted((n, r.get(res, Fraction(0))) for n, r in members if r.get(res))))
    return out


class Api:
    """GETs against the API server with the kubeconfig's credentials (read once via kubectl)."""

    def __init__(self, kubectl, kubeconfig):
        cfg = json.loads(subprocess.check_output(
            [kubectl, "--kubeconfig", kubeconfig, "config", "view", "--raw", "--minify", "-o", "json"]))
        cluster = cfg["clusters"][0]["cluster"]
        user = cfg["users"][0]["user"]
        self.server = cluster["server"].rstrip("/")
        self.tmp = tempfile.mkdtemp(prefix="overcommit-")

        def path(entry, key):
            if entry.get(key):
                return entry[key]
            if entry.get(key + "-data"):
                import base64
                f = os.path.join(self.tmp, key)
                with open(f, "wb") as out:
                    out.write(base64.b64decode(entry[key + "-data"]))
                return f
            return None

        if cluster.get("insecure-skip-tls-verify"):
            self.ctx = ssl._create_unverified_context()
        else:
            self.ctx = ssl.create_default_context(cafile=path(cluster, "certificate-authority"))
        cert, key = path(user, "client-certificate"), path(user, "client-key")
        if cert:
            self.ctx.load_cert_chain(cert, key)
        self.headers = {"Accept": "application/json"}
        if user.get("token"):
            self.headers["Authorization"] = f'Bearer {user["token"]}'

    def get(self, path, **query):
        url = self.server + path + ("?" + urllib.parse.urlencode(query) if query else "")
        req = urllib.request.Request(url, headers=self.headers)
        with urllib.request.urlopen(req, context=self.ctx, timeout=10) as r:
            return json.load(r)


def run(args):
    api = Api(args.kubectl, args.kubeconfig)
    state = {"polls": 0, "errors": 0, "violations": 0, "polls_with_violations": 0, "last_error": ""}
    seen = {}
    logf = open(args.log, "a", buffering=1) if args.log else None
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))

    def say(line):
        line = f"{time.strftime('%H:%M:%S')} {line}"
        print(f"  !!   over-commit: {line}", file=sys.stderr, flush=True)
        if logf:
            logf.write(line + "\n")

    def write_state():
        if args.state:
            tmp = args.state + ".tmp"
            with open(tmp, "w") as f:
                json.dump(state, f)
            os.replace(tmp, args.state)

    while not stop:
        t0 = time.monotonic()
        try:
            # Pods first: a pod listed is bound to a node that existed when the nodes are read.
            pods = api.get("/api/v1/pods",
                           fieldSelector="spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed")["items"]
            nodes = api.get("/api/v1/nodes")["items"]
            found = violations(nodes, pods)
            state["polls"] += 1
            if found:
                state["polls_with_violations"] += 1
            for node, res, total, have, members in found:
                key = (node, res, tuple(n for n, _ in members))
                seen[key] = seen.get(key, 0) + 1
                if seen[key] == 1:
                    state["violations"] += 1
                    pods_txt = ", ".join(f"{n} {fmt(res, v)}" for n, v in members)
                    say(f"node {node}: {res} requested {fmt(res, total)} > allocatable {fmt(res, have)}: {pods_txt}")
        except Exception as e:  # the API server busy or restarting: counted, and the poll retried
            state["errors"] += 1
            state["last_error"] = f"{type(e).__name__}: {e}"
        write_state()
        time.sleep(max(0.0, args.interval - (time.monotonic() - t0)))
    write_state()
    if logf:
        logf.close()


def self_test():
    c = lambda cpu, **kw: {"name": "c", "resources": {"requests": {"cpu": cpu}}, **kw}
    cases = [
        ("two containers are summed", {"containers": [c("1"), c("2")]}, "3"),
        ("a native sidecar adds to the containers", {"initContainers": [c("4", restartPolicy="Always")],
                                                     "containers": [c("1")]}, "5"),
        ("an ordinary init container larger than the containers",
         {"initContainers": [c("6")], "containers": [c("1")]}, "6"),
        ("an init container after a sidecar runs beside it",
         {"initContainers": [c("2", restartPolicy="Always"), c("3")], "containers": [c("1")]}, "5"),
        ("an init container before a sidecar does not",
         {"initContainers": [c("3"), c("2", restartPolicy="Always")], "containers": [c("1")]}, "3"),
        ("pod-level requests replace the sum", {"resources": {"requests": {"cpu": "5"}},
                                                "containers": [c("1")]}, "5"),
        ("pod-level limits stand in for pod-level requests", {"resources": {"limits": {"cpu": "4"}},
                                                              "containers": [c("1")]}, "4"),
        ("overhead is added", {"overhead": {"cpu": "250m"}, "containers": [c("1500m")]}, "1.75"),
        ("a limit stands in for a missing request",
         {"containers": [{"name": "c", "resources": {"limits": {"cpu": "2"}}}]}, "2"),
    ]
    bad = 0
    for what, spec, want in cases:
        got = pod_requests(spec).get("cpu")
        ok = got == qty(want)
        bad += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {what}: cpu {fmt('cpu', got)} (want {want})")
    mem = pod_requests({"resources": {"requests": {"cpu": "5"}},
                        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]})
    ok = mem.get("memory") == qty("1Gi") and mem.get("pods") == 1
    bad += not ok
    print(f"{'ok  ' if ok else 'FAIL'} what pod-level requests do not name comes from the containers; pods 1")
    node = {"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "8", "memory": "1Gi", "pods": "110"}}}
    pod = lambda name, cpu, phase="Running": {"metadata": {"name": name, "namespace": "ns"},
                                              "spec": {"nodeName": "n", "containers": [c(cpu)]},
                                              "status": {"phase": phase}}
    v = violations([node], [pod("a", "7"), pod("b", "1.5"), pod("c", "4", "Succeeded")])
    ok = len(v) == 1 and v[0][:2] == ("n", "cpu") and v[0][2] == qty("8.5")
    bad += not ok
    print(f"{'ok  ' if ok else 'FAIL'} 7 + 1.5 cpu on an 8-cpu node is a violation; a Succeeded pod is not counted")
    ok = not violations([node], [pod("a", "7"), pod("b", "1")])
    bad += not ok
    print(f"{'ok  ' if ok else 'FAIL'} 7 + 1 cpu on an 8-cpu node is not")
    for s, want in [("1e3", 1000), ("0.5", Fraction(1, 2)), ("100Mi", 100 * 2**20), ("2k", 2000), ("1500m", Fraction(3, 2))]:
        ok = qty(s) == want
        bad += not ok
        print(f"{'ok  ' if ok else 'FAIL'} quantity {s}")
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    ap.add_argument("--kubectl", default="kubectl")
    ap.add_argument("--interval", type=float, default=0.5)
    ap.add_argument("--log")
    ap.add_argument("--state")
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        sys.exit(self_test())
    if not args.kubeconfig:
        sys.exit("overcommit.py: no --kubeconfig (or KUBECONFIG)")
    run(args)


if __name__ == "__main__":
    main()
