#!/usr/bin/env bash
# e2e: a JobSet (jobset.x-k8s.io/v1alpha2) with muster, against the real JobSet controller (built
# from its Go module by hack/third-party.sh, run here as a local process with its own defaulting
# and validating webhooks registered by URL). A JobSet with the queue label is created suspended
# with muster as its pods' scheduler; muster makes it ONE group spanning every pod of every child
# Job (replicas x parallelism of each replicated Job), owned by the JobSet, admits it, resumes the
# JobSet; the JobSet controller resumes its child Jobs, and muster binds each pod to the node of
# its member, numbered by (replicated Job, Job index, completion index). Child Jobs are no groups
# of their own. The JobSet completes, so does the Group. A tenant unsuspending a JobSet that
# waits gets a resume request, not a start; deleting the JobSet deletes its Group. The JobSet CRD
# is removed after, so later tests run without it.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/muster.sh"
ns=e2e-muster-jobset
echo "test-muster-jobset" >&2
tmp=$(mktemp -d)
cleanup() {
  local rc=$?
  muster_down
  k delete namespace $ns --wait=false --ignore-not-found >/dev/null 2>&1 || true
  jobset_controller_down $rc
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the JobSet controller ------------------------------------------------------------------
jobset_controller_up "$tmp" "$MUSTER_CLUSTER_DIR/logs/jobset-controller.log"

touch "$muster_log"
log_from=$(( $(wc -l < "$muster_log") + 1 ))
muster_up
fresh_namespace $ns
# The CRD was installed first, so muster's first discovery finds it.
eventually 30 "muster watches JobSets (the CRD is installed)" bash -c \
  "tail -n +$log_from '$muster_log' | grep -q 'the JobSet CRD is installed; watching JobSets'"

# jobset_yaml NAME RUN_SECONDS CPU [WORKERS]: workers (WORKERS Jobs, default 2, x 2 indexed pods)
# and a driver (1 pod)
jobset_yaml() {
  local pod
  pod=$(cat <<YAML
          metadata:
            annotations: {kwok.muster.dev/run-seconds: "$2", e2e.muster.dev/test: "true"}
          spec:
            restartPolicy: Never
            terminationGracePeriodSeconds: 0
            containers:
            - name: main
              image: kwok-fake
              resources:
                requests: {cpu: "$3", memory: 1Mi}
YAML
)
  cat <<YAML
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: $1
  labels: {muster.dev/queue: default}
spec:
  replicatedJobs:
  - name: workers
    replicas: ${4:-2}
    template:
      spec:
        parallelism: 2
        completions: 2
        completionMode: Indexed
        backoffLimit: 0
        template:
$pod
  - name: driver
    template:
      spec:
        backoffLimit: 0
        template:
$pod
YAML
}
field() { k -n $ns get "$@" 2>/dev/null; }

out=$(jobset_yaml train 8 10m | k -n $ns create -f - -o jsonpath='{.spec.suspend} {.spec.replicatedJobs[*].template.spec.template.spec.schedulerName}')
check "the webhook held the JobSet and named muster its pods' scheduler ($out)" test "$out" = "true muster muster"
check_workload_group $ns train jobset JobSet 5 "every pod of the JobSet (2x2 workers + 1 driver)"
eventually 30 "muster admitted the group and resumed the JobSet" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get jobset train -o jsonpath='{.spec.suspend}') == false ]]"
placed() { on_assigned $ns train jobset.sigs.k8s.io/jobset-name=train 5 2>/dev/null; }
eventually 60 "all 5 pods are bound, each on the node its Group assigned to its member" placed
member_of() { # member_of REPLICATED_JOB JOB_INDEX COMPLETION_INDEX
  k -n $ns get pods -l "jobset.sigs.k8s.io/replicatedjob-name=$1,jobset.sigs.k8s.io/job-index=$2" \
    -o jsonpath="{range .items[?(@.metadata.annotations.batch\.kubernetes\.io/job-completion-index==\"$3\")]}{.metadata.annotations.muster\.dev/member}{end}"
}
members="$(member_of workers 0 0) $(member_of workers 0 1) $(member_of workers 1 0) $(member_of workers 1 1)"
check "members are numbered by replicated Job, Job index and completion index ($members)" test "$members" = "0 1 2 3"
check "the driver's pod takes the member left" test "$(k -n $ns get pods -l jobset.sigs.k8s.io/replicatedjob-name=driver -o jsonpath='{.items[0].metadata.annotations.muster\.dev/member}')" = 4
check "the child Jobs are no groups of their own (one Group in the namespace)" \
  test "$(k -n $ns get groups.muster.dev -o name)" = "group.muster.dev/train"
eventually 90 "the JobSet completed" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get jobset train -o jsonpath='{.status.conditions[?(@.type==\"Completed\")].status}') == True ]]"
eventually 30 "and its Group is Succeeded" bash -c \
  "[[ \$('$K8S_BIN/kubectl' -n $ns get groups.muster.dev train -o jsonpath='{.status.phase}') == Succeeded ]]"

# --- a JobSet that does not fit waits; unsuspending it is a request, not a start -------------
# 401 pods of 64 cpu: more than the 100 nodes of 100 cpu hold.
jobset_yaml huge 5 64 200 | k -n $ns create -f - >/dev/null
out=$(k -n $ns patch jobset huge --type merge -p '{"spec":{"suspend":false}}' \
  -o jsonpath='{.spec.suspend} {.metadata.annotations.muster\.dev/resume-requested}')
check "unsuspending it by hand keeps it suspended, with a resume request ($out)" bash -c "[[ '$out' == 'true '2* ]]"
check_waits_unmade $ns huge JobSet jobset.sigs.k8s.io/jobset-name=huge
check_deleted_with_group $ns huge jobset JobSet
