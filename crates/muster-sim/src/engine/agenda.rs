//! What is to happen, in the order it happens: by time, and at equal times in the order it was
//! scheduled, so a run is a pure function of its inputs. Three stores keep that order cheaply:
//! arrivals, all known at the start, in a sorted list (scheduled first, each comes first among
//! its instant's events); later events in a heap ordered by (time, sequence number); and events
//! scheduled for the current instant (a bind and a pod start under an instant control plane) in
//! a queue, since they come after every heap event of that instant, which was scheduled before
//! the instant began.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::iter::Peekable;
use std::vec::IntoIter;

use crate::scheduler::{JobId, PodId};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Ev {
    Arrive(JobId),
    CreateTick,
    BindDone(PodId),
    PodReady(PodId),
    PodDone(PodId),
    /// One pod of a job whose run ended (`true`: the job completes with the last one) or that
    /// failed (`false`) goes, when pod ends are spread out (`timing.podEndSpread`).
    PodEnd(PodId, bool, bool),
    RunDone(JobId, u32),
    Deadline(JobId, u32),
    /// The Job controller marks a job whose pods all succeeded Complete.
    JobComplete(JobId),
    Wakeup,
}

struct Entry {
    time: i64,
    seq: u64,
    ev: Ev,
}
impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.time, self.seq) == (o.time, o.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.time, self.seq).cmp(&(o.time, o.seq))
    }
}

/// The events still to happen.
pub(super) struct Agenda {
    /// (submit time, job), sorted.
    arrivals: Peekable<IntoIter<(i64, JobId)>>,
    heap: BinaryHeap<Reverse<Entry>>,
    seq: u64,
    /// Events scheduled for the current instant, in the order they were scheduled.
    now: VecDeque<Ev>,
}

impl Agenda {
    pub(super) fn new(arrivals: impl IntoIterator<Item = (i64, JobId)>) -> Self {
        let mut arrivals: Vec<(i64, JobId)> = arrivals.into_iter().collect();
        arrivals.sort_unstable();
        Agenda { arrivals: arrivals.into_iter().peekable(), heap: BinaryHeap::new(), seq: 0, now: VecDeque::new() }
    }

    /// Schedules `ev` at `time`, the current instant being `now`.
    pub(super) fn push(&mut self, now: i64, time: i64, ev: Ev) {
        if time == now {
            self.now.push_back(ev);
        } else {
            self.seq += 1;
            self.heap.push(Reverse(Entry { time, seq: self.seq, ev }));
        }
    }

    /// The instant of the next event: the current one `now` while events are due in it.
    pub(super) fn next_time(&mut self, now: i64) -> Option<i64> {
        if !self.now.is_empty() {
            return Some(now);
        }
        let heap = self.heap.peek().map(|Reverse(e)| e.time);
        let arrival = self.arrivals.peek().map(|&(t, _)| t);
        heap.into_iter().chain(arrival).min()
    }

    /// The next event of instant `t`, once the agenda has moved to it ([`Agenda::next_time`]).
    pub(super) fn pop(&mut self, t: i64) -> Option<Ev> {
        if let Some((_, job)) = self.arrivals.next_if(|&(a, _)| a == t) {
            return Some(Ev::Arrive(job));
        }
        if self.heap.peek().is_some_and(|Reverse(e)| e.time == t) {
            return self.heap.pop().map(|Reverse(e)| e.ev);
        }
        self.now.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every event in the order the agenda gives it, events scheduled while one is handled by
    /// `then` (time, event) included, as the engine's loop drains it.
    fn drain(agenda: &mut Agenda, then: impl Fn(i64, Ev) -> Vec<(i64, Ev)>) -> Vec<(i64, Ev)> {
        let (mut now, mut out) = (0, Vec::new());
        while let Some(t) = agenda.next_time(now) {
            now = t;
            while let Some(ev) = agenda.pop(t) {
                out.push((t, ev));
                for (time, e) in then(t, ev) {
                    agenda.push(now, time, e);
                }
            }
        }
        out
    }

    #[test]
    fn events_come_by_time_then_in_the_order_they_were_scheduled() {
        let (a, b) = (JobId(0), JobId(1));
        let mut agenda = Agenda::new([(5, b), (0, a), (5, a)]);
        agenda.push(0, 5, Ev::Wakeup);
        agenda.push(0, 3, Ev::CreateTick);
        // An arrival binds a pod now and schedules its run's end later; the pod's start follows
        // its bind at the same instant.
        let then = |t, ev| match ev {
            Ev::Arrive(j) => vec![(t, Ev::BindDone(PodId(j.0))), (9, Ev::RunDone(j, 0))],
            Ev::BindDone(p) => vec![(t, Ev::PodReady(p))],
            _ => vec![],
        };
        let got = drain(&mut agenda, then);
        assert_eq!(
            got,
            [
                (0, Ev::Arrive(a)),
                (0, Ev::BindDone(PodId(0))),
                (0, Ev::PodReady(PodId(0))),
                (3, Ev::CreateTick),
                // Arrivals first at their instant, in job order, then the heap's, then this
                // instant's own in the order they were scheduled.
                (5, Ev::Arrive(a)),
                (5, Ev::Arrive(b)),
                (5, Ev::Wakeup),
                (5, Ev::BindDone(PodId(0))),
                (5, Ev::BindDone(PodId(1))),
                (5, Ev::PodReady(PodId(0))),
                (5, Ev::PodReady(PodId(1))),
                (9, Ev::RunDone(a, 0)),
                (9, Ev::RunDone(a, 0)),
                (9, Ev::RunDone(b, 0)),
            ]
        );
    }
}
