//! When an agent stops waiting for the answer to its `Hello`: the protocol's
//! answer timeout ([`cipherfleet_proto::ANSWER_TIMEOUT`], 20 s), or the
//! session request's `grpc-timeout` when it is shorter, counted from the
//! request's arrival, less [`SLACK`]. A handshake that cannot be done by then
//! is refused before, with a time to come back ([`super::turns`]), instead of
//! doing database work for an agent that has given up and dials again.

use std::time::Duration;

use cipherfleet_proto::ANSWER_TIMEOUT;
use tokio::time::Instant;
use tonic::metadata::MetadataMap;

/// The part of the agent's wait that this coordinator does not see: dialling
/// and sending before the request is read (longer when the machine is busy),
/// and the answer's way back.
pub const SLACK: Duration = Duration::from_secs(2);

/// The gRPC deadline header: a positive integer of at most 8 digits and a unit.
const GRPC_TIMEOUT: &str = "grpc-timeout";

/// When the answer to a session request that arrived at `arrived` with
/// `metadata` must be on its way.
pub fn answer_by(metadata: &MetadataMap, arrived: Instant) -> Instant {
    let patience = grpc_timeout(metadata).map_or(ANSWER_TIMEOUT, |t| t.min(ANSWER_TIMEOUT));
    arrived + patience.saturating_sub(SLACK)
}

/// The request's `grpc-timeout`, if it has a well-formed one.
fn grpc_timeout(metadata: &MetadataMap) -> Option<Duration> {
    let value = metadata.get(GRPC_TIMEOUT)?.to_str().ok()?;
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_timeout(value: &str) -> MetadataMap {
        let mut metadata = MetadataMap::new();
        metadata.insert(GRPC_TIMEOUT, value.parse().unwrap());
        metadata
    }

    #[test]
    fn the_answer_is_due_before_the_agent_gives_up() {
        let now = Instant::now();
        // No deadline sent: the protocol's 20 s answer timeout.
        assert_eq!(answer_by(&MetadataMap::new(), now), now + ANSWER_TIMEOUT - SLACK);
        // A shorter one is honoured, a longer one is not waited out.
        assert_eq!(answer_by(&with_timeout("5S"), now), now + Duration::from_secs(3));
        assert_eq!(answer_by(&with_timeout("2500m"), now), now + Duration::from_millis(500));
        assert_eq!(answer_by(&with_timeout("1H"), now), now + ANSWER_TIMEOUT - SLACK);
        // One already spent by the slack leaves no time at all.
        assert_eq!(answer_by(&with_timeout("1000000u"), now), now);
    }

    #[test]
    fn malformed_grpc_timeouts_are_ignored() {
        for value in ["", "S", "12", "5s", "-5S", "123456789S", "1.5S"] {
            assert_eq!(grpc_timeout(&with_timeout(value)), None, "{value:?}");
        }
        assert_eq!(grpc_timeout(&with_timeout("7n")), Some(Duration::from_nanos(7)));
        assert_eq!(grpc_timeout(&with_timeout("3M")), Some(Duration::from_secs(180)));
    }
}
