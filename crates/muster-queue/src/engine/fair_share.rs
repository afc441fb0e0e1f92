//! Time and fair share: the engine's clock, each queue's decayed usage history, and the
//! dominant-resource share the cycle orders queues by.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Engine, EngineError};
use crate::group::GroupKey;

/// Per-queue accounting.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueUsage {
    /// Past usage in resource-seconds, decayed by the half-life (f64 bits, for exact round trips).
    #[serde(with = "f64_bits")]
    pub decayed: BTreeMap<String, f64>,
    pub last_update: i64,
}

mod f64_bits {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(m: &BTreeMap<String, f64>, s: S) -> Result<S::Ok, S::Error> {
        m.iter().map(|(k, v)| (k.clone(), v.to_bits())).collect::<BTreeMap<String, u64>>().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, f64>, D::Error> {
        Ok(BTreeMap::<String, u64>::deserialize(d)?.into_iter().map(|(k, v)| (k, f64::from_bits(v))).collect())
    }
}

impl Engine {
    /// Moves the clock forward (never back) and accrues decayed usage.
    pub(super) fn advance(&mut self, now: i64) -> i64 {
        if now <= self.now {
            return self.now;
        }
        let h = self.config.fair_share_half_life_s;
        for (q, hist) in &mut self.usage_hist {
            if h > 0 && now > hist.last_update {
                let dt = (now - hist.last_update) as f64;
                let f = (-dt / h as f64).exp2();
                let scale = h as f64 / std::f64::consts::LN_2 * (1.0 - f);
                for v in hist.decayed.values_mut() {
                    *v *= f;
                }
                if let Some(u) = self.usage.get(q) {
                    for (r, amount) in u {
                        *hist.decayed.entry(r.clone()).or_insert(0.0) += *amount as f64 * scale;
                    }
                }
            }
            hist.last_update = now;
        }
        self.now = now;
        now
    }

    /// Adds past usage (resource-seconds at time `at`, e.g. from the store's history) to a queue.
    pub fn add_usage_history(
        &mut self,
        queue: &str,
        resource_seconds: &BTreeMap<String, f64>,
        at: i64,
        now: i64,
    ) -> Result<(), EngineError> {
        let now = self.advance(now);
        if !self.compiled.queues.contains_key(queue) {
            return Err(self.unknown_queue_err(&GroupKey::new("", ""), queue));
        }
        let h = self.config.fair_share_half_life_s;
        let f = if h > 0 { (-((now - at).max(0) as f64) / h as f64).exp2() } else { 0.0 };
        let hist = self.usage_hist.entry(queue.to_string()).or_default();
        for (r, v) in resource_seconds {
            *hist.decayed.entry(r.clone()).or_insert(0.0) += v * f;
        }
        Ok(())
    }

    /// Dominant-resource share of a queue divided by its weight: the largest, over resources, of
    /// (recent average use + current use) / cluster capacity.
    pub fn fair_share(&self, queue: &str) -> f64 {
        let (cap, _) = self.graph.graph.totals();
        let h = self.config.fair_share_half_life_s;
        let weight = self.config.queues[self.compiled.queues[queue].index].fair_share_weight;
        let mut share: f64 = 0.0;
        let mut consider = |r: &str, amount: f64| {
            if r == "pods" {
                return;
            }
            if let Some(id) = self.graph.graph.resources.get(r) {
                let c = cap[id.index()];
                if c > 0 {
                    share = share.max(amount / c as f64);
                }
            }
        };
        let mut amounts: BTreeMap<&str, f64> = BTreeMap::new();
        if let Some(u) = self.usage.get(queue) {
            for (r, a) in u {
                *amounts.entry(r).or_insert(0.0) += *a as f64;
            }
        }
        if h > 0
            && let Some(hist) = self.usage_hist.get(queue)
        {
            for (r, v) in &hist.decayed {
                *amounts.entry(r).or_insert(0.0) += v * std::f64::consts::LN_2 / h as f64;
            }
        }
        for (r, a) in amounts {
            consider(r, a);
        }
        share / weight
    }
}
