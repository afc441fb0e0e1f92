//! How much one caller can take of the dashboard and, through it, of the API server.

use std::time::Duration;

/// The bounds the dashboard serves within; [`Limits::default`] is what the controller uses.
#[derive(Debug, Clone)]
pub struct Limits {
    /// A request's head (request line and headers) must arrive within this, counted from when
    /// the connection waits for it; a keep-alive connection waiting longer for its next request
    /// is closed then too.
    pub header_timeout: Duration,
    /// A connection where no byte moves either way for this long is closed (a stalled TLS
    /// handshake, body or reader).
    pub idle_timeout: Duration,
    /// A request not answered within this gets 503 (its body read, the reviews it needs).
    pub request_timeout: Duration,
    /// Connections open at once; one more is closed as soon as it is accepted.
    pub max_connections: usize,
    /// Tokens one client address may have checked by the API server at once ...
    pub checks_burst: u32,
    /// ... and then one more each this long (429 until then).
    pub checks_every: Duration,
    /// A token the API server refused is refused again without asking it for this long.
    pub refused_for: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(30),
            max_connections: 256,
            checks_burst: 10,
            checks_every: Duration::from_secs(1),
            refused_for: Duration::from_secs(60),
        }
    }
}
