//! How the engine's times read in its messages. The engine counts whole seconds on its embedder's
//! clock: Unix time in the controller, seconds since the scenario's start in the simulator. A
//! reason the user reads (a Group's status, `muster why`, an event) shows the first as a UTC
//! timestamp and the second as `t=N s`; no scenario runs for the 31 years that would make the two
//! overlap.

use jiff::Timestamp;

/// Times at or above this are Unix seconds (2001-09-09), below it scenario seconds.
const UNIX_FROM: i64 = 1_000_000_000;

/// `t` as a user reads it: `2026-11-27T05:40:00Z` for Unix seconds, `t=120 s` for scenario ones.
pub fn show(t: i64) -> String {
    match Timestamp::from_second(t) {
        Ok(ts) if t >= UNIX_FROM => ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        _ => format!("t={t} s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_seconds_read_as_utc_and_scenario_seconds_as_offsets() {
        assert_eq!(show(1_795_750_091), "2026-11-27T03:28:11Z");
        assert_eq!(show(0), "t=0 s");
        assert_eq!(show(452), "t=452 s");
        // Beyond what a timestamp holds: still a number, never a panic.
        assert_eq!(show(i64::MAX), format!("t={} s", i64::MAX));
    }
}
