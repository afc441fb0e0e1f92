//! Writes the synthetic SWF trace the swf-example scenario uses:
//! cargo run -p muster-sim --example gen_swf -- SEED JOBS MAX_PROCS MEAN_GAP_S > scenarios/swf/example.swf

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, d: f64| a.get(i).and_then(|s| s.parse::<f64>().ok()).unwrap_or(d);
    print!(
        "{}",
        muster_sim::swf::generate(num(0, 1.0) as u64, num(1, 300.0) as usize, num(2, 512.0) as u32, num(3, 60.0))
    );
}
