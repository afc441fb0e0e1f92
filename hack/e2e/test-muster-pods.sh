#!/usr/bin/env bash
# e2e: a plain-pod group with muster (no Job). Pods labelled muster.dev/group=ring,
# muster.dev/group-size=3, muster.dev/queue=default are gated by the webhook; muster holds
# nothing for the group while fewer than its 3 pods exist, then admits it, ungates each pod and
# binds it to the node its Group assigned to the member it fills; they run (KWOK) and succeed;
# the Group goes Succeeded; once the pods are deleted, muster deletes the Group. A group whose
# pods do not all exist yet waits gated, holding nothing. An elastic group (group-min 1) starts
# with its one pod and takes the pods created later, up to its size. Pods annotated
# muster.dev/required-topology: rack are placed all in one rack; with preferred-topology: rack and
# required-topology: block, a group too big for a rack is kept within one block.
# A running group that loses a node is evicted: pods cannot be suspended, so muster deletes its
# pods (also the one on the node that is left) and the Group goes with them. A controller
# restart while an admitted group waits for a pod created again neither evicts it nor binds
# anything twice.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
ns=e2e-muster-pods
echo "test-muster-pods" >&2
cleanup() {
  muster_down
  k label nodes -l muster.dev/block muster.dev/block- >/dev/null 2>&1 || true
  "$hack_dir/cluster-nodes.sh" "$repo_dir/scenarios/clusters/seed-scalability.yaml" >/dev/null 2>&1 || true
}
trap cleanup EXIT
muster_up
fresh_namespace $ns

# group_pod_yaml NAME GROUP SIZE RUN_SECONDS
group_pod_yaml() {
  kwok_pod_yaml "$1" "$4" "muster.dev/group: $2, muster.dev/group-size: \"$3\", muster.dev/queue: default"
}
group_phase_is() { [[ $(k -n $ns get groups.muster.dev "$1" -o jsonpath='{.status.phase}' 2>/dev/null) =~ ^($2)$ ]]; }
group_says() { [[ $(k -n $ns get groups.muster.dev "$1" -o jsonpath='{.status.message}' 2>/dev/null) == *"$2"* ]]; }

# gates_and_scheduler POD: "<gates> <schedulerName>"
gates_and_scheduler() {
  k -n $ns get pod "$1" -o jsonpath='{.spec.schedulingGates[*].name} {.spec.schedulerName}'
}
bound_ungated() { # bound_ungated POD...: every pod has a node and no scheduling gate
  local p
  for p in "$@"; do
    [[ -n $(k -n $ns get pod "$p" -o jsonpath='{.spec.nodeName}') ]] || return 1
    [[ -z $(k -n $ns get pod "$p" -o jsonpath='{.spec.schedulingGates}') ]] || return 1
  done
}

# pods_on_assigned GROUP N: N pods of GROUP bound to their assigned nodes, each member once
pods_on_assigned() { on_assigned "$ns" "$1" "muster.dev/group=$1" "$2"; }

out=$(group_pod_yaml ring-0 ring 3 8 | k -n $ns create -f - -o jsonpath='{.spec.schedulingGates[*].name} {.spec.schedulerName}')
check "the webhook gated the plain pod and named muster its scheduler ($out)" test "$out" = "muster.dev/admission muster"
group_pod_yaml ring-1 ring 3 8 | k -n $ns create -f - >/dev/null
eventually 30 "with 2 of the 3 pods it needs, the Group waits for its pods" group_says ring "2 of the 3"
check "and nothing is admitted or bound" bash -c "! '$K8S_BIN/kubectl' -n $ns get pod ring-0 ring-1 -o jsonpath='{.items[*].spec.nodeName}' | grep -q ."
group_pod_yaml ring-2 ring 3 8 | k -n $ns create -f - >/dev/null
eventually 30 "the Group of ring is admitted once its 3 pods exist" group_phase_is ring 'Admitted|Running'
check "the Group has no owner (plain pods)" test -z "$(k -n $ns get groups.muster.dev ring -o jsonpath='{.metadata.ownerReferences}')"
eventually 30 "ring-0, ring-1 and ring-2 are ungated and bound" bound_ungated ring-0 ring-1 ring-2
check "every pod runs on the node its Group assigned to its member" pods_on_assigned ring 3
eventually 30 "the group is Running" bash -c "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev ring -o jsonpath='{.status.phase}') == Running ]]"
eventually 60 "all three pods succeeded" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get pods -l muster.dev/group=ring --field-selector status.phase=Succeeded -o name | wc -l) -eq 3 ]]"
eventually 30 "the Group is Succeeded" bash -c "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev ring -o jsonpath='{.status.phase}') == Succeeded ]]"
check "muster recorded the admission as an event on the Group" bash -c \
  "'$K8S_BIN/kubectl' -n $ns get events -o jsonpath='{range .items[*]}{.reason}/{.involvedObject.kind} {end}' | grep -q 'Admitted/Group'"

# --- a group that does not fit waits gated; the pods go, the Group goes ----------------------
group_pod_yaml huge-0 huge 1000 5 | sed 's/cpu: 10m/cpu: "64"/' | k -n $ns create -f - >/dev/null
eventually 30 "a group of 1000 with one pod waits for its pods, holding nothing" group_says huge "1 of the 1000"
sleep 2
check "its pod stays gated and unbound ($(gates_and_scheduler huge-0))" test "$(gates_and_scheduler huge-0)" = "muster.dev/admission muster"
k -n $ns delete pod ring-0 ring-1 ring-2 huge-0 --wait=false >/dev/null
eventually 30 "with their pods gone, muster deleted both Groups" bash -c \
  "[[ -z \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev -o name) ]]"

# --- an elastic group (group-min 1, group-size 3) grows as its later pods come ---------------
elastic_pod_yaml() { group_pod_yaml "$1" grow 3 600 | sed 's/muster.dev\/group-size: "3"/muster.dev\/group-size: "3", muster.dev\/group-min: "1"/'; }
elastic_pod_yaml grow-0 | k -n $ns create -f - >/dev/null
eventually 30 "an elastic group starts with the one pod it has" bound_ungated grow-0
elastic_pod_yaml grow-1 | k -n $ns create -f - >/dev/null
elastic_pod_yaml grow-2 | k -n $ns create -f - >/dev/null
eventually 30 "it takes the two pods created after it started" bound_ungated grow-1 grow-2
eventually 15 "each on the node its Group assigned to its member" pods_on_assigned grow 3
elastic_pod_yaml grow-3 | k -n $ns create -f - >/dev/null
sleep 2
check "a fourth pod, beyond its size, stays gated" test "$(gates_and_scheduler grow-3)" = "muster.dev/admission muster"
k -n $ns delete pod grow-0 grow-1 grow-2 grow-3 --wait=false >/dev/null

# --- a topology level asked for on the pods: the group's members all in one rack -------------
# 3 pods of 60 cpu (one per 100-cpu node) annotated muster.dev/required-topology: rack.
for i in 0 1 2; do
  group_pod_yaml racked-$i racked 3 5 | sed -e 's/cpu: 10m/cpu: "60"/' \
    -e 's/annotations: {/annotations: {muster.dev\/required-topology: rack, /' | k -n $ns create -f - >/dev/null
done
eventually 30 "the Group of racked asks for one rack" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev racked -o jsonpath='{.spec.topology.mode}/{.spec.topology.level}') == required/rack ]]"
eventually 30 "its 3 pods are bound to their members' nodes" pods_on_assigned racked 3
racks=$(for n in $(k -n $ns get pods -l muster.dev/group=racked -o jsonpath='{.items[*].spec.nodeName}'); do
  k get node "$n" -o jsonpath='{.metadata.labels.muster\.dev/rack}{"\n"}'; done | sort -u)
check "on 3 nodes of one rack ($racks)" test "$(wc -l <<<"$racks")" -eq 1 -a -n "$racks"
k -n $ns delete pod racked-0 racked-1 racked-2 --wait=false >/dev/null

# --- a preferred rack kept within a block -------------------------------------------------------
# Blocks of 5 racks (50 nodes) labelled while muster runs; 12 pods of 60 cpu (one per node) fit in
# no 10-node rack, so the group takes nodes of several racks, all in one block.
for r in 0 1 2 3 4 5 6 7 8 9; do
  k label nodes -l muster.dev/rack=worker-rack-$r muster.dev/block=block-$(( r / 5 )) --overwrite >/dev/null
done
for i in $(seq 0 11); do
  group_pod_yaml blocked-$i blocked 12 5 | sed -e 's/cpu: 10m/cpu: "60"/' \
    -e 's/annotations: {/annotations: {muster.dev\/preferred-topology: rack, muster.dev\/required-topology: block, /' |
    k -n $ns create -f - >/dev/null
done
eventually 30 "the Group of blocked prefers a rack within a block" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev blocked -o jsonpath='{.spec.topology.mode}/{.spec.topology.level}/{.spec.topology.within}') == preferred/rack/block ]]"
eventually 30 "its 12 pods are bound to their members' nodes" pods_on_assigned blocked 12
domains() {
  for n in $(k -n $ns get pods -l muster.dev/group=blocked -o jsonpath='{.items[*].spec.nodeName}'); do
    k get node "$n" -o jsonpath="{.metadata.labels.muster\.dev/$1}{'\n'}"; done | sort -u | wc -l
}
check "on nodes of one block ($(domains block) blocks, $(domains rack) racks)" test "$(domains block)" -eq 1 -a "$(domains rack)" -ge 2
k -n $ns delete pod $(seq -f 'blocked-%g' 0 11) --wait=false >/dev/null

# --- eviction: a node of a running group is deleted -------------------------------------------
# Two pods that each need most of a node, so they land on two nodes.
for i in 0 1; do group_pod_yaml pair-$i pair 2 600 | sed 's/cpu: 10m/cpu: "60"/' | k -n $ns create -f - >/dev/null; done
eventually 30 "the pair runs" bash -c "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev pair -o jsonpath='{.status.phase}') == Running ]]"
check "the pair is on its assigned nodes" pods_on_assigned pair 2
lost=$(k -n $ns get pod pair-0 -o jsonpath='{.spec.nodeName}')
kept=$(k -n $ns get pod pair-1 -o jsonpath='{.spec.nodeName}')
echo "  ..   pair-0 on $lost (deleting the node), pair-1 on $kept" >&2
check "the two pods are on two nodes" test "$lost" != "$kept"
k delete node "$lost" --wait=false >/dev/null
eventually 30 "muster deleted the evicted group's pod on the node that is left" bash -c \
  "! '$K8S_BIN/kubectl' -n $ns get pod pair-1 >/dev/null 2>&1"
evicted_event() {
  k -n $ns get events --field-selector involvedObject.kind=Group,involvedObject.name=pair,reason=Evicted \
    -o jsonpath='{range .items[*]}{.message}{"\n"}{end}' | grep -q 'deleting its 2 pods'
}
eventually 15 "the eviction was recorded on the Group" evicted_event
k -n $ns delete pod pair-0 --wait=false --ignore-not-found >/dev/null 2>&1 || true
eventually 60 "with the pods gone, the Group is deleted" bash -c \
  "! '$K8S_BIN/kubectl' -n $ns get groups.muster.dev pair >/dev/null 2>&1"

# --- a restart while an admitted group waits for a pod created again ------------------------
for i in 0 1; do group_pod_yaml late-$i late 2 600 | k -n $ns create -f - >/dev/null; done
eventually 30 "late-0 and late-1 of a 2-pod group are ungated and bound" bound_ungated late-0 late-1
uid=$(k -n $ns get pod late-0 -o jsonpath='{.metadata.uid}')
muster_kill
k -n $ns delete pod late-1 --grace-period=0 --force >/dev/null 2>&1
muster_start
group_pod_yaml late-1 late 2 600 | k -n $ns create -f - >/dev/null
eventually 30 "after a restart, late-1 created again takes the member left" bound_ungated late-1
check "late-0 was neither deleted nor bound again (same pod)" test "$(k -n $ns get pod late-0 -o jsonpath='{.metadata.uid}')" = "$uid"
eventually 10 "both on their assigned nodes, each member once" pods_on_assigned late 2
check "the group was not evicted" test -z "$(k -n $ns get events --field-selector involvedObject.name=late,reason=Evicted -o name)"
# A plain group's pods run where they ask to: a nodeSelector on one node puts both there.
for i in 0 1; do
  group_pod_yaml pinned-$i pinned 2 600 | sed 's/^spec:/spec:\n  nodeSelector: {kubernetes.io\/hostname: worker-7}/' |
    k -n $ns create -f - >/dev/null
done
eventually 30 "both pods of a group with a nodeSelector are bound" bound_ungated pinned-0 pinned-1
check "both on the node their nodeSelector names" test \
  "$(k -n $ns get pods pinned-0 pinned-1 -o jsonpath='{.items[*].spec.nodeName}')" = "worker-7 worker-7"
eventually 10 "each on the node the Group assigned its member" pods_on_assigned pinned 2
k delete namespace $ns --wait=false >/dev/null
