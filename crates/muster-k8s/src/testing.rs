//! Objects as the apiserver sends them, for tests of this crate and of the controller.

use k8s_openapi::api::resource::v1::ResourceSlice;

/// A ResourceSlice of driver `gpu.example.com` for `node` (its pool, at `generation`): one GPU per
/// model given, named `gpu-<i>`, with a model, an index, a driver version, a flag in the driver's
/// qualified form and 80Gi of memory.
pub fn resource_slice(name: &str, node: &str, generation: i64, models: &[&str]) -> ResourceSlice {
    let devices: Vec<serde_json::Value> = (models.iter().enumerate())
        .map(|(i, m)| {
            serde_json::json!({
                "name": format!("gpu-{i}"),
                "attributes": {
                    "model": {"string": m},
                    "index": {"int": i},
                    "driverVersion": {"version": "550.54.15"},
                    "gpu.example.com/mig": {"bool": false}
                },
                "capacity": {"memory": {"value": "80Gi"}}
            })
        })
        .collect();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name, "resourceVersion": "812", "generation": 1},
        "spec": {
            "driver": "gpu.example.com",
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
            "devices": devices
        }
    }))
    .expect("a valid ResourceSlice")
}
