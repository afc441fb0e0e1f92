//! A new configuration for the running engine (Queues, Cohorts, Reservations or PriorityClasses
//! changed): every group keeps its state and placement, and what follows from the configuration
//! is worked out again from them.

use super::{Engine, EngineError};
use crate::config::EngineConfig;

impl Engine {
    /// Takes `config` in place of the running configuration. The engine becomes what a restore
    /// of its own snapshot under `config` would be, on the nodes as it knows them now: groups
    /// keep their states and placements, a queue that groups still name and `config` leaves out
    /// is kept closed ([`EngineConfig::close_undefined_queues`]), reservation windows are made
    /// again on the nodes they held, and what it learned (run times, fair-share usage of the
    /// queues that remain) stays. A configuration the engine refuses changes nothing.
    pub fn reconfigure(&mut self, mut config: EngineConfig) -> Result<(), EngineError> {
        config.close_undefined_queues(self.groups.values().map(|g| &g.spec));
        let mut snap = self.snapshot();
        snap.usage.retain(|q, _| config.queues.iter().any(|c| c.name == *q));
        snap.config = config;
        snap.dirty = true;
        // Every unsatisfiable mark is checked again: a quota may have changed what can fit.
        snap.structure_version = self.structure_version + 1;
        let mut next = Engine::restore(self.graph.without_allocations(), snap)?;
        // What a snapshot leaves out and is still true of the same nodes and groups.
        next.deferred_reshapes = std::mem::take(&mut self.deferred_reshapes);
        next.leaving = std::mem::take(&mut self.leaving);
        next.leaving_for = self.leaving_for.take();
        next.last_stats = self.last_stats;
        next.settle_repeat_misfits = self.settle_repeat_misfits;
        next.compare_by_size = self.compare_by_size;
        *self = next;
        Ok(())
    }
}
