//! Targets computed without any scheduler model: the ideal FIFO gang schedule and a lower bound.
//!
//! Ideal FIFO gang: jobs in submission order; each starts the moment the whole gang (all
//! `max_members` pods, each set's pods asking their own set's requests) fits on the free node
//! resources, never before the job ahead of it started, with zero scheduling, binding or start-up
//! overhead, and runs for its run time.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

#[derive(Debug, Clone, PartialEq)]
pub struct IdealJob<'a> {
    pub submit_ms: i64,
    pub run_ms: i64,
    /// Its sets of alike pods (one when all its pods are alike), placed in this order.
    pub sets: Vec<IdealSet<'a>>,
}

/// Alike pods of a job.
#[derive(Debug, Clone, PartialEq)]
pub struct IdealSet<'a> {
    pub members: u32,
    /// Per pod, by resource index.
    pub request: Vec<u64>,
    /// Per node: may a pod of this set go there.
    pub eligible: &'a [bool],
}

impl<'a> IdealJob<'a> {
    /// A job whose sets are placed biggest pods first (by their largest share of any resource
    /// of the cluster, `totals`): small pods placed first could take the room a big one needs.
    pub fn new(submit_ms: i64, run_ms: i64, mut sets: Vec<IdealSet<'a>>, totals: &[u64]) -> Self {
        let size = |s: &IdealSet<'_>| {
            s.request
                .iter()
                .zip(totals)
                .filter(|(_, t)| **t > 0)
                .map(|(q, t)| *q as f64 / *t as f64)
                .fold(0.0, f64::max)
        };
        sets.sort_by(|a, b| size(b).total_cmp(&size(a)));
        IdealJob { submit_ms, run_ms, sets }
    }
}

/// Where a job's pods go: set, node, pods.
type Placement = Vec<(usize, usize, u32)>;

#[derive(Debug, Clone, PartialEq)]
pub struct IdealSchedule {
    /// Start time per job; None if the gang cannot fit even on the empty cluster.
    pub starts: Vec<Option<i64>>,
    pub makespan_ms: i64,
}

/// Greedy fill, set after set: a set's pods are identical, so filling nodes one after another
/// fits the most of it.
fn fit(free: &[Vec<u64>], job: &IdealJob<'_>) -> Option<Placement> {
    let mut free = free.to_vec();
    let mut out = vec![];
    for (s, set) in job.sets.iter().enumerate() {
        let mut left = set.members;
        for (n, f) in free.iter_mut().enumerate() {
            if left == 0 {
                break;
            }
            if !set.eligible[n] {
                continue;
            }
            let k = f
                .iter()
                .zip(&set.request)
                .filter(|(_, q)| **q > 0)
                .map(|(a, q)| a / q)
                .min()
                .unwrap_or(u64::MAX)
                .min(u64::from(left)) as u32;
            if k > 0 {
                for (a, q) in f.iter_mut().zip(&set.request) {
                    *a -= q * u64::from(k);
                }
                out.push((s, n, k));
                left -= k;
            }
        }
        if left > 0 {
            return None;
        }
    }
    Some(out)
}

/// The ideal FIFO gang schedule of `jobs` (in submission order) on nodes with `capacity`.
pub fn fifo_gang(capacity: &[Vec<u64>], jobs: &[IdealJob<'_>]) -> IdealSchedule {
    let mut free = capacity.to_vec();
    let mut running: BinaryHeap<Reverse<(i64, usize)>> = BinaryHeap::new();
    let mut placements: Vec<Placement> = vec![vec![]; jobs.len()];
    let mut starts = vec![None; jobs.len()];
    let mut t = 0i64;
    let mut makespan = 0i64;
    let release = |free: &mut Vec<Vec<u64>>, job: &IdealJob<'_>, p: &[(usize, usize, u32)]| {
        for &(s, n, k) in p {
            for (f, q) in free[n].iter_mut().zip(&job.sets[s].request) {
                *f += q * u64::from(k);
            }
        }
    };
    for (i, job) in jobs.iter().enumerate() {
        if fit(capacity, job).is_none() {
            continue;
        }
        t = t.max(job.submit_ms);
        loop {
            while let Some(&Reverse((end, j))) = running.peek() {
                if end > t {
                    break;
                }
                running.pop();
                release(&mut free, &jobs[j], &placements[j]);
            }
            if let Some(p) = fit(&free, job) {
                for &(s, n, k) in &p {
                    for (f, q) in free[n].iter_mut().zip(&job.sets[s].request) {
                        *f -= q * u64::from(k);
                    }
                }
                placements[i] = p;
                starts[i] = Some(t);
                running.push(Reverse((t + job.run_ms, i)));
                makespan = makespan.max(t + job.run_ms);
                break;
            }
            // Fits the empty cluster, so some running job must end first.
            let Reverse((end, _)) = *running.peek().expect("a job that fits the empty cluster waits for a running one");
            t = end;
        }
    }
    IdealSchedule { starts, makespan_ms: makespan }
}

/// max(total work / capacity over every resource, the latest submit + run time of any job), over
/// the jobs that fit the empty cluster: one that does not (a trace's job larger than the machine)
/// runs in no schedule, so it adds no work to any.
pub fn lower_bound(capacity: &[Vec<u64>], jobs: &[IdealJob<'_>]) -> i64 {
    let r = capacity.first().map_or(0, Vec::len);
    let runs: Vec<&IdealJob<'_>> = jobs.iter().filter(|j| fit(capacity, j).is_some()).collect();
    let jobs = runs.as_slice();
    let mut bound = jobs.iter().map(|j| j.submit_ms + j.run_ms).max().unwrap_or(0) as f64;
    for k in 0..r {
        let cap: u64 = capacity.iter().map(|c| c[k]).sum();
        if cap == 0 {
            continue;
        }
        let asks = |j: &IdealJob<'_>| j.sets.iter().map(|s| s.request[k] as f64 * f64::from(s.members)).sum::<f64>();
        let work: f64 = jobs.iter().map(|j| asks(j) * j.run_ms as f64).sum();
        bound = bound.max(work / cap as f64);
    }
    bound.ceil() as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(submit_ms: i64, run_ms: i64, members: u32, cpu: u64) -> IdealJob<'static> {
        IdealJob { submit_ms, run_ms, sets: vec![IdealSet { members, request: vec![cpu], eligible: &[true, true] }] }
    }

    #[test]
    fn hand_computed_fifo_gang() {
        // Two nodes of 4 cpu. A: 3 pods x 2 cpu (t=0, 10s) -> nodes 2+1, 2 cpu left on node 1.
        // B: 2 x 2 cpu (t=1s) waits for A (only 2 cpu free): starts at 10s, ends 15s.
        // C: 1 x 2 cpu (t=2s) would fit at 2s but FIFO keeps it behind B: starts 10s, ends 11s.
        // D: 2 x 4 cpu (t=3s): needs both nodes empty: B ends at 15s, so it starts at 15s, ends 35s.
        let cap = vec![vec![4], vec![4]];
        let jobs =
            vec![job(0, 10_000, 3, 2), job(1_000, 5_000, 2, 2), job(2_000, 1_000, 1, 2), job(3_000, 20_000, 2, 4)];
        let s = fifo_gang(&cap, &jobs);
        assert_eq!(s.starts, vec![Some(0), Some(10_000), Some(10_000), Some(15_000)]);
        assert_eq!(s.makespan_ms, 35_000);
        // Work: 6*10 + 4*5 + 2*1 + 8*20 = 242 cpu-s on 8 cpu = 30.25 s; latest end alone 23 s.
        assert_eq!(lower_bound(&cap, &jobs), 30_250);
        // A gang larger than the cluster never starts and blocks nobody, nor adds to the bound.
        let big = vec![job(0, 1_000, 3, 4), job(0, 1_000, 1, 1)];
        assert_eq!(fifo_gang(&cap, &big).starts, vec![None, Some(0)]);
        assert_eq!(lower_bound(&cap, &big), 1_000);
    }
}
