#!/usr/bin/env python3
"""A plain reference simulator of FCFS and EASY backfilling over an SWF trace.

Prints each job's start, a line per job in trace order: `swf-ID START_S` (`-` when it never
starts), the same lines as `cargo run -p muster-sim --example schedule`, so that muster's
schedules can be compared with it job for job (`make ref-sim`).

    refsim.py TRACE.swf fcfs|easy PROCESSORS

Jobs as muster's SWF mapping reads them (docs/simulator.md): processors = field 8, else field 5;
run time = field 4; submit = field 2; jobs without processors or run time are skipped. The
scheduler plans with the requested time (field 9) or, when absent or shorter, the run time.
Times are whole seconds; at each instant jobs end, then jobs arrive, then the queue is scheduled.
Standard library only.
"""

import heapq
import sys


def read_jobs(path):
    jobs = []
    with open(path) as f:
        for line in f:
            fields = line.split()
            if not fields or fields[0].startswith(";"):
                continue
            v = [int(float(x)) for x in fields[:18]]
            procs = v[7] if v[7] > 0 else v[4]
            run, submit = v[3], v[1]
            if procs <= 0 or run <= 0 or submit < 0:
                continue
            planned = max(v[8] if v[8] > 0 else run, run)
            jobs.append({"id": v[0], "submit": submit, "procs": procs, "run": run, "planned": planned})
    jobs.sort(key=lambda j: j["submit"])  # stable: trace order among equal submits
    return jobs


def simulate(jobs, policy, total):
    free = total
    queue = []  # waiting jobs, in arrival order
    running = []  # heap of (actual end, index)
    planned_ends = {}  # index -> (planned end, procs) of running jobs
    start = {}
    arrivals = 0
    while arrivals < len(jobs) or queue:
        times = []
        if arrivals < len(jobs):
            times.append(jobs[arrivals]["submit"])
        if running:
            times.append(running[0][0])
        if not times:
            break  # jobs larger than the machine never start
        now = min(times)
        while running and running[0][0] <= now:
            _, i = heapq.heappop(running)
            free += jobs[i]["procs"]
            del planned_ends[i]
        while arrivals < len(jobs) and jobs[arrivals]["submit"] <= now:
            queue.append(arrivals)
            arrivals += 1

        def run(i):
            nonlocal free
            j = jobs[i]
            free -= j["procs"]
            start[i] = now
            heapq.heappush(running, (now + j["run"], i))
            planned_ends[i] = (now + j["planned"], j["procs"])

        while queue and jobs[queue[0]]["procs"] <= free:
            run(queue.pop(0))
        if policy == "easy" and queue and jobs[queue[0]]["procs"] <= total:
            # The head's reservation (the shadow time): when enough planned ends free its
            # processors. Every job ending at that very time frees its processors then too, so
            # the extra processors count them all.
            need = jobs[queue[0]]["procs"]
            avail, shadow = free, now
            for end, procs in sorted(planned_ends.values()):
                if avail >= need and end > shadow:
                    break
                avail += procs
                shadow = end
            extra = avail - need
            for i in list(queue[1:]):
                j = jobs[i]
                if j["procs"] > free:
                    continue
                if now + j["planned"] <= shadow:
                    run(i)
                    queue.remove(i)
                elif j["procs"] <= extra:
                    extra -= j["procs"]
                    run(i)
                    queue.remove(i)
    return start


def main():
    if len(sys.argv) != 4 or sys.argv[2] not in ("fcfs", "easy"):
        sys.exit("usage: refsim.py TRACE.swf fcfs|easy PROCESSORS")
    jobs = read_jobs(sys.argv[1])
    start = simulate(jobs, sys.argv[2], int(sys.argv[3]))
    out = []
    for i, j in enumerate(jobs):
        out.append(f"swf-{j['id']} {start.get(i, '-')}")
    print("\n".join(out))


if __name__ == "__main__":
    main()
