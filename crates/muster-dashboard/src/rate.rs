//! A rate limit of token checks per client address (a token bucket each): what reaches the API
//! server for one caller's unknown tokens is bounded, whatever tokens they make up.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Clients remembered at most; beyond, the full buckets go (they hold nothing to remember).
const MAX_CLIENTS: usize = 10_000;

/// At most `burst` checks at once per client, then one each `every`.
pub struct RateLimit {
    burst: u32,
    every: Duration,
    buckets: Mutex<HashMap<IpAddr, Bucket>>,
}

struct Bucket {
    /// Checks the client may still make; fractions are time already earned toward the next.
    left: f64,
    at: Instant,
}

impl RateLimit {
    pub fn new(burst: u32, every: Duration) -> Self {
        RateLimit { burst: burst.max(1), every, buckets: Mutex::new(HashMap::new()) }
    }

    /// Takes one check for `client`; when none is left, how long until the next.
    pub fn take(&self, client: IpAddr) -> Result<(), Duration> {
        let now = Instant::now();
        let burst = f64::from(self.burst);
        let every = self.every.as_secs_f64().max(f64::EPSILON);
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() >= MAX_CLIENTS && !buckets.contains_key(&client) {
            buckets.retain(|_, b| b.left + now.duration_since(b.at).as_secs_f64() / every < burst);
        }
        let bucket = buckets.entry(client).or_insert(Bucket { left: burst, at: now });
        bucket.left = (bucket.left + now.duration_since(bucket.at).as_secs_f64() / every).min(burst);
        bucket.at = now;
        if bucket.left >= 1.0 {
            bucket.left -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - bucket.left) * every))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_gets_its_burst_then_one_check_each_period_and_others_are_not_affected() {
        let limit = RateLimit::new(3, Duration::from_millis(100));
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        for _ in 0..3 {
            assert_eq!(limit.take(a), Ok(()));
        }
        let wait = limit.take(a).expect_err("the burst is spent");
        assert!(wait > Duration::ZERO && wait <= Duration::from_millis(100), "{wait:?}");
        assert_eq!(limit.take(b), Ok(()), "another client has its own bucket");
        std::thread::sleep(Duration::from_millis(110));
        assert_eq!(limit.take(a), Ok(()), "one more after a period");
        assert!(limit.take(a).is_err());
    }
}
