//! The cipherfleet wire protocol, generated at build time from
//! `proto/cipherfleet/v1/*.proto` (protox + tonic-prost-build; no system
//! `protoc` needed).
//!
//! - [`v1`]: package `cipherfleet.v1`.
//!   - `agent.proto`, the agent session: [`v1::AgentMessage`] (agent → coordinator,
//!     a oneof in [`v1::agent_message::Body`]) and [`v1::CoordinatorMessage`]
//!     (coordinator → agent, [`v1::coordinator_message::Body`]) on one
//!     bidirectional stream, `AgentService.Session`. Server side:
//!     [`v1::agent_service_server::AgentServiceServer`] around an
//!     [`v1::agent_service_server::AgentService`] impl; client side:
//!     [`v1::agent_service_client::AgentServiceClient`].
//!   - `admin.proto`, the operator API: [`v1::admin_service_server`] and
//!     [`v1::admin_service_client`].
//! - [`codec`]: prost's codec with small per-call buffers, used by every
//!   generated client and server.
//! - `redact`: the hand-written `Debug` for [`v1::Hello`] and [`v1::Welcome`],
//!   which keeps the enrollment token and host credentials out of logs.
//!
//! - [`client`] (feature `client`): the coordinator URL check and TLS settings
//!   that the agent and the operator commands dial with.
//!
//! Clients have no `connect` constructor (that would force tonic's transport
//! on every user): build a `tonic::transport::Channel` and pass it to `new`.

pub mod codec;
mod redact;

#[cfg(feature = "client")]
pub mod client;

/// Messages, enums, clients and servers of package `cipherfleet.v1`.
pub mod v1 {
    tonic::include_proto!("cipherfleet.v1");
}

/// The protocol version this build speaks, sent in `Hello.protocol_version`.
/// Bump it on any change an older peer would misread. 2: per-host credentials
/// (`Hello.credential`, `Welcome.credential`) and attempt ids on every job message.
pub const PROTOCOL_VERSION: u32 = 2;

/// How long an agent waits for the answer to its session request, the
/// `Welcome` (or a refusal), before it gives up and dials again. A coordinator
/// that cannot admit a `Hello` within this, counted from its arrival (or
/// within the request's `grpc-timeout`, when shorter), refuses it before,
/// with a time to come back, rather than work for an agent that has left.
pub const ANSWER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::v1::{AgentMessage, CoordinatorMessage, Heartbeat, agent_message};

    #[test]
    fn empty_agent_message_decodes_with_no_body() {
        // An agent (or a newer one sending a variant we do not know) may send a
        // message with no oneof set; it must decode so the server can answer
        // with a clear error instead of a codec failure.
        let decoded = AgentMessage::decode(&[][..]).expect("empty message decodes");
        assert_eq!(decoded.body, None);
        let decoded = CoordinatorMessage::decode(&[][..]).expect("empty message decodes");
        assert_eq!(decoded.body, None);
    }

    #[test]
    fn unknown_oneof_variant_decodes_as_no_body() {
        // Field 99 is not part of the oneof: a newer peer's variant.
        let mut bytes = Vec::new();
        prost::encoding::string::encode(99, &"from the future".to_string(), &mut bytes);
        let decoded = AgentMessage::decode(bytes.as_slice()).expect("unknown field skipped");
        assert_eq!(decoded.body, None);
    }

    #[test]
    fn heartbeat_round_trips_through_bytes() {
        let sent = AgentMessage {
            body: Some(agent_message::Body::Heartbeat(Heartbeat { seq: 7 })),
        };
        let decoded = AgentMessage::decode(sent.encode_to_vec().as_slice()).unwrap();
        assert_eq!(decoded, sent);
    }
}
