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
  sim-vs-real.py metrics REAL.json                     kube-scheduler's own counters over the run
                                                       (scraped when SCHEDULER_METRICS_URL is set)
  sim-vs-real.py attempts KUBE-SCHEDULER.log [NS]      per-attempt timing and requeueing, from a
                                                       kube-scheduler log at --v=3 or more

`jobs` re-implements the part of crates/muster-sim/src/scenario.rs that turns job classes into
jobs (SplitMix64 streams `arrival:<class>` and `runtime:<class>` seeded from the seed, uniform /
burst / poisson arrivals, run time = runTime x (1 + jitter x u), serial submitters), so both sides
get the same jobs: count, pods, requests, run time, deadline and submit time. Only what a Job
manifest can express is accepted: rigid jobs (members: N), priority 0, no SWF trace.
"""
import json
import math
import os
import re
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


# kube-scheduler's metrics kept by `run` (counters and gauges; histograms as _sum and _count only).
SCHED_METRICS = (
    "scheduler_schedule_attempts_total",
    "scheduler_scheduling_attempt_duration_seconds_sum",
    "scheduler_scheduling_attempt_duration_seconds_count",
    "scheduler_queue_incoming_pods_total",
    "scheduler_pending_pods",
    "scheduler_unschedulable_pods",
    "scheduler_framework_extension_point_duration_seconds_sum",
    "scheduler_framework_extension_point_duration_seconds_count",
    "scheduler_event_handling_duration_seconds_count",
    "rest_client_requests_total",
    "process_cpu_seconds_total",
)


def scrape(api, url):
    """The SCHED_METRICS samples of a Prometheus text page, as {"name{labels}": value}."""
    req = urllib.request.Request(url)
    with urllib.request.urlopen(req, context=api.ctx, timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        key, _, value = line.rpartition(" ")
        if key.split("{", 1)[0] in SCHED_METRICS:
            out[key] = float(value)
    return out


def scrape_every(api, url, t0, period, stop, into):
    """Scrape `url` every `period` seconds until `stop` is set; append (t, samples) to `into`."""
    while not stop.is_set():
        try:
            into.append({"t": round(time.time() - t0, 2), "samples": scrape(api, url)})
        except (OSError, urllib.error.URLError) as e:
            print(f"scheduler metrics: {e}", file=sys.stderr)
        stop.wait(period)


def run_real(jobs_file, kubeconfig, ns, out_file, timeout):
    jobs = json.loads(Path(jobs_file).read_text())
    api = Api(kubeconfig)
    # SCHEDULER_METRICS_URL (hack/sim-vs-real.sh sets it): scrape kube-scheduler once a second.
    metrics_url = os.environ.get("SCHEDULER_METRICS_URL")
    snapshots, stop_scraping = [], threading.Event()
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
    if metrics_url:
        threading.Thread(
            target=scrape_every, args=(api, metrics_url, t0, 1.0, stop_scraping, snapshots), daemon=True
        ).start()
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
    stop_scraping.set()
    items = api.call("GET", base)["items"]
    pods = api.call("GET", f"/api/v1/namespaces/{ns}/pods")["items"]
    result = summarize(items, pods, t0, lag)
    result["series"] = series
    if snapshots:
        result["scheduler_metrics"] = snapshots
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


def labels(key):
    """(name, {label: value}) of a sample key such as name{a="x",b="y"}."""
    name, _, rest = key.partition("{")
    return name, dict(re.findall(r'(\w+)="([^"]*)"', rest))


def metric_sums(samples, name, by):
    """Sum of the samples of `name` grouped by the tuple of labels `by`."""
    out = {}
    for key, v in samples.items():
        n, ls = labels(key)
        if n == name:
            k = tuple(ls.get(b, "") for b in by)
            out[k] = out.get(k, 0.0) + v
    return out


def metrics_report(real_file, step=10):
    """kube-scheduler's counters over the run, from the snapshots `run` scraped."""
    snaps = json.loads(Path(real_file).read_text()).get("scheduler_metrics")
    if not snaps:
        print("no scheduler metrics in this run (SCHEDULER_METRICS_URL was not set)")
        return 1
    first, last = snaps[0]["samples"], snaps[-1]["samples"]

    def delta(name, by):
        a, b = metric_sums(first, name, by), metric_sums(last, name, by)
        return {k: b[k] - a.get(k, 0.0) for k in sorted(b) if b[k] - a.get(k, 0.0)}

    span = snaps[-1]["t"] - snaps[0]["t"]
    cpu = delta("process_cpu_seconds_total", ())
    print(f"{len(snaps)} snapshots over {span:.0f}s; kube-scheduler cpu {sum(cpu.values()):.1f}s")
    att = delta("scheduler_schedule_attempts_total", ("result",))
    dur = delta("scheduler_scheduling_attempt_duration_seconds_sum", ("result",))
    cnt = delta("scheduler_scheduling_attempt_duration_seconds_count", ("result",))
    for (res,), n in att.items():
        mean = dur.get((res,), 0.0) / cnt[(res,)] * 1e3 if cnt.get((res,)) else float("nan")
        print(f"  attempts {res}: {n:.0f} ({n / span:.1f}/s), mean attempt {mean:.2f} ms")
    ext_s = delta("scheduler_framework_extension_point_duration_seconds_sum", ("extension_point", "status"))
    ext_n = delta("scheduler_framework_extension_point_duration_seconds_count", ("extension_point", "status"))
    for k, n in ext_n.items():
        print(f"  extension point {k[0]} ({k[1]}): {n:.0f} x {ext_s.get(k, 0.0) / n * 1e3:.2f} ms")
    for (ev, q), n in delta("scheduler_queue_incoming_pods_total", ("event", "queue")).items():
        print(f"  incoming {ev} -> {q}: {n:.0f}")
    for (code, method), n in delta("rest_client_requests_total", ("code", "method")).items():
        print(f"  API {method} {code}: {n:.0f}")
    print(f"{'t':>5} {'sched/s':>8} {'unsched/s':>9} {'active':>7} {'backoff':>8} {'unsched':>8} {'gated':>6}")
    prev = first
    prev_t = snaps[0]["t"]
    for s in snaps[1:]:
        if s["t"] - prev_t < step and s is not snaps[-1]:
            continue
        dt = s["t"] - prev_t
        a, b = metric_sums(prev, "scheduler_schedule_attempts_total", ("result",)), metric_sums(
            s["samples"], "scheduler_schedule_attempts_total", ("result",))
        r = {k[0]: (b[k] - a.get(k, 0.0)) / dt for k in b}
        q = {k[0]: v for k, v in metric_sums(s["samples"], "scheduler_pending_pods", ("queue",)).items()}
        print(f"{s['t']:5.0f} {r.get('scheduled', 0):8.1f} {r.get('unschedulable', 0):9.1f} {q.get('active', 0):7.0f}"
              f" {q.get('backoff', 0):8.0f} {q.get('unschedulable', 0):8.0f} {q.get('gated', 0):6.0f}")
        prev, prev_t = s["samples"], s["t"]
    return 0


KLOG = re.compile(r'^[IWE](\d{4}) (\d\d):(\d\d):(\d\d\.\d+)\s+\d+ \S+\] "([^"]*)"(.*)$')


def attempts(log_file, ns="sim-vs-real"):
    """Per-attempt timing and requeueing from kube-scheduler's log at --v=3: an attempt starts with
    "Attempting to schedule pod" and, when it fails, logs "Pod moved to an internal scheduling
    queue" with event ScheduleAttemptFailure and the queue (Backoff when a cluster event came in
    during the attempt, Unschedulable otherwise); "Delete event for scheduled pod" frees a pod's
    resources (a pod Succeeded, the scheduler's informer dropping terminal pods, or deleted)."""
    evs = []
    for line in Path(log_file).read_text(errors="replace").splitlines():
        m = KLOG.match(line)
        if not m:
            continue
        pod = re.search(r' pod="([^"]+)"', m.group(6))
        if not pod or not pod.group(1).startswith(ns + "/"):
            continue
        t = int(m.group(2)) * 3600 + int(m.group(3)) * 60 + float(m.group(4))
        evs.append((t, m.group(5), pod.group(1), m.group(6)))
    starts = [i for i, e in enumerate(evs) if e[1] == "Attempting to schedule pod"]
    if len(starts) < 2:
        print("fewer than two attempts in the log (kube-scheduler at --v=3 or more?)")
        return 1

    def q(xs, f):
        xs = sorted(xs)
        return xs[int(f * (len(xs) - 1))] * 1e3

    # Loop time of an attempt: from its start to the next attempt's start (pauses over 1 s, when
    # nothing was queued, are left out). A pod's first failure includes its status patch.
    first, repeated, queues, failed_before = [], [], {}, set()
    nxt = {a: b for a, b in zip(starts, starts[1:])}
    for i in starts:
        t, _, pod, _ = evs[i]
        end = nxt.get(i)
        fail = next((e for e in evs[i + 1 : end] if e[2] == pod and "ScheduleAttemptFailure" in e[3]), None)
        if fail is None:
            continue
        qm = re.search(r' queue="([^"]+)"', fail[3])
        queues[qm.group(1) if qm else "?"] = queues.get(qm.group(1) if qm else "?", 0) + 1
        if end is not None and evs[end][0] - t < 1.0:
            (repeated if pod in failed_before else first).append(evs[end][0] - t)
        failed_before.add(pod)
    bound = sum(1 for e in evs if e[1] == "Successfully bound pod to node")
    print(f"{len(starts)} attempts, {bound} bound, {sum(queues.values())} failed")
    for name, xs in (("first failure of a pod", first), ("repeated failure", repeated)):
        if xs:
            print(f"  loop time, {name}: n {len(xs)}, p50 {q(xs, .5):.2f} ms, p90 {q(xs, .9):.2f} ms,"
                  f" mean {sum(xs) / len(xs) * 1e3:.2f} ms")
    for k, n in sorted(queues.items()):
        print(f"  failed attempts requeued to {k}: {n}")
    # How a job's pods go, as the scheduler sees it.
    dels = {}
    for t, msg, pod, _ in evs:
        if msg == "Delete event for scheduled pod":
            dels.setdefault(pod.rsplit("-", 1)[0], []).append(t)
    spans, gaps = [], []
    for ts in dels.values():
        ts.sort()
        spans.append(ts[-1] - ts[0])
        gaps += [b - a for a, b in zip(ts, ts[1:])]
    if gaps:
        big = [g for g in gaps if g >= 1e-3]
        print(f"  pods freed, per job: first -> last p50 {q(spans, .5):.0f} ms, p90 {q(spans, .9):.0f} ms;"
              f" {len(big) / len(gaps):.0%} of the gaps >= 1 ms, their mean"
              f" {sum(big) / max(1, len(big)) * 1e3:.1f} ms")
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
    if len(argv) == 3 and argv[1] == "metrics":
        return metrics_report(argv[2])
    if len(argv) in (3, 4) and argv[1] == "attempts":
        return attempts(*argv[2:])
    if len(argv) == 6 and argv[1] == "compare":
        return compare(argv[2], argv[3], argv[4], float(argv[5]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
