#![no_main]
//! The JGF importer (and `load_graph`) never panic; what imports exports and re-imports unchanged.

use libfuzzer_sys::fuzz_target;
use muster_graph::{jgf, load_graph};

#[path = "common.rs"]
mod common;

const FILE: &str = "fuzz.json";

fuzz_target!(|data: &[u8]| {
    let text = &*String::from_utf8_lossy(data);
    match jgf::import(FILE, text) {
        Ok(g) => common::check_round_trip(&g),
        Err(e) => common::check_error(FILE, &e),
    }
    if let Err(e) = load_graph(FILE, text) {
        common::check_error(FILE, &e);
    }
});
