#!/usr/bin/env python3
"""Writes a synthetic recorded history (JSON Lines, as `muster history export` writes) of N
groups for scenarios/clusters/history-128.yaml: deterministic for a seed, arrivals spread so
that the work offered is LOAD of the cluster's cpu. For benchmarks of `muster sim --history`
(docs/benchmarks.md); a real history comes from `muster history export`.

usage: synth.py N [--seed S] [--load 0.8] > runs.jsonl
"""
import argparse
import json
import math
import random

CLUSTER_CPU = 128 * 64  # scenarios/clusters/history-128.yaml
T0 = 1_767_225_600  # 2026-01-01T00:00:00Z


def main():
    p = argparse.ArgumentParser()
    p.add_argument("n", type=int)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--load", type=float, default=0.8)
    a = p.parse_args()
    rng = random.Random(a.seed)
    shapes = []
    for _ in range(a.n):
        members = rng.choice([1, 1, 1, 2, 2, 4, 4, 8, 16])
        cpu = rng.choice([4, 8, 16, 32, 64])
        run = min(12 * 3600, max(30, int(rng.lognormvariate(math.log(900), 1.2))))
        declared = int(run * rng.uniform(1.0, 2.0)) if rng.random() < 0.7 else None
        shapes.append((members, cpu, run, declared))
    work = sum(m * c * r for m, c, r, _ in shapes)
    span = work / (a.load * CLUSTER_CPU)
    arrivals = sorted(rng.uniform(0, span) for _ in range(a.n))
    for i, ((members, cpu, run, declared), at) in enumerate(zip(shapes, arrivals)):
        submitted = T0 + int(at)
        started = submitted + rng.randint(0, 60)
        request = {
            "name": f"job-{i}",
            "min": members,
            "max": members,
            "requests": [["cpu", cpu * 1000], ["memory", cpu * 4 << 30]],
        }
        if declared:
            request["duration"] = declared
        print(json.dumps({
            "group": f"synthetic/job-{i}",
            "queue": "default",
            "submitted": submitted,
            "started": started,
            "ended": started + run,
            "members": members,
            "outcome": "Succeeded",
            "request": request,
        }, separators=(",", ":")))


if __name__ == "__main__":
    main()
