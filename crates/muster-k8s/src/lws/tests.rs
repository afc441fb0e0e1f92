use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde_json::json;

use super::*;

fn meta(name: &str, labels: &[(&str, &str)], annotations: &[(&str, &str)], owner_kind: &str) -> ObjectMeta {
    let map = |kv: &[(&str, &str)]| Some(kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
    ObjectMeta {
        name: Some(name.into()),
        labels: map(labels),
        annotations: map(annotations),
        owner_references: Some(vec![OwnerReference {
            api_version: "apps/v1".into(),
            kind: owner_kind.into(),
            name: "serve".into(),
            uid: "u".into(),
            controller: Some(true),
            ..OwnerReference::default()
        }]),
        ..ObjectMeta::default()
    }
}

#[test]
fn a_leader_names_its_group_and_its_workers_name_their_leader() {
    let leader =
        meta("serve-1", &[(NAME_LABEL, "serve"), (WORKER_INDEX_LABEL, "0")], &[(SIZE_ANNOTATION, "4")], "StatefulSet");
    assert_eq!(pod_gang(&leader), Some(Ok(PodGang { group: "serve-1".into(), size: 4, set: LEADER_SET })));
    let worker = meta(
        "serve-1-3",
        &[(NAME_LABEL, "serve"), (WORKER_INDEX_LABEL, "3")],
        &[(SIZE_ANNOTATION, "4"), (LEADER_NAME_ANNOTATION, "serve-1")],
        "StatefulSet",
    );
    assert_eq!(pod_gang(&worker), Some(Ok(PodGang { group: "serve-1".into(), size: 4, set: WORKER_SET })));
}

#[test]
fn only_pods_of_a_leader_worker_sets_statefulsets_are_its_gangs() {
    let labels = [(NAME_LABEL, "serve"), (WORKER_INDEX_LABEL, "0")];
    assert_eq!(pod_gang(&meta("serve-0", &labels, &[(SIZE_ANNOTATION, "2")], "ReplicaSet")), None);
    assert_eq!(pod_gang(&meta("serve-0", &[], &[(SIZE_ANNOTATION, "2")], "StatefulSet")), None);
    let bad_size = pod_gang(&meta("serve-0", &labels, &[(SIZE_ANNOTATION, "0")], "StatefulSet")).unwrap();
    assert!(bad_size.unwrap_err().contains(SIZE_ANNOTATION));
    let no_leader = meta(
        "serve-0-1",
        &[(NAME_LABEL, "serve"), (WORKER_INDEX_LABEL, "1")],
        &[(SIZE_ANNOTATION, "2")],
        "StatefulSet",
    );
    assert!(pod_gang(&no_leader).unwrap().unwrap_err().contains(LEADER_NAME_ANNOTATION));
}

fn lws(spec: serde_json::Value) -> LeaderWorkerSet {
    serde_json::from_value(json!({
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "serve", "namespace": "ns"}, "spec": spec
    }))
    .unwrap()
}

fn template(cpu: &str, extra: serde_json::Value) -> serde_json::Value {
    let mut spec = json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]});
    spec.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    json!({"spec": spec})
}

#[test]
fn a_leader_may_differ_from_its_workers() {
    let ok = lws(json!({"replicas": 2, "leaderWorkerTemplate": {"size": 4,
        "leaderTemplate": template("500m", json!({"nodeSelector": {"pool": "cpu"}})),
        "workerTemplate": template("2", json!({}))}}));
    assert_eq!(check(&ok), Vec::<String>::new());
    assert_eq!(ok.size(), 4);
    let cpu = |m: u64| crate::pod::Amounts::from([("cpu".to_string(), m)]);
    assert_eq!(group_asks(&ok), Some(vec![(1, cpu(500)), (3, cpu(2000))]), "what the quota counts");
    let mut ranked = ok.clone();
    ranked.spec.leader_worker_template.worker_template.spec.as_mut().unwrap().priority_class_name = Some("high".into());
    assert!(check(&ranked)[0].contains("priorityClassName"), "one group starts at one priority");
    let workers_only = lws(json!({"leaderWorkerTemplate": {"workerTemplate": template("1", json!({}))}}));
    assert_eq!((check(&workers_only), workers_only.size()), (Vec::new(), 1));
}

#[test]
fn what_could_never_start_whole_is_refused_naming_the_field() {
    let hostile = lws(json!({"startupPolicy": "LeaderReady", "leaderWorkerTemplate": {"size": 3,
        "leaderTemplate": template("500m", json!({"nodeSelector": {"pool": "a"}})),
        "workerTemplate": template("1", json!({"nodeName": "node-1"}))}}));
    let errors = check(&hostile);
    let has = |s: &str| errors.iter().any(|e| e.contains(s));
    assert!(has("spec.startupPolicy: LeaderReady"), "{errors:?}");
    assert!(has("spec.leaderWorkerTemplate.workerTemplate.spec.nodeName"), "{errors:?}");
    assert_eq!(errors.len(), 2, "a leader asking less, elsewhere, is fine: {errors:?}");
    let claiming = lws(json!({"leaderWorkerTemplate": {"size": 2, "workerTemplate": template("1",
        json!({"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]}))}}));
    let errors = check(&claiming);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].starts_with("spec.leaderWorkerTemplate.workerTemplate.spec.resourceClaims: muster allocates"));
    let too_big = lws(json!({"leaderWorkerTemplate": {"size": 0, "workerTemplate": template("1", json!({}))}}));
    assert!(check(&too_big)[0].starts_with(SIZE_FIELD));
    let mut exclusive = lws(json!({"leaderWorkerTemplate": {"size": 4, "workerTemplate": template("1", json!({})),
        "subGroupPolicy": {"subGroupSize": 2}}}));
    exclusive.metadata.annotations =
        Some([(SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION.to_string(), "muster.dev/rack".to_string())].into());
    let errors = check(&exclusive);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].starts_with("metadata.annotations[leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology]"));
    let no_spec = lws(json!({"leaderWorkerTemplate": {"size": 2, "workerTemplate": {}}}));
    assert_eq!(check(&no_spec), vec![format!("{WORKER_TEMPLATE_FIELD}.spec is missing")]);
}
