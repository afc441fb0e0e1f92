#![no_main]
//! The jobspec parser (group form and Flux jobspec v1) never panics, and what it accepts is sane.

use libfuzzer_sys::fuzz_target;
use muster_graph::jobspec;

#[path = "common.rs"]
mod common;

const FILE: &str = "fuzz-job.yaml";

fuzz_target!(|data: &[u8]| {
    let text = &*String::from_utf8_lossy(data);
    match jobspec::parse(FILE, text) {
        Ok(g) => {
            assert!(g.min_members >= 1, "accepted a group of {} members", g.min_members);
            assert!(g.min_members <= g.max_members, "min {} > max {}", g.min_members, g.max_members);
            assert!(g.max_members <= jobspec::MAX_MEMBERS, "accepted {} members", g.max_members);
        }
        Err(e) => common::check_error(FILE, &e),
    }
});
