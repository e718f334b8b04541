//! What `/modes` is asked: whose curves (a host or a class), direction,
//! path, the size of the thread-scaling chart and the algorithms; checked
//! once, and the link back to the same view.

use cipherfleet_core::algorithm::Algorithm;
use cipherfleet_core::path::Path;
use cipherfleet_core::provider::Provider;
use cipherfleet_core::spec::Direction;
use serde::Deserialize;

use super::super::WebError;
use super::super::compare::{self, not_valid, parse_algorithms};
use super::super::paging::parse_id;
use super::super::params::{DEFAULT_SIZE_BYTES, class_key, given};

/// The query string as sent; blank fields mean the default.
#[derive(Debug, Default, Deserialize)]
pub struct ModesQuery {
    host: Option<String>,
    class: Option<String>,
    direction: Option<String>,
    path: Option<String>,
    provider: Option<String>,
    /// Payload size of the thread-scaling chart, in bytes.
    size: Option<String>,
    algorithms: Option<String>,
}

/// Whose curves: one host, or the median over a class's hosts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    Host(i64),
    Class(String),
}

/// The checked parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct ModesParams {
    /// `None`: nothing chosen yet, the page offers the choice.
    pub subject: Option<Subject>,
    pub direction: Direction,
    /// The path asked for.
    pub path: Path,
    pub provider: Provider,
    pub size_bytes: u64,
    /// Empty = every algorithm with data.
    pub algorithms: Vec<Algorithm>,
}

impl ModesParams {
    pub fn parse(q: &ModesQuery) -> Result<Self, WebError> {
        let bad = not_valid;
        let subject = match (given(&q.host), given(&q.class)) {
            (Some(_), Some(_)) => {
                return Err(WebError::BadRequest("give host= or class=, not both".into()));
            }
            (Some(h), None) => Some(Subject::Host(
                parse_id(h, "host").map_err(|_| bad("host", h, "a host id (a positive integer)"))?,
            )),
            (None, Some(c)) => Some(Subject::Class(
                class_key(c).ok_or_else(|| bad("class", c, "a class key (16 hex digits)"))?,
            )),
            (None, None) => None,
        };
        let direction = compare::direction(&q.direction)?;
        let path = compare::path(&q.path)?;
        let provider = compare::provider(&q.provider)?;
        // The payload size of the thread-scaling chart.
        let size_bytes = compare::size(&q.size)?;
        let algorithms = given(&q.algorithms)
            .map(parse_algorithms)
            .transpose()?
            .unwrap_or_default();
        Ok(ModesParams {
            subject,
            direction,
            path,
            provider,
            size_bytes,
            algorithms,
        })
    }

    /// This view as query pairs (defaults left out).
    pub(super) fn query_pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = Vec::new();
        match &self.subject {
            Some(Subject::Host(id)) => pairs.push(("host", id.to_string())),
            Some(Subject::Class(key)) => pairs.push(("class", key.clone())),
            None => {}
        }
        if self.direction != Direction::Encrypt {
            pairs.push(("direction", self.direction.to_string()));
        }
        if self.path != Path::Accelerated {
            pairs.push(("path", self.path.to_string()));
        }
        if !self.provider.is_rustcrypto() {
            pairs.push(("provider", self.provider.to_string()));
        }
        if self.size_bytes != DEFAULT_SIZE_BYTES {
            pairs.push(("size", self.size_bytes.to_string()));
        }
        if !self.algorithms.is_empty() {
            pairs.push(("algorithms", compare::names(&self.algorithms)));
        }
        pairs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_need_one_subject_and_name_what_is_wrong() {
        let q = |host: Option<&str>, class: Option<&str>, size: Option<&str>| ModesQuery {
            host: host.map(String::from),
            class: class.map(String::from),
            size: size.map(String::from),
            ..Default::default()
        };
        let p = ModesParams::parse(&q(Some("7"), None, None)).unwrap();
        assert_eq!((p.subject, p.size_bytes), (Some(Subject::Host(7)), 16384));
        assert_eq!(ModesParams::parse(&q(None, None, None)).unwrap().subject, None);
        let ring = ModesQuery {
            provider: Some("ring".into()),
            ..q(Some("7"), None, None)
        };
        let p = ModesParams::parse(&ring).unwrap();
        assert_eq!(p.provider, Provider::Ring);
        assert_eq!(
            p.query_pairs(),
            [("host", "7".to_string()), ("provider", "ring".to_string())]
        );
        assert_eq!(
            ModesParams::parse(&q(Some("7"), None, None)).unwrap().provider,
            Provider::RustCrypto
        );
        for (query, name) in [
            (q(Some("x"), None, None), "host"),
            (q(None, Some("zz"), None), "class"),
            (q(Some("1"), Some("00000000000000ff"), None), "not both"),
            (q(Some("1"), None, Some("big")), "size"),
            (
                ModesQuery {
                    provider: Some("libsodium".into()),
                    ..q(Some("1"), None, None)
                },
                "provider",
            ),
        ] {
            let err = ModesParams::parse(&query).unwrap_err();
            assert!(matches!(err, WebError::BadRequest(_)));
            assert!(err.to_string().contains(name), "{err}");
        }
    }
}
