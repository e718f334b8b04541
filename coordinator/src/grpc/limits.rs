//! Caps that hold before anyone is authenticated: open connections (at the
//! cap a new connection takes the place of the one idle longest, and
//! connections without a stream close after their timeouts:
//! [`crate::guard::conn`]), HTTP/2 streams per connection (a server setting),
//! and agent sessions (a semaphore taken before `Hello` is read).
//!
//! The connection and session caps are `serve --max-connections` and
//! `--max-sessions`. Every connection is an open file, so at start the soft
//! open-files limit is raised to the hard one and the caps are checked against
//! it ([`Caps::fit`]): a cap given that cannot fit is an error, a default that
//! cannot is lowered to fit, with a warning.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http_body_util::BodyExt;
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio_stream::{Stream, StreamExt};
use tonic::body::Body;
use tonic::codegen::{Body as HttpBody, Service, http};
use tonic::server::NamedService;
use tonic::transport::server::{Connected, TcpConnectInfo, TlsConnectInfo};

use crate::guard::conn::{Connections, Guarded};

/// Default cap on open gRPC connections, agents and operators together.
pub const DEFAULT_MAX_CONNECTIONS: usize = 65_536;
/// Connections the kernel may queue before they are accepted (it caps this at
/// `net.core.somaxconn`): a fleet that dials at once (a connect storm, a
/// coordinator restart) would otherwise overflow the usual 128 and see its
/// handshakes dropped and retried seconds later.
pub const ACCEPT_BACKLOG: u32 = 65_535;
/// Concurrent HTTP/2 streams on one connection: an agent needs one, an operator a few.
pub const MAX_STREAMS_PER_CONNECTION: u32 = 16;
/// HTTP/2 receive windows, of each connection and each stream: what a client
/// may have sent and the coordinator not yet read (a session waiting for room
/// in the ingest queue stops reading) is at most this per connection (hyper's
/// default is 1 MiB). A larger message still passes: the window reopens as
/// the session reads it.
pub const RECEIVE_WINDOW_BYTES: u32 = 256 * 1024;
/// Handshakes (admission to welcome: several statements each) in progress at
/// once. The rest wait their turn rather than all queueing on the database
/// pool, where in a connect storm every one of them would time out half-done;
/// a `Hello` waits as long as its agent waits for the answer allows, less the
/// handshake's own work, and is told when to retry when that is not enough
/// (`UNAVAILABLE`, with a time to come back: [`super::turns`]).
pub const HANDSHAKES_AT_ONCE: usize = 16;
/// Open files kept aside from gRPC connections: the database pools, the
/// HTTP listener and its clients (at most [`MAX_HTTP_CONNECTIONS`]), the
/// private cluster's pipes, logs.
pub const RESERVED_FILES: u64 = 1024;
/// The most `--http-max-connections` may be: half of [`RESERVED_FILES`].
pub const MAX_HTTP_CONNECTIONS: usize = 512;
pub use crate::guard::conn::{DEFAULT_HTTP_CONNECTIONS, DEFAULT_TIMEOUTS};
/// The least a cap may be.
const MIN_CAP: usize = 16;

/// How many connections and agent sessions are served at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// Open gRPC connections (`--max-connections`).
    pub connections: usize,
    /// Agent sessions, open or still waiting for their `Hello` (`--max-sessions`).
    pub sessions: usize,
}

impl Default for Caps {
    fn default() -> Caps {
        Caps {
            connections: DEFAULT_MAX_CONNECTIONS,
            sessions: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// Caps that cannot be served; the message names the flag and what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CapsError(String);

impl Caps {
    /// The caps for `--max-connections` and `--max-sessions` (`None`: not
    /// given) with `open_files` open files allowed (the soft limit, already
    /// raised to the hard one). A session is one connection, so sessions
    /// default to the connection cap and may not exceed it. A default that
    /// does not fit is lowered, and the warning returned says so.
    pub fn fit(
        connections: Option<usize>,
        sessions: Option<usize>,
        open_files: u64,
    ) -> Result<(Caps, Option<String>), CapsError> {
        let room = usize::try_from(open_files.saturating_sub(RESERVED_FILES)).unwrap_or(usize::MAX);
        let mut warning = None;
        let connections = match connections {
            Some(n) if n < MIN_CAP => return Err(CapsError(format!("--max-connections {n}: at least {MIN_CAP}"))),
            Some(n) if n > room => {
                return Err(CapsError(format!(
                    "--max-connections {n} needs {} open files (one per connection, {RESERVED_FILES} for the \
                     rest) and this process may open {open_files}: raise the hard limit (`ulimit -Hn`, \
                     LimitNOFILE= in the systemd unit, the container's nofile ulimit) or lower --max-connections",
                    n as u64 + RESERVED_FILES
                )));
            }
            Some(n) => n,
            None if DEFAULT_MAX_CONNECTIONS > room => {
                let fits = room.max(MIN_CAP);
                warning = Some(format!(
                    "the open-files limit is {open_files}: serving at most {fits} gRPC connections, not \
                     {DEFAULT_MAX_CONNECTIONS}; raise the hard limit (`ulimit -Hn`, LimitNOFILE= in the \
                     systemd unit) for a larger fleet"
                ));
                fits
            }
            None => DEFAULT_MAX_CONNECTIONS,
        };
        let sessions = match sessions {
            Some(n) if n < 1 => return Err(CapsError("--max-sessions 0: at least 1".into())),
            Some(n) if n > connections => {
                return Err(CapsError(format!(
                    "--max-sessions {n} exceeds --max-connections {connections}: every session is a connection"
                )));
            }
            Some(n) => n,
            None => connections,
        };
        Ok((Caps { connections, sessions }, warning))
    }

    /// [`Caps::fit`] on this process's open-files limit, after raising its soft
    /// limit to the hard one; the warning, if any, is logged.
    pub fn fit_this_process(connections: Option<usize>, sessions: Option<usize>) -> anyhow::Result<Caps> {
        let open_files = raise_open_files()?;
        let (caps, warning) = Caps::fit(connections, sessions, open_files)?;
        if let Some(warning) = warning {
            tracing::warn!("{warning}");
        }
        tracing::info!(
            max_connections = caps.connections,
            max_sessions = caps.sessions,
            open_files,
            "connection caps"
        );
        Ok(caps)
    }

    /// The session semaphore: [`Caps::sessions`] permits.
    pub fn session_permits(&self) -> Arc<Semaphore> {
        Arc::new(Semaphore::new(self.sessions))
    }
}

/// A listener on `addr` with [`ACCEPT_BACKLOG`] (and `SO_REUSEADDR`, as `TcpListener::bind` sets).
pub fn bind(addr: std::net::SocketAddr) -> io::Result<tokio::net::TcpListener> {
    let socket = match addr {
        std::net::SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        std::net::SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(ACCEPT_BACKLOG)
}

/// Raises the soft limit of open files to the hard one; returns it.
fn raise_open_files() -> anyhow::Result<u64> {
    // SAFETY: getrlimit and setrlimit only read and write the struct passed.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return Err(anyhow::Error::new(io::Error::last_os_error()).context("reading the open-files limit"));
        }
        if limit.rlim_cur < limit.rlim_max {
            let soft = limit.rlim_cur;
            limit.rlim_cur = limit.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                tracing::warn!(
                    error = %io::Error::last_os_error(),
                    "cannot raise the open-files limit from {soft} to {}",
                    limit.rlim_max
                );
                return Ok(soft as u64);
            }
        }
        Ok(limit.rlim_cur as u64)
    }
}

/// `incoming`, each connection admitted by `conns` (the cap, the timeouts);
/// one that cannot be is closed at once.
pub fn admitted<S>(incoming: S, conns: Arc<Connections>) -> impl Stream<Item = io::Result<Guarded>>
where
    S: Stream<Item = io::Result<TcpStream>>,
{
    incoming
        .then(move |accepted| {
            let conns = conns.clone();
            async move {
                match accepted {
                    Ok(io) => Ok(conns.admit(io).await),
                    Err(e) => Err(e),
                }
            }
        })
        .filter_map(|admitted| match admitted {
            Ok(Some(io)) => Some(Ok(io)),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        })
}

impl Connected for Guarded {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.tcp().connect_info()
    }
}

/// A gRPC service whose requests (streams) count as in progress on their
/// connection until their response ends ([`Connections::request`]): a
/// connection with an open stream is never closed as idle.
#[derive(Clone)]
pub struct Tracked<S> {
    inner: S,
    conns: Arc<Connections>,
}

/// `service`, its streams counted on their connections in `conns`.
pub fn tracked<S>(service: S, conns: Arc<Connections>) -> Tracked<S> {
    Tracked { inner: service, conns }
}

impl<S: NamedService> NamedService for Tracked<S> {
    const NAME: &'static str = S::NAME;
}

impl<S, B> Service<http::Request<Body>> for Tracked<S>
where
    S: Service<http::Request<Body>, Response = http::Response<B>, Error = Infallible>,
    S::Future: Send + 'static,
    B: HttpBody<Data = tonic::codegen::Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<http::Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let extensions = request.extensions();
        let peer = extensions
            .get::<TcpConnectInfo>()
            .and_then(TcpConnectInfo::remote_addr)
            .or_else(|| {
                extensions
                    .get::<TlsConnectInfo<TcpConnectInfo>>()
                    .and_then(|i| i.get_ref().remote_addr())
            });
        let in_flight = peer.and_then(|peer| self.conns.request(peer));
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            Ok(match in_flight {
                // Held by the body: a session's stream is in progress until it ends.
                Some(in_flight) => response.map(|body| {
                    Body::new(body.map_frame(move |frame| {
                        let _ = &in_flight;
                        frame
                    }))
                }),
                None => response.map(Body::new),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_fit_the_open_files_limit_or_say_which_flag_to_change() {
        let big = 1 << 20;
        // Defaults: where the limit allows them, else as many as fit, said in a warning.
        assert_eq!(Caps::fit(None, None, big), Ok((Caps::default(), None)));
        let (caps, warning) = Caps::fit(None, None, 20_000).unwrap();
        assert_eq!(
            caps,
            Caps {
                connections: 18_976,
                sessions: 18_976
            }
        );
        assert!(warning.unwrap().contains("18976"));
        assert_eq!(Caps::fit(None, None, 100).unwrap().0.connections, MIN_CAP);
        // Given: kept when they fit, refused naming the flag when they do not.
        assert_eq!(
            Caps::fit(Some(10_000), Some(9_000), 20_000),
            Ok((
                Caps {
                    connections: 10_000,
                    sessions: 9_000
                },
                None
            ))
        );
        assert_eq!(Caps::fit(None, Some(500), big).unwrap().0.sessions, 500);
        for (connections, sessions, open_files, flag) in [
            (Some(50_000), None, 20_000, "--max-connections 50000"),
            (Some(4), None, big, "--max-connections 4"),
            (Some(100), Some(101), big, "--max-sessions 101"),
            (None, Some(0), big, "--max-sessions 0"),
        ] {
            let err = Caps::fit(connections, sessions, open_files).unwrap_err().to_string();
            assert!(err.starts_with(flag), "{err}");
        }
        assert!(
            Caps::fit(Some(50_000), None, 20_000)
                .unwrap_err()
                .to_string()
                .contains("LimitNOFILE")
        );
    }

    #[tokio::test]
    async fn a_connection_past_the_cap_is_closed_and_a_freed_permit_admits_the_next() {
        use tokio::io::AsyncReadExt;
        use tokio_stream::wrappers::TcpListenerStream;

        let listener = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let conns = Connections::new("test", 1, DEFAULT_TIMEOUTS);
        let mut incoming = Box::pin(admitted(TcpListenerStream::new(listener), conns.clone()));

        let _first_client = TcpStream::connect(addr).await.unwrap();
        let first = incoming.next().await.unwrap().unwrap();
        assert_eq!(first.connect_info().local_addr(), Some(addr));
        // Serving a request: it keeps its place (an idle one would give it up).
        let in_flight = conns.request(first.peer()).unwrap();

        // Over the cap: accepted and closed, so the client reads end of stream.
        let mut second_client = TcpStream::connect(addr).await.unwrap();
        let next = tokio::spawn(async move {
            let conn = incoming.next().await;
            (incoming, conn)
        });
        let mut byte = [0u8; 1];
        assert_eq!(second_client.read(&mut byte).await.unwrap(), 0, "closed by the server");

        // The first one closes: the next connection is served.
        drop(in_flight);
        drop(first);
        let _third_client = TcpStream::connect(addr).await.unwrap();
        let (_incoming, third) = next.await.unwrap();
        assert!(third.unwrap().is_ok());
    }
}
