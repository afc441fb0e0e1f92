//! A gang of gangs as Kubernetes 1.37 writes it: PodGroups (`scheduling.k8s.io/v1beta1`) whose
//! `spec.parentCompositePodGroupName` names a CompositePodGroup (`scheduling.k8s.io/v1alpha3`,
//! the CompositePodGroup gate), which may itself have a parent. As kube-scheduler does, muster
//! takes the root of the tree as the unit: one group, named after the root, with a member set per
//! PodGroup (named after it, its gang `minCount` members). The root's topology constraint is the
//! group's, a PodGroup's that of its set, and one of a CompositePodGroup between them makes the
//! PodGroups below it a sub-group kept within one domain of that level.
//!
//! A CompositePodGroup whose gang `minGroupCount` k is below its n children (k of n) starts
//! once k of them are placed: its PodGroups are k required sets and n - k optional ones, each
//! placed whole when room comes (`muster_graph::jobspec::MemberSet`). The required ones are the
//! k smallest gangs (by `minCount`, then name), those most likely to fit: of alike replicas the
//! first k by name. kube-scheduler starts with any k; muster waits for these k, never starting
//! fewer.
//!
//! What muster cannot keep is refused, naming the object and field: k of n over children that
//! are CompositePodGroups, a topology constraint on a CompositePodGroup below another that has
//! one (below the root), a PodGroup without a gang policy. A basic CompositePodGroup lets its
//! children run apart; muster places them together all the same.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::scheduling::v1alpha3::CompositePodGroup;
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use kube::core::ApiResource;

use crate::external::{native_pod_group_level, native_pod_group_min_count};

/// The CompositePodGroup API: `scheduling.k8s.io/v1alpha3`, namespaced.
pub fn composite_pod_group_resource() -> ApiResource {
    ApiResource::erase::<CompositePodGroup>(&())
}

/// The muster group a tree of PodGroups makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Composite {
    /// The root CompositePodGroup's name: the group's.
    pub root: String,
    /// The root's topology level, if it keeps the whole tree within one domain.
    pub level: Option<&'static str>,
    /// One set per PodGroup of the tree, by name.
    pub sets: Vec<CompositeSet>,
}

/// One PodGroup of a tree: a member set of the group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompositeSet {
    /// The PodGroup's name: the set's.
    pub name: String,
    /// Its gang's `minCount`.
    pub members: u32,
    /// Its own topology level, inside the root's.
    pub level: Option<&'static str>,
    /// The CompositePodGroup between it and the root that keeps it and its siblings within one
    /// domain of a level, by name, and that level.
    pub subgroup: Option<(String, &'static str)>,
    /// One of the n - k replicas of a k-of-n CompositePodGroup its group may start without.
    pub optional: bool,
}

impl Composite {
    /// Members of the whole group.
    pub fn members(&self) -> u32 {
        self.sets.iter().map(|s| s.members).sum()
    }

    /// The set of the PodGroup `name`.
    pub fn set(&self, name: &str) -> Option<&CompositeSet> {
        self.sets.iter().find(|s| s.name == name)
    }
}

/// The tree the PodGroup `leaf` belongs to, from every CompositePodGroup and PodGroup of its
/// namespace; None when `leaf` has no parent (a gang of its own). The error names the object,
/// the field and the fix; a tree still being made (a parent or a child not created yet) says so.
pub fn resolve(
    leaf: &PodGroup,
    composites: &[CompositePodGroup],
    pod_groups: &[PodGroup],
    max_members: u32,
) -> Result<Option<Composite>, String> {
    let Some(parent) = leaf.spec.parent_composite_pod_group_name.as_deref() else { return Ok(None) };
    let ns = leaf.metadata.namespace.as_deref().unwrap_or_default();
    let by_name: BTreeMap<&str, &CompositePodGroup> =
        composites.iter().map(|c| (c.metadata.name.as_deref().unwrap_or_default(), c)).collect();
    let root = root_of(parent, ns, &by_name)?;
    let mut tree = Tree { ns, by_name: &by_name, pod_groups, sets: Vec::new(), max_members };
    tree.walk(root, None, &mut BTreeSet::new())?;
    tree.sets.sort_by(|a, b| a.name.cmp(&b.name));
    let level = level_of(root, ns)?;
    let composite = Composite { root: name(root).to_string(), level, sets: tree.sets };
    if composite.members() > max_members {
        return Err(format!(
            "CompositePodGroup {ns}/{}: its PodGroups' gangs add up to {} pods, more than the {max_members} a group \
             may have",
            composite.root,
            composite.members()
        ));
    }
    Ok(Some(composite))
}

fn name(c: &CompositePodGroup) -> &str {
    c.metadata.name.as_deref().unwrap_or_default()
}

/// The root of the tree above the CompositePodGroup `first`.
fn root_of<'a>(
    first: &str,
    ns: &str,
    by_name: &BTreeMap<&str, &'a CompositePodGroup>,
) -> Result<&'a CompositePodGroup, String> {
    let mut seen = BTreeSet::new();
    let mut at = first;
    loop {
        let Some(c) = by_name.get(at) else {
            return Err(format!(
                "CompositePodGroup {ns}/{at} (scheduling.k8s.io/v1alpha3) does not exist, so its gang has no size; \
                 create the CompositePodGroups and PodGroups of a workload before its pods"
            ));
        };
        if !seen.insert(at) {
            return Err(format!(
                "CompositePodGroup {ns}/{at}: spec.parentCompositePodGroupName makes a cycle; a tree of \
                 CompositePodGroups must end at a root without a parent"
            ));
        }
        match c.spec.parent_composite_pod_group_name.as_deref() {
            None => return Ok(c),
            Some(parent) => at = parent,
        }
    }
}

/// The topology level a CompositePodGroup keeps its tree within.
fn level_of(c: &CompositePodGroup, ns: &str) -> Result<Option<&'static str>, String> {
    let topology = c.spec.scheduling_constraints.as_ref().and_then(|s| s.topology.as_deref()).unwrap_or_default();
    let field = format!("CompositePodGroup {ns}/{}: spec.schedulingConstraints.topology", name(c));
    match topology {
        [] => Ok(None),
        [one] => crate::labels::level_of_node_label(&one.key)
            .map(Some)
            .ok_or_else(|| crate::labels::unknown_node_label(&format!("{field}[0].key"), &one.key)),
        _ => Err(format!("{field}: muster keeps a group within one topology domain; keep one constraint")),
    }
}

/// A walk down a tree of CompositePodGroups, collecting its PodGroups as sets.
struct Tree<'a> {
    ns: &'a str,
    by_name: &'a BTreeMap<&'a str, &'a CompositePodGroup>,
    pod_groups: &'a [PodGroup],
    sets: Vec<CompositeSet>,
    max_members: u32,
}

impl Tree<'_> {
    /// Collects the PodGroups below `c`; `above` is None at the root, else the sub-group the
    /// CompositePodGroups between the root and `c` make (if one has a topology constraint).
    fn walk(
        &mut self,
        c: &CompositePodGroup,
        above: Option<Option<(String, &'static str)>>,
        seen: &mut BTreeSet<String>,
    ) -> Result<(), String> {
        let (ns, here) = (self.ns, name(c));
        if !seen.insert(here.to_string()) {
            return Err(format!("CompositePodGroup {ns}/{here}: the tree below it makes a cycle"));
        }
        let subgroup = match (above, level_of(c, ns)?) {
            (None, _) => None,
            (Some(Some((outer, _))), Some(_)) => {
                return Err(format!(
                    "CompositePodGroup {ns}/{here}: spec.schedulingConstraints.topology: muster keeps a topology \
                     constraint at the root, at one CompositePodGroup on the way down (here {outer}) and at each \
                     PodGroup; move it to {outer} or to the PodGroups"
                ));
            }
            (Some(outer), None) => outer,
            (Some(None), Some(level)) => Some((here.to_string(), level)),
        };
        let parent_is_here = |p: Option<&str>| p == Some(here);
        let children: Vec<&CompositePodGroup> = self
            .by_name
            .values()
            .copied()
            .filter(|k| parent_is_here(k.spec.parent_composite_pod_group_name.as_deref()))
            .collect();
        let mut leaves: Vec<&PodGroup> = self
            .pod_groups
            .iter()
            .filter(|pg| parent_is_here(pg.spec.parent_composite_pod_group_name.as_deref()))
            .collect();
        leaves.sort_by_key(|pg| pg_name(pg));
        let count = children.len() + leaves.len();
        let policy = &c.spec.scheduling_policy;
        let field = format!("CompositePodGroup {ns}/{here}: spec.schedulingPolicy.gang.minGroupCount");
        match policy.gang.as_ref().map(|g| g.min_group_count) {
            Some(min) if usize::try_from(min).is_ok_and(|m| m > count) => {
                return Err(format!(
                    "{field} is {min}, and {count} of its child groups exist; create its PodGroups and \
                     CompositePodGroups before their pods"
                ));
            }
            Some(min) if min < 1 => {
                return Err(format!("{field} is {min}; a gang needs at least 1 child group, or leave the gang out"));
            }
            _ if count == 0 => {
                return Err(format!(
                    "CompositePodGroup {ns}/{here} has no child groups yet; create its PodGroups before their pods"
                ));
            }
            _ => {}
        }
        // None: every child is required.
        let required: Option<BTreeSet<&str>> = match policy
            .gang
            .as_ref()
            .and_then(|g| usize::try_from(g.min_group_count).ok())
        {
            Some(k) if k < count => {
                if let Some(c) = children.first() {
                    return Err(format!(
                        "{field} is {k}, below its {count} child groups, and CompositePodGroup {ns}/{} is one of them: \
                         muster starts k of n child groups only when they are PodGroups; set minGroupCount to {count}, \
                         or make the children PodGroups",
                        name(c)
                    ));
                }
                Some(smallest_gangs(&leaves, k))
            }
            _ => None,
        };
        for pg in leaves {
            let optional = required.as_ref().is_some_and(|r| !r.contains(pg_name(pg)));
            self.leaf(pg, subgroup.clone(), optional)?;
        }
        for child in children {
            self.walk(child, Some(subgroup.clone()), seen)?;
        }
        Ok(())
    }

    fn leaf(&mut self, pg: &PodGroup, subgroup: Option<(String, &'static str)>, optional: bool) -> Result<(), String> {
        let members = native_pod_group_min_count(pg, self.max_members)?;
        let pg_name = pg_name(pg).to_string();
        let level = native_pod_group_level(pg).map_err(|e| format!("PodGroup {}/{pg_name}: {e}", self.ns))?;
        self.sets.push(CompositeSet { name: pg_name, members, level, subgroup, optional });
        Ok(())
    }
}

fn pg_name(pg: &PodGroup) -> &str {
    pg.metadata.name.as_deref().unwrap_or_default()
}

/// The names of the `k` PodGroups of `leaves` with the smallest gangs (`minCount`, then name):
/// the required ones of a k-of-n CompositePodGroup. A PodGroup whose gang cannot be read sorts
/// first, so that its error is the one reported.
fn smallest_gangs<'a>(leaves: &[&'a PodGroup], k: usize) -> BTreeSet<&'a str> {
    let mut by_size: Vec<(Option<u32>, &str)> =
        leaves.iter().map(|pg| (native_pod_group_min_count(pg, u32::MAX).ok(), pg_name(pg))).collect();
    by_size.sort();
    by_size.into_iter().take(k).map(|(_, name)| name).collect()
}

#[cfg(test)]
mod tests;
