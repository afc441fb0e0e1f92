//! A test of several checks in a row that goes on past a failed one: each part runs to its end
//! or its first failed assertion, which is recorded; after the last part the namespaces are
//! shown (if a part failed) and released, and the test fails naming every failed part.

use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use kube::Client;

use super::namespaces::release;
use super::objects::dump;

pub struct Parts<'a> {
    client: &'a Client,
    namespaces: Vec<&'a str>,
    failed: Vec<String>,
}

impl<'a> Parts<'a> {
    /// Parts acting in `namespaces`: shown when a part fails, released at the end.
    pub fn new(client: &'a Client, namespaces: &[&'a str]) -> Self {
        Parts { client, namespaces: namespaces.to_vec(), failed: Vec::new() }
    }

    /// Runs part `id` (`title` says what it checks); a failure is recorded and shown.
    pub async fn run(&mut self, id: &str, title: &str, part: impl Future<Output = ()>) {
        eprintln!("-- part {id}: {title}");
        if AssertUnwindSafe(part).catch_unwind().await.is_err() {
            eprintln!("  FAIL part {id} ({title})");
            self.failed.push(format!("{id} ({title})"));
            for ns in &self.namespaces {
                dump(self.client, ns).await;
            }
        }
    }

    /// Releases the namespaces and fails the test if any part failed.
    pub async fn finish(self) {
        release(self.client, &self.namespaces).await;
        assert!(self.failed.is_empty(), "failed parts: {}", self.failed.join("; "));
    }
}
