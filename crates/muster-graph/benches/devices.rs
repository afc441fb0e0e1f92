//! Published devices (DRA): a 1,000-member gang, each member claiming eight GPUs by a CEL
//! selector, on 10k nodes of eight published GPUs each (half H100, half A100, every device with a
//! uuid of its own), a third of the nodes with some GPUs already taken. Beside it, the same gang
//! asking eight GPUs by count alone, and by a selector that reads the device as a whole (so that
//! no result is shared between devices). Run with `cargo bench -p muster-graph --bench devices`;
//! results are recorded in docs/benchmarks.md.
//!
//! Every timed iteration allocates the gang (asserting every member was placed) and cancels it.

mod common;

use std::hint::black_box;
use std::time::Duration;

use common::{SplitMix64, round};
use criterion::{Criterion, criterion_group, criterion_main};
use muster_graph::dra::{AttributeValue, DeviceRequest, PublishedDevice};
use muster_graph::{Graph, GroupRequest, NodeSpec, Policy, ResourceGraph};

const DRIVER: &str = "gpu.example.com";
const NODES: usize = 10_000;

fn cluster() -> ResourceGraph {
    let nodes: Vec<NodeSpec> = (0..NODES)
        .map(|i| {
            let name = format!("n{i:05}");
            let model = if i % 2 == 0 { "h100" } else { "a100" };
            let published = (0..8)
                .map(|k| {
                    PublishedDevice::new(DRIVER, &name, &format!("gpu-{k}"))
                        .with_attribute("model", AttributeValue::String(model.into()))
                        .with_attribute("uuid", AttributeValue::String(format!("GPU-{i}-{k}")))
                        .with_attribute("index", AttributeValue::Int(k))
                        .with_capacity("memory", "80Gi")
                })
                .collect();
            NodeSpec {
                name,
                topology: vec![("zone".into(), format!("z{}", i / 1000)), ("rack".into(), format!("r{}", i / 40))],
                pooled: vec![("cpu".into(), 128_000), ("memory".into(), 1 << 40)],
                published,
                ..NodeSpec::default()
            }
        })
        .collect();
    let mut rg = ResourceGraph::new(Graph::from_nodes("dra", &nodes).expect("valid cluster"), Policy::First);
    // A third of the nodes run something holding one to seven of their GPUs.
    let mut rng = SplitMix64(0x5EED_0D4A);
    for i in (0..NODES).filter(|i| i % 3 == 0) {
        let gpus = 1 + rng.upto(6);
        let name = format!("n{i:05}");
        rg.hold(&name, &[("cpu".into(), 1000), (DRIVER.into(), gpus)], &[], 0).expect("background fits");
    }
    rg
}

fn gang(selectors: &[&str]) -> GroupRequest {
    let mut g = GroupRequest::simple("train", 1000, &[("cpu", 1000)]);
    g.devices = vec![DeviceRequest {
        name: "gpus".into(),
        driver: DRIVER.into(),
        count: 8,
        selectors: selectors.iter().map(|s| s.to_string()).collect(),
        extended_resource: None,
    }];
    g
}

fn devices(c: &mut Criterion) {
    let mut rg = cluster();
    let mut g = c.benchmark_group("dra10k");
    let by_model = gang(&[r#"device.attributes["gpu.example.com"].model == "h100""#]);
    g.bench_function("match1000x8/selector", |b| b.iter(|| round(&mut rg, black_box(&by_model))));
    let whole = gang(&[
        r#"device.attributes["gpu.example.com"].exists(k, k == "model" && device.attributes["gpu.example.com"][k] == "h100")"#,
    ]);
    g.bench_function("match1000x8/selector-reading-whole-device", |b| b.iter(|| round(&mut rg, black_box(&whole))));
    let count = GroupRequest::simple("train", 1000, &[("cpu", 1000), (DRIVER, 8)]);
    g.bench_function("match1000x8/count", |b| b.iter(|| round(&mut rg, black_box(&count))));
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args()
}

criterion_group! {
    name = benches;
    config = config();
    targets = devices
}
criterion_main!(benches);
