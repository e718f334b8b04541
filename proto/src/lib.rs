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
//! - [`PROTOCOL_VERSION`] and [`check_agent_version`]: the version this build
//!   speaks and the agents a coordinator serves (its own version and the one before).
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
/// Bump it on any change an older peer would misread. 3: `Measurement` is its
/// JSON object alone (the typed copies of its figures are gone). 2: per-host
/// credentials (`Hello.credential`, `Welcome.credential`) and attempt ids on
/// every job message.
pub const PROTOCOL_VERSION: u32 = 3;

/// The oldest agent protocol a coordinator of this build serves: one version
/// behind, so a fleet upgrades its coordinator first and its agents after.
/// Whatever such an agent sends must still read right: from version 2 that is
/// `Measurement`'s typed figures (fields 1–20) beside its JSON, skipped unread
/// as reserved numbers, while the JSON, the same object, is stored.
pub const OLDEST_AGENT_VERSION: u32 = PROTOCOL_VERSION - 1;

/// Whether a coordinator of this build serves an agent that speaks protocol
/// `agent`: [`PROTOCOL_VERSION`] or [`OLDEST_AGENT_VERSION`]. The one place
/// the upgrade rule lives; the error says which side to upgrade.
pub fn check_agent_version(agent: u32) -> Result<(), VersionMismatch> {
    if (OLDEST_AGENT_VERSION..=PROTOCOL_VERSION).contains(&agent) {
        Ok(())
    } else {
        Err(VersionMismatch { agent })
    }
}

/// An agent's protocol version that this coordinator does not serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionMismatch {
    /// The version the agent sent.
    pub agent: u32,
}

impl VersionMismatch {
    /// The side that is behind: an agent older than [`OLDEST_AGENT_VERSION`]
    /// is, else the coordinator.
    pub fn upgrade(&self) -> &'static str {
        if self.agent < OLDEST_AGENT_VERSION {
            "the agent"
        } else {
            "the coordinator"
        }
    }
}

impl std::fmt::Display for VersionMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "agent speaks protocol version {}, this coordinator speaks version {PROTOCOL_VERSION} \
             and serves agents of versions {OLDEST_AGENT_VERSION} to {PROTOCOL_VERSION}; upgrade {}",
            self.agent,
            self.upgrade()
        )
    }
}

impl std::error::Error for VersionMismatch {}

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
    use super::{PROTOCOL_VERSION, check_agent_version};

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
    fn a_coordinator_serves_its_own_version_and_the_one_before() {
        assert_eq!(check_agent_version(PROTOCOL_VERSION), Ok(()));
        assert_eq!(check_agent_version(PROTOCOL_VERSION - 1), Ok(()));
        let cases = [
            (PROTOCOL_VERSION - 2, "upgrade the agent"),
            (0, "upgrade the agent"),
            (PROTOCOL_VERSION + 1, "upgrade the coordinator"),
            (u32::MAX, "upgrade the coordinator"),
        ];
        for (agent, upgrade) in cases {
            let refused = check_agent_version(agent).unwrap_err().to_string();
            assert!(
                refused.starts_with(&format!(
                    "agent speaks protocol version {agent}, this coordinator speaks version {PROTOCOL_VERSION} "
                )),
                "{refused}"
            );
            assert!(refused.ends_with(upgrade), "{refused}");
        }
    }

    /// What an agent one version behind sends: the typed figures of protocol
    /// 2 (fields 1–20) beside the JSON. They decode as unknown fields, skipped.
    #[test]
    fn the_typed_figures_of_an_agent_one_version_behind_are_skipped() {
        let json = r#"{"schema":"cipherfleet.measurement/2"}"#.to_string();
        let mut bytes = Vec::new();
        prost::encoding::double::encode(1, &1234.5, &mut bytes); // throughput_mb_s
        prost::encoding::uint32::encode(11, &3, &mut bytes); // samples
        prost::encoding::string::encode(8, &"per-op".to_string(), &mut bytes); // latency_method
        prost::encoding::int32::encode(17, &1, &mut bytes); // path_used
        prost::encoding::string::encode(21, &json, &mut bytes);
        let decoded = super::v1::Measurement::decode(bytes.as_slice()).unwrap();
        assert_eq!(decoded, super::v1::Measurement { measurement_json: json });
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
