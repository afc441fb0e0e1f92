//! Tokens the API server refused, remembered for a short while by their SHA-256 (never the token
//! itself), so that a caller repeating a bad token costs one TokenReview, not one a request.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The SHA-256 of a token: how the dashboard remembers tokens, refused or accepted.
pub type TokenHash = [u8; 32];

pub fn hash(token: &str) -> TokenHash {
    let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut out = [0; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

/// A bounded set of refused tokens, each forgotten `ttl` after it was refused.
pub struct Refused {
    ttl: Duration,
    max: usize,
    at: Mutex<HashMap<TokenHash, Instant>>,
}

impl Refused {
    pub fn new(ttl: Duration, max: usize) -> Self {
        Refused { ttl, max, at: Mutex::new(HashMap::new()) }
    }

    /// Whether `token` was refused less than the TTL ago.
    pub fn contains(&self, token: &TokenHash) -> bool {
        let at = self.at.lock().unwrap_or_else(|e| e.into_inner());
        at.get(token).is_some_and(|t| t.elapsed() < self.ttl)
    }

    /// Remembers `token` as refused now. When full, the expired entries go, and if none had
    /// expired, all of them: the cost is a few more reviews, never unbounded memory.
    pub fn insert(&self, token: TokenHash) {
        let mut at = self.at.lock().unwrap_or_else(|e| e.into_inner());
        if at.len() >= self.max {
            at.retain(|_, t| t.elapsed() < self.ttl);
            if at.len() >= self.max {
                at.clear();
            }
        }
        at.insert(token, Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_token_is_remembered_by_its_hash_until_the_ttl_and_the_set_stays_bounded() {
        let refused = Refused::new(Duration::from_millis(50), 3);
        assert!(!refused.contains(&hash("bad")));
        refused.insert(hash("bad"));
        assert!(refused.contains(&hash("bad")));
        assert!(!refused.contains(&hash("bad2")), "only that token");
        for t in ["a", "b", "c"] {
            refused.insert(hash(t));
        }
        assert!(refused.at.lock().unwrap().len() <= 3, "never more than the bound");
        assert!(refused.contains(&hash("c")), "the newest is kept");
        std::thread::sleep(Duration::from_millis(60));
        assert!(!refused.contains(&hash("c")), "forgotten after the TTL");
    }

    #[test]
    fn the_hash_is_sha256() {
        let hex: String = hash("abc").iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
