//! Caps that hold before anyone is authenticated: open connections (a
//! semaphore around the listener: past the cap a new connection is closed at
//! once), HTTP/2 streams per connection (a server setting), and agent sessions
//! (a semaphore taken before `Hello` is read).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_stream::{Stream, StreamExt};
use tonic::transport::server::{Connected, TcpConnectInfo};

/// Open gRPC connections, agents and operators together.
pub const MAX_CONNECTIONS: usize = 4096;
/// Concurrent HTTP/2 streams on one connection: an agent needs one, an operator a few.
pub const MAX_STREAMS_PER_CONNECTION: u32 = 16;
/// Agent sessions, open or still waiting for their `Hello`.
pub const MAX_SESSIONS: usize = 4096;

/// A connection that holds one of the [`MAX_CONNECTIONS`] permits while open.
pub struct Limited {
    io: TcpStream,
    _permit: OwnedSemaphorePermit,
}

/// `incoming`, with at most `cap` connections open at once: one past it is
/// closed as soon as it is accepted (and logged), which costs it nothing but
/// the attempt.
pub fn limit_connections<S>(incoming: S, cap: usize) -> impl Stream<Item = io::Result<Limited>>
where
    S: Stream<Item = io::Result<TcpStream>>,
{
    let open = Arc::new(Semaphore::new(cap));
    incoming.filter_map(move |accepted| match accepted {
        Ok(io) => match open.clone().try_acquire_owned() {
            Ok(permit) => Some(Ok(Limited { io, _permit: permit })),
            Err(_) => {
                tracing::warn!(peer = ?io.peer_addr().ok(), cap, "too many open connections: closing a new one");
                None
            }
        },
        Err(e) => Some(Err(e)),
    })
}

/// The session semaphore: [`MAX_SESSIONS`] permits.
pub fn session_permits() -> Arc<Semaphore> {
    Arc::new(Semaphore::new(MAX_SESSIONS))
}

impl Connected for Limited {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.io.connect_info()
    }
}

impl AsyncRead for Limited {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Limited {
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
    use tokio_stream::wrappers::TcpListenerStream;

    use super::*;

    #[tokio::test]
    async fn a_connection_past_the_cap_is_closed_and_a_freed_permit_admits_the_next() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut incoming = Box::pin(limit_connections(TcpListenerStream::new(listener), 1));

        let _first_client = TcpStream::connect(addr).await.unwrap();
        let first = incoming.next().await.unwrap().unwrap();
        assert_eq!(first.connect_info().local_addr(), Some(addr));

        // Over the cap: accepted and closed, so the client reads end of stream.
        let mut second_client = TcpStream::connect(addr).await.unwrap();
        let next = tokio::spawn(async move {
            let conn = incoming.next().await;
            (incoming, conn)
        });
        let mut byte = [0u8; 1];
        assert_eq!(second_client.read(&mut byte).await.unwrap(), 0, "closed by the server");

        // The first one closes: the next connection is served.
        drop(first);
        let _third_client = TcpStream::connect(addr).await.unwrap();
        let (_incoming, third) = next.await.unwrap();
        assert!(third.unwrap().is_ok());
    }
}
