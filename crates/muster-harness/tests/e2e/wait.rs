//! Waiting on the cluster: until a condition holds, or checking that one holds for a while.

use std::future::Future;
use std::time::{Duration, Instant};

const POLL: Duration = Duration::from_millis(500);

/// Polls `check` every half second until it yields Some, or fails the test after `secs` seconds.
pub async fn eventually<T, F, Fut>(secs: u64, what: &str, check: F) -> T
where
    F: Fn() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    for _ in 0..secs * 2 {
        if let Some(v) = check().await {
            eprintln!("  ok   {what}");
            return v;
        }
        tokio::time::sleep(POLL).await;
    }
    panic!("{what}: not within {secs} s");
}

/// Polls `check` every half second for `secs` seconds; fails the test, saying when, the first
/// time it does not hold. What must never happen is seen only if it happens in that window: the
/// window is as long as the system under test would take to do it.
pub async fn throughout<F, Fut>(secs: u64, what: &str, check: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(secs) {
        assert!(check().await, "{what}: broken after {:.1} s", start.elapsed().as_secs_f64());
        tokio::time::sleep(POLL).await;
    }
    eprintln!("  ok   {what} ({secs} s)");
}
