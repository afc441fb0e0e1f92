//! The queue view, computed on a thread of its own. Its estimated starts come from a forecast
//! that runs a copy of the engine forward, which on a large cluster with a long queue takes far
//! longer than a cycle: decisions must not wait for it. The brain hands over a copy of the
//! engine and picks the view up on a later turn of its loop; one view is computed at a time.

use std::sync::mpsc;
use std::thread;

use muster_queue::Engine;

use crate::brain::QueueView;

struct Request {
    engine: Engine,
    now: i64,
    with_plan: bool,
}

pub struct Forecaster {
    requests: mpsc::SyncSender<Request>,
    views: mpsc::Receiver<QueueView>,
    busy: bool,
}

impl Forecaster {
    /// Starts the thread; it ends when the forecaster is dropped.
    pub fn start() -> std::io::Result<Self> {
        let (requests, incoming) = mpsc::sync_channel::<Request>(1);
        let (done, views) = mpsc::channel();
        thread::Builder::new().name("muster-forecast".into()).spawn(move || {
            for r in incoming {
                if done.send(QueueView::of(&r.engine, r.now, r.with_plan)).is_err() {
                    return;
                }
            }
        })?;
        Ok(Self { requests, views, busy: false })
    }

    /// True while a view is being computed.
    pub fn busy(&self) -> bool {
        self.busy
    }

    /// Starts computing the view of `engine` at `now`.
    pub fn submit(&mut self, engine: Engine, now: i64, with_plan: bool) {
        self.busy = self.requests.send(Request { engine, now, with_plan }).is_ok();
    }

    /// The view, once it is ready.
    pub fn take(&mut self) -> Option<QueueView> {
        let view = self.views.try_recv().ok()?;
        self.busy = false;
        Some(view)
    }
}
