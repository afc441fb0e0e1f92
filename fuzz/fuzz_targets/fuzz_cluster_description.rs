#![no_main]
//! The cluster description parser never panics; what it accepts exports to JGF and back unchanged.

use libfuzzer_sys::fuzz_target;
use muster_graph::cluster::{self, ClusterDescription};

#[path = "common.rs"]
mod common;

const FILE: &str = "fuzz-cluster.yaml";

fuzz_target!(|data: &[u8]| {
    let text = &*String::from_utf8_lossy(data);
    match ClusterDescription::parse(FILE, text) {
        Ok(_) => {}
        Err(e) => common::check_error(FILE, &e),
    }
    match cluster::load(FILE, text) {
        Ok(g) => common::check_round_trip(&g),
        Err(e) => common::check_error(FILE, &e),
    }
});
