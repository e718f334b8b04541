//! `Debug` for messages that carry secrets: the generated derive is switched
//! off for them in `build.rs`, and these impls print everything but the secret.

use std::fmt;

use crate::v1::Hello;

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
        } = self;
        let token = if enrollment_token.is_empty() {
            "<empty>"
        } else {
            "<redacted>"
        };
        f.debug_struct("Hello")
            .field("protocol_version", protocol_version)
            .field("enrollment_token", &token)
            .field("facts", facts)
            .field("capabilities", capabilities)
            .field("labels", labels)
            .field("name", name)
            .field("running_job_id", running_job_id)
            .field("spooled_job_ids", spooled_job_ids)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use crate::v1::{AgentMessage, Hello, agent_message};

    #[test]
    fn hello_debug_hides_the_enrollment_token() {
        let hello = Hello {
            enrollment_token: "s3cret-token".into(),
            name: "host-a".into(),
            ..Default::default()
        };
        let message = AgentMessage {
            body: Some(agent_message::Body::Hello(hello)),
        };
        let printed = format!("{message:?}");
        assert!(!printed.contains("s3cret-token"), "{printed}");
        assert!(printed.contains("<redacted>"), "{printed}");
        assert!(printed.contains("host-a"), "{printed}");
    }
}
