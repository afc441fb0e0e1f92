//! A running job's quorum and evictions: whether its run can go on, at what rate it works, a pod
//! deleted and replaced (a peer reclaiming pod by pod), a run cut short, and what an evicted job
//! loses, metered against its tenant.

use super::agenda::Ev;
use super::{Engine, EvictionRecord};
use crate::scenario::RunStart;
use crate::scheduler::{JobId, JobPhase, PodId, PodPhase, SimEvent};

impl Engine<'_> {
    /// Deletes one holding pod and has it replaced. Of a job whose pods run their own run time,
    /// the pod's work is lost; a job whose run needs its quorum and falls below it loses its
    /// run (metered as an eviction of the job) and waits for the quorum again.
    pub(super) fn evict(&mut self, pod: PodId) {
        let now = self.now;
        let p = &self.pods[pod.index()];
        let (job, index, phase, ready_ms) = (p.job, p.index, p.phase, p.ready_ms);
        let held_before = self.held_by(job);
        let run_started = self.jobs[job.index()].run_started_ms;
        self.release(pod);
        self.end_pod(pod, false);
        let j = &mut self.jobs[job.index()];
        j.ready -= u32::from(phase == PodPhase::Ready);
        j.bound -= u32::from(matches!(phase, PodPhase::Starting | PodPhase::Ready));
        let own_run = j.spec.run_starts == RunStart::PodStart;
        let request = j.set_of(index).request.clone();
        self.out.push(SimEvent::PodFinished { pod, succeeded: false });
        self.replacing[job.index()].push(index);
        match (run_started, own_run) {
            (_, true) => {
                if let Some(ready) = ready_ms {
                    self.run_lost(job, request, now - ready);
                }
            }
            (Some(started), false) if !self.at_quorum(job) => {
                self.run_lost(job, held_before, now - started);
                self.cut_run(job);
            }
            (Some(_), false) if phase == PodPhase::Ready => {
                let (working, _) = self.working(job);
                self.rework(job, working);
            }
            _ => {}
        }
        self.create_pods_of(job);
    }

    /// The job's run stops: its pods hold room without working until its quorum is Ready again
    /// and the run starts over. Its pending run end is dropped (a new epoch, the deadline kept).
    pub(super) fn cut_run(&mut self, job: JobId) {
        let held = self.held_by(job);
        for (c, h) in self.clogged.iter_mut().zip(&held) {
            *c += h;
        }
        if let Some(q) = self.jobs[job.index()].spec.queue {
            self.tenants.working(q, &held, false);
        }
        let j = &mut self.jobs[job.index()];
        j.run_started_ms = None;
        j.phase = JobPhase::Started;
        let deadline = j.spec.deadline_ms.zip(j.started_ms).map(|(d, s)| s + d);
        self.work[job.index()] = None;
        self.epochs[job.index()] += 1;
        if let Some(at) = deadline {
            self.push(at.max(self.now), Ev::Deadline(job, self.epochs[job.index()]));
        }
    }

    /// A run of `job` holding `held` (base units per resource) is cut short after `ran_ms`:
    /// counted, metered against its tenant and kept in the record.
    pub(super) fn run_lost(&mut self, job: JobId, held: Vec<u64>, ran_ms: i64) {
        self.suspensions += 1;
        if let Some(q) = self.jobs[job.index()].spec.queue {
            self.tenants.evicted(q, &held, ran_ms);
        }
        self.evictions.push(EvictionRecord { job: job.index(), at_ms: self.now, ran_ms, held });
    }

    /// What the job's pods hold now, by resource index.
    pub(super) fn held_by(&self, job: JobId) -> Vec<u64> {
        let j = &self.jobs[job.index()];
        let mut held = vec![0u64; self.resources.len()];
        for &pod in &j.pods {
            let p = &self.pods[pod.index()];
            if p.phase.holds() {
                for (h, r) in held.iter_mut().zip(&j.set_of(p.index).request) {
                    *h += r;
                }
            }
        }
        held
    }

    /// Whether the job's quorum is Ready: every pod of the sets before its last, and its min
    /// (or all it has, if fewer) of the last.
    pub(super) fn at_quorum(&self, job: JobId) -> bool {
        let j = &self.jobs[job.index()];
        let fixed = j.fixed_members();
        let (working, fixed_ready) = self.working(job);
        fixed_ready && working >= (j.spec.min_members - fixed).min(j.members - fixed)
    }

    /// Ready pods of the job's last set (the only set whose count changes, and the one whose work
    /// spreads over its pods), and whether every pod of the sets before it is Ready.
    pub(super) fn working(&self, job: JobId) -> (u32, bool) {
        let j = &self.jobs[job.index()];
        if j.sets.len() == 1 {
            return (j.ready, true);
        }
        let (mut fixed_ready, mut last_ready) = (0, 0);
        for p in j.pods.iter().map(|p| &self.pods[p.index()]).filter(|p| p.phase == PodPhase::Ready) {
            if j.in_last_set(p.index) {
                last_ready += 1;
            } else {
                fixed_ready += 1;
            }
        }
        (last_ready, fixed_ready == j.fixed_members())
    }

    /// The work left of a running elastic job, done by `rate` members from now: a new end.
    pub(super) fn rework(&mut self, job: JobId, rate: u32) {
        let (now, epoch) = (self.now, self.epochs[job.index()]);
        let Some(mut w) = self.work[job.index()] else { return };
        w.left -= (now - w.since) * i64::from(w.rate);
        w.rate = rate;
        w.since = now;
        w.ends_at = self.run_end((w.left / i64::from(rate.max(1))).max(0));
        self.work[job.index()] = Some(w);
        self.push(w.ends_at, Ev::RunDone(job, epoch));
    }
}
