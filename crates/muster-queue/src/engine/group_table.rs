//! The engine's groups, by key and by slot. A slot is a group's place in a vector, fixed while the
//! group is in play: the pending index keeps it beside the key, so that a cycle walking thousands
//! of waiting groups reaches each without a search of string keys. A lookup by key is a hash
//! lookup. Groups that ended (succeeded or failed) leave their slots for a history shared with the
//! engine's copies: a copy (the forecast behind estimated starts, the queue view) then costs what
//! the groups still in play cost, not every group the engine has seen. Iteration is in key order,
//! over both, as every reader of the groups expects.

use std::collections::BTreeMap;
use std::iter::Peekable;
use std::ops::Index;
use std::sync::Arc;

use crate::group::{Group, GroupKey};

/// Where a group is kept in a [`GroupTable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Slot(u32);

impl Slot {
    /// Its place, for tables kept beside the groups.
    pub(super) fn index(self) -> usize {
        self.0 as usize
    }

    #[cfg(test)]
    pub(super) fn at(index: u32) -> Self {
        Slot(index)
    }
}

/// Groups shared with the engine's copies: a group is copied only when changed (`Arc::make_mut`).
#[derive(Debug, Clone)]
pub(super) struct GroupTable {
    /// Groups in play, for lookups; `ordered` holds the same keys, for iteration.
    slots: foldhash::HashMap<GroupKey, Slot>,
    ordered: BTreeMap<GroupKey, Slot>,
    groups: Vec<Option<Arc<Group>>>,
    /// Slots of groups gone, taken again first.
    free: Vec<Slot>,
    /// Groups that ended, shared between the engine and its copies until one changes it.
    ended: Arc<BTreeMap<GroupKey, Arc<Group>>>,
    /// Whether ending a group moves it to `ended`. Off in a copy run forward, whose groups end in
    /// place: moving one would copy the whole history.
    keeps_history: bool,
}

impl Default for GroupTable {
    fn default() -> Self {
        Self {
            slots: foldhash::HashMap::default(),
            ordered: BTreeMap::new(),
            groups: Vec::new(),
            free: Vec::new(),
            ended: Arc::default(),
            keeps_history: true,
        }
    }
}

impl GroupTable {
    pub fn get(&self, key: &GroupKey) -> Option<&Arc<Group>> {
        match self.slots.get(key) {
            Some(&s) => Some(self.at(s)),
            None => self.ended.get(key),
        }
    }

    /// A group to change; one that ended is taken out of the shared history's copy first.
    pub fn get_mut(&mut self, key: &GroupKey) -> Option<&mut Arc<Group>> {
        match self.slots.get(key) {
            Some(&s) => Some(self.at_mut(s)),
            None if self.ended.contains_key(key) => Arc::make_mut(&mut self.ended).get_mut(key),
            None => None,
        }
    }

    pub fn contains_key(&self, key: &GroupKey) -> bool {
        self.slots.contains_key(key) || self.ended.contains_key(key)
    }

    /// The slot of a group in play (none for one that ended).
    pub fn slot(&self, key: &GroupKey) -> Option<Slot> {
        self.slots.get(key).copied()
    }

    /// The group in slot `s`, which must hold one.
    pub fn at(&self, s: Slot) -> &Arc<Group> {
        self.groups[s.0 as usize].as_ref().expect("a slot in use holds a group")
    }

    pub fn at_mut(&mut self, s: Slot) -> &mut Arc<Group> {
        self.groups[s.0 as usize].as_mut().expect("a slot in use holds a group")
    }

    /// Adds or replaces the group of `key`, in play; a replaced group keeps its slot.
    pub fn insert(&mut self, key: GroupKey, group: Arc<Group>) {
        if let Some(&s) = self.slots.get(&key) {
            self.groups[s.0 as usize] = Some(group);
            return;
        }
        if self.ended.contains_key(&key) {
            Arc::make_mut(&mut self.ended).remove(&key);
        }
        let s = match self.free.pop() {
            Some(s) => {
                self.groups[s.0 as usize] = Some(group);
                s
            }
            None => {
                self.groups.push(Some(group));
                Slot(u32::try_from(self.groups.len() - 1).expect("fewer than 2^32 groups"))
            }
        };
        self.ordered.insert(key.clone(), s);
        self.slots.insert(key, s);
    }

    pub fn remove(&mut self, key: &GroupKey) -> Option<Arc<Group>> {
        let Some(s) = self.slots.remove(key) else {
            if !self.ended.contains_key(key) {
                return None;
            }
            return Arc::make_mut(&mut self.ended).remove(key);
        };
        self.ordered.remove(key);
        self.free.push(s);
        self.groups[s.0 as usize].take()
    }

    /// Moves a group that ended out of play, into the history (not in a copy run forward).
    pub fn retire(&mut self, key: &GroupKey) {
        if !self.keeps_history {
            return;
        }
        if let Some(g) = self.remove(key) {
            Arc::make_mut(&mut self.ended).insert(key.clone(), g);
        }
    }

    /// For a copy run forward: groups that end stay in play, and the history stays shared.
    pub fn keep_history_shared(&mut self) {
        self.keeps_history = false;
    }

    pub fn len(&self) -> usize {
        self.slots.len() + self.ended.len()
    }

    /// In key order.
    pub fn iter(&self) -> impl Iterator<Item = (&GroupKey, &Arc<Group>)> {
        let in_play = self.ordered.iter().map(|(k, &s)| (k, self.at(s)));
        ByKey { a: in_play.peekable(), b: self.ended.iter().peekable() }
    }

    /// In key order.
    pub fn values(&self) -> impl Iterator<Item = &Arc<Group>> {
        self.iter().map(|(_, g)| g)
    }
}

/// Two iterators in key order (with no key in both) merged into one in key order.
struct ByKey<'a, A: Iterator<Item = (&'a GroupKey, &'a Arc<Group>)>, B: Iterator<Item = (&'a GroupKey, &'a Arc<Group>)>>
{
    a: Peekable<A>,
    b: Peekable<B>,
}

impl<'a, A, B> Iterator for ByKey<'a, A, B>
where
    A: Iterator<Item = (&'a GroupKey, &'a Arc<Group>)>,
    B: Iterator<Item = (&'a GroupKey, &'a Arc<Group>)>,
{
    type Item = (&'a GroupKey, &'a Arc<Group>);

    fn next(&mut self) -> Option<Self::Item> {
        match (self.a.peek(), self.b.peek()) {
            (Some((ka, _)), Some((kb, _))) if kb < ka => self.b.next(),
            (Some(_), _) => self.a.next(),
            (None, _) => self.b.next(),
        }
    }
}

impl Index<&GroupKey> for GroupTable {
    type Output = Arc<Group>;

    fn index(&self, key: &GroupKey) -> &Arc<Group> {
        self.get(key).expect("a known group")
    }
}

/// A waiting group in the pending index: its key, its slot in the [`GroupTable`] and its request
/// shape (a group's spec changes only while it is out of the index).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PendingGroup {
    /// Shared, not copied: a cycle takes one per group it looks at.
    pub key: Arc<GroupKey>,
    pub slot: Slot,
    /// Kept here so that settling the groups behind a blocked head reads no other table for it.
    pub shape: u64,
}

impl std::ops::Deref for PendingGroup {
    type Target = GroupKey;

    fn deref(&self) -> &GroupKey {
        &self.key
    }
}

#[cfg(test)]
mod tests {
    use muster_graph::GroupRequest;

    use super::*;
    use crate::group::{GroupSpec, GroupState};

    fn group(name: &str, state: GroupState) -> Arc<Group> {
        let spec = GroupSpec {
            key: GroupKey::new("ns", name),
            queue: "q".into(),
            priority_class: None,
            request: GroupRequest::simple(name, 1, &[("cpu", 1000)]),
            submitted_at: 0,
        };
        let mut g = Group::submitted(spec, 0, 0);
        g.state = state;
        Arc::new(g)
    }

    fn names(t: &GroupTable) -> Vec<&str> {
        t.iter().map(|(k, _)| &*k.name).collect()
    }

    #[test]
    fn ended_groups_leave_play_but_are_found_and_listed_in_key_order() {
        let mut t = GroupTable::default();
        for n in ["a", "b", "c", "d"] {
            t.insert(GroupKey::new("ns", n), group(n, GroupState::Running));
        }
        let (b, c) = (GroupKey::new("ns", "b"), GroupKey::new("ns", "c"));
        t.retire(&b);
        t.retire(&c);
        assert_eq!(t.slot(&b), None, "an ended group holds no slot");
        assert!(t.slot(&GroupKey::new("ns", "a")).is_some());
        assert_eq!(t.get(&b).map(|g| g.spec.key.name.as_ref()), Some("b"));
        assert_eq!(names(&t), ["a", "b", "c", "d"]);
        assert_eq!(t.len(), 4);
        // A slot given up is taken again.
        t.insert(GroupKey::new("ns", "e"), group("e", GroupState::Queued));
        assert_eq!(t.groups.len(), 4);
        // Deleted, an ended group is gone; submitted again, it is in play.
        assert!(t.remove(&b).is_some());
        assert!(!t.contains_key(&b));
        t.insert(c.clone(), group("c", GroupState::Queued));
        assert!(t.slot(&c).is_some());
        assert_eq!(names(&t), ["a", "c", "d", "e"]);
        assert_eq!(t.len(), 4);
    }

    #[test]
    fn a_copy_shares_the_history_and_a_copy_run_forward_never_copies_it() {
        let mut t = GroupTable::default();
        for n in ["a", "b", "c"] {
            t.insert(GroupKey::new("ns", n), group(n, GroupState::Running));
        }
        t.retire(&GroupKey::new("ns", "a"));
        let mut copy = t.clone();
        assert!(Arc::ptr_eq(&t.ended, &copy.ended), "copying the table does not copy its history");
        copy.keep_history_shared();
        copy.retire(&GroupKey::new("ns", "b"));
        assert!(Arc::ptr_eq(&t.ended, &copy.ended), "a group ending in the copy stays in play there");
        assert!(copy.slot(&GroupKey::new("ns", "b")).is_some());
        // Changing an ended group in the copy copies the history once, leaving the engine's as it was.
        Arc::make_mut(copy.get_mut(&GroupKey::new("ns", "a")).unwrap()).reason = "changed".into();
        assert!(!Arc::ptr_eq(&t.ended, &copy.ended));
        assert_ne!(t[&GroupKey::new("ns", "a")].reason, "changed");
    }
}
