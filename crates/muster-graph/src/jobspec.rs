//! What a group asks for: the Kubernetes-shaped group form, and Flux jobspec version 1, both turned
//! into one `GroupRequest`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::dra::DeviceRequest;
use crate::error::InputError;
use crate::filter::NodeFilter;
use crate::policy::Policy;

mod flux;
mod form;

/// Most members one group may ask for.
pub const MAX_MEMBERS: u32 = 1_000_000;
/// Longest duration a group may declare: ten years, in seconds.
pub const MAX_DURATION: u64 = 10 * 365 * 24 * 3600;

/// Whether a topology constraint must hold or is only preferred.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConstraintMode {
    Required,
    Preferred,
}

/// All members within one domain of `level` (rack, block, zone, ...).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologyConstraint {
    pub level: String,
    pub mode: ConstraintMode,
    /// For a preferred constraint: a level enclosing `level` that the members must share even
    /// when `level` cannot hold them (prefer one rack, require one block). Absent: a preferred
    /// constraint falls back to the whole cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within: Option<String>,
    /// For a preferred constraint: several levels, `level` (the innermost) among them, with what
    /// sharing a domain of each is worth (1..=100, as pod affinity weights). When no domain of
    /// `level` holds the group, the placement kept is the one where the most member pairs share a
    /// domain, each level's share counted by its weight. Empty: the first level out that holds the
    /// group wins.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub weights: BTreeMap<String, u32>,
}

/// The largest weight of a weighted topology preference, as for pod affinity terms.
pub const MAX_TOPOLOGY_WEIGHT: u32 = 100;

impl TopologyConstraint {
    /// All members within one domain of `level`.
    pub fn required(level: impl Into<String>) -> Self {
        Self { level: level.into(), mode: ConstraintMode::Required, within: None, weights: BTreeMap::new() }
    }

    /// Members within one domain of `level` where they fit, else of the next level out.
    pub fn preferred(level: impl Into<String>) -> Self {
        Self { level: level.into(), mode: ConstraintMode::Preferred, within: None, weights: BTreeMap::new() }
    }

    /// The rules that hold on any cluster: a required constraint is kept within nothing else and
    /// has no weights; a preferred one weighs each level 1..=100, its own level included. Err
    /// says what to write instead. (Which levels exist, and their order, the matcher checks.)
    pub fn check_shape(&self) -> Result<(), String> {
        if self.mode == ConstraintMode::Required {
            if let Some(within) = &self.within {
                return Err(format!(
                    "a required {:?} constraint cannot also be kept within {within:?}; require one level, or prefer \
                     {:?} within {within:?}",
                    self.level, self.level
                ));
            }
            if !self.weights.is_empty() {
                return Err(format!(
                    "weights rank preferred levels; a required {:?} constraint has none (prefer it instead)",
                    self.level
                ));
            }
            return Ok(());
        }
        if let Some((level, w)) = self.weights.iter().find(|(_, w)| !(1..=MAX_TOPOLOGY_WEIGHT).contains(*w)) {
            return Err(format!("weight {w} of {level:?} is out of range; allowed 1..={MAX_TOPOLOGY_WEIGHT}"));
        }
        if !self.weights.is_empty() && !self.weights.contains_key(&self.level) {
            return Err(format!(
                "the weights leave out {:?}, the innermost preferred level; give it a weight too",
                self.level
            ));
        }
        Ok(())
    }
}

/// Whole sockets of one node per member (Flux `slot > socket[count] > ...`): the member holds
/// each socket exclusively and needs at least `requests` inside each.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SocketRequest {
    pub count: u32,
    /// Within each socket, in base units, by Kubernetes resource name.
    pub requests: Vec<(String, u64)>,
}

/// One set of alike members within a group of several (a launcher and its workers, a head and
/// each worker group, a prefill and a decode gang): what one member asks, where it may run, and
/// the domain its members must (or would rather) share inside the group's. A set whose minimum
/// is 0 is optional: a gang of its own that the group starts without and takes on later, all
/// `max` members at once or none (k of n alike replicas: the first k required, the rest
/// optional).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberSet {
    pub name: String,
    #[serde(rename = "min")]
    pub min_members: u32,
    #[serde(rename = "max")]
    pub max_members: u32,
    /// Per member, in base units, by Kubernetes resource name.
    pub requests: Vec<(String, u64)>,
    /// Per member, published devices picked by selectors (Dynamic Resource Allocation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceRequest>,
    #[serde(flatten)]
    pub filter: NodeFilter,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<TopologyConstraint>,
}

impl MemberSet {
    /// The one unnamed set a group of alike members is.
    pub fn alike(min_members: u32, max_members: u32, requests: &[(String, u64)], filter: &NodeFilter) -> Self {
        Self {
            name: String::new(),
            min_members,
            max_members,
            requests: requests.to_vec(),
            devices: Vec::new(),
            filter: filter.clone(),
            topology: None,
        }
    }
}

/// Sets of a group that are a gang of their own inside it, kept within one domain of their own
/// (a prefill leader and its workers in one rack, a decode leader and its workers in another,
/// both in one block): the third level of a gang of gangs, between the group and its sets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubGroup {
    pub name: String,
    /// The names of its sets; a set belongs to at most one sub-group.
    pub sets: Vec<String>,
    pub topology: TopologyConstraint,
}

/// A group of members to place all at once: alike, or in several [`MemberSet`]s. Its serde form
/// is how muster stores a group (muster-queue's GroupSpec); users write the jobspecs `parse` reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupRequest {
    pub name: String,
    #[serde(rename = "min")]
    pub min_members: u32,
    #[serde(rename = "max")]
    pub max_members: u32,
    /// Per member, in base units, by Kubernetes resource name.
    pub requests: Vec<(String, u64)>,
    /// Per member, published devices picked by selectors (Dynamic Resource Allocation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceRequest>,
    #[serde(flatten)]
    pub filter: NodeFilter,
    /// Exactly this many members on each node used, each node distinct (Flux `node > slot`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members_per_node: Option<u32>,
    /// Whole nodes: nothing else may run beside the group on a node it uses.
    #[serde(default)]
    pub exclusive: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<TopologyConstraint>,
    /// Whole sockets per member; `requests` then holds their sum (the least a member takes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sockets: Option<SocketRequest>,
    /// Expected run time in seconds with all `max_members` members; None means until cancelled.
    /// An elastic group placed with fewer does the same work on fewer members
    /// ([`GroupRequest::run_time_with`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<u64>,
    /// Overrides the matcher's default policy for this group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<Policy>,
    /// An elastic group that may give back members above its minimum while it runs, so that the
    /// first group in line starts sooner (it then runs longer, as `run_time_with` says).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shrinkable: bool,
    /// Members that differ, set by set (see [`GroupRequest::with_sets`]); empty for a group of
    /// alike members, which the fields above describe.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sets: Vec<MemberSet>,
    /// Sets kept together within a domain of their own (see [`GroupRequest::with_subgroups`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subgroups: Vec<SubGroup>,
    /// Calendar reservations (by name) whose set-aside room this group may use: their spans do
    /// not hold room against it (see `ResourceGraph::set_aside_nodes`). The queue engine fills
    /// it in from the group's queue and namespace; whatever a submitted group says is replaced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reservations: Vec<String>,
}

/// Why a group's sets cannot be placed as given, with the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct SetError {
    /// The set's field at fault, such as `sets[1].members`.
    pub path: String,
    pub message: String,
}

impl GroupRequest {
    /// A group of `sets`, members numbered set after set (each set takes `max` numbers, so a
    /// member's set never changes as others come and go). Any set may be elastic; how a member
    /// count splits over them is [`GroupRequest::member_steps`]. The group's own bounds become
    /// the sums, its `requests` the most any set's member asks (a bound for whatever reads one
    /// member's size), and its own filter must be empty: each set says where its members run.
    pub fn with_sets(mut self, sets: Vec<MemberSet>) -> Result<Self, SetError> {
        let err = |i: usize, field: &str, message: String| SetError { path: format!("sets[{i}].{field}"), message };
        if sets.is_empty() {
            return Err(SetError { path: "sets".into(), message: "a group of sets needs at least one set".into() });
        }
        let mut names = BTreeSet::new();
        let (mut min, mut max) = (0u64, 0u64);
        for (i, s) in sets.iter().enumerate() {
            if s.name.is_empty() || !names.insert(s.name.as_str()) {
                return Err(err(i, "name", format!("{:?}: each set needs a name of its own", s.name)));
            }
            if s.max_members == 0 || s.min_members > s.max_members {
                return Err(err(
                    i,
                    "members",
                    format!("{}..{} is not a range of at least 1", s.min_members, s.max_members),
                ));
            }
            min += u64::from(s.min_members);
            max += u64::from(s.max_members);
        }
        if max > u64::from(MAX_MEMBERS) {
            return Err(SetError {
                path: "sets".into(),
                message: format!("{max} members in all; at most {MAX_MEMBERS}"),
            });
        }
        if min == 0 {
            return Err(SetError {
                path: "sets".into(),
                message: "every set is optional, so the group could start with nothing; make at least one set \
                          required"
                    .into(),
            });
        }
        if self.shrinkable && min == max {
            return Err(SetError { path: "shrinkable".into(), message: SHRINKABLE_NEEDS_ELASTIC.into() });
        }
        if self.sockets.is_some() || self.members_per_node.is_some() {
            return Err(SetError {
                path: "sets".into(),
                message: "sockets and members per node are for groups of alike members; drop them or the sets".into(),
            });
        }
        let mut most: BTreeMap<String, u64> = BTreeMap::new();
        for (r, a) in sets.iter().flat_map(|s| &s.requests) {
            let e = most.entry(r.clone()).or_default();
            *e = (*e).max(*a);
        }
        (self.min_members, self.max_members) = (min as u32, max as u32);
        self.requests = most.into_iter().collect();
        self.filter = NodeFilter::default();
        self.sets = sets;
        Ok(self)
    }

    /// The group's sets gathered into `subgroups`, each kept within one domain of its topology
    /// level (inside the group's). Every set a sub-group names must exist, and belong to no other.
    pub fn with_subgroups(mut self, subgroups: Vec<SubGroup>) -> Result<Self, SetError> {
        let err =
            |i: usize, field: &str, message: String| SetError { path: format!("subgroups[{i}].{field}"), message };
        if !subgroups.is_empty() && self.sets.is_empty() {
            return Err(SetError {
                path: "subgroups".into(),
                message: "sub-groups gather sets; give the group sets, or drop its sub-groups".into(),
            });
        }
        let (mut names, mut taken) = (BTreeSet::new(), BTreeMap::new());
        for (i, g) in subgroups.iter().enumerate() {
            if g.name.is_empty() || !names.insert(g.name.as_str()) {
                return Err(err(i, "name", format!("{:?}: each sub-group needs a name of its own", g.name)));
            }
            if g.sets.is_empty() {
                return Err(err(i, "sets", "a sub-group needs at least one set".into()));
            }
            if g.sets.iter().all(|name| self.sets.iter().any(|s| s.name == *name && s.min_members == 0)) {
                return Err(err(
                    i,
                    "sets",
                    "every set of the sub-group is optional; make one of them required, or leave the sub-group out"
                        .into(),
                ));
            }
            for (j, set) in g.sets.iter().enumerate() {
                if !self.sets.iter().any(|s| s.name == *set) {
                    return Err(err(i, &format!("sets[{j}]"), format!("{set:?} is not a set of this group")));
                }
                if let Some(other) = taken.insert(set.as_str(), g.name.as_str()) {
                    return Err(err(
                        i,
                        &format!("sets[{j}]"),
                        format!("set {set:?} is in sub-group {other:?} already; a set belongs to one sub-group"),
                    ));
                }
            }
        }
        self.subgroups = subgroups;
        Ok(self)
    }

    /// The sub-group set `k` belongs to, if any.
    pub fn subgroup_of(&self, k: usize) -> Option<&SubGroup> {
        let name = &self.sets.get(k)?.name;
        self.subgroups.iter().find(|g| g.sets.contains(name))
    }

    /// The group's sets: its own, or the one set of alike members its fields describe.
    pub fn member_sets(&self) -> std::borrow::Cow<'_, [MemberSet]> {
        if !self.sets.is_empty() {
            return std::borrow::Cow::Borrowed(&self.sets);
        }
        let mut alike = MemberSet::alike(self.min_members, self.max_members, &self.requests, &self.filter);
        alike.devices.clone_from(&self.devices);
        std::borrow::Cow::Owned(vec![alike])
    }

    /// The set member `index` belongs to (by position), and the number of that set's first member;
    /// (0, 0) for alike members.
    pub fn set_of(&self, index: u32) -> (usize, u32) {
        let mut first = 0u32;
        for (k, s) in self.sets.iter().enumerate() {
            if index < first.saturating_add(s.max_members) || k + 1 == self.sets.len() {
                return (k, first);
            }
            first = first.saturating_add(s.max_members);
        }
        (0, 0)
    }

    /// The numbers of the members of the set named `name`, if the group has such a set.
    pub fn set_members(&self, name: &str) -> Option<std::ops::Range<u32>> {
        let k = self.sets.iter().position(|s| s.name == name)?;
        let first: u32 = self.sets[..k].iter().map(|s| s.max_members).sum();
        Some(first..first + self.sets[k].max_members)
    }

    /// Whether the members `held` meet the group's minimum: each set's share of it, for a group of
    /// sets (a group that lost its launcher has too few, whatever its workers).
    pub fn meets_minimum(&self, held: impl IntoIterator<Item = u32>) -> bool {
        let counts = self.held_per_set(held);
        counts.iter().zip(self.split(self.min_members)).enumerate().all(|(k, (n, min))| *n >= self.least_of(k, min))
    }

    /// The fewest members set `k` may hold when its share of the group's minimum is `min`: at
    /// least 1, but for an optional set, which may hold none.
    fn least_of(&self, k: usize, min: u32) -> u32 {
        if self.is_optional(k) { min } else { min.max(1) }
    }

    /// Whether set `k` is optional (its minimum is 0): placed with all its members or none.
    pub fn is_optional(&self, k: usize) -> bool {
        self.sets.get(k).is_some_and(|s| s.min_members == 0)
    }

    /// The most members, at most `members`, that take each optional set whole or not at all:
    /// `members` cut back to the last whole step of [`GroupRequest::member_steps`].
    pub fn whole_count(&self, members: u32) -> u32 {
        let mut left = members;
        for (k, n) in self.member_steps() {
            if left == 0 || (left < n && self.is_optional(k)) {
                break;
            }
            left -= n.min(left);
        }
        members - left
    }

    /// `chosen` of the members `held`, with every held member of each optional set that one of
    /// them is in: an optional set is given back whole, never left part-placed.
    pub fn with_whole_sets(&self, chosen: BTreeSet<u32>, held: impl IntoIterator<Item = u32>) -> BTreeSet<u32> {
        let touched: BTreeSet<usize> =
            chosen.iter().map(|&i| self.set_of(i).0).filter(|&k| self.is_optional(k)).collect();
        let mut all = chosen;
        all.extend(held.into_iter().filter(|&i| touched.contains(&self.set_of(i).0)));
        all
    }

    /// How many of the members `held` each set has.
    pub fn held_per_set(&self, held: impl IntoIterator<Item = u32>) -> Vec<u32> {
        let mut counts = vec![0u32; self.sets.len().max(1)];
        for index in held {
            counts[self.set_of(index).0] += 1;
        }
        counts
    }

    /// What member `index` asks, per member, by resource name.
    pub fn member_requests(&self, index: u32) -> &[(String, u64)] {
        self.set_requests_of(self.set_of(index).0)
    }

    /// What one member of set `k` asks, by resource name (of alike members: `requests`).
    pub fn set_requests_of(&self, k: usize) -> &[(String, u64)] {
        self.sets.get(k).map_or(&self.requests, |s| &s.requests)
    }

    /// The order in which a group's members are counted, as (set, members) steps: every set's
    /// minimum, set by set, then the rest of each set up to its maximum, set by set, and the last
    /// set takes whatever lies beyond (a group resized past its sets). A member count splits over
    /// the sets along these steps ([`GroupRequest::split`]): a group below its maximum is short of
    /// its later sets' extra members, so the extra members of a set listed earlier come first,
    /// whether a quota caps the group, it grows, or it gives members back.
    pub fn member_steps(&self) -> Vec<(usize, u32)> {
        let Some(last) = self.sets.len().checked_sub(1) else { return vec![(0, u32::MAX)] };
        let minimums = self.sets.iter().enumerate().map(|(k, s)| (k, s.min_members));
        let extras = self.sets.iter().enumerate().map(|(k, s)| (k, s.max_members - s.min_members));
        minimums.chain(extras).filter(|(_, n)| *n > 0).chain([(last, u32::MAX)]).collect()
    }

    /// How `members` members split over the group's sets (one count for alike members), along
    /// [`GroupRequest::member_steps`].
    pub fn split(&self, members: u32) -> Vec<u32> {
        let mut counts = vec![0u32; self.sets.len().max(1)];
        let mut left = members;
        for (k, n) in self.member_steps() {
            let take = n.min(left);
            counts[k] += take;
            left -= take;
        }
        counts
    }

    /// Each set's bounds within the group's: its share of the group's min and of its max.
    pub fn set_bounds_within(&self) -> Vec<(u32, u32)> {
        self.split(self.min_members).into_iter().zip(self.split(self.max_members)).collect()
    }

    /// What the group asks in all with `members` members, by resource name, split over its sets
    /// as [`GroupRequest::split`] says.
    pub fn requests_with(&self, members: u32) -> BTreeMap<String, u64> {
        let mut total: BTreeMap<String, u64> = BTreeMap::new();
        for (k, count) in self.split(members).into_iter().enumerate() {
            for (r, a) in self.set_requests_of(k) {
                let e = total.entry(r.clone()).or_default();
                *e = e.saturating_add(a.saturating_mul(u64::from(count)));
            }
        }
        total
    }

    /// The set a running group with the members `held` grows next, and by how many members at
    /// most: the first set, in the group's order, below its share of the group's max.
    pub fn growing_set(&self, held: impl IntoIterator<Item = u32>) -> Option<(usize, u32)> {
        let counts = self.held_per_set(held);
        (counts.iter().zip(self.split(self.max_members)).enumerate())
            .find_map(|(k, (&n, max))| (n < max).then_some((k, max - n)))
    }

    /// Of the members `held`, those above each set's share of the group's minimum, in the order
    /// to give them back: [`GroupRequest::member_steps`] backwards (the later sets' extra members
    /// first), the highest index first within a set.
    pub fn surplus(&self, held: impl IntoIterator<Item = u32>) -> Vec<u32> {
        let mut by_set: Vec<Vec<u32>> = vec![Vec::new(); self.sets.len().max(1)];
        for index in held {
            by_set[self.set_of(index).0].push(index);
        }
        let minimums = self.split(self.min_members);
        let mut surplus = Vec::new();
        for (k, mut members) in by_set.into_iter().enumerate().rev() {
            members.sort_unstable_by(|a, b| b.cmp(a));
            let extra = members.len().saturating_sub(self.least_of(k, minimums[k]) as usize);
            surplus.extend(members.into_iter().take(extra));
        }
        surplus
    }

    /// The devices one member of set `k` asks for (of alike members: `devices`).
    pub fn set_devices_of(&self, k: usize) -> &[DeviceRequest] {
        self.sets.get(k).map_or(&self.devices, |s| &s.devices)
    }

    /// The request for set `k` alone: its share of the group's bounds, its requests, the group's
    /// other terms.
    pub fn set_request(&self, k: usize) -> GroupRequest {
        let s = &self.member_sets()[k];
        let mut r = self.clone();
        r.name = if s.name.is_empty() { self.name.clone() } else { format!("{}/{}", self.name, s.name) };
        (r.min_members, r.max_members) = self.set_bounds_within()[k];
        r.requests.clone_from(&s.requests);
        r.devices.clone_from(&s.devices);
        r.filter.clone_from(&s.filter);
        r.topology = if self.sets.is_empty() { self.topology.clone() } else { s.topology.clone() };
        r.sets = Vec::new();
        r.subgroups = Vec::new();
        r
    }

    /// Expected run time with `members` members: the duration, stretched by max / members for an
    /// elastic group placed with fewer than max (its work is spread over fewer members, as for
    /// data-parallel training or a malleable MPI job). Rounded up: a plan must not end early.
    pub fn run_time_with(&self, members: u32) -> Option<u64> {
        self.duration.map(|d| self.stretched(d, members))
    }

    /// `run_time` (with all `max_members`) stretched to `members` members, as
    /// [`GroupRequest::run_time_with`] stretches the duration.
    pub fn stretched(&self, run_time: u64, members: u32) -> u64 {
        if members >= self.max_members {
            // All of them (the common case, and every rigid group): nothing to stretch.
            return run_time;
        }
        let (max, members) = (self.sharing_work(self.max_members), self.sharing_work(members));
        if members == 0 || members >= max {
            return run_time;
        }
        (u128::from(run_time) * u128::from(max)).div_ceil(u128::from(members)).min(u128::from(MAX_DURATION)) as u64
    }

    /// Of `members` members (counted along [`GroupRequest::member_steps`]), those whose number
    /// spreads the group's work: the members of its elastic sets. The rigid sets (a launcher, a
    /// head) do the same work whatever the count, and optional sets (replicas beyond a k of n
    /// gang's k) serve beside the rest rather than take a share of its work. So the run time
    /// never grows with more members: a plan made for the fewest holds for any more.
    fn sharing_work(&self, members: u32) -> u32 {
        (self.split(members).into_iter().zip(self.set_bounds_within()).enumerate())
            .filter(|&(k, (_, (min, max)))| min < max && !self.is_optional(k))
            .map(|(_, (n, _))| n)
            .sum()
    }

    /// The same request allowed at most `max` members (a quota or start window narrowed it), cut
    /// back to whole optional sets ([`GroupRequest::whole_count`]): its duration becomes the run
    /// time with that max, so that the work stays the same.
    pub fn narrowed_to(&self, max: u32) -> GroupRequest {
        let mut r = self.clone();
        r.narrow_to(max);
        r
    }

    /// [`GroupRequest::narrowed_to`] in place.
    pub fn narrow_to(&mut self, max: u32) {
        let max = self.whole_count(max).max(self.min_members);
        self.duration = self.run_time_with(max);
        self.set_bounds(self.min_members, max);
    }

    /// Sets the group's member bounds. Its sets keep theirs (they number the members), and each
    /// takes its share of the group's ([`GroupRequest::set_bounds_within`]); a max beyond the sets'
    /// sum widens the last set.
    pub fn set_bounds(&mut self, min: u32, max: u32) {
        let declared: u32 = self.sets.iter().map(|s| s.max_members).sum();
        if let Some(last) = self.sets.last_mut()
            && max > declared
        {
            last.max_members += max - declared;
        }
        (self.min_members, self.max_members) = (min, max);
    }

    /// Whether `other` asks the same as this request but for its member counts: the group's and
    /// its last set's (the one set that can be resized without renumbering the others' members).
    pub fn same_but_counts(&self, other: &GroupRequest) -> bool {
        let counts_erased = |r: &GroupRequest| {
            let mut r = r.clone();
            r.set_bounds(0, 0);
            if let Some(last) = r.sets.last_mut() {
                (last.min_members, last.max_members) = (0, 0);
            }
            r
        };
        counts_erased(self) == counts_erased(other)
    }

    /// A rigid group of `members` with the given per-member requests, no constraints.
    pub fn simple(name: &str, members: u32, requests: &[(&str, u64)]) -> Self {
        Self {
            name: name.to_string(),
            min_members: members,
            max_members: members,
            requests: requests.iter().map(|(r, a)| (r.to_string(), *a)).collect(),
            devices: Vec::new(),
            filter: NodeFilter::default(),
            members_per_node: None,
            exclusive: false,
            topology: None,
            sockets: None,
            duration: None,
            policy: None,
            shrinkable: false,
            sets: Vec::new(),
            subgroups: Vec::new(),
            reservations: Vec::new(),
        }
    }
}

/// A count: an integer or a min/max range.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged, expecting = "a whole number such as 4, or a range such as {min: 2, max: 8}")]
pub enum Count {
    Exact(i64),
    Range {
        min: i64,
        #[serde(default)]
        max: Option<i64>,
        #[serde(default)]
        operator: Option<String>,
        #[serde(default)]
        operand: Option<i64>,
    },
}

impl Count {
    /// Returns (min, max) after range checks; `path` names the field in errors.
    fn bounds(&self, file: &str, path: &str) -> Result<(u32, u32), InputError> {
        let check = |v: i64, what: &str| {
            if v < 1 || v > i64::from(MAX_MEMBERS) {
                Err(InputError::new(file, path, format!("{what} {v} is out of range; allowed 1..={MAX_MEMBERS}")))
            } else {
                Ok(v as u32)
            }
        };
        match self {
            Count::Exact(n) => {
                let n = check(*n, "count")?;
                Ok((n, n))
            }
            Count::Range { min, max, operator, operand } => {
                if operator.as_deref().is_some_and(|o| o != "+") || operand.is_some_and(|o| o != 1) {
                    return Err(InputError::new(file, path, "only operator \"+\" with operand 1 is supported"));
                }
                let lo = check(*min, "min")?;
                let hi = check(max.unwrap_or(*min), "max")?;
                if hi < lo {
                    return Err(InputError::new(file, path, format!("max {hi} is below min {lo}")));
                }
                Ok((lo, hi))
            }
        }
    }
}

fn check_duration(file: &str, path: &str, seconds: f64) -> Result<Option<u64>, InputError> {
    if !seconds.is_finite() || seconds < 0.0 || seconds > MAX_DURATION as f64 {
        return Err(InputError::new(
            file,
            path,
            format!("{seconds} is out of range; allowed 0..={MAX_DURATION} seconds (0 = unlimited)"),
        ));
    }
    Ok(if seconds == 0.0 { None } else { Some(seconds.ceil() as u64) })
}

/// Parses a group request: Flux jobspec when the document has `version`, else the group form.
pub fn parse(file: &str, text: &str) -> Result<GroupRequest, InputError> {
    let doc: serde_yaml_ng::Value = InputError::parse_yaml(file, text)?;
    let is_flux = doc.as_mapping().is_some_and(|m| m.contains_key("version"));
    if is_flux {
        let spec: flux::FluxJobspec = InputError::parse_yaml(file, text)?;
        flux::from_flux(file, &spec)
    } else {
        let form: form::GroupForm = InputError::parse_yaml(file, text)?;
        form::from_form(file, &form)
    }
}

/// Why a rigid group cannot be shrinkable, with the fix.
pub const SHRINKABLE_NEEDS_ELASTIC: &str =
    "only an elastic group gives back members while it runs; give it fewer min than max members, or drop shrinkable";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_form_parses() {
        let g = parse(
            "g.yaml",
            "name: train\nmembers: {min: 4, max: 8}\nresources: {cpu: 2, memory: 2Gi, nvidia.com/gpu: 1}\n\
             topology: {level: rack, mode: required}\nduration: 600\n",
        )
        .unwrap();
        assert_eq!((g.min_members, g.max_members), (4, 8));
        assert!(g.requests.contains(&("cpu".to_string(), 2000)));
        assert!(g.requests.contains(&("memory".to_string(), 2 << 30)));
        assert_eq!(g.duration, Some(600));
        assert_eq!(g.topology.unwrap().mode, ConstraintMode::Required);
    }

    #[test]
    fn sub_groups_gather_named_sets_and_refuse_what_they_cannot_keep() {
        let sets = "name: serve\nsets:\n  - {name: prefill-leader, members: 1, resources: {cpu: 1}}\n  \
                    - {name: prefill, members: 2, resources: {nvidia.com/gpu: 8}}\n  \
                    - {name: decode, members: 2, resources: {nvidia.com/gpu: 8}}\n";
        let g = parse(
            "g.yaml",
            &format!(
                "{sets}subgroups:\n  - {{name: p, sets: [prefill-leader, prefill], topology: {{level: rack, mode: \
                 required}}}}\n"
            ),
        )
        .unwrap();
        assert_eq!(g.subgroup_of(0).map(|s| s.name.as_str()), Some("p"));
        assert_eq!(g.subgroup_of(1).map(|s| s.name.as_str()), Some("p"));
        assert_eq!(g.subgroup_of(2), None);
        let bad = |sub: &str| parse("g.yaml", &format!("{sets}subgroups:\n{sub}")).unwrap_err();
        let e = bad("  - {name: p, sets: [prefil], topology: {level: rack, mode: required}}\n");
        assert_eq!(e.path, "subgroups[0].sets[0]", "{e}");
        let e = bad("  - {name: p, sets: [prefill], topology: {level: rack, mode: required}}\n  \
                     - {name: q, sets: [decode, prefill], topology: {level: rack, mode: required}}\n");
        assert_eq!(e.path, "subgroups[1].sets[1]", "{e}");
        assert!(e.message.contains("sub-group \"p\""), "{e}");
        let e = bad("  - {name: p, sets: [], topology: {level: rack, mode: required}}\n");
        assert_eq!(e.path, "subgroups[0].sets", "{e}");
        let e = parse(
            "g.yaml",
            "name: x\nmembers: 2\nresources: {cpu: 1}\nsubgroups: [{name: p, sets: [a], topology: {level: rack, \
             mode: required}}]\n",
        )
        .unwrap_err();
        assert_eq!(e.path, "subgroups", "{e}");
    }

    #[test]
    fn flux_node_slot_core() {
        let text = "version: 1\nresources:\n  - type: rack\n    count: 1\n    with:\n      - type: node\n        count: 2\n        with:\n          - type: slot\n            count: 4\n            label: task\n            with:\n              - type: core\n                count: 2\n              - type: memory\n                count: 1\n              - type: gpu\n                count: 1\nattributes:\n  system:\n    duration: 3600\n";
        let g = parse("j.yaml", text).unwrap();
        assert_eq!((g.min_members, g.max_members, g.members_per_node), (8, 8, Some(4)));
        assert_eq!(g.topology.as_ref().unwrap().level, "rack");
        assert_eq!(g.duration, Some(3600));
        assert!(g.requests.contains(&("cpu".to_string(), 2000)));
        assert!(g.requests.contains(&("memory".to_string(), 1 << 30)));
        assert!(g.requests.contains(&("nvidia.com/gpu".to_string(), 1)));
    }

    #[test]
    fn flux_slot_range_and_whole_nodes() {
        let g = parse("j", "version: 1\nresources:\n  - type: slot\n    count: {min: 2, max: 6}\n    with:\n      - type: core\n        count: 1\n").unwrap();
        assert_eq!((g.min_members, g.max_members), (2, 6));
        let g = parse(
            "j",
            "version: 1\nresources:\n  - type: slot\n    count: 3\n    with:\n      - type: node\n        count: 1\n",
        )
        .unwrap();
        assert!(g.exclusive);
        assert_eq!(g.members_per_node, Some(1));
    }

    #[test]
    fn errors_name_file_path_and_rule() {
        let e = parse("bad.yaml", "name: x\nmembers: 0\nresources: {cpu: 1}\n").unwrap_err();
        assert_eq!((e.file.as_str(), e.path.as_str()), ("bad.yaml", "members"));
        assert!(e.message.contains("allowed 1..="), "{e}");
        let e = parse("bad.yaml", "name: x\nmembers: 2\nresources: {gpu: 1}\n").unwrap_err();
        assert_eq!(e.path, "resources.gpu");
        let e = parse("bad.yaml", "name: x\nmembers: 2\nresources: {cpu: -1}\n").unwrap_err();
        assert!(e.message.contains("negative"), "{e}");
        let e = parse("bad.yaml", "name: x\nmembers: 99999999999\nresources: {cpu: 1}\n").unwrap_err();
        assert_eq!(e.path, "members");
        let e = parse(
            "j",
            "version: 1\nresources:\n  - type: slot\n    count: 1\n    with:\n      - type: widget\n        count: 1\n",
        )
        .unwrap_err();
        assert_eq!(e.path, "resources[0].with[0].type");
        let e = parse("j", "name: x\nmembers: 1\nresources: {cpu: 1}\ncolour: red\n").unwrap_err();
        assert!(e.message.contains("colour"), "{e}");
    }
}
