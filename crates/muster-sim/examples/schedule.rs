//! Prints when each job of a scenario started under one scheduler, a line per job in the
//! scenario's order: `NAME START_S` (whole seconds, `-` when it never started). For comparing a
//! schedule job for job with another simulator (hack/ref-sim/).
//!
//! cargo run --release -p muster-sim --example schedule -- SCENARIO SCHEDULER

use std::path::PathBuf;

use muster_sim::engine::Engine;
use muster_sim::{RunOptions, scenario};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [path, scheduler] = args.as_slice() else {
        return Err("usage: schedule SCENARIO SCHEDULER (muster-fifo, muster-easy, ...)".into());
    };
    let w = scenario::load(&PathBuf::from(path), 1)?;
    // Starts only: muster's estimated starts are not measured (they change no schedule).
    let mut opts = RunOptions::new(path);
    opts.estimates = false;
    let mut s = muster_sim::scheduler_with(scheduler, &w, &opts)?;
    let rec = Engine::new(&w)?.run(s.as_mut(), false)?;
    let mut out = String::new();
    for (spec, job) in w.jobs.iter().zip(&rec.jobs) {
        let start = job.scheduled_ms.map_or("-".to_string(), |ms| ms.div_euclid(1000).to_string());
        out.push_str(&format!("{} {start}\n", spec.name));
    }
    print!("{out}");
    Ok(())
}
