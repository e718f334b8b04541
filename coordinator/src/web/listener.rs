//! The report's connections: admitted under a cap, closed when they say
//! nothing ([`crate::guard::conn`]); each request counted as in progress on
//! its connection until its response is sent, and the peer's address handed
//! to the handlers ([`Peer`]) for the failed-token limit.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::connect_info::Connected;
use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use axum::serve::IncomingStream;
use http_body_util::BodyExt;
use tokio::net::TcpListener;

use crate::guard::conn::{Connections, Guarded};

/// A listener whose connections `conns` admits.
pub struct Admitting {
    listener: TcpListener,
    conns: Arc<Connections>,
}

impl Admitting {
    pub fn new(listener: TcpListener, conns: Arc<Connections>) -> Admitting {
        Admitting { listener, conns }
    }
}

impl axum::serve::Listener for Admitting {
    type Io = Guarded;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Guarded, SocketAddr) {
        loop {
            match self.listener.accept().await {
                Ok((io, peer)) => {
                    let _ = io.set_nodelay(true);
                    if let Some(admitted) = self.conns.admit(io).await {
                        return (admitted, peer);
                    }
                }
                // Out of files or the like: the listener itself is fine; wait a moment.
                Err(e) => {
                    tracing::warn!(error = %e, "accepting an HTTP connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

/// The peer of a request's connection (`ConnectInfo<Peer>` in its extensions).
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub SocketAddr);

impl Connected<IncomingStream<'_, Admitting>> for Peer {
    fn connect_info(stream: IncomingStream<'_, Admitting>) -> Peer {
        Peer(*stream.remote_addr())
    }
}

/// The middleware: the request is in progress on its connection until its body is sent.
pub async fn track(State(conns): State<Arc<Connections>>, request: Request, next: Next) -> Response {
    let in_flight = request
        .extensions()
        .get::<ConnectInfo<Peer>>()
        .and_then(|peer| conns.request(peer.0.0));
    let response = next.run(request).await;
    match in_flight {
        Some(in_flight) => response.map(|body| {
            Body::new(body.map_frame(move |frame| {
                let _ = &in_flight;
                frame
            }))
        }),
        None => response,
    }
}
