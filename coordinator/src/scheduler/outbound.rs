//! A session's outbound queue: what the coordinator sends one agent.
//!
//! Bounded, and nobody ever waits on it: the scheduler, the sweep, the admin
//! API and the session itself only [`Outbound::try_send`]. An agent that does
//! not read its stream fills its queue; the first message that does not fit
//! ends the session ([`Outbound::ended`]): the stream answers
//! `RESOURCE_EXHAUSTED` instead of what was queued, and the agent reconnects.
//! One slow agent therefore costs at most [`OUTBOUND_QUEUE`] messages of
//! memory and never delays another host's work, a cancel or a shutdown.

use std::pin::Pin;
use std::task::{Context, Poll};

use cipherfleet_proto::v1::{CoordinatorMessage, coordinator_message::Body};
use tokio::sync::mpsc::{self, error::TrySendError};
use tokio_stream::Stream;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use tonic::Status;

/// Messages queued for one agent before its session is ended.
pub const OUTBOUND_QUEUE: usize = 64;

/// What the agent is told when its queue overflowed.
pub const FULL: &str = "the agent does not read its stream: its outbound queue is full; reconnect";

type Item = Result<CoordinatorMessage, Status>;

/// The sending half; cheap to clone (clones share the queue).
///
/// The queue holds boxes: tokio allocates a channel's slots 32 at a time, the
/// first block when the channel is made, so slots of whole messages (128 bytes
/// each) would hold 4 KiB per session before anything was sent.
#[derive(Clone, Debug)]
pub struct Outbound {
    tx: mpsc::Sender<Box<Item>>,
    ended: CancellationToken,
}

/// Why a message was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotSent {
    /// The queue was full: the session is ended now.
    #[error("{FULL}")]
    Full,
    /// The session is over (its stream is gone, or it was ended earlier).
    #[error("the agent went away")]
    Closed,
}

impl NotSent {
    /// As a status for the session that failed to send.
    pub fn status(self) -> Status {
        match self {
            NotSent::Full => Status::resource_exhausted(FULL),
            NotSent::Closed => Status::cancelled("agent went away"),
        }
    }
}

impl Outbound {
    /// A new queue: the sender, and the stream tonic serves to the agent.
    pub fn channel() -> (Outbound, OutboundStream) {
        let (tx, rx) = mpsc::channel(OUTBOUND_QUEUE);
        let ended = CancellationToken::new();
        let stream = OutboundStream {
            rx,
            ended: Box::pin(ended.clone().cancelled_owned()),
            done: false,
        };
        (Outbound { tx, ended }, stream)
    }

    /// Queues `body` without waiting. A full queue ends the session.
    pub fn try_send(&self, body: Body) -> Result<(), NotSent> {
        self.try_send_item(Ok(CoordinatorMessage { body: Some(body) }))
    }

    /// Queues the error status that closes the stream, if there is room.
    pub fn try_close_with(&self, status: Status) {
        let _ = self.try_send_item(Err(status));
    }

    fn try_send_item(&self, item: Item) -> Result<(), NotSent> {
        if self.ended.is_cancelled() {
            return Err(NotSent::Closed);
        }
        match self.tx.try_send(Box::new(item)) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) => {
                self.ended.cancel();
                Err(NotSent::Full)
            }
            Err(TrySendError::Closed(_)) => Err(NotSent::Closed),
        }
    }

    /// Resolves once the queue overflowed: the session must end.
    pub async fn ended(&self) {
        self.ended.cancelled().await
    }

    /// Whether the queue overflowed.
    pub fn is_ended(&self) -> bool {
        self.ended.is_cancelled()
    }

    /// Messages waiting to be read by the agent.
    pub fn queued(&self) -> usize {
        OUTBOUND_QUEUE - self.tx.capacity()
    }
}

/// The receiving half, served as the session's response stream. Once the
/// queue overflowed it drops what is queued and ends with `RESOURCE_EXHAUSTED`.
pub struct OutboundStream {
    rx: mpsc::Receiver<Box<Item>>,
    ended: Pin<Box<WaitForCancellationFutureOwned>>,
    done: bool,
}

impl Stream for OutboundStream {
    type Item = Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        if self.ended.as_mut().poll(cx).is_ready() {
            self.done = true;
            self.rx.close();
            return Poll::Ready(Some(Err(Status::resource_exhausted(FULL))));
        }
        self.rx.poll_recv(cx).map(|item| item.map(|boxed| *boxed))
    }
}

#[cfg(test)]
mod tests {
    use cipherfleet_proto::v1;
    use tokio_stream::StreamExt;

    use super::*;

    fn ping(seq: u64) -> Body {
        Body::Ping(v1::Ping { seq })
    }

    #[tokio::test]
    async fn a_full_queue_refuses_the_next_message_at_once_and_ends_the_stream() {
        let (tx, mut stream) = Outbound::channel();
        for seq in 0..OUTBOUND_QUEUE as u64 {
            tx.try_send(ping(seq)).unwrap();
        }
        assert_eq!(tx.queued(), OUTBOUND_QUEUE);
        assert!(!tx.is_ended());
        assert_eq!(tx.try_send(ping(99)), Err(NotSent::Full));
        assert!(tx.is_ended());
        // Ended for good: nothing more is queued, even after the agent reads.
        assert_eq!(tx.try_send(ping(100)), Err(NotSent::Closed));
        let first = stream.next().await.unwrap().unwrap_err();
        assert_eq!(first.code(), tonic::Code::ResourceExhausted);
        assert!(stream.next().await.is_none(), "the queued messages are dropped");
        tx.ended().await;
    }

    #[tokio::test]
    async fn messages_flow_in_order_while_the_agent_keeps_up() {
        let (tx, mut stream) = Outbound::channel();
        for round in 0..3 * OUTBOUND_QUEUE as u64 {
            tx.try_send(ping(round)).unwrap();
            let got = stream.next().await.unwrap().unwrap();
            assert_eq!(got.body, Some(ping(round)));
        }
        assert!(!tx.is_ended());
        drop(tx);
        assert!(stream.next().await.is_none());
    }
}
