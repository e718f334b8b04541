//! Connections before anyone is known, on the gRPC port and the report's
//! alike: a cap on how many are open, and an end for those that say nothing.
//!
//! - **Timeouts.** A connection must start its first request within
//!   [`Timeouts::first_request`] of being accepted (the HTTP headers read, the
//!   first gRPC stream opened; TLS handshakes included), and is closed once it
//!   has had no request in progress for [`Timeouts::idle`] (keep-alive). A
//!   request in progress — an agent's session stream lives for hours — keeps
//!   its connection open however quiet it is.
//! - **The cap.** At most `cap` connections are open ([`Connections::admit`]).
//!   One more arriving at the cap closes the connection that has been idle
//!   longest (a socket that never sent a request goes first) and takes its
//!   place at once, without waiting for it to close (a few dozen such at a
//!   time); only when every open connection has a request in progress is the
//!   new one closed instead. So idle sockets, however many, never keep an
//!   agent, an operator or a probe out: they are the first to go.
//!
//! A request is attributed to its connection by the peer's address and port
//! ([`Connections::request`]): a tower layer on the gRPC side
//! (`grpc::limits::tracked`), a middleware on the HTTP side (`web::listener::Peer`).

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// Default cap on the report's open HTTP connections (`--http-max-connections`):
/// readers, probes and scrapers need a few dozen.
pub const DEFAULT_HTTP_CONNECTIONS: usize = 256;
/// Default timeouts of connections without a request, on both listeners
/// (`--first-request-timeout`, `--idle-timeout`): the first request within
/// the time a TLS handshake may take (`crate::tls`), and the keep-alive of a
/// connection whose last request ended — an agent's next session, an
/// operator's next call, a browser's next page.
pub const DEFAULT_TIMEOUTS: Timeouts = Timeouts {
    first_request: Duration::from_secs(10),
    idle: Duration::from_secs(60),
};

/// Connections evicted and not closed yet whose places were handed on at
/// once; past it a new connection waits for its victim to close.
const MAX_HANDED_OVER: usize = 64;
/// How long a connection that one more is waiting to replace has to close.
const EVICTION_WAIT: Duration = Duration::from_secs(1);

/// When a connection that is not serving a request is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// From its accept to its first request (for HTTP: its headers read).
    pub first_request: Duration,
    /// From the end of its last request (keep-alive).
    pub idle: Duration,
}

/// The open connections of one listener.
pub struct Connections {
    permits: Arc<Semaphore>,
    cap: usize,
    timeouts: Timeouts,
    /// For the log: which listener.
    what: &'static str,
    next: AtomicU64,
    inner: Mutex<Inner>,
    /// Evicted connections whose places were handed on before they closed.
    handed_over: AtomicUsize,
}

#[derive(Default)]
struct Inner {
    /// Connections without a request in progress, by when they became so.
    idle: BTreeMap<u64, Arc<Conn>>,
    /// Every open connection, by its peer.
    by_peer: HashMap<SocketAddr, Arc<Conn>>,
}

/// One open connection.
pub struct Conn {
    id: u64,
    peer: SocketAddr,
    state: Mutex<State>,
    /// Told to close (one more connection needs its place).
    evict: Notify,
}

struct State {
    requests: usize,
    /// Since when it has had no request in progress (or was accepted).
    since: Instant,
    /// It has served a request: the idle timeout applies, not the first request's.
    served: bool,
    /// Its key in [`Inner::idle`] while it is there.
    idle_key: Option<u64>,
    /// Its connection was dropped.
    closed: bool,
    /// Evicted, its place already given to another: its permit is forgotten, not released.
    handed_over: bool,
}

impl Conn {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Connections {
    /// At most `cap` connections of listener `what`, closed by `timeouts`.
    pub fn new(what: &'static str, cap: usize, timeouts: Timeouts) -> Arc<Connections> {
        Arc::new(Connections {
            permits: Arc::new(Semaphore::new(cap)),
            cap,
            timeouts,
            what,
            next: AtomicU64::new(0),
            inner: Mutex::default(),
            handed_over: AtomicUsize::new(0),
        })
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.cap - self.permits.available_permits()
    }

    /// Admits `io`, just accepted: at the cap, in place of the connection idle
    /// longest; `None` (and `io` closed) when every open one serves a request.
    pub async fn admit(self: &Arc<Self>, io: TcpStream) -> Option<Guarded> {
        let peer = io.peer_addr().ok()?;
        let permit = match self.permits.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => self.evict_for(peer).await?,
        };
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn {
            id,
            peer,
            state: Mutex::new(State {
                requests: 0,
                since: Instant::now(),
                served: false,
                idle_key: Some(id),
                closed: false,
                handed_over: false,
            }),
            evict: Notify::new(),
        });
        {
            let mut inner = self.inner();
            inner.idle.insert(id, conn.clone());
            inner.by_peer.insert(peer, conn.clone());
        }
        let closing = Box::pin(until_closed(conn.clone(), self.timeouts));
        Some(Guarded {
            io,
            conns: self.clone(),
            conn,
            closing,
            permit: Some(permit),
        })
    }

    /// A place for a new connection from `peer` at the cap: the one of the
    /// connection idle longest, which is told to close. Its place is handed
    /// on at once (its permit forgotten when it closes) while fewer than
    /// [`MAX_HANDED_OVER`] are, else when it has closed. `None` when no
    /// connection is idle, or none closed in time.
    async fn evict_for(&self, peer: SocketAddr) -> Option<OwnedSemaphorePermit> {
        let Some(victim) = self.inner().idle.pop_first().map(|(_, conn)| conn) else {
            tracing::warn!(
                listener = self.what,
                cap = self.cap,
                ?peer,
                "every connection serves a request: closing a new one"
            );
            return None;
        };
        let hand_over = self.handed_over.load(Ordering::Relaxed) < MAX_HANDED_OVER;
        let closing_already = {
            let mut state = victim.state();
            state.idle_key = None;
            // Set under its lock: its drop then forgets its permit, or has released it already.
            if !state.closed && hand_over {
                state.handed_over = true;
                self.handed_over.fetch_add(1, Ordering::Relaxed);
            }
            state.closed
        };
        if !closing_already {
            tracing::debug!(listener = self.what, victim = ?victim.peer, ?peer, "at the cap: closing the connection idle longest");
            victim.evict.notify_one();
            if hand_over {
                self.permits.add_permits(1);
                if let Ok(permit) = self.permits.clone().try_acquire_owned() {
                    return Some(permit);
                }
            }
        }
        match tokio::time::timeout(EVICTION_WAIT, self.permits.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Some(permit),
            _ => {
                tracing::warn!(
                    listener = self.what,
                    cap = self.cap,
                    ?peer,
                    "no connection closed in time: closing a new one"
                );
                None
            }
        }
    }

    /// A request of the connection from `peer` starts; it ends when the
    /// returned guard is dropped. `None` for a peer that is not open here.
    pub fn request(self: &Arc<Self>, peer: SocketAddr) -> Option<InFlight> {
        let conn = self.inner().by_peer.get(&peer).cloned()?;
        let key = {
            let mut state = conn.state();
            state.requests += 1;
            state.idle_key.take()
        };
        if let Some(key) = key {
            self.inner().idle.remove(&key);
        }
        Some(InFlight {
            conns: self.clone(),
            conn,
        })
    }

    fn request_ended(&self, conn: &Arc<Conn>) {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        let mut state = conn.state();
        state.requests -= 1;
        if state.requests == 0 {
            state.since = Instant::now();
            state.served = true;
            state.idle_key = Some(key);
            drop(state);
            self.inner().idle.insert(key, conn.clone());
        }
    }

    fn closed(&self, conn: &Conn) {
        let key = conn.state().idle_key.take();
        let mut inner = self.inner();
        if let Some(key) = key {
            inner.idle.remove(&key);
        }
        if inner.by_peer.get(&conn.peer).is_some_and(|c| c.id == conn.id) {
            inner.by_peer.remove(&conn.peer);
        }
    }
}

/// Resolves when `conn` is to close: evicted, or without a request for its timeout.
async fn until_closed(conn: Arc<Conn>, timeouts: Timeouts) -> &'static str {
    loop {
        let deadline = {
            let state = conn.state();
            let limit = if state.served {
                timeouts.idle
            } else {
                timeouts.first_request
            };
            if state.requests > 0 {
                // Looked at again then: a request that ended meanwhile set `since`.
                Instant::now() + limit
            } else {
                state.since + limit
            }
        };
        tokio::select! {
            () = conn.evict.notified() => return "closed to make room for a new connection",
            () = tokio::time::sleep_until(deadline) => {}
        }
        let state = conn.state();
        let limit = if state.served {
            timeouts.idle
        } else {
            timeouts.first_request
        };
        if state.requests == 0 && state.since + limit <= Instant::now() {
            return if state.served {
                "idle past its keep-alive timeout"
            } else {
                "no request within its first-request timeout"
            };
        }
    }
}

/// A request in progress ([`Connections::request`]).
pub struct InFlight {
    conns: Arc<Connections>,
    conn: Arc<Conn>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.conns.request_ended(&self.conn);
    }
}

/// An admitted connection: holds its place under the cap, and fails its
/// reads once it is to close (the server then drops it).
pub struct Guarded {
    io: TcpStream,
    conns: Arc<Connections>,
    conn: Arc<Conn>,
    closing: Pin<Box<dyn Future<Output = &'static str> + Send + Sync>>,
    /// Its place under the cap.
    permit: Option<OwnedSemaphorePermit>,
}

impl Guarded {
    /// The TCP connection.
    pub fn tcp(&self) -> &TcpStream {
        &self.io
    }

    /// The peer's address and port.
    pub fn peer(&self) -> SocketAddr {
        self.conn.peer
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        let handed_over = {
            let mut state = self.conn.state();
            state.closed = true;
            state.handed_over
        };
        if handed_over && let Some(permit) = self.permit.take() {
            // Its place went to another connection when it was evicted.
            permit.forget();
            self.conns.handed_over.fetch_sub(1, Ordering::Relaxed);
        }
        self.conns.closed(&self.conn);
    }
}

impl AsyncRead for Guarded {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if let Poll::Ready(why) = self.closing.as_mut().poll(cx) {
            tracing::debug!(listener = self.conns.what, peer = ?self.conn.peer, why, "closing a connection");
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, why)));
        }
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;
    use tokio::net::TcpListener;

    use super::*;

    const T: Timeouts = Timeouts {
        first_request: Duration::from_secs(10),
        idle: Duration::from_secs(30),
    };

    /// A client connected to `listener` and the server's side of it, admitted.
    async fn connect(listener: &TcpListener, conns: &Arc<Connections>) -> (TcpStream, Option<Guarded>) {
        let client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        (client, conns.admit(server).await)
    }

    /// Reads on the server's side until it fails (the connection is to close) or `limit` passes.
    async fn closes_within(guarded: &mut Guarded, limit: Duration) -> bool {
        let mut byte = [0u8; 1];
        tokio::time::timeout(limit, guarded.read(&mut byte))
            .await
            .is_ok_and(|r| r.is_err())
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_without_a_request_closes_after_its_first_request_timeout() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let conns = Connections::new("test", 4, T);
        let (_client, guarded) = connect(&listener, &conns).await;
        let mut guarded = guarded.unwrap();
        assert!(!closes_within(&mut guarded, T.first_request - Duration::from_millis(1)).await);
        assert!(closes_within(&mut guarded, Duration::from_millis(2)).await);
        drop(guarded);
        assert_eq!(conns.open(), 0, "its place is free again");
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_in_progress_keeps_its_connection_and_its_end_starts_the_idle_timeout() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let conns = Connections::new("test", 4, T);
        let (_client, guarded) = connect(&listener, &conns).await;
        let mut guarded = guarded.unwrap();
        let request = conns.request(guarded.peer()).expect("an open connection");
        assert!(
            !closes_within(&mut guarded, 10 * T.idle).await,
            "a session stream lasts"
        );
        drop(request);
        assert!(!closes_within(&mut guarded, T.idle - Duration::from_millis(1)).await);
        assert!(closes_within(&mut guarded, Duration::from_millis(2)).await);
    }

    #[tokio::test(start_paused = true)]
    async fn at_the_cap_a_new_connection_takes_the_place_of_the_one_idle_longest() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let conns = Connections::new("test", 2, T);
        let (_c1, busy) = connect(&listener, &conns).await;
        let busy = busy.unwrap();
        let _r1 = conns.request(busy.peer()).unwrap();
        let (_c2, idle) = connect(&listener, &conns).await;
        let mut idle = idle.unwrap();
        // A third: admitted in the idle one's place once that one closed.
        let _c3 = TcpStream::connect(addr).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let admit = tokio::spawn({
            let conns = conns.clone();
            async move { conns.admit(server).await }
        });
        assert!(closes_within(&mut idle, Duration::from_millis(10)).await, "evicted");
        drop(idle);
        let third = admit.await.unwrap().expect("admitted in its place");
        assert_eq!(conns.open(), 2);
        // With both open ones serving a request, a fourth is closed instead.
        let _r3 = conns.request(third.peer()).unwrap();
        let _c4 = TcpStream::connect(addr).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        assert!(conns.admit(server).await.is_none());
        assert_eq!(conns.open(), 2);
    }
}
