//! What one connection may hold: a place among at most `max_connections` (one more is closed at
//! once), and no longer than the idle timeout without a byte moving either way.

use std::future::{Future, Ready};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum_server::accept::Accept;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

/// Gives each accepted connection its place and its idle timeout, or closes it when every place
/// is taken. (The TLS handshake, when there is one, comes after and is bounded as well.)
#[derive(Clone)]
pub struct ConnectionGuard {
    places: Arc<Semaphore>,
    idle: Duration,
}

impl ConnectionGuard {
    pub fn new(max_connections: usize, idle: Duration) -> Self {
        ConnectionGuard { places: Arc::new(Semaphore::new(max_connections.max(1))), idle }
    }
}

impl<S> Accept<TcpStream, S> for ConnectionGuard {
    type Stream = Guarded<TcpStream>;
    type Service = S;
    type Future = Ready<io::Result<(Self::Stream, S)>>;

    fn accept(&self, stream: TcpStream, service: S) -> Self::Future {
        let Ok(place) = self.places.clone().try_acquire_owned() else {
            tracing::debug!("dashboard: every connection place is taken; closing a new one");
            // Dropping the stream closes it.
            return std::future::ready(Err(io::Error::other("too many connections")));
        };
        let _ = stream.set_nodelay(true);
        std::future::ready(Ok((Guarded::new(stream, self.idle, place), service)))
    }
}

/// A stream that fails with `TimedOut` once nothing was read or written for `idle`, and gives
/// its place back when dropped.
pub struct Guarded<S> {
    inner: S,
    idle: Duration,
    deadline: Pin<Box<Sleep>>,
    _place: OwnedSemaphorePermit,
}

impl<S> Guarded<S> {
    fn new(inner: S, idle: Duration, place: OwnedSemaphorePermit) -> Self {
        Guarded { inner, idle, deadline: Box::pin(tokio::time::sleep(idle)), _place: place }
    }

    /// After progress the idle time starts again; while waiting, the deadline is armed with the
    /// same waker, so the task wakes when it passes.
    fn moved<T>(&mut self, cx: &mut Context<'_>, done: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if done.is_ready() {
            let at = Instant::now() + self.idle;
            self.deadline.as_mut().reset(at);
            return done;
        }
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "idle connection"))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Guarded<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let done = Pin::new(&mut this.inner).poll_read(cx, buf);
        this.moved(cx, done)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Guarded<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let done = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.moved(cx, done)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let done = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.moved(cx, done)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let done = Pin::new(&mut this.inner).poll_flush(cx);
        this.moved(cx, done)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
