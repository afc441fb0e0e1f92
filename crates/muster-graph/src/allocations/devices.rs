//! Which device slots a placement's members take on a node, once the search has counted them.

use super::Allocation;
use crate::dra::{self, DeviceMatcher};
use crate::graph::{DeviceSlot, Node};

/// Devices for `a`'s members `on_node` on `node`: each keeps (or, on import, claims) what it
/// lists; a member without devices yet whose set asks for published ones takes them first (by
/// `matchers`, one per set, the choice the search counted with), so that plain counts of the
/// same driver take what the selectors left; a member holding sockets takes every device in them;
/// the others take free ones, on a node with sockets from the sockets `split` gave them.
pub(super) fn take_devices(
    node: &mut Node,
    a: &mut Allocation,
    on_node: &[usize],
    (kinds, matchers): (&[usize], &[Option<DeviceMatcher>]),
    split: &[Vec<u64>],
) {
    let mut budget = split.to_vec();
    for &mi in on_node {
        let member = &a.members[mi];
        for slot in node.devices.iter_mut().filter(|s| member.devices.contains(&s.vertex)) {
            slot.holder = Some(a.id);
            if let Some(b) = slot.socket.and_then(|x| budget.get_mut(usize::from(x))) {
                b[slot.resource.index()] = b[slot.resource.index()].saturating_sub(1);
            }
        }
    }
    for &mi in on_node {
        let set = a.request.set_of(a.members[mi].index).0;
        let Some(m) = matchers.get(set).and_then(Option::as_ref) else { continue };
        if !a.members[mi].devices.is_empty() {
            continue;
        }
        for i in dra::pick(&node.devices, |s| s.holder.is_none(), m, 1).concat() {
            let slot = &mut node.devices[i];
            slot.holder = Some(a.id);
            if let Some(b) = slot.socket.and_then(|x| budget.get_mut(usize::from(x))) {
                b[slot.resource.index()] = b[slot.resource.index()].saturating_sub(1);
            }
            a.members[mi].devices.push(slot.vertex);
        }
    }
    for &mi in on_node {
        let wants: Vec<u64> = a.member_amounts(a.members[mi].index).to_vec();
        let member = &mut a.members[mi];
        if !member.sockets.is_empty() {
            let own: Vec<usize> =
                member.sockets.iter().filter_map(|v| node.sockets.iter().position(|s| s.vertex == *v)).collect();
            let in_own = |s: &DeviceSlot| s.socket.is_some_and(|x| own.contains(&usize::from(x)));
            for slot in node.devices.iter_mut().filter(|s| s.holder.is_none() && in_own(s)) {
                slot.holder = Some(a.id);
                member.devices.push(slot.vertex);
            }
            continue;
        }
        for &r in kinds {
            let have =
                node.devices.iter().filter(|s| s.resource.index() == r && member.devices.contains(&s.vertex)).count();
            for _ in have..wants[r] as usize {
                let free = |s: &DeviceSlot| s.resource.index() == r && s.holder.is_none();
                let budgeted =
                    |s: &DeviceSlot| s.socket.is_none_or(|x| budget.get(usize::from(x)).is_some_and(|b| b[r] > 0));
                let pick = node.devices.iter().position(|s| free(s) && budgeted(s));
                let Some(i) = pick.or_else(|| node.devices.iter().position(free)) else { break };
                let slot = &mut node.devices[i];
                if let Some(b) = slot.socket.and_then(|x| budget.get_mut(usize::from(x))) {
                    b[r] = b[r].saturating_sub(1);
                }
                slot.holder = Some(a.id);
                member.devices.push(slot.vertex);
            }
        }
    }
}
