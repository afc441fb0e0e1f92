#!/usr/bin/env python3
"""A plain reference simulator of FCFS, best-effort FIFO, EASY, conservative and selective
backfilling over an SWF trace.

Prints each job's start, a line per job in trace order: `swf-ID START_S` (`-` when it never
starts), the same lines as `cargo run -p muster-sim --example schedule`, so that muster's
schedules can be compared with it job for job (`make ref-sim`).

    refsim.py TRACE.swf fcfs|besteffort|easy|conservative|selective PROCESSORS [DEPTH]

Jobs as muster's SWF mapping reads them (docs/simulator.md): processors = field 8, else field 5;
run time = field 4; submit = field 2; jobs without processors or run time are skipped. The
scheduler plans with the requested time (field 9) or, when absent or shorter, the run time.
Times are whole seconds; at each instant jobs end, then jobs arrive, then the queue is scheduled.
Best-effort FIFO starts, in arrival order, every job that fits now. Conservative backfilling
(depth 16 unless DEPTH is given) plans afresh at each instant: in arrival order, a job starts if
it fits now without touching any reservation made before it in this pass; else, while fewer than
DEPTH jobs hold one, it is reserved at the earliest time a running job or a reservation ends at
which it fits for its whole planned time. Selective reservation does the same in the order of
the time each job's slowdown so far would reach SLOWDOWN, and reserves only for jobs past it
(Srinivasan et al., JSSPP 2002). Standard library only.
"""

import heapq
import sys

SLOWDOWN = 3  # selective reservation's threshold, as muster's default


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


def simulate(jobs, policy, total, depth):
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

        if policy in ("conservative", "selective"):
            if policy == "selective":
                queue.sort(key=lambda i: (due_at(jobs[i]), i))
            for i in backfill_pass(jobs, queue, planned_ends, now, free, total, depth, policy == "selective"):
                run(i)
                queue.remove(i)
            continue
        while queue and jobs[queue[0]]["procs"] <= free:
            run(queue.pop(0))
        if policy == "besteffort":
            waiting = []
            for i in queue:
                if jobs[i]["procs"] <= free:
                    run(i)
                else:
                    waiting.append(i)
            queue[:] = waiting
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


def due_at(job):
    """Under selective reservation, when a job's slowdown so far, (wait + planned) / planned,
    reaches SLOWDOWN: the time it is due a reservation, and what orders the queue."""
    return job["submit"] + job["planned"] * (SLOWDOWN - 1)


def backfill_pass(jobs, queue, planned_ends, now, free, total, depth, selective):
    """The jobs of `queue`, in its order, that conservative or selective backfilling starts now.

    A job holds its processors from its start to its planned end, running or reserved. The free
    processors only fall at a reservation's start, so a job fits over [a, b) when they suffice at
    a and at each reservation start inside it.
    """
    ends = sorted(planned_ends.values())  # (planned end, procs) of what runs
    reservations = []  # (start, planned end, procs)
    started = []

    def free_at(t):
        f = free
        for end, procs in ends:
            if end > t:
                break
            f += procs
        for s, e, procs in reservations:
            if s <= t < e:
                f -= procs
        return f

    def fits(a, b, procs):
        return all(free_at(t) >= procs for t in [a] + [s for s, _, _ in reservations if a < s < b])

    # A job asking no fewer processors for no shorter a time than one that did not fit now does
    # not fit either (within a pass, room now only shrinks).
    failed = []
    for i in queue:
        j = jobs[i]
        procs, planned = j["procs"], j["planned"]
        if procs > total:
            continue  # larger than the machine: never starts, holds no reservation
        if procs <= free and not any(procs >= p and planned >= d for p, d in failed):
            if fits(now, now + planned, procs):
                started.append(i)
                free -= procs
                ends.append((now + planned, procs))
                ends.sort()
                continue
            failed.append((procs, planned))
        if len(reservations) < depth and (not selective or now >= due_at(j)):
            times = sorted({e for e, _ in ends} | {e for _, e, _ in reservations})
            at = next(t for t in times if t > now and fits(t, t + planned, procs))
            reservations.append((at, at + planned, procs))
    return started


def main():
    policies = ("fcfs", "besteffort", "easy", "conservative", "selective")
    if len(sys.argv) not in (4, 5) or sys.argv[2] not in policies:
        sys.exit(f"usage: refsim.py TRACE.swf {'|'.join(policies)} PROCESSORS [DEPTH]")
    jobs = read_jobs(sys.argv[1])
    depth = int(sys.argv[4]) if len(sys.argv) == 5 else 16
    start = simulate(jobs, sys.argv[2], int(sys.argv[3]), depth)
    out = []
    for i, j in enumerate(jobs):
        out.append(f"swf-{j['id']} {start.get(i, '-')}")
    print("\n".join(out))


if __name__ == "__main__":
    main()
