//! The engine's groups, by key and by slot. A slot is a group's place in a vector, fixed while the
//! group exists: the pending index keeps it beside the key, so that a cycle walking thousands of
//! waiting groups reaches each without a search of string keys. A lookup by key is a hash lookup:
//! the table keeps every group until it is deleted, finished ones too, and an ordered search of
//! tens of thousands of string keys costs dozens of comparisons. Iteration is in key order, as
//! every reader of the groups expects.

use std::collections::{BTreeMap, HashMap};
use std::ops::Index;
use std::sync::Arc;

use crate::group::{Group, GroupKey};

/// Where a group is kept in a [`GroupTable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Slot(u32);

/// Groups shared with the engine's copies: a group is copied only when changed (`Arc::make_mut`).
#[derive(Debug, Clone, Default)]
pub(super) struct GroupTable {
    /// For lookups; `ordered` holds the same keys, for iteration.
    slots: HashMap<GroupKey, Slot>,
    ordered: BTreeMap<GroupKey, Slot>,
    groups: Vec<Option<Arc<Group>>>,
    /// Slots of deleted groups, taken again first.
    free: Vec<Slot>,
}

impl GroupTable {
    pub fn get(&self, key: &GroupKey) -> Option<&Arc<Group>> {
        self.slots.get(key).map(|&s| self.at(s))
    }

    pub fn get_mut(&mut self, key: &GroupKey) -> Option<&mut Arc<Group>> {
        let s = *self.slots.get(key)?;
        Some(self.at_mut(s))
    }

    pub fn contains_key(&self, key: &GroupKey) -> bool {
        self.slots.contains_key(key)
    }

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

    /// Adds or replaces the group of `key`; a replaced group keeps its slot.
    pub fn insert(&mut self, key: GroupKey, group: Arc<Group>) {
        if let Some(&s) = self.slots.get(&key) {
            self.groups[s.0 as usize] = Some(group);
            return;
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
        let s = self.slots.remove(key)?;
        self.ordered.remove(key);
        self.free.push(s);
        self.groups[s.0 as usize].take()
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// In key order.
    pub fn iter(&self) -> impl Iterator<Item = (&GroupKey, &Arc<Group>)> {
        self.ordered.iter().map(|(k, &s)| (k, self.at(s)))
    }

    /// In key order.
    pub fn values(&self) -> impl Iterator<Item = &Arc<Group>> {
        self.ordered.values().map(|&s| self.at(s))
    }
}

impl Index<&GroupKey> for GroupTable {
    type Output = Arc<Group>;

    fn index(&self, key: &GroupKey) -> &Arc<Group> {
        self.get(key).expect("a known group")
    }
}

/// A waiting group in the pending index: its key, and its slot in the [`GroupTable`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PendingGroup {
    /// Shared, not copied: a cycle takes one per group it looks at.
    pub key: Arc<GroupKey>,
    pub slot: Slot,
}

impl std::ops::Deref for PendingGroup {
    type Target = GroupKey;

    fn deref(&self) -> &GroupKey {
        &self.key
    }
}
