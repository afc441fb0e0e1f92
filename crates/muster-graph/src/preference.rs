//! Weighted topology preferences: a group that prefers several levels (one rack worth 10, one
//! block worth 3) and fits in no single domain of the innermost one. The candidates are the best
//! single domain of each level out, and for each weighted level the placement over the fewest of
//! its domains; the one kept places the most members, then scores highest. A placement's score
//! counts, per weighted level, the member pairs that share a domain of it, times its weight - the
//! gang form of pod affinity weights, which count pods already in a node's domain.

use std::collections::BTreeMap;

use crate::graph::{DomainId, Graph, VertexId};
use crate::jobspec::TopologyConstraint;
use crate::matcher::{Demand, Placement, Window, placed_units};
use crate::policy::Policy;

/// A candidate placement and the topology domain it is confined to.
struct Candidate {
    placement: Placement,
    confined: Option<VertexId>,
    units: u32,
    score: u128,
}

impl Graph {
    /// Searches as `search` does for a preferred constraint with weights; see the module comment.
    pub(crate) fn search_weighted(
        &self,
        d: &Demand,
        window: Window,
        policy: Policy,
        t: &TopologyConstraint,
        outward: &[String],
    ) -> (Placement, Option<VertexId>) {
        let mut best: Option<Candidate> = None;
        let mut consider = |placement: Placement, confined: Option<VertexId>| {
            let units = placed_units(&placement);
            if units < d.min_units || units == 0 {
                return;
            }
            let score = self.pair_score(&placement, d, &t.weights);
            // Ties keep the earlier candidate: the more confined one.
            if best.as_ref().is_none_or(|b| (units, score) > (b.units, b.score)) {
                best = Some(Candidate { placement, confined, units, score });
            }
        };
        for (i, level) in outward.iter().enumerate() {
            if let Some((p, v)) = self.search_level(level, None, d, window, policy) {
                if i == 0 && placed_units(&p) >= d.max_units {
                    // The whole group in one domain of the innermost level: every pair shares all.
                    return (p, Some(v));
                }
                consider(p, Some(v));
            }
        }
        let scopes: Vec<(DomainId, Option<VertexId>)> = match &t.within {
            Some(w) => self.level_domains(w).iter().map(|&(v, dom)| (dom, Some(v))).collect(),
            None => vec![(self.root_domain, None)],
        };
        for (scope, confined) in scopes {
            if self.domain_total_bound(scope, d, window) < u64::from(d.min_units) {
                continue;
            }
            for level in t.weights.keys() {
                consider(self.select_fewest_domains(scope, level, d, window), confined);
            }
            if confined.is_none() {
                consider(self.select_flat(scope, d, window, policy), None);
            }
        }
        best.map_or((Vec::new(), None), |b| (b.placement, b.confined))
    }

    /// Packs `d` into as few domains of `level` under `scope` as it can: the domains that take the
    /// most units first, each packed.
    fn select_fewest_domains(&self, scope: DomainId, level: &str, d: &Demand, window: Window) -> Placement {
        let outer = self.domain(scope).vertex;
        let mut domains: Vec<(u32, DomainId)> = self
            .level_domains(level)
            .iter()
            .filter(|&&(v, _)| outer.is_none_or(|o| self.encloses(o, v)))
            .map(|&(_, dom)| (self.candidates(dom, d, window).iter().map(|&(_, u)| u).sum::<u32>(), dom))
            .filter(|&(units, _)| units > 0)
            .collect();
        // Most room first; tree order breaks ties (a stable sort keeps it).
        domains.sort_by_key(|&(units, _)| std::cmp::Reverse(units));
        let mut placed = Placement::new();
        let mut rest = d.clone();
        for (_, dom) in domains {
            rest.max_units = d.max_units - placed_units(&placed);
            if rest.max_units == 0 {
                break;
            }
            placed.extend(self.select_pack(dom, &rest, window));
        }
        placed
    }

    /// Whether topology vertex `outer` is `inner` or one of its ancestors.
    fn encloses(&self, outer: VertexId, inner: VertexId) -> bool {
        let mut cur = Some(inner);
        while let Some(v) = cur {
            if v == outer {
                return true;
            }
            cur = self.vertex(v).parent;
        }
        false
    }

    /// Sum over the weighted levels of weight x member pairs sharing a domain of the level.
    fn pair_score(&self, p: &Placement, d: &Demand, weights: &BTreeMap<String, u32>) -> u128 {
        weights
            .iter()
            .map(|(level, &weight)| {
                let mut members: BTreeMap<VertexId, u128> = BTreeMap::new();
                for &(n, units) in p {
                    if let Some(v) = self.ancestor_at_level(n, level) {
                        *members.entry(v).or_default() += u128::from(d.members(units));
                    }
                }
                let pairs: u128 = members.values().map(|m| m * m.saturating_sub(1) / 2).sum();
                u128::from(weight) * pairs
            })
            .sum()
    }
}
