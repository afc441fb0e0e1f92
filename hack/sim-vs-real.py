#!/usr/bin/env python3
"""Helper of hack/sim-vs-real.sh: the same scenario on the simulator and the real control plane.

  sim-vs-real.py jobs SCENARIO SEED OUT.json           the scenario's jobs, as muster-sim draws them
  sim-vs-real.py run JOBS.json KUBECONFIG NS OUT.json TIMEOUT
                                                       submit each Job at its time, wait until all are
                                                       Complete/Failed (or TIMEOUT s), read the objects
  sim-vs-real.py calibrate KUBECONFIG NS JOBS PODS OUT.json
                                                       rates of the control plane on a burst that fits
  sim-vs-real.py compare REAL.json SIM.json JOBS.json TOLERANCE
                                                       side by side; exit 1 beyond TOLERANCE (0.10)
  sim-vs-real.py completions KWOK.log [NS]             how spread out in time the pods of each Job
                                                       were marked Succeeded (KWOK's log, ns stamps;
                                                       the pods' finishedAt has only 1 s resolution)

`jobs` re-implements the part of crates/muster-sim/src/scenario.rs that turns job classes into
jobs (SplitMix64 streams `arrival:<class>` and `runtime:<class>` seeded from the seed, uniform /
burst / poisson arrivals, run time = runTime x (1 + jitter x u), serial submitters), so both sides
get the same jobs: count, pods, requests, run time, deadline and submit time. Only what a Job
manifest can express is accepted: rigid jobs (members: N), priority 0, no SWF trace.
"""
import json
import math
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

import yaml

M64 = (1 << 64) - 1


def mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


class Rng:
    """muster-sim's rng.rs: SplitMix64, one stream per label (FNV-1a of the label mixed with the seed)."""

    def __init__(self, seed, label):
        h = 0xCBF29CE484222325
        for b in label.encode():
            h = ((h ^ b) * 0x100000001B3) & M64
        self.s = mix(seed ^ mix(h))

    def next_u64(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & M64
        return mix(self.s)

    def unit(self):
        return (self.next_u64() >> 11) / float(1 << 53)


def rround(x):
    """Rust's f64::round (half away from zero) for the non-negative values used here."""
    return int(math.floor(x + 0.5))


def dur_ms(v, what):
    """scenario.rs Dur::parse: 500ms, 90s, 3m, 1h or a number of seconds."""
    if v is None:
        return None
    t = str(v).strip()
    for suf, scale in (("ms", 1.0), ("s", 1e3), ("m", 60e3), ("h", 3600e3)):
        if t.endswith(suf):
            return rround(float(t[: -len(suf)]) * scale)
    try:
        return rround(float(t) * 1e3)
    except ValueError:
        sys.exit(f"error: {what}: bad duration {v!r}")


def gen_jobs(scenario_path, seed):
    sc = yaml.safe_load(Path(scenario_path).read_text())
    if sc.get("swf"):
        sys.exit("error: swf traces are not supported by the real-cluster comparison")
    pending = []  # (nominal, class index, order, job)
    for ci, c in enumerate(sc["jobClasses"]):
        name = c["name"]
        members = c["members"]
        if not isinstance(members, int):
            sys.exit(f"error: class {name}: only rigid jobs (members: N) can be compared")
        if c.get("priority", 0) != 0:
            sys.exit(f"error: class {name}: priority needs a PriorityClass; not supported here")
        run_ms = dur_ms(c["runTime"], f"{name}.runTime")
        jitter = float(c.get("jitter", 0))
        deadline = dur_ms(c.get("deadline"), f"{name}.deadline")
        if deadline is not None and deadline % 1000:
            sys.exit(f"error: class {name}: activeDeadlineSeconds needs a whole number of seconds")
        arr = c.get("arrival") or {}
        pattern = arr.get("pattern", "burst")
        start = dur_ms(arr.get("start"), "arrival.start") or 0
        interval = dur_ms(arr.get("interval"), "arrival.interval") or 0
        arrivals = Rng(seed, f"arrival:{name}")
        runtimes = Rng(seed, f"runtime:{name}")
        t = start
        for k in range(int(c["count"])):
            if pattern == "burst":
                nominal = start
            elif pattern == "uniform":
                nominal = start + k * interval
            elif pattern == "poisson":
                t += rround(-math.log(1.0 - arrivals.unit()) * interval)
                nominal = t
            else:
                sys.exit(f"error: class {name}: unknown arrival pattern {pattern}")
            r = max(1, rround(run_ms * (1.0 + jitter * runtimes.unit())))
            job = {
                "name": f"{name}-{k}",
                "class": name,
                "pods": members,
                "requests": {k2: str(v) for k2, v in c["resources"].items()},
                "run_ms": r,
                "run_after": "all-ready" if c.get("runStarts", "allReady") == "allReady" else "start",
                "deadline_s": None if deadline is None else deadline // 1000,
                "node_selector": c.get("nodeSelector") or {},
                "tolerations": c.get("tolerations") or [],
            }
            pending.append((nominal, ci, len(pending), job))
    pending.sort(key=lambda p: p[0])  # stable, as in scenario.rs
    subs = sc.get("submitters") or {}
    count = int(subs.get("count", 1))
    per_job = dur_ms(subs.get("perJob"), "submitters.perJob") or 0
    free_at = [0] * count
    jobs = []
    for nominal, _, _, job in pending:
        si = min(range(count), key=lambda i: (free_at[i], i))
        done = max(nominal, free_at[si]) + per_job
        free_at[si] = done
        job["submit_ms"] = done
        jobs.append(job)
    jobs.sort(key=lambda j: j["submit_ms"])
    return jobs


def manifest(job):
    ann = {
        "kwok.muster.dev/run-seconds": f"{job['run_ms'] / 1000:g}",
        "kwok.muster.dev/run-after": job["run_after"],
    }
    spec = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": "kwok-fake", "resources": {"requests": job["requests"]}}],
    }
    if job["node_selector"]:
        spec["nodeSelector"] = job["node_selector"]
    if job["tolerations"]:
        spec["tolerations"] = job["tolerations"]
    js = {
        "parallelism": job["pods"],
        "completions": job["pods"],
        "backoffLimit": 0,
        "template": {"metadata": {"annotations": ann}, "spec": spec},
    }
    if job["deadline_s"] is not None:
        js["activeDeadlineSeconds"] = job["deadline_s"]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": job["name"]}, "spec": js}


# --- the real control plane -------------------------------------------------------------------


class Api:
    def __init__(self, kubeconfig):
        kc = yaml.safe_load(Path(kubeconfig).read_text())
        self.server = kc["clusters"][0]["cluster"]["server"]
        ctx = ssl.create_default_context(cafile=kc["clusters"][0]["cluster"]["certificate-authority"])
        user = kc["users"][0]["user"]
        ctx.load_cert_chain(user["client-certificate"], user["client-key"])
        self.ctx = ctx

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        req.add_header("Accept", "application/json")
        with urllib.request.urlopen(req, context=self.ctx, timeout=60) as r:
            return json.load(r)


def ts(s):
    return datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


def cond(obj, typ):
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == typ and c["status"] == "True":
            return c
    return None


def job_end(j):
    """(state, end time) of a Job from its status: Complete/Failed conditions (1 s resolution)."""
    st = j.get("status") or {}
    if cond(j, "Complete"):
        return "Complete", ts(st.get("completionTime") or cond(j, "Complete")["lastTransitionTime"])
    if cond(j, "Failed"):
        return "Failed", ts(cond(j, "Failed")["lastTransitionTime"])
    return "Active", None


def run_real(jobs_file, kubeconfig, ns, out_file, timeout):
    jobs = json.loads(Path(jobs_file).read_text())
    api = Api(kubeconfig)
    base = f"/apis/batch/v1/namespaces/{ns}/jobs"
    lag = []
    series = []
    errors = []
    lock = threading.Lock()

    def submit(job, at):
        delay = at - time.time()
        if delay > 0:
            time.sleep(delay)
        t = time.time()
        try:
            api.call("POST", base, manifest(job))
        except urllib.error.HTTPError as e:
            with lock:
                errors.append(f"{job['name']}: {e.code} {e.read()[:200]!r}")
        with lock:
            lag.append(t - at)

    t0 = time.time() + 1.0  # scenario time 0
    print(f"submitting {len(jobs)} Jobs over {jobs[-1]['submit_ms'] / 1000:.1f}s", file=sys.stderr)
    with ThreadPoolExecutor(max_workers=8) as pool:
        for job in jobs:
            at = t0 + job["submit_ms"] / 1000
            # Hand each job to the pool shortly before its time, so a slow create delays no other.
            while at - time.time() > 0.5:
                time.sleep(min(0.2, at - time.time() - 0.5))
            pool.submit(submit, job, at)
    if errors:
        sys.exit("error: creates failed: " + "; ".join(errors[:5]))
    limit = t0 + timeout
    while True:
        items = api.call("GET", base)["items"]
        states = [job_end(j)[0] for j in items]
        active = sum(s == "Active" for s in states)
        if active == 0 and len(items) == len(jobs):
            break
        if time.time() > limit:
            print(f"time limit: {active} Jobs still active after {timeout}s", file=sys.stderr)
            break
        g = gangs(api.call("GET", f"/api/v1/namespaces/{ns}/pods")["items"])
        g.update(t=round(time.time() - t0), complete=states.count("Complete"), failed=states.count("Failed"))
        series.append(g)
        print(
            f"  t={g['t']:4d}s Jobs complete {g['complete']} failed {g['failed']} active {active};"
            f" active Jobs with all pods bound {g['whole']}, partly bound {g['partial']}, none bound"
            f" {g['none']}; pending pods {g['pending']}",
            file=sys.stderr,
        )
        time.sleep(5)
    time.sleep(1)
    items = api.call("GET", base)["items"]
    pods = api.call("GET", f"/api/v1/namespaces/{ns}/pods")["items"]
    result = summarize(items, pods, t0, lag)
    result["series"] = series
    Path(out_file).write_text(json.dumps(result, indent=2) + "\n")


def gangs(pods):
    """Active Jobs by how many of their (non-terminal) pods are bound, and the pending pods."""
    by = {}
    for p in pods:
        if (p.get("status") or {}).get("phase") in ("Succeeded", "Failed") or p["metadata"].get("deletionTimestamp"):
            continue
        name = (p["metadata"].get("labels") or {}).get("batch.kubernetes.io/job-name")
        b = by.setdefault(name, [0, 0])
        b[0] += 1
        b[1] += bool((p.get("spec") or {}).get("nodeName"))
    return {
        "whole": sum(1 for n, b in by.values() if b == n),
        "partial": sum(1 for n, b in by.values() if 0 < b < n),
        "none": sum(1 for n, b in by.values() if b == 0),
        "pending": sum(n - b for n, b in by.values()),
    }


def calibrate(kubeconfig, ns, jobs, pods, out_file):
    """Rates of the modelled steps, measured on a burst that fits the cluster at once: `jobs` Jobs
    of `pods` pods (2 cpu / 2Gi, 5 s after all ready) created together."""
    api = Api(kubeconfig)
    base = f"/apis/batch/v1/namespaces/{ns}/jobs"
    js = [
        {"name": f"cal-{i}", "pods": pods, "requests": {"cpu": "2", "memory": "2Gi"}, "run_ms": 5000,
         "run_after": "all-ready", "deadline_s": None, "node_selector": {}, "tolerations": []}
        for i in range(jobs)
    ]
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda j: api.call("POST", base, manifest(j)), js))
    limit = time.time() + 300
    while time.time() < limit:
        items = api.call("GET", base)["items"]
        if all(job_end(j)[0] != "Active" for j in items):
            break
        time.sleep(1)
    items = api.call("GET", base)["items"]
    ps = api.call("GET", f"/api/v1/namespaces/{ns}/pods")["items"]
    first = min(ts(j["metadata"]["creationTimestamp"]) for j in items)
    created = [ts(p["metadata"]["creationTimestamp"]) for p in ps]
    bound = [ts(cond(p, "PodScheduled")["lastTransitionTime"]) for p in ps if cond(p, "PodScheduled")]
    by = {}
    for p in ps:
        by.setdefault(p["metadata"]["labels"]["batch.kubernetes.io/job-name"], []).append(p)
    stamp_lag, done_lag = [], []
    for j in items:
        mine = by.get(j["metadata"]["name"], [])
        stamp = (mine[0]["metadata"].get("annotations") or {}).get("kwok.muster.dev/all-ready-at") if mine else None
        pb = [ts(cond(p, "PodScheduled")["lastTransitionTime"]) for p in mine if cond(p, "PodScheduled")]
        if stamp and pb:
            stamp_lag.append(ts(stamp) - max(pb))
            end = job_end(j)[1]
            if end is not None:
                done_lag.append(end - ts(stamp) - 5)
    n = len(ps)
    res = {
        "pods": n,
        "all_created_s": max(created) - first,
        "all_bound_s": max(bound) - first,
        # 1 s timestamps: spans count whole seconds, so +1 s keeps a rate from being overstated.
        "pod_creates_per_s": round(n / (max(created) - first + 1), 1),
        "bindings_per_s": round(len(bound) / (max(bound) - min(bound) + 1), 1),
        "last_bound_to_all_ready_stamp_s": round(sum(stamp_lag) / len(stamp_lag), 2) if stamp_lag else None,
        "stamp_plus_run_to_job_complete_s": round(sum(done_lag) / len(done_lag), 2) if done_lag else None,
    }
    Path(out_file).write_text(json.dumps(res, indent=2) + "\n")
    print("calibration (1 s timestamps): " + ", ".join(f"{k} {v}" for k, v in res.items()), file=sys.stderr)


def rate(times, window=5.0):
    """Peak events per second over any `window`-second span (1 s timestamps)."""
    times = sorted(times)
    best, i = 0, 0
    for j, t in enumerate(times):
        while t - times[i] >= window:
            i += 1
        best = max(best, j - i + 1)
    return round(best / window, 1)


def summarize(items, pods, t0, lag):
    created = [ts(j["metadata"]["creationTimestamp"]) for j in items]
    first = min(created)
    ends = [job_end(j) for j in items]
    done = [e for s, e in ends if e is not None]
    by_job = {}
    for p in pods:
        name = (p["metadata"].get("labels") or {}).get("batch.kubernetes.io/job-name")
        by_job.setdefault(name, []).append(p)
    # Latencies of the modelled steps (1 s resolution): Job created -> its last pod created; last
    # pod bound -> all-ready stamp (the gang is running); among the Jobs whose pods still exist.
    create_lat, ready_lat, pod_created, pod_bound = [], [], [], []
    jobs_by_name = {j["metadata"]["name"]: j for j in items}
    for name, ps in by_job.items():
        pc = [ts(p["metadata"]["creationTimestamp"]) for p in ps]
        pod_created += pc
        pb = [ts(cond(p, "PodScheduled")["lastTransitionTime"]) for p in ps if cond(p, "PodScheduled")]
        pod_bound += pb
        j = jobs_by_name.get(name)
        if j and len(ps) == j["spec"]["parallelism"]:
            create_lat.append(max(pc) - ts(j["metadata"]["creationTimestamp"]))
        stamp = (ps[0]["metadata"].get("annotations") or {}).get("kwok.muster.dev/all-ready-at")
        if stamp and len(pb) == len(ps):
            ready_lat.append(ts(stamp) - max(pb))

    def mean(xs):
        return round(sum(xs) / len(xs), 2) if xs else None

    states = [s for s, _ in ends]
    return {
        "jobs": len(items),
        "completed": states.count("Complete"),
        "failed": states.count("Failed"),
        "unfinished": states.count("Active"),
        "makespan_s": (max(done) - first) if done and "Active" not in states else None,
        "last_end_s": (max(done) - first) if done else None,
        "first_submit_offset_s": round(first - t0, 2),
        "submit_lag_s": {"mean": mean(lag), "max": round(max(lag), 3) if lag else None},
        "measured": {
            "job_to_last_pod_created_s": mean(create_lat),
            "last_pod_bound_to_all_ready_s": mean(ready_lat),
            "peak_pod_creates_per_s": rate(pod_created),
            "peak_bindings_per_s": rate(pod_bound),
            "pods_seen": len(pods),
        },
    }


# --- comparison -------------------------------------------------------------------------------


def compare(real_file, sim_file, jobs_file, tol):
    real = json.loads(Path(real_file).read_text())
    sim_report = json.loads(Path(sim_file).read_text())
    jobs = json.loads(Path(jobs_file).read_text())
    run = next(r for r in sim_report["runs"] if r["scheduler"] == "default")
    first = jobs[0]["submit_ms"] / 1000
    sim = {
        "completed": run["completed"],
        "failed": run["failed"],
        "unfinished": run["unfinished"],
        # The simulator's makespan runs from time 0; the real one from the first submit.
        "makespan_s": None if run["makespan_s"] is None else run["makespan_s"] - first,
    }

    def rel(r, s):
        if r is None or s is None:
            return None if r == s else math.inf
        if r == s:
            return 0.0
        return abs(s - r) / abs(r) if r else math.inf

    rows = []
    ok = True
    print(f"{'metric':<12} {'real':>10} {'sim':>10} {'diff':>8}")
    for key, checked in (("completed", True), ("failed", False), ("unfinished", False), ("makespan_s", True)):
        r, s = real[key], sim[key]
        d = rel(r, s)
        bad = checked and (d is None and r is not None or d is not None and d > tol)
        if r is None and s is None:
            bad = False
        ok &= not bad
        fmt = lambda v: "never" if v is None else (f"{v:.1f}" if isinstance(v, float) else str(v))
        ds = "-" if d is None else ("inf" if d == math.inf else f"{d * 100:.1f}%")
        print(f"{key:<12} {fmt(r):>10} {fmt(s):>10} {ds:>8}{'  <- over ' + str(round(tol * 100)) + '%' if bad else ''}")
        rows.append({"metric": key, "real": r, "sim": s, "rel_diff": None if d in (None, math.inf) else round(d, 4)})
    m = real["measured"]
    print(
        f"real: Job -> last pod created {m['job_to_last_pod_created_s']}s, last pod bound -> all-ready stamp "
        f"{m['last_pod_bound_to_all_ready_s']}s (means over the Jobs whose pods remain; 1 s timestamps); "
        f"submit lag mean {real['submit_lag_s']['mean']}s, max {real['submit_lag_s']['max']}s"
    )
    print("agreement within %d%% on completed jobs and makespan: %s" % (round(tol * 100), "yes" if ok else "NO"))
    return 0 if ok else 1


def completions(log_file, ns="sim-vs-real"):
    """Per Job, the times KWOK patched its pods to Succeeded (each pod's second status patch: Running,
    then Succeeded; pods deleted before finishing have one), read off kwok.log's JSON lines."""
    patches = {}
    for line in Path(log_file).read_text().splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if d.get("msg") != "Patch pod" or not d.get("pod", "").startswith(ns + "/"):
            continue
        day, frac = d["time"].rstrip("Z").split(".")
        t = datetime.fromisoformat(day).replace(tzinfo=timezone.utc).timestamp() + float("0." + frac)
        patches.setdefault(d["pod"], []).append(t)
    by_job = {}
    for pod, times in patches.items():
        if len(times) >= 2:
            by_job.setdefault(pod.split("/", 1)[1].rsplit("-", 1)[0], []).append(times[1])
    spreads, gaps = [], []
    for times in by_job.values():
        times.sort()
        spreads.append(times[-1] - times[0])
        gaps += [b - a for a, b in zip(times, times[1:])]
    if not gaps:
        print("no Job with two or more Succeeded pods in the log")
        return 1
    spreads.sort()
    gaps.sort()

    def q(xs, f):
        return xs[int(f * (len(xs) - 1))]

    per_job = max(len(v) for v in by_job.values())
    print(
        f"{len(by_job)} Jobs, {sum(map(len, by_job.values()))} pods Succeeded; first -> last pod of a Job:"
        f" p50 {q(spreads, 0.5):.3f}s, p90 {q(spreads, 0.9):.3f}s, max {spreads[-1]:.3f}s"
        f" (= {(per_job - 1) / q(spreads, 0.5):.0f} pods/s at the median); gap between consecutive pods:"
        f" p25 {q(gaps, 0.25) * 1e3:.0f}ms, p50 {q(gaps, 0.5) * 1e3:.0f}ms, p75 {q(gaps, 0.75) * 1e3:.0f}ms,"
        f" p90 {q(gaps, 0.9) * 1e3:.0f}ms, mean {sum(gaps) / len(gaps) * 1e3:.0f}ms"
    )
    return 0


def main(argv):
    if len(argv) >= 4 and argv[1] == "jobs":
        jobs = gen_jobs(argv[2], int(argv[3]))
        Path(argv[4]).write_text(json.dumps(jobs, indent=1) + "\n")
        return 0
    if len(argv) == 7 and argv[1] == "run":
        run_real(argv[2], argv[3], argv[4], argv[5], float(argv[6]))
        return 0
    if len(argv) == 7 and argv[1] == "calibrate":
        calibrate(argv[2], argv[3], int(argv[4]), int(argv[5]), argv[6])
        return 0
    if len(argv) in (3, 4) and argv[1] == "completions":
        return completions(*argv[2:])
    if len(argv) == 6 and argv[1] == "compare":
        return compare(argv[2], argv[3], argv[4], float(argv[5]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
