#!/usr/bin/env python3
"""Helper of hack/e2e/test-scale.sh and hack/bench-bind.sh: submit Jobs or pods to a real
control plane, follow every pod and Job through watches, and report the figures as one JSON line.

  scale.py scale --kubeconfig K --namespace NS [--scheduler default|muster] [--queue Q]
                 [--jobs N] [--pods-per-job P] [--submitters S] [--run-seconds R]
                 [--jitter-seconds J] [--deadline-seconds D] [--timeout T] [--out FILE]
      seed 002's experiment: N Jobs x P pods (2 cpu / 2Gi), run R (+0..J) s after all pods of a
      Job are ready, activeDeadlineSeconds D, from S parallel submitters; wait until every Job
      completed or failed; report completed/failed jobs, makespan, jobs/minute, pods bound per
      second, and the peak use of every node against its allocatable.

  scale.py bind --kubeconfig K --namespace NS [--scheduler ...] --shape jobs|gang|pods --count N
                [--release uncordon|create]
      a burst of N pods (N one-pod Jobs, one Job of N pods, or N bare pods) created by S
      submitters; report how fast they were bound. With --release uncordon (default) the nodes are
      cordoned while the burst is created and the clock starts when they are uncordoned, so the
      figure is the scheduler's, not the rate at which pods can be created.

Times are taken when the watch delivers an object (sub-second, includes the watch's latency of a
few ms), not from the objects' own timestamps, which have one-second resolution. Node use is
accounted from the same ordered watch stream: a pod holds its requests on its node from the
event that shows it bound until the one that shows it Succeeded, Failed or deleted, which is the
order the scheduler itself sees them in. Runs with the Python standard library and PyYAML.
"""
import argparse
import base64
import http.client
import json
import os
import ssl
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from urllib.parse import urlparse

import yaml

# --- a minimal Kubernetes client ------------------------------------------------------------------


class Kube:
    """Talks to the apiserver of a kubeconfig's current context (client certificates or a token)."""

    def __init__(self, path):
        with open(path) as f:
            kc = yaml.safe_load(f)
        ctx_name = kc.get("current-context")
        ctx = next(c["context"] for c in kc["contexts"] if c["name"] == ctx_name)
        cluster = next(c["cluster"] for c in kc["clusters"] if c["name"] == ctx["cluster"])
        user = next((u["user"] for u in kc.get("users", []) if u["name"] == ctx.get("user")), {})
        base = os.path.dirname(os.path.abspath(path))
        self._tmp = tempfile.mkdtemp(prefix="muster-scale-")

        def file_of(entry, key):
            # Either a path (relative to the kubeconfig) or inline base64 data.
            if entry.get(key):
                return os.path.join(base, entry[key])
            if entry.get(key + "-data"):
                p = os.path.join(self._tmp, key)
                with open(p, "wb") as f:
                    f.write(base64.b64decode(entry[key + "-data"]))
                return p
            return None

        url = urlparse(cluster["server"])
        self.host, self.port = url.hostname, url.port or 443
        ca = file_of(cluster, "certificate-authority")
        self.ctx = ssl.create_default_context(cafile=ca)
        if cluster.get("insecure-skip-tls-verify"):
            self.ctx.check_hostname = False
            self.ctx.verify_mode = ssl.CERT_NONE
        cert, key = file_of(user, "client-certificate"), file_of(user, "client-key")
        if cert:
            self.ctx.load_cert_chain(cert, key)
        self.headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if user.get("token"):
            self.headers["Authorization"] = "Bearer " + user["token"]
        self.local = threading.local()

    def conn(self, timeout=60):
        return http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)

    def call(self, method, path, body=None, ok=(200, 201), retries=8, content_type=None):
        """One request on this thread's kept-alive connection; retries throttling and resets."""
        data = json.dumps(body).encode() if body is not None else None
        headers = dict(self.headers, **({"Content-Type": content_type} if content_type else {}))
        for attempt in range(retries):
            c = getattr(self.local, "c", None)
            if c is None:
                c = self.local.c = self.conn()
            try:
                c.request(method, path, body=data, headers=headers)
                r = c.getresponse()
                payload = r.read()
            except (OSError, http.client.HTTPException):
                self.local.c = None
                time.sleep(0.2 * (attempt + 1))
                continue
            if r.status in ok:
                return json.loads(payload) if payload else None
            if r.status in (429, 500, 503, 504):
                time.sleep(float(r.getheader("Retry-After") or 0.2 * (attempt + 1)))
                continue
            raise RuntimeError(f"{method} {path}: HTTP {r.status}: {payload[:300].decode(errors='replace')}")
        raise RuntimeError(f"{method} {path}: gave up after {retries} attempts")

    def watch(self, path, on_event, stop):
        """Lists `path`, then watches it from there until `stop` is set; calls on_event(type, obj)
        for the listed objects (as ADDED) and every event, in the apiserver's order."""
        rv = None
        while not stop.is_set():
            if rv is None:
                listed = self.call("GET", path)
                for o in listed.get("items", []):
                    on_event("ADDED", o)
                rv = listed["metadata"]["resourceVersion"]
            sep = "&" if "?" in path else "?"
            c = self.conn(timeout=30)
            try:
                c.request("GET", f"{path}{sep}watch=1&allowWatchBookmarks=true&timeoutSeconds=20&resourceVersion={rv}",
                          headers=self.headers)
                r = c.getresponse()
                if r.status != 200:
                    r.read()
                    rv = None if r.status == 410 else rv
                    time.sleep(0.5)
                    continue
                while not stop.is_set():
                    line = r.readline()
                    if not line:
                        break
                    ev = json.loads(line)
                    obj = ev.get("object") or {}
                    if ev.get("type") == "ERROR":
                        if obj.get("code") == 410:
                            rv = None  # too old: list again
                        break
                    rv = obj.get("metadata", {}).get("resourceVersion", rv)
                    if ev["type"] != "BOOKMARK":
                        on_event(ev["type"], obj)
            except (OSError, http.client.HTTPException, ValueError):
                time.sleep(0.2)
            finally:
                c.close()


# --- quantities ---------------------------------------------------------------------------------

SUFFIX = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
          "n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}


def quantity(q):
    """A Kubernetes quantity as a float in base units (cores, bytes, count)."""
    q = str(q)
    for s in sorted(SUFFIX, key=len, reverse=True):
        if q.endswith(s):
            return float(q[: -len(s)]) * SUFFIX[s]
    return float(q)


def rfc3339(s):
    try:
        return datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        return None


def pod_requests(pod):
    cpu = mem = 0.0
    for c in pod["spec"].get("containers", []):
        req = (c.get("resources") or {}).get("requests") or {}
        cpu += quantity(req.get("cpu", 0))
        mem += quantity(req.get("memory", 0))
    return cpu, mem


# --- following pods and jobs --------------------------------------------------------------------


class Tracker:
    """Every pod's and Job's life as the watches show it, and each node's use over time."""

    def __init__(self, nodes):
        self.lock = threading.Lock()
        self.pods = {}  # uid -> dict(seen, bound, node, ended, job, cpu, mem, phase)
        self.jobs = {}  # name -> dict(seen, end, outcome, reason)
        self.alloc = nodes  # node -> (cpu, mem, pods)
        self.use = {n: [0.0, 0.0, 0] for n in nodes}
        self.peak = {n: [0.0, 0.0, 0] for n in nodes}
        self.over = []  # (time, node, cpu, mem, pods) whenever a node went over its allocatable
        self.running = 0
        self.peak_running = 0

    def on_pod(self, kind, pod):
        now = time.time()
        meta, spec, status = pod["metadata"], pod["spec"], pod.get("status") or {}
        with self.lock:
            p = self.pods.get(meta["uid"])
            if p is None:
                labels = meta.get("labels") or {}
                cpu, mem = pod_requests(pod)
                p = self.pods[meta["uid"]] = {
                    "seen": now, "bound": None, "node": None, "ended": None, "cpu": cpu, "mem": mem,
                    "job": labels.get("batch.kubernetes.io/job-name") or labels.get("job-name"),
                    "created": meta.get("creationTimestamp"), "phase": None, "all_ready": None, "running": None,
                }
            if p["ended"] is not None:
                return
            node = spec.get("nodeName")
            if node and p["bound"] is None:
                p["bound"], p["node"] = now, node
                u = self.use.setdefault(node, [0.0, 0.0, 0])
                u[0] += p["cpu"]
                u[1] += p["mem"]
                u[2] += 1
                self.running += 1
                self.peak_running = max(self.peak_running, self.running)
                pk = self.peak.setdefault(node, [0.0, 0.0, 0])
                for i in range(3):
                    pk[i] = max(pk[i], u[i])
                a = self.alloc.get(node)
                if a and (u[0] > a[0] + 1e-9 or u[1] > a[1] + 0.5 or u[2] > a[2]):
                    self.over.append((now, node, u[0], u[1], u[2]))
            stamp = (meta.get("annotations") or {}).get("kwok.muster.dev/all-ready-at")
            if stamp and p["all_ready"] is None:
                p["all_ready"] = rfc3339(stamp)
            p["phase"] = status.get("phase")
            if p["phase"] == "Running" and p["running"] is None:
                p["running"] = now
            if kind == "DELETED" or p["phase"] in ("Succeeded", "Failed"):
                p["ended"] = now
                if p["bound"] is not None:
                    u = self.use[p["node"]]
                    u[0] -= p["cpu"]
                    u[1] -= p["mem"]
                    u[2] -= 1
                    self.running -= 1

    def on_job(self, kind, job):
        now = time.time()
        name = job["metadata"]["name"]
        with self.lock:
            j = self.jobs.setdefault(name, {"seen": now, "end": None, "outcome": None, "reason": None, "start": None})
            if j["end"] is not None:
                return
            # The Job controller sets startTime when the Job starts (again, after a suspension):
            # where activeDeadlineSeconds counts from.
            started = (job.get("status") or {}).get("startTime")
            if started:
                j["start"] = rfc3339(started)
            for c in (job.get("status") or {}).get("conditions") or []:
                if c.get("status") == "True" and c.get("type") in ("Complete", "Failed"):
                    j["end"], j["outcome"], j["reason"] = now, c["type"], c.get("reason")
            if kind == "DELETED" and j["end"] is None:
                j["end"], j["outcome"], j["reason"] = now, "Failed", "Deleted"

    def counts(self):
        with self.lock:
            pods = list(self.pods.values())
            jobs = list(self.jobs.values())
        return {
            "pods": len(pods),
            "bound": sum(p["bound"] is not None for p in pods),
            "holding": self.running,
            "running": sum(p["phase"] == "Running" and p["ended"] is None for p in pods),
            "complete": sum(j["outcome"] == "Complete" for j in jobs),
            "failed": sum(j["outcome"] == "Failed" for j in jobs),
        }


def node_allocatable(kube, selector):
    path = "/api/v1/nodes" + (f"?labelSelector={selector}" if selector else "")
    out = {}
    for n in kube.call("GET", path)["items"]:
        a = n["status"].get("allocatable") or {}
        out[n["metadata"]["name"]] = (quantity(a.get("cpu", 0)), quantity(a.get("memory", 0)), int(quantity(a.get("pods", 110))))
    return out


# --- objects ------------------------------------------------------------------------------------


def pod_template(args, run_seconds, jitter, labels):
    ann = {"e2e.muster.dev/test": "true"}
    if run_seconds is not None:
        ann["kwok.muster.dev/run-seconds"] = str(run_seconds)
        ann["kwok.muster.dev/run-after"] = args.run_after
        if jitter:
            ann["kwok.muster.dev/run-jitter-seconds"] = str(jitter)
    res = {"cpu": args.cpu, "memory": args.memory}
    spec = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "job", "image": "kwok-fake", "resources": {"requests": res, "limits": res}}],
    }
    if args.node_selector:
        k, _, v = args.node_selector.partition("=")
        spec["nodeSelector"] = {k: v}
    return {"metadata": {"labels": labels, "annotations": ann}, "spec": spec}


def job_manifest(args, name, pods, run_seconds, jitter, deadline):
    labels = {"app.kubernetes.io/part-of": "muster-scale"}
    if args.scheduler == "muster":
        labels["muster.dev/queue"] = args.queue
    spec = {
        "parallelism": pods,
        "completions": pods,
        "backoffLimit": 0,
        "template": pod_template(args, run_seconds, jitter, {"app.kubernetes.io/part-of": "muster-scale"}),
    }
    if deadline:
        spec["activeDeadlineSeconds"] = deadline
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": labels}, "spec": spec}


def bare_pod(args, name, group_size):
    labels = {"app.kubernetes.io/part-of": "muster-scale"}
    if args.scheduler == "muster":
        # One plain-pod gang: muster's label contract for pods that no Job owns.
        labels.update({"muster.dev/queue": args.queue, "muster.dev/group": "burst",
                       "muster.dev/group-size": str(group_size)})
    t = pod_template(args, None, 0, labels)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, **t["metadata"]}, "spec": t["spec"]}


def submit_all(kube, path_of, manifests, submitters):
    """Creates the objects from `submitters` threads (object i from thread i mod S); returns the
    times of the first and last create request and of each object's (by name)."""
    sent = {}
    errors = []

    def worker(k):
        for i in range(k, len(manifests), submitters):
            m = manifests[i]
            t = time.time()
            try:
                kube.call("POST", path_of(m), m)
            except RuntimeError as e:
                errors.append(str(e))
                continue
            sent[m["metadata"]["name"]] = t

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(submitters)]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        print(f"scale: {len(errors)} create requests failed; first: {errors[0]}", file=sys.stderr)
    return t0, time.time(), sent


def start_watches(kube, ns, tracker, jobs=True):
    stop = threading.Event()
    ws = [threading.Thread(target=kube.watch, args=(f"/api/v1/namespaces/{ns}/pods", tracker.on_pod, stop), daemon=True)]
    if jobs:
        ws.append(threading.Thread(target=kube.watch, args=(f"/apis/batch/v1/namespaces/{ns}/jobs", tracker.on_job, stop),
                                   daemon=True))
    for w in ws:
        w.start()
    return stop


def quantiles(xs):
    if not xs:
        return None
    xs = sorted(xs)

    def q(f):
        return round(xs[min(len(xs) - 1, int(f * len(xs)))], 3)

    return {"p50": q(0.5), "p95": q(0.95), "max": round(xs[-1], 3)}


def bind_figures(pods, t0):
    """Pods bound per second: overall from t0 (the first create request, or the release of a held
    burst), between the first and the last bind, and the best 10 s window; and each pod's wait."""
    binds = sorted(p["bound"] for p in pods if p["bound"] is not None)
    if not binds:
        return {"podsBound": 0}
    span = binds[-1] - binds[0]
    # Over a burst shorter than 10 s the best window is the whole burst.
    window = min(10.0, span) or 1.0
    best, j = 0, 0
    for i, b in enumerate(binds):
        while binds[j] < b - window:
            j += 1
        best = max(best, i - j + 1)
    return {
        "podsBound": len(binds),
        "firstBindSeconds": round(binds[0] - t0, 3),
        "lastBindSeconds": round(binds[-1] - t0, 3),
        "podsBoundPerSecond": round(len(binds) / max(binds[-1] - t0, 1e-3), 1),
        "podsBoundPerSecondBetweenFirstAndLast": round((len(binds) - 1) / span, 1) if span > 0 else None,
        "podsBoundPerSecondBest10s": round(best / window, 1),
        # From when a pod could be placed (seen, or released) to bound.
        "waitToBindSeconds": quantiles([p["bound"] - max(p["seen"], t0) for p in pods if p["bound"] is not None]),
    }


def job_start_figures(jobs, pods, complete, failed):
    last_created, all_ready = {}, {}
    for p in pods:
        if p["job"]:
            last_created[p["job"]] = max(last_created.get(p["job"], 0.0), p["seen"])
            if p["all_ready"]:
                all_ready[p["job"]] = p["all_ready"]
    out = {}
    for label, names in (("Completed", complete), ("Failed", failed)):
        started = [(n, jobs[n]["start"]) for n in names if jobs[n].get("start")]
        out[f"startToPodsCreatedSeconds{label}"] = quantiles([last_created[n] - s for n, s in started if n in last_created])
        out[f"startToAllReadySeconds{label}"] = quantiles([all_ready[n] - s for n, s in started if n in all_ready])
    return out


def node_figures(tracker, pod_cpu, pod_mem):
    alloc = tracker.alloc
    used = {n: pk for n, pk in tracker.peak.items() if pk[2] > 0}
    fits = min((int(min(a[0] / pod_cpu if pod_cpu else a[2], a[1] / pod_mem if pod_mem else a[2], a[2]))
                for a in alloc.values()), default=0)
    worst = max(used.items(), key=lambda kv: kv[1][0] / max(alloc.get(kv[0], (1, 1, 1))[0], 1e-9), default=None)
    return {
        "nodes": len(alloc),
        "nodesUsed": len(used),
        "podsPerNodeCapacity": fits,
        "peakPodsOnANode": max((pk[2] for pk in used.values()), default=0),
        "peakCpuFractionOnANode": round(worst[1][0] / alloc[worst[0]][0], 3) if worst and worst[0] in alloc else None,
        "peakPodsRunning": tracker.peak_running,
        "clusterPodCapacity": sum(int(min(a[0] / pod_cpu, a[1] / pod_mem, a[2])) for a in alloc.values())
        if pod_cpu and pod_mem else None,
        "overcommittedNodes": len({o[1] for o in tracker.over}),
        "overcommitEvents": len(tracker.over),
    }


def progress(tracker, t0, total_jobs):
    c = tracker.counts()
    print(f"[{time.time() - t0:6.0f}s] pods {c['pods']} bound {c['bound']} on nodes {c['holding']} "
          f"Running {c['running']} | "
          f"jobs complete {c['complete']} failed {c['failed']} of {total_jobs}", file=sys.stderr, flush=True)


def emit(result, out):
    line = json.dumps(result, sort_keys=False)
    print(line, flush=True)
    if out:
        with open(out, "a") as f:
            f.write(line + "\n")


def server_version(kube):
    try:
        return kube.call("GET", "/version").get("gitVersion")
    except RuntimeError:
        return None


# --- the experiments ----------------------------------------------------------------------------


def cmd_scale(args):
    kube = Kube(args.kubeconfig)
    ns = args.namespace
    alloc = node_allocatable(kube, args.node_selector)
    if not alloc:
        sys.exit(f"error: no nodes match {args.node_selector!r}")
    tracker = Tracker(alloc)
    stop = start_watches(kube, ns, tracker)
    time.sleep(1.0)  # let both watches list before the first create
    names = [f"scale-{i:05d}" for i in range(args.jobs)]
    manifests = [job_manifest(args, n, args.pods_per_job, args.run_seconds, args.jitter_seconds, args.deadline_seconds)
                 for n in names]
    pod_cpu, pod_mem = quantity(args.cpu), quantity(args.memory)
    cap_cpu = sum(a[0] for a in alloc.values())
    print(f"scale: {args.jobs} jobs x {args.pods_per_job} pods ({args.cpu} cpu / {args.memory}) on {len(alloc)} nodes "
          f"({cap_cpu:.0f} cpu), run {args.run_seconds}s+0..{args.jitter_seconds}s after {args.run_after}, deadline "
          f"{args.deadline_seconds}s, {args.submitters} submitters, scheduler {args.scheduler}", file=sys.stderr, flush=True)
    # Progress while submitting too: 1000 jobs take a while to create.
    t_start = time.time()
    done = threading.Event()

    def report_loop():
        while not done.wait(args.progress_seconds):
            progress(tracker, t_start, args.jobs)

    threading.Thread(target=report_loop, daemon=True).start()
    t0, t_sub, sent = submit_all(kube, lambda m: f"/apis/batch/v1/namespaces/{ns}/jobs", manifests, args.submitters)
    deadline = t0 + args.timeout
    timed_out = False
    while True:
        with tracker.lock:
            ended = sum(1 for n in sent if tracker.jobs.get(n, {}).get("end") is not None)
        if ended >= len(sent):
            break
        if time.time() > deadline:
            timed_out = True
            break
        time.sleep(0.5)
    done.set()
    stop.set()
    progress(tracker, t_start, args.jobs)
    with tracker.lock:
        jobs = {n: dict(tracker.jobs.get(n) or {}) for n in names}
        pods = [dict(p) for p in tracker.pods.values()]
    complete = [n for n, j in jobs.items() if j.get("outcome") == "Complete"]
    failed = [n for n, j in jobs.items() if j.get("outcome") == "Failed"]
    deadline_failed = [n for n in failed if jobs[n].get("reason") == "DeadlineExceeded"]
    ends = [j["end"] for j in jobs.values() if j.get("end")]
    done_ends = [jobs[n]["end"] for n in complete]
    makespan = (max(ends) - t0) if ends and not timed_out else None
    # Bound pod-seconds of each job: what it held, whether or not it finished.
    held = {}
    for p in pods:
        if p["bound"] is not None and p["job"]:
            held[p["job"]] = held.get(p["job"], 0.0) + ((p["ended"] or time.time()) - p["bound"])
    held_total = sum(held.values())
    mean_run = args.run_seconds + args.jitter_seconds / 2.0
    work = len(names) * args.pods_per_job * pod_cpu * mean_run
    result = {
        "experiment": "seed-002-scale",
        "scheduler": args.scheduler,
        "server": server_version(kube),
        "jobs": args.jobs,
        "podsPerJob": args.pods_per_job,
        "podCpu": args.cpu,
        "podMemory": args.memory,
        "submitters": args.submitters,
        "runSeconds": args.run_seconds,
        "jitterSeconds": args.jitter_seconds,
        "runAfter": args.run_after,
        "deadlineSeconds": args.deadline_seconds,
        "submitted": len(sent),
        "submitSeconds": round(t_sub - t0, 3),
        "completed": len(complete),
        "failed": len(failed),
        "failedDeadlineExceeded": len(deadline_failed),
        "unfinished": len(names) - len(complete) - len(failed),
        "timedOut": timed_out,
        "makespanSeconds": round(makespan, 2) if makespan is not None else None,
        "lastCompletionSeconds": round(max(done_ends) - t0, 2) if done_ends else None,
        # Completed jobs over the whole run (until the last job ended), as the seed counts them.
        "jobsPerMinute": round(len(complete) / makespan * 60.0, 1) if makespan else 0.0,
        # No schedule can beat this: all the work spread over all the cpus, or one job's run time.
        "makespanLowerBoundSeconds": round(max(work / cap_cpu, args.run_seconds), 1),
        # How late the fake kubelet finished pods: seen Succeeded minus (all-ready stamp + run time).
        # The stamp is cut to the second and the jitter adds 0..J, so 0..J+1 is on time; more is
        # the harness lagging (a busy machine), which makes jobs look slower than the scheduler is.
        # The fake kubelet's own delay from bind to Running; seconds here mean the harness, not
        # the scheduler, sets the pace.
        "boundToRunningSeconds": quantiles([p["running"] - p["bound"] for p in pods if p["running"] and p["bound"]]),
        "runLagSeconds": quantiles([p["ended"] - p["all_ready"] - args.run_seconds for p in pods
                                    if p["phase"] == "Succeeded" and p["all_ready"] and p["ended"]]),
        # From a Job's start (its deadline's clock) to its last pod created and to its all-ready
        # stamp, for the Jobs that completed and those that failed: where a deadline went.
        **job_start_figures(jobs, pods, complete, failed),
        "loadAverage": [round(x, 2) for x in os.getloadavg()],
        "goodput": round(sum(held.get(n, 0.0) for n in complete) / held_total, 3) if held_total else None,
        "podsCreated": len(pods),
        **bind_figures(pods, t0),
        **node_figures(tracker, pod_cpu, pod_mem),
    }
    emit(result, args.out)
    bad = result["overcommittedNodes"] > 0
    if bad:
        o = tracker.over[0]
        print(f"scale: node {o[1]} over its allocatable: cpu {o[2]}, memory {o[3]:.0f}, pods {o[4]}", file=sys.stderr)
    return 1 if bad or timed_out else 0


def set_unschedulable(kube, nodes, value, threads=10):
    """Cordons (True) or uncordons (False) `nodes` from a few threads at once."""
    names = list(nodes)

    def worker(k):
        for name in names[k::threads]:
            kube.call("PATCH", f"/api/v1/nodes/{name}", {"spec": {"unschedulable": value or None}},
                      content_type="application/merge-patch+json")

    ts = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def cmd_bind(args):
    kube = Kube(args.kubeconfig)
    ns = args.namespace
    alloc = node_allocatable(kube, args.node_selector)
    tracker = Tracker(alloc)
    stop = start_watches(kube, ns, tracker, jobs=False)
    time.sleep(1.0)
    n = args.count
    if args.release == "uncordon":
        # Hold the whole burst back by cordoning the nodes, so that what is timed is the scheduler
        # placing N waiting pods, not how fast they can be created.
        set_unschedulable(kube, alloc, True)
    try:
        return bind_burst(args, kube, ns, tracker, stop, n)
    finally:
        if args.release == "uncordon":
            set_unschedulable(kube, alloc, False)


def bind_burst(args, kube, ns, tracker, stop, n):
    if args.shape == "jobs":
        manifests = [job_manifest(args, f"bind-{i:05d}", 1, None, 0, None) for i in range(n)]
        path = f"/apis/batch/v1/namespaces/{ns}/jobs"
    elif args.shape == "gang":
        manifests = [job_manifest(args, "bind-gang", n, None, 0, None)]
        path = f"/apis/batch/v1/namespaces/{ns}/jobs"
    else:
        manifests = [bare_pod(args, f"bind-{i:05d}", n) for i in range(n)]
        path = f"/api/v1/namespaces/{ns}/pods"
    t_create, t_sub, sent = submit_all(kube, lambda m: path, manifests, args.submitters)
    t0 = t_create
    release_s = None
    if args.release == "uncordon":
        deadline = t_create + args.timeout
        # muster creates a queued Job's pods only once it admits the Job: none to wait for.
        want = 0 if args.scheduler == "muster" and args.shape != "pods" else n
        while tracker.counts()["pods"] < want and time.time() < deadline:
            time.sleep(0.2)
        time.sleep(args.settle_seconds)  # let the scheduler (or muster) look at them all once
        held = tracker.counts()["bound"]
        if held:
            print(f"bind: {held} pods were bound while the nodes were cordoned", file=sys.stderr)
        t0 = time.time()
        # Uncordon all at once (one thread per node, up to 50): the nodes should come back together.
        set_unschedulable(kube, tracker.alloc, False, threads=min(50, len(tracker.alloc)) or 1)
        release_s = time.time() - t0
    deadline = t0 + args.timeout
    while True:
        c = tracker.counts()
        if c["bound"] >= n or time.time() > deadline:
            break
        time.sleep(0.2)
    stop.set()
    with tracker.lock:
        pods = [dict(p) for p in tracker.pods.values()]
    seen = sorted(p["seen"] for p in pods)
    result = {
        "experiment": "bind-burst",
        "scheduler": args.scheduler,
        "server": server_version(kube),
        "shape": args.shape,
        "count": n,
        "submitters": args.submitters,
        "release": args.release,
        # How long uncordoning took: pods bound meanwhile saw only some of the nodes.
        "releaseSeconds": round(release_s, 3) if release_s is not None else None,
        "createRequestsSeconds": round(t_sub - t_create, 3),
        "podsSeen": len(pods),
        "lastPodSeenSeconds": round(seen[-1] - t_create, 3) if seen else None,
        **bind_figures(pods, t0),
        **node_figures(tracker, quantity(args.cpu), quantity(args.memory)),
    }
    result["timedOut"] = result["podsBound"] < n
    emit(result, args.out)
    return 1 if result["timedOut"] or result["overcommittedNodes"] else 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    common.add_argument("--namespace", required=True)
    common.add_argument("--scheduler", choices=["default", "muster"], default="default")
    common.add_argument("--queue", default="default", help="muster.dev/queue of the jobs with --scheduler muster")
    common.add_argument("--submitters", type=int, default=5)
    common.add_argument("--cpu", default="2")
    common.add_argument("--memory", default="2Gi")
    common.add_argument("--node-selector", default="muster.dev/pool=worker",
                        help="key=value: the nodes the pods may use (and whose capacity is reported)")
    common.add_argument("--out", help="also append the JSON line to this file")
    s = sub.add_parser("scale", parents=[common])
    s.add_argument("--jobs", type=int, default=200)
    s.add_argument("--pods-per-job", type=int, default=10)
    s.add_argument("--run-seconds", type=int, default=18)
    s.add_argument("--jitter-seconds", type=int, default=9)
    s.add_argument("--run-after", choices=["all-ready", "start"], default="all-ready")
    s.add_argument("--deadline-seconds", type=int, default=90)
    s.add_argument("--timeout", type=float, default=0, help="give up after this many seconds (default: from the sizes)")
    s.add_argument("--progress-seconds", type=float, default=10)
    b = sub.add_parser("bind", parents=[common])
    b.add_argument("--shape", choices=["jobs", "gang", "pods"], default="pods")
    b.add_argument("--count", type=int, default=1000)
    b.add_argument("--timeout", type=float, default=300)
    b.add_argument("--release", choices=["uncordon", "create"], default="uncordon",
                   help="uncordon: create the burst on cordoned nodes, time from uncordoning them; "
                        "create: time from the first create request")
    b.add_argument("--settle-seconds", type=float, default=3)
    args = ap.parse_args(argv)
    if not args.kubeconfig:
        sys.exit("error: no kubeconfig (set KUBECONFIG or pass --kubeconfig)")
    for name in ("submitters",) + (("jobs", "pods_per_job") if args.cmd == "scale" else ("count",)):
        if getattr(args, name) < 1:
            sys.exit(f"error: --{name.replace('_', '-')} must be 1 or more")
    if args.cmd == "scale":
        if min(args.run_seconds, args.jitter_seconds, args.deadline_seconds) < 0:
            sys.exit("error: --run-seconds, --jitter-seconds and --deadline-seconds must not be negative")
        if not args.timeout:
            # Every job either completes or hits its deadline; allow for the submissions and a
            # control plane that binds slowly.
            work = args.jobs * args.pods_per_job * quantity(args.cpu) * (args.run_seconds + args.jitter_seconds)
            args.timeout = args.deadline_seconds * 4 + args.jobs * args.pods_per_job / 20 + 3 * work / 10_000 + 120
        return cmd_scale(args)
    return cmd_bind(args)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
