//! The discrete-event engine: one modelled cluster, one scheduler, one workload. What is to
//! happen waits in an `agenda::Agenda`, by time and then in the order it was scheduled, so a
//! run is a pure function of its inputs.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::{IsTerminal, Write};

use muster_graph::graph::Node;

use crate::SimError;
use crate::node_index::NodeIndex;
use crate::reservation_meter::{ReservationMeter, ReservationRecord};
use crate::rng::Rng;
use crate::scenario::{JobTopology, RunStart, Workload};
use crate::scheduler::{
    Action, ClusterView, JobId, JobPhase, JobState, NodeId, NodeState, PodId, PodPhase, PodSetState, PodState,
    Scheduler, SimEvent,
};
use crate::tenant_meter::{TenantMeter, TenantRecord};

mod agenda;
mod evictions;

use agenda::{Agenda, Ev};

/// What one run leaves behind for the metrics.
#[derive(Debug, Clone)]
pub struct RunRecord {
    pub scheduler: String,
    pub jobs: Vec<JobRecord>,
    /// Simulated time at which the run stopped.
    pub end_ms: i64,
    pub sample_ms: i64,
    /// Per resource: capacity of the whole cluster.
    pub capacity: Vec<u64>,
    pub resources: Vec<String>,
    /// Per sample bucket, per resource: resource-milliseconds held.
    pub held: Vec<Vec<f64>>,
    /// Per resource: resource-milliseconds held by pods whose job was not running.
    pub clog: Vec<f64>,
    pub events: u64,
    /// Runs taken away: jobs suspended once started, and runs cut short by a pod's eviction (a
    /// job below its quorum, or the pod of a job whose pods run their own time).
    pub suspensions: u64,
    pub horizon_hit: bool,
    /// The scheduler predicts starts (`estimated_start_ms` is filled where it gave one).
    pub estimates: bool,
    /// Per tenant's queue; empty without tenants.
    pub tenants: TenantRecord,
    /// Per calendar reservation; empty without them.
    pub reservations: Vec<ReservationRecord>,
    /// Every run cut short, in the order they happened (the sim's; a real run lists none).
    pub evictions: Vec<EvictionRecord>,
}

/// A run cut short: a job taken off its nodes once started, or below its quorum, or the pod of a
/// job whose pods run their own time. What it had done is lost (a job restarts from the start).
#[derive(Debug, Clone, PartialEq)]
pub struct EvictionRecord {
    pub job: usize,
    pub at_ms: i64,
    /// How long the run had gone (0 when it had not begun).
    pub ran_ms: i64,
    /// Per resource (`RunRecord::resources`), base units its pods held.
    pub held: Vec<u64>,
}

#[derive(Debug, Clone)]
pub struct JobRecord {
    pub class_index: usize,
    pub submit_ms: i64,
    /// First time all pods of a start were bound.
    pub scheduled_ms: Option<i64>,
    pub run_started_ms: Option<i64>,
    pub ended_ms: Option<i64>,
    pub phase: JobPhase,
    pub starts: u32,
    /// For a job with a topology constraint: whether its run spanned more than one domain.
    pub spread: Option<bool>,
    /// The start the scheduler first predicted for it, if it predicts starts.
    pub estimated_start_ms: Option<i64>,
}

/// A running job's work in member-milliseconds, done at `rate` members since `since`; it ends at
/// `ends_at` (a `RunDone` for an earlier time was superseded by a shrink).
#[derive(Debug, Clone, Copy)]
struct Work {
    left: i64,
    rate: u32,
    since: i64,
    ends_at: i64,
}

/// The cluster, its jobs and pods, and the clocks of the modelled control plane.
pub struct Engine<'w> {
    workload: &'w Workload,
    resources: Vec<String>,
    nodes: Vec<NodeState>,
    node_by_name: BTreeMap<String, NodeId>,
    jobs: Vec<JobState<'w>>,
    pods: Vec<PodState>,
    eligible: Vec<Vec<bool>>,
    index: NodeIndex,
    epochs: Vec<u32>,
    /// Per job: the work its run has left, while it runs (AllReady jobs).
    work: Vec<Option<Work>>,
    scheduled: Vec<Option<i64>>,
    agenda: Agenda,
    now: i64,
    binder_free_at: i64,
    /// Jobs waiting for a Job-controller sync to create their pods (job, epoch).
    creating: VecDeque<(JobId, u32)>,
    /// Per job: completion indices of evicted pods, which their replacements take.
    replacing: Vec<Vec<u32>>,
    /// Jobs being synced (at most `concurrentJobSyncs`): job, epoch, pods left in the current
    /// slow-start batch, size of that batch.
    syncing: Vec<(JobId, u32, u32, u32)>,
    /// Pod-create calls waiting for the controller's client rate limiter, in request order.
    create_calls: VecDeque<(JobId, u32)>,
    tick_pending: bool,
    wakeups: BTreeSet<i64>,
    out: Vec<SimEvent>,
    terminal: usize,
    // accounting
    held: Vec<u64>,
    clogged: Vec<u64>,
    last_t: i64,
    held_buckets: Vec<Vec<f64>>,
    clog_total: Vec<f64>,
    events: u64,
    suspensions: u64,
    evictions: Vec<EvictionRecord>,
    tenants: TenantMeter,
    reservations: ReservationMeter,
    /// Gaps between the pod ends of a job (`timing.podEndSpread`).
    spread_rng: Rng,
}

/// The node's cluster-description view, enough for `NodeFilter::admits`.
fn filter_node(n: &NodeState) -> Node {
    Node::for_filtering(&n.name, n.labels.clone(), n.taints.clone(), n.unschedulable)
}

impl<'w> Engine<'w> {
    pub fn new(workload: &'w Workload) -> Result<Self, SimError> {
        let mut resources: Vec<String> = Vec::new();
        let mut described = Vec::new();
        workload.cluster.for_each_node(&workload.cluster_file, |n| {
            for (r, _) in
                n.spec.pooled.iter().map(|(r, a)| (r, *a)).chain(n.spec.devices.iter().map(|(r, c)| (r, u64::from(*c))))
            {
                if !resources.contains(r) {
                    resources.push(r.clone());
                }
            }
            described.push(n.spec);
            Ok(())
        })?;
        let nodes: Vec<NodeState> = described
            .into_iter()
            .map(|s| {
                let mut capacity = vec![0u64; resources.len()];
                for (r, a) in
                    s.pooled.iter().map(|(r, a)| (r, *a)).chain(s.devices.iter().map(|(r, c)| (r, u64::from(*c))))
                {
                    capacity[resources.iter().position(|x| x == r).expect("collected above")] += a;
                }
                NodeState {
                    name: s.name,
                    labels: s.labels,
                    taints: s.taints,
                    unschedulable: s.unschedulable,
                    free: capacity.clone(),
                    capacity,
                }
            })
            .collect();
        let node_by_name = nodes.iter().enumerate().map(|(i, n)| (n.name.clone(), NodeId(i as u32))).collect();
        let filter_nodes: Vec<Node> = nodes.iter().map(filter_node).collect();
        let mut filters: Vec<muster_graph::filter::NodeFilter> = Vec::new();
        let mut eligible: Vec<Vec<bool>> = Vec::new();
        let mut jobs = Vec::with_capacity(workload.jobs.len());
        for spec in &workload.jobs {
            let mut sets = Vec::new();
            for set in spec.pod_sets().iter() {
                let filter = match filters.iter().position(|f| *f == set.filter) {
                    Some(i) => i,
                    None => {
                        filters.push(set.filter.clone());
                        eligible.push(filter_nodes.iter().map(|n| !n.unschedulable && set.filter.admits(n)).collect());
                        filters.len() - 1
                    }
                };
                let mut request = vec![0u64; resources.len()];
                for (r, a) in &set.requests {
                    // Validated against the description when the scenario was loaded.
                    if let Some(i) = resources.iter().position(|x| x == r) {
                        request[i] = *a;
                    }
                }
                sets.push(PodSetState { request, filter, max_members: set.max_members });
            }
            jobs.push(JobState {
                spec,
                phase: JobPhase::Future,
                sets,
                pods: vec![],
                members: 0,
                started_ms: None,
                run_started_ms: None,
                ended_ms: None,
                ready: 0,
                bound: 0,
                deleted: 0,
                succeeded: 0,
                starts: 0,
                spread: None,
            });
        }
        let free: Vec<Vec<u64>> = nodes.iter().map(|n| n.free.clone()).collect();
        let index = NodeIndex::new(&free, resources.len());
        let reservations = ReservationMeter::new(workload, &resources, &free);
        let r = resources.len();
        let n_jobs = jobs.len();
        // Every job's first pods, room made once: growing by doubling would copy them and touch
        // twice the memory, which on a trace of half a million pods is a tenth of the run.
        let first_pods = workload.jobs.iter().map(|j| j.min_members as usize).sum();
        Ok(Engine {
            workload,
            resources,
            nodes,
            node_by_name,
            jobs,
            pods: Vec::with_capacity(first_pods),
            eligible,
            index,
            epochs: vec![0; n_jobs],
            work: vec![None; n_jobs],
            scheduled: vec![None; n_jobs],
            agenda: Agenda::new(workload.jobs.iter().enumerate().map(|(i, j)| (j.submit_ms, JobId(i as u32)))),
            now: 0,
            binder_free_at: 0,
            creating: VecDeque::new(),
            replacing: vec![vec![]; n_jobs],
            syncing: vec![],
            create_calls: VecDeque::new(),
            tick_pending: false,
            wakeups: BTreeSet::new(),
            out: vec![],
            terminal: 0,
            held: vec![0; r],
            clogged: vec![0; r],
            last_t: 0,
            held_buckets: vec![],
            clog_total: vec![0.0; r],
            events: 0,
            suspensions: 0,
            evictions: vec![],
            tenants: TenantMeter::new(workload.tenants.queues.len(), r),
            reservations,
            spread_rng: Rng::stream(workload.params.seed, "podend"),
        })
    }

    pub fn view(&self) -> ClusterView<'_> {
        ClusterView {
            resources: &self.resources,
            nodes: &self.nodes,
            node_by_name: &self.node_by_name,
            jobs: &self.jobs,
            pods: &self.pods,
            eligible: &self.eligible,
            index: &self.index,
            timing: &self.workload.params.timing,
            binder_free_at: self.binder_free_at,
        }
    }

    fn push(&mut self, time: i64, ev: Ev) {
        self.agenda.push(self.now, time, ev);
    }

    /// Integrates held and clogged resources over [last_t, t).
    fn account(&mut self, t: i64) {
        let sample = self.workload.params.sample_ms;
        let mut a = self.last_t;
        if t <= a {
            return;
        }
        self.reservations.accrue(a, t);
        for (c, k) in self.clog_total.iter_mut().zip(&self.clogged) {
            *c += (*k as f64) * (t - a) as f64;
        }
        if self.held.iter().any(|h| *h > 0) {
            while a < t {
                let b = (a / sample + 1) * sample;
                let end = b.min(t);
                let bucket = (a / sample) as usize;
                if self.held_buckets.len() <= bucket {
                    self.held_buckets.resize(bucket + 1, vec![0.0; self.resources.len()]);
                }
                for (s, h) in self.held_buckets[bucket].iter_mut().zip(&self.held) {
                    *s += (*h as f64) * (end - a) as f64;
                }
                self.tenants.accrue(bucket, end - a);
                a = end;
            }
        }
        self.last_t = t;
    }

    fn job_running(&self, job: JobId) -> bool {
        self.jobs[job.index()].run_started_ms.is_some()
    }

    fn hold(&mut self, pod: PodId, node: NodeId) {
        let job = self.pods[pod.index()].job;
        let running = self.job_running(job);
        let j = &self.jobs[job.index()];
        let req = &j.set_of(self.pods[pod.index()].index).request;
        if let Some(q) = j.spec.queue.filter(|_| running) {
            self.tenants.working(q, req, true);
        }
        self.reservations.placed(job.index(), node.index(), req, true);
        let n = &mut self.nodes[node.index()];
        for (i, q) in req.iter().enumerate() {
            n.free[i] -= q;
            self.held[i] += q;
            if !running {
                self.clogged[i] += q;
            }
        }
        self.index.update(node.index(), &n.free);
        self.pods[pod.index()].node = Some(node);
    }

    fn release(&mut self, pod: PodId) {
        let p = &self.pods[pod.index()];
        let (job, node) = (p.job, p.node.expect("a holding pod has a node"));
        let running = self.job_running(job);
        let j = &self.jobs[job.index()];
        let req = &j.set_of(p.index).request;
        if let Some(q) = j.spec.queue.filter(|_| running) {
            self.tenants.working(q, req, false);
        }
        self.reservations.placed(job.index(), node.index(), req, false);
        let n = &mut self.nodes[node.index()];
        for (i, q) in req.iter().enumerate() {
            n.free[i] += q;
            self.held[i] -= q;
            if !running {
                self.clogged[i] -= q;
            }
        }
        self.index.update(node.index(), &n.free);
    }

    fn bad(&self, sched: &str, action: &Action, why: &str) -> SimError {
        SimError::BadAction { scheduler: sched.to_string(), action: format!("{action:?}"), reason: why.to_string() }
    }

    fn apply(&mut self, sched: &str, action: Action) -> Result<(), SimError> {
        let now = self.now;
        match action {
            Action::Start { job, members } => {
                let j = self.jobs.get(job.index()).ok_or_else(|| self.bad(sched, &action, "no such job"))?;
                if j.phase != JobPhase::Suspended {
                    return Err(self.bad(sched, &action, &format!("job is {:?}, not suspended", j.phase)));
                }
                if members < j.spec.min_members || members > j.spec.max_members {
                    return Err(self.bad(sched, &action, "members outside the job's min..=max"));
                }
                let deadline = j.spec.deadline_ms;
                let j = &mut self.jobs[job.index()];
                j.phase = JobPhase::Started;
                j.members = members;
                j.started_ms = Some(now);
                j.starts += 1;
                j.pods.clear();
                j.ready = 0;
                j.bound = 0;
                j.deleted = 0;
                j.succeeded = 0;
                j.run_started_ms = None;
                self.replacing[job.index()].clear();
                self.epochs[job.index()] += 1;
                let epoch = self.epochs[job.index()];
                self.create_pods_of(job);
                if let Some(d) = deadline {
                    self.push(now + d, Ev::Deadline(job, epoch));
                }
                self.out.push(SimEvent::JobStarted { job });
            }
            Action::Reserve { pod, node } | Action::Bind { pod, node } => {
                let Some(p) = self.pods.get(pod.index()) else { return Err(self.bad(sched, &action, "no such pod")) };
                if node.index() >= self.nodes.len() {
                    return Err(self.bad(sched, &action, "no such node"));
                }
                let reserved_here = p.phase == PodPhase::Reserved && p.node == Some(node);
                let is_bind = matches!(action, Action::Bind { .. });
                if !(p.phase == PodPhase::Pending || (is_bind && reserved_here)) {
                    return Err(self.bad(sched, &action, &format!("pod is {:?}", p.phase)));
                }
                if p.phase == PodPhase::Pending {
                    if !self.view().fits(pod, node) {
                        return Err(self.bad(sched, &action, "the pod does not fit the node (resources or filter)"));
                    }
                    self.hold(pod, node);
                }
                if is_bind {
                    self.pods[pod.index()].phase = PodPhase::Binding;
                    let interval = self.workload.params.timing.bind_interval_ms();
                    let done = self.binder_free_at.max(now) + interval;
                    self.binder_free_at = done;
                    self.push(done, Ev::BindDone(pod));
                } else {
                    self.pods[pod.index()].phase = PodPhase::Reserved;
                }
            }
            Action::Unreserve { pod } => {
                if self.pods.get(pod.index()).map(|p| p.phase) != Some(PodPhase::Reserved) {
                    return Err(self.bad(sched, &action, "pod is not reserved"));
                }
                self.release(pod);
                let p = &mut self.pods[pod.index()];
                p.phase = PodPhase::Pending;
                p.node = None;
            }
            Action::Suspend { job } => {
                let phase = self.jobs.get(job.index()).map(|j| j.phase);
                if !matches!(phase, Some(JobPhase::Started | JobPhase::Running)) {
                    return Err(self.bad(sched, &action, &format!("job is {phase:?}, not started")));
                }
                let ran = self.jobs[job.index()].run_started_ms.map_or(0, |s| now - s);
                let held = self.held_by(job);
                self.run_lost(job, held, ran);
                self.delete_pods(job, false);
                let j = &mut self.jobs[job.index()];
                j.phase = JobPhase::Suspended;
                j.members = 0;
                j.run_started_ms = None;
                j.started_ms = None;
                self.epochs[job.index()] += 1;
                self.out.push(SimEvent::JobSuspended { job });
            }
            Action::Fail { job } => {
                let phase = self.jobs.get(job.index()).map(|j| j.phase);
                if !matches!(phase, Some(JobPhase::Suspended | JobPhase::Started | JobPhase::Running)) {
                    return Err(self.bad(sched, &action, &format!("job is {phase:?}")));
                }
                self.finish(job, false);
            }
            Action::Grow { job, members } => {
                let j = self.jobs.get(job.index()).ok_or_else(|| self.bad(sched, &action, "no such job"))?;
                if !matches!(j.phase, JobPhase::Started | JobPhase::Running) {
                    return Err(self.bad(sched, &action, &format!("job is {:?}, not started", j.phase)));
                }
                if members <= j.members || members > j.spec.max_members {
                    return Err(self.bad(
                        sched,
                        &action,
                        "members not above the job's current count and within its max",
                    ));
                }
                self.jobs[job.index()].members = members;
                self.create_pods_of(job);
            }
            Action::Shrink { job, ref pods } => {
                let j = self.jobs.get(job.index()).ok_or_else(|| self.bad(sched, &action, "no such job"))?;
                let theirs = |p: &PodId| j.pods.contains(p) && self.pods[p.index()].phase.holds();
                if j.phase != JobPhase::Running || !pods.iter().all(theirs) {
                    return Err(self.bad(sched, &action, "the job is not running, or a pod is not one it runs"));
                }
                let distinct: std::collections::BTreeSet<_> = pods.iter().collect();
                if distinct.len() != pods.len() || j.members < j.spec.min_members + pods.len() as u32 {
                    return Err(self.bad(sched, &action, "it would run below its min"));
                }
                if !pods.iter().all(|p| j.in_last_set(self.pods[p.index()].index)) {
                    return Err(self.bad(sched, &action, "only pods of the job's last set are given back"));
                }
                for &pod in pods {
                    let phase = self.pods[pod.index()].phase;
                    self.release(pod);
                    self.end_pod(pod, false);
                    let j = &mut self.jobs[job.index()];
                    j.members -= 1;
                    j.ready -= u32::from(phase == PodPhase::Ready);
                    j.bound -= u32::from(matches!(phase, PodPhase::Starting | PodPhase::Ready));
                    self.out.push(SimEvent::PodFinished { pod, succeeded: false });
                }
                let (working, _) = self.working(job);
                self.rework(job, working);
            }
            Action::Evict { pod } => {
                let Some(p) = self.pods.get(pod.index()) else { return Err(self.bad(sched, &action, "no such pod")) };
                let phase = self.jobs[p.job.index()].phase;
                if !p.phase.holds() || !matches!(phase, JobPhase::Started | JobPhase::Running) {
                    return Err(self.bad(sched, &action, "the pod holds no room, or its job is not started"));
                }
                self.evict(pod);
            }
        }
        Ok(())
    }

    /// Has the Job controller make the job's missing pods (the current epoch's).
    fn create_pods_of(&mut self, job: JobId) {
        self.creating.push_back((job, self.epochs[job.index()]));
        if !self.tick_pending {
            self.tick_pending = true;
            self.push(self.now, Ev::CreateTick);
        }
    }

    /// Ends every pod of the job's current start: Ready pods succeed if `success`, others are deleted.
    fn delete_pods(&mut self, job: JobId, success: bool) {
        for k in 0..self.jobs[job.index()].pods.len() {
            let pod = self.jobs[job.index()].pods[k];
            let phase = self.pods[pod.index()].phase;
            if matches!(phase, PodPhase::Succeeded | PodPhase::Deleted) {
                continue;
            }
            if phase.holds() {
                self.release(pod);
            }
            let ok = success && phase == PodPhase::Ready;
            self.end_pod(pod, ok);
            self.out.push(SimEvent::PodFinished { pod, succeeded: ok });
        }
    }

    /// The pod succeeded (`ok`) or was deleted, counted on its job.
    fn end_pod(&mut self, pod: PodId, ok: bool) {
        let p = &mut self.pods[pod.index()];
        p.phase = if ok { PodPhase::Succeeded } else { PodPhase::Deleted };
        let j = &mut self.jobs[p.job.index()];
        if ok {
            j.succeeded += 1;
        } else {
            j.deleted += 1;
        }
    }

    fn finish(&mut self, job: JobId, success: bool) {
        self.delete_pods(job, success);
        self.end_job(job, success);
    }

    /// The job's run is over: its pods succeed now (their room is free at once) and the job is
    /// marked Complete `timing.jobCompleteDelay` later, when the Job controller syncs it.
    fn succeed(&mut self, job: JobId) {
        self.delete_pods(job, true);
        match self.workload.params.timing.job_complete_delay.0 {
            0 => self.end_job(job, true),
            delay => self.push(self.now + delay, Ev::JobComplete(job)),
        }
    }

    fn end_job(&mut self, job: JobId, success: bool) {
        let j = &mut self.jobs[job.index()];
        j.phase = if success { JobPhase::Succeeded } else { JobPhase::Failed };
        j.ended_ms = Some(self.now);
        self.epochs[job.index()] += 1;
        self.terminal += 1;
        self.out.push(SimEvent::JobFinished { job, succeeded: success });
    }

    /// Spreads the ends of the job's remaining pods over time (`timing.podEndSpread`): each pod
    /// after the first starts a new clump with probability `newClump`, an exponential gap after
    /// the previous one; a clump's pods end at the same instant. `success`: the run is over (the
    /// last pod completes the job); else the job has failed and its pods are deleted.
    fn spread_pod_ends(&mut self, job: JobId, success: bool) {
        let spread = self.workload.params.timing.pod_end_spread.expect("spread configured");
        let pods: Vec<PodId> = self.jobs[job.index()]
            .pods
            .iter()
            .copied()
            .filter(|p| !matches!(self.pods[p.index()].phase, PodPhase::Succeeded | PodPhase::Deleted))
            .collect();
        let mut at_us = self.now * 1000;
        for (k, &pod) in pods.iter().enumerate() {
            if k > 0 && self.spread_rng.unit() < spread.new_clump {
                at_us += (-(1.0 - self.spread_rng.unit()).ln() * spread.gap.0 as f64 * 1000.0) as i64;
            }
            self.push(at_us.div_euclid(1000), Ev::PodEnd(pod, success, success && k + 1 == pods.len()));
        }
        if pods.is_empty() && success {
            self.succeed(job);
        }
    }

    /// When a run started now and lasting `run` ms ends.
    fn run_end(&self, run: i64) -> i64 {
        let now = self.now;
        if self.workload.params.timing.run_ends_on_second {
            (now.div_euclid(1000) * 1000 + run.div_euclid(1000) * 1000).max(now)
        } else {
            now + run
        }
    }

    /// The constraints the pods the job holds now break (the job's own, its gangs'): the pods it
    /// covers lie in more than one domain of the constraint's level.
    fn broken_constraints(&self, job: JobId) -> impl Iterator<Item = &JobTopology> {
        let j = &self.jobs[job.index()];
        let spans = move |t: &JobTopology, sets: Option<&[usize]>| {
            let mut domains = (j.pods.iter().map(|p| &self.pods[p.index()]))
                .filter(|p| p.phase.holds() && sets.is_none_or(|s| s.contains(&j.set_index(p.index))))
                .filter_map(|p| p.node)
                .map(|n| self.nodes[n.index()].labels.get(&t.label));
            let first = domains.next();
            domains.any(|d| d != first.flatten())
        };
        let own = j.spec.topology.iter().filter(move |t| spans(t, None));
        let units = j.spec.units.iter().filter(move |u| spans(&u.topology, Some(&u.sets))).map(|u| &u.topology);
        own.chain(units)
    }

    /// The job's run time as its placement allows: longer by the largest span slowdown of the
    /// constraints its pods break (its traffic crosses that level's uplinks).
    fn placed_run_ms(&self, job: JobId) -> i64 {
        let spec = &self.jobs[job.index()].spec;
        let slowdown = self.broken_constraints(job).map(|t| t.span_slowdown).fold(1.0, f64::max);
        if slowdown > 1.0 { (spec.run_ms as f64 * slowdown).round() as i64 } else { spec.run_ms }
    }

    fn mark_running(&mut self, job: JobId) {
        let now = self.now;
        let spec = &self.jobs[job.index()].spec;
        let constrained = spec.topology.is_some() || !spec.units.is_empty();
        let spread = constrained.then(|| self.broken_constraints(job).next().is_some());
        self.jobs[job.index()].spread = spread;
        for k in 0..self.jobs[job.index()].pods.len() {
            let pod = self.jobs[job.index()].pods[k];
            if self.pods[pod.index()].phase.holds() {
                let index = self.pods[pod.index()].index;
                for (c, q) in self.clogged.iter_mut().zip(&self.jobs[job.index()].set_of(index).request) {
                    *c -= q;
                }
            }
        }
        if let Some(q) = self.jobs[job.index()].spec.queue {
            self.tenants.working(q, &self.held_by(job), true);
        }
        let j = &mut self.jobs[job.index()];
        j.run_started_ms = Some(now);
        j.phase = JobPhase::Running;
        self.out.push(SimEvent::JobRunning { job });
    }

    /// Whether any pod creation is still to come.
    fn creation_pending(&self) -> bool {
        !self.creating.is_empty() || !self.syncing.is_empty()
    }

    /// Pods the job's current start still lacks (0 once stale: suspended, failed, restarted).
    fn missing_pods(&self, job: JobId, epoch: u32) -> u32 {
        if self.epochs[job.index()] != epoch {
            0
        } else {
            self.jobs[job.index()].members.saturating_sub(self.view().live_pods(job))
        }
    }

    /// The Job controller (pkg/controller/job/job_controller.go, manageJob): up to
    /// `concurrentJobSyncs` jobs are synced at once; a sync creates the missing pods in slow-start
    /// batches of 1, 2, 4, ... (each batch's creates in parallel, the next batch once it is done).
    /// All create calls share the controller's client rate limiter, which serves them in request
    /// order: one call per create interval.
    fn fill_syncs(&mut self) {
        let window = self.workload.params.timing.concurrent_job_syncs as usize;
        while self.syncing.len() < window {
            let Some((job, epoch)) = self.creating.pop_front() else { break };
            if self.missing_pods(job, epoch) == 0 {
                continue;
            }
            self.syncing.push((job, epoch, 1, 1));
            self.create_calls.push_back((job, epoch));
        }
    }

    /// Creates the next pod: one create call of the rate limiter. Stale calls (their job was
    /// suspended or ended meanwhile) cost nothing and are skipped; returns whether a pod was made.
    fn create_one(&mut self) -> bool {
        self.fill_syncs();
        let Some((job, epoch)) = self.create_calls.pop_front() else {
            // Every live sync has its calls queued, so nothing is left.
            self.syncing.clear();
            return false;
        };
        let Some(k) = self.syncing.iter().position(|&(j, e, ..)| j == job && e == epoch) else { return false };
        let made = self.missing_pods(job, epoch) > 0;
        if made {
            let pod = PodId(self.pods.len() as u32);
            let j = &self.jobs[job.index()];
            let index = self.replacing[job.index()].pop().unwrap_or(j.pods.len() as u32);
            let created_ms = self.now;
            self.pods.push(PodState { job, index, phase: PodPhase::Pending, node: None, created_ms, ready_ms: None });
            self.jobs[job.index()].pods.push(pod);
            self.out.push(SimEvent::PodCreated { pod });
        }
        self.syncing[k].2 -= 1;
        let (left, size) = (self.syncing[k].2, self.syncing[k].3);
        if left == 0 || !made {
            let missing = self.missing_pods(job, epoch);
            if missing == 0 {
                self.syncing.remove(k);
                // Drop the stale calls of this sync, if any.
                self.create_calls.retain(|&(j, e)| !(j == job && e == epoch));
            } else if left == 0 {
                let batch = (size * 2).min(missing);
                self.syncing[k] = (job, epoch, batch, batch);
                self.create_calls.extend(std::iter::repeat_n((job, epoch), batch as usize));
            }
        }
        made
    }

    fn process(&mut self, ev: Ev) {
        let now = self.now;
        match ev {
            Ev::Arrive(job) => {
                self.jobs[job.index()].phase = JobPhase::Suspended;
                self.out.push(SimEvent::JobSubmitted { job });
            }
            Ev::CreateTick => {
                let interval = self.workload.params.timing.create_interval_ms();
                if interval == 0 {
                    while self.creation_pending() {
                        self.create_one();
                    }
                } else {
                    // Stale calls cost no API call: skip them within the same tick.
                    while self.creation_pending() && !self.create_one() {}
                }
                if !self.creation_pending() {
                    self.tick_pending = false;
                } else {
                    self.push(now + interval, Ev::CreateTick);
                }
            }
            Ev::BindDone(pod) => {
                if self.pods[pod.index()].phase != PodPhase::Binding {
                    return;
                }
                let p = &mut self.pods[pod.index()];
                p.phase = PodPhase::Starting;
                let (job, node) = (p.job, p.node.expect("binding pods have a node"));
                let j = &mut self.jobs[job.index()];
                j.bound += 1;
                if j.bound == j.members && self.scheduled[job.index()].is_none() {
                    self.scheduled[job.index()] = Some(now);
                }
                self.out.push(SimEvent::PodBound { pod, node });
                let delay = self.workload.params.timing.pod_start_delay.0;
                self.push(now + delay, Ev::PodReady(pod));
            }
            Ev::PodReady(pod) => {
                if self.pods[pod.index()].phase != PodPhase::Starting {
                    return;
                }
                self.pods[pod.index()].phase = PodPhase::Ready;
                self.pods[pod.index()].ready_ms = Some(now);
                let job = self.pods[pod.index()].job;
                // A pod of a failed job whose deletion is still to come (podEndSpread) starts
                // nothing: the Job is Failed already.
                if self.jobs[job.index()].phase.is_terminal() {
                    return;
                }
                let j = &mut self.jobs[job.index()];
                j.ready += 1;
                self.out.push(SimEvent::PodReady { pod });
                let j = &self.jobs[job.index()];
                let (ready, members, running) = (j.ready, j.members, j.run_started_ms.is_some());
                let run_ms = self.placed_run_ms(job);
                let j = &self.jobs[job.index()];
                // The work that scales with the count is the last set's: the sets before it do the
                // same work whatever the count (a launcher, a head), and must all be Ready.
                let fixed = j.fixed_members();
                let (min, max) = (j.spec.min_members - fixed, j.spec.max_members - fixed);
                let (working, _) = self.working(job);
                let quorum = self.at_quorum(job);
                match j.spec.run_starts {
                    RunStart::PodStart => {
                        let end = self.run_end(run_ms);
                        self.push(end, Ev::PodDone(pod));
                        if ready == members && !running {
                            self.mark_running(job);
                        }
                    }
                    RunStart::AllReady => {
                        let epoch = self.epochs[job.index()];
                        if !running && quorum {
                            // The work of max members for the run time, done by those ready: fewer
                            // members do it more slowly.
                            let left = run_ms * i64::from(max);
                            self.mark_running(job);
                            let end = self.run_end(left / i64::from(working));
                            self.work[job.index()] = Some(Work { left, rate: working, since: now, ends_at: end });
                            self.push(end, Ev::RunDone(job, epoch));
                        } else if running && min < max {
                            // An elastic job goes faster as members join; the later end is
                            // superseded (it finds the job over).
                            self.rework(job, working);
                        }
                    }
                }
            }
            Ev::PodDone(pod) => {
                if self.pods[pod.index()].phase != PodPhase::Ready {
                    return;
                }
                self.release(pod);
                self.end_pod(pod, true);
                self.out.push(SimEvent::PodFinished { pod, succeeded: true });
                let job = self.pods[pod.index()].job;
                if self.view().all_succeeded(job) {
                    self.succeed(job);
                }
            }
            Ev::RunDone(job, _) if self.work[job.index()].is_some_and(|w| w.ends_at > now) => {
                // A shrink moved the end later.
            }
            Ev::RunDone(job, epoch) | Ev::Deadline(job, epoch) => {
                if self.epochs[job.index()] == epoch && !self.jobs[job.index()].phase.is_terminal() {
                    let success = matches!(ev, Ev::RunDone(..));
                    if self.workload.params.timing.pod_end_spread.is_none() {
                        if success { self.succeed(job) } else { self.finish(job, false) }
                    } else {
                        // A failed Job is marked at its deadline, then its pods are deleted.
                        if !success {
                            self.end_job(job, false);
                        }
                        self.spread_pod_ends(job, success);
                    }
                }
            }
            Ev::PodEnd(pod, success, last) => {
                let phase = self.pods[pod.index()].phase;
                if matches!(phase, PodPhase::Succeeded | PodPhase::Deleted) {
                    return;
                }
                if phase.holds() {
                    self.release(pod);
                }
                let ok = success && phase == PodPhase::Ready;
                self.end_pod(pod, ok);
                self.out.push(SimEvent::PodFinished { pod, succeeded: ok });
                let job = self.pods[pod.index()].job;
                if last && !self.jobs[job.index()].phase.is_terminal() {
                    self.succeed(job);
                }
            }
            Ev::JobComplete(job) => {
                // A suspension meanwhile deleted no pod (all had succeeded): the Job completes.
                if !self.jobs[job.index()].phase.is_terminal() {
                    self.end_job(job, true);
                }
            }
            Ev::Wakeup => {
                self.wakeups.remove(&now);
            }
        }
    }

    fn deliver(&mut self, sched: &mut dyn Scheduler) {
        let mut evs = std::mem::take(&mut self.out);
        let view = self.view();
        for e in &evs {
            sched.on_event(e, &view, self.now);
        }
        evs.clear();
        self.out = evs;
    }

    /// Runs the workload to the end (every job terminal, nothing left to happen, or the horizon).
    pub fn run(mut self, sched: &mut dyn Scheduler, progress: bool) -> Result<RunRecord, SimError> {
        let name = sched.name();
        let horizon = self.workload.params.horizon_ms;
        let total = self.jobs.len();
        let show = progress && std::io::stderr().is_terminal();
        let mut horizon_hit = false;
        while let Some(t) = self.agenda.next_time(self.now) {
            if t > horizon {
                horizon_hit = true;
                self.account(horizon);
                self.now = horizon;
                break;
            }
            self.account(t);
            self.now = t;
            while let Some(ev) = self.agenda.pop(t) {
                self.events += 1;
                self.process(ev);
            }
            self.deliver(sched);
            let mut rounds = 0;
            loop {
                let actions = sched.decide(&self.view(), t);
                if actions.is_empty() {
                    break;
                }
                rounds += 1;
                if rounds > 1_000_000 {
                    return Err(SimError::BadAction {
                        scheduler: name,
                        action: "decide".into(),
                        reason: "kept returning actions at one instant".into(),
                    });
                }
                for a in actions {
                    self.apply(&name, a)?;
                }
                self.deliver(sched);
            }
            if self.terminal == total {
                break;
            }
            if let Some(w) = sched.next_wakeup() {
                let w = w.max(t + 1);
                if self.wakeups.insert(w) {
                    self.push(w, Ev::Wakeup);
                }
            }
            if show && self.events.is_multiple_of(8192) {
                eprint!("\r{name}: {}/{total} jobs done, simulated {} s   ", self.terminal, t / 1000);
                let _ = std::io::stderr().flush();
            }
        }
        if show {
            eprint!("\r{:70}\r", "");
        }
        let capacity = (0..self.resources.len()).map(|r| self.nodes.iter().map(|n| n.capacity[r]).sum()).collect();
        let estimates = sched.estimated_starts();
        let jobs = self
            .jobs
            .iter()
            .enumerate()
            .zip(&self.scheduled)
            .map(|((i, j), s)| JobRecord {
                class_index: j.spec.class_index,
                submit_ms: j.spec.submit_ms,
                scheduled_ms: *s,
                run_started_ms: j.run_started_ms,
                ended_ms: j.ended_ms,
                phase: j.phase,
                starts: j.starts,
                spread: j.spread,
                estimated_start_ms: estimates.and_then(|e| e.get(&JobId(i as u32)).copied()),
            })
            .collect();
        let reservations = self.reservations.into_record(&self.resources, sched.window_evictions());
        Ok(RunRecord {
            scheduler: name,
            jobs,
            end_ms: self.now,
            sample_ms: self.workload.params.sample_ms,
            capacity,
            resources: self.resources,
            held: self.held_buckets,
            clog: self.clog_total,
            events: self.events,
            suspensions: self.suspensions,
            horizon_hit,
            estimates: estimates.is_some(),
            tenants: self.tenants.into_record(),
            reservations,
            evictions: self.evictions,
        })
    }
}
