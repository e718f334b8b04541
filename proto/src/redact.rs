//! `Debug` for messages that carry secrets: the generated derive is switched
//! off for them in `build.rs`, and these impls print everything but the secret.

use std::fmt;

use crate::v1::{Hello, Welcome};

/// What a secret field prints as.
fn shown(secret: &str) -> &'static str {
    if secret.is_empty() { "<empty>" } else { "<redacted>" }
}

impl fmt::Debug for Hello {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Destructured so that a field added to `Hello` fails to compile here
        // instead of silently going missing from the output.
        let Hello {
            protocol_version,
            enrollment_token,
            facts,
            capabilities,
            labels,
            name,
            running_job_id,
            spooled_job_ids,
            credential,
            running_attempt_id,
            proposed_credential,
        } = self;
        f.debug_struct("Hello")
            .field("protocol_version", protocol_version)
            .field("enrollment_token", &shown(enrollment_token))
            .field("credential", &shown(credential))
            .field("proposed_credential", &shown(proposed_credential))
            .field("facts", facts)
            .field("capabilities", capabilities)
            .field("labels", labels)
            .field("name", name)
            .field("running_job_id", running_job_id)
            .field("spooled_job_ids", spooled_job_ids)
            .field("running_attempt_id", running_attempt_id)
            .finish()
    }
}

impl fmt::Debug for Welcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Welcome {
            agent_id,
            heartbeat_interval_ms,
            credential,
        } = self;
        f.debug_struct("Welcome")
            .field("agent_id", agent_id)
            .field("heartbeat_interval_ms", heartbeat_interval_ms)
            .field("credential", &shown(credential))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use crate::v1::{AgentMessage, CoordinatorMessage, Hello, Welcome, agent_message, coordinator_message};

    #[test]
    fn welcome_debug_hides_the_host_credential() {
        let message = CoordinatorMessage {
            body: Some(coordinator_message::Body::Welcome(Welcome {
                agent_id: "17".into(),
                heartbeat_interval_ms: 500,
                credential: "c0ffee-host-credential".into(),
            })),
        };
        let printed = format!("{message:?}");
        assert!(!printed.contains("c0ffee"), "{printed}");
        assert!(printed.contains("<redacted>") && printed.contains("17"), "{printed}");
    }

    #[test]
    fn hello_debug_hides_the_enrollment_token_and_the_credential() {
        let hello = Hello {
            enrollment_token: "s3cret-token".into(),
            credential: "c0ffee-host-credential".into(),
            proposed_credential: "beef-proposed-credential".into(),
            name: "host-a".into(),
            ..Default::default()
        };
        let message = AgentMessage {
            body: Some(agent_message::Body::Hello(hello)),
        };
        let printed = format!("{message:?}");
        assert!(!printed.contains("s3cret-token"), "{printed}");
        assert!(!printed.contains("c0ffee"), "{printed}");
        assert!(!printed.contains("beef"), "{printed}");
        assert!(printed.contains("<redacted>"), "{printed}");
        assert!(printed.contains("host-a"), "{printed}");
    }
}
