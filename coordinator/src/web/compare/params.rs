//! The parameters of `/compare` (and the algorithm list `/modes` shares):
//! what the query string may say, checked once, and the link back to a
//! view. Every view is a link, so [`CompareParams::query_pairs`] leaves the
//! defaults out and a parsed link gives the same view back.

use cipherfleet_core::algorithm::Algorithm;
use cipherfleet_core::path::Path;
use cipherfleet_core::provider::Provider;
use cipherfleet_core::spec::Direction;
use serde::Deserialize;

use super::super::WebError;
use super::super::paging::Pager;
use super::super::params::{DEFAULT_SIZE_BYTES, byte_size, class_key, given, require, thread_count};
use crate::report::matrix::{Slice, View};

/// The query string as sent; blank fields mean the default.
#[derive(Debug, Default, Deserialize)]
pub struct CompareQuery {
    rows: Option<String>,
    size: Option<String>,
    threads: Option<String>,
    direction: Option<String>,
    path: Option<String>,
    provider: Option<String>,
    algorithms: Option<String>,
    metric: Option<String>,
    class: Option<String>,
    page: Option<String>,
}

/// What a row of the matrix is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rows {
    Hosts,
    /// Machine classes ([`crate::analysis::class`]): the median over their hosts.
    Classes,
}

/// What colours and sorts the cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    Throughput,
    /// P99 latency per operation, shown next to MB/s; lower is better.
    P99,
}

/// The checked parameters of a view.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareParams {
    pub rows: Rows,
    pub view: View,
    /// The algorithms in the order asked; empty = every one with data.
    pub algorithms: Vec<Algorithm>,
    pub metric: Metric,
    /// Only hosts of this class (its [`crate::analysis::class::MachineClass::key`]).
    pub class: Option<String>,
    pub page: u64,
}

impl CompareParams {
    /// Reads the query; anything unusable is a bad request naming the parameter and the value.
    pub fn parse(q: &CompareQuery) -> Result<Self, WebError> {
        let bad = not_valid;
        let rows = match given(&q.rows) {
            None | Some("hosts") => Rows::Hosts,
            Some("classes") => Rows::Classes,
            Some(v) => return Err(bad("rows", v, "hosts or classes")),
        };
        let size_bytes = size(&q.size)?;
        let threads = match given(&q.threads) {
            None => 1,
            Some(v) => thread_count(v, 65536)
                .map(i32::unsigned_abs)
                .ok_or_else(|| bad("threads", v, "a thread count, e.g. 1"))?,
        };
        let direction = direction(&q.direction)?;
        let path = path(&q.path)?;
        let provider = provider(&q.provider)?;
        let metric = match given(&q.metric) {
            None | Some("throughput") => Metric::Throughput,
            Some("p99") => Metric::P99,
            Some(v) => return Err(bad("metric", v, "throughput or p99")),
        };
        let algorithms = match given(&q.algorithms) {
            None => Vec::new(),
            Some(list) => parse_algorithms(list)?,
        };
        let class = match given(&q.class) {
            None => None,
            Some(v) => Some(
                class_key(v).ok_or_else(|| bad("class", v, "a class key (16 hex digits, as the class links carry)"))?,
            ),
        };
        Ok(CompareParams {
            rows,
            view: View {
                size_bytes,
                threads,
                direction,
                path,
                provider,
            },
            algorithms,
            metric,
            class,
            page: Pager::parse_page(q.page.as_deref())?,
        })
    }

    /// The parameters that differ from the defaults, for links to this view (page left out).
    pub fn query_pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = Vec::new();
        if self.rows == Rows::Classes {
            pairs.push(("rows", "classes".into()));
        }
        if self.view.size_bytes != DEFAULT_SIZE_BYTES {
            pairs.push(("size", self.view.size_bytes.to_string()));
        }
        if self.view.threads != 1 {
            pairs.push(("threads", self.view.threads.to_string()));
        }
        if self.view.direction != Direction::Encrypt {
            pairs.push(("direction", self.view.direction.to_string()));
        }
        if self.view.path != Path::Accelerated {
            pairs.push(("path", self.view.path.to_string()));
        }
        if !self.view.provider.is_rustcrypto() {
            pairs.push(("provider", self.view.provider.to_string()));
        }
        if !self.algorithms.is_empty() {
            pairs.push(("algorithms", names(&self.algorithms)));
        }
        if self.metric == Metric::P99 {
            pairs.push(("metric", "p99".into()));
        }
        if let Some(class) = &self.class {
            pairs.push(("class", class.clone()));
        }
        pairs
    }

    /// This view at another size and thread count.
    pub fn at(&self, slice: Slice) -> Self {
        let mut other = self.clone();
        other.view.size_bytes = slice.size_bytes;
        other.view.threads = slice.threads;
        other.page = 1;
        other
    }
}

/// The refusal of `/compare` and `/modes`: the parameter, the value sent, and what would do.
pub fn not_valid(name: &str, value: &str, expected: &str) -> WebError {
    WebError::BadRequest(format!("{name}={value:?} is not valid: {expected}"))
}

/// `size=` in plain bytes, as `/compare` and `/modes` read it; blank is [`DEFAULT_SIZE_BYTES`].
pub fn size(raw: &Option<String>) -> Result<u64, WebError> {
    match given(raw) {
        None => Ok(DEFAULT_SIZE_BYTES),
        Some(v) => byte_size(v).ok_or_else(|| not_valid("size", v, "a payload size in bytes, e.g. 16384")),
    }
}

/// `direction=` as `/compare` and `/modes` read it; blank is `encrypt`.
pub fn direction(raw: &Option<String>) -> Result<Direction, WebError> {
    given(raw).map_or(Ok(Direction::Encrypt), |v| require("direction", v))
}

/// `path=` as `/compare` and `/modes` read it; blank is `accelerated`.
pub fn path(raw: &Option<String>) -> Result<Path, WebError> {
    given(raw).map_or(Ok(Path::Accelerated), |v| require("path", v))
}

/// `provider=` as `/compare`, `/modes` and `/fallback` read it; blank is the built-in `rustcrypto`.
pub fn provider(raw: &Option<String>) -> Result<Provider, WebError> {
    given(raw).map_or(Ok(Provider::RustCrypto), |v| require("provider", v))
}

/// A comma-separated list of algorithm names (`AES-256-GCM`, `3des-cbc`
/// accepted), deduplicated in the order given.
pub fn parse_algorithms(list: &str) -> Result<Vec<Algorithm>, WebError> {
    let mut algorithms: Vec<Algorithm> = Vec::new();
    for raw in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let algorithm: Algorithm = raw
            .parse()
            .map_err(|e| WebError::BadRequest(format!("algorithms: {e}")))?;
        if !algorithms.contains(&algorithm) {
            algorithms.push(algorithm);
        }
    }
    Ok(algorithms)
}

/// Algorithm names, comma separated, as links and forms carry them.
pub fn names(algorithms: &[Algorithm]) -> String {
    algorithms.iter().map(|a| a.name()).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::super::super::paging::with_query;
    use super::super::super::params::query_from as query;
    use super::*;

    #[test]
    fn no_parameters_mean_hosts_at_16_kib_one_thread_encrypt_accelerated() {
        let p = CompareParams::parse(&query(&[])).unwrap();
        assert_eq!(p.rows, Rows::Hosts);
        assert_eq!(
            p.view,
            View {
                size_bytes: 16384,
                threads: 1,
                direction: Direction::Encrypt,
                path: Path::Accelerated,
                provider: Provider::RustCrypto,
            }
        );
        assert_eq!(p.metric, Metric::Throughput);
        assert!(p.algorithms.is_empty() && p.class.is_none());
        assert_eq!(p.page, 1);
        assert!(p.query_pairs().is_empty(), "the default view is plain /compare");
    }

    #[test]
    fn parameters_round_trip_through_the_view_link() {
        let p = CompareParams::parse(&query(&[
            ("rows", "classes"),
            ("size", "1048576"),
            ("threads", "4"),
            ("direction", "decrypt"),
            ("path", "software"),
            ("provider", "openssl"),
            ("algorithms", " AES-256-GCM, 3des-cbc ,aes-256-gcm"),
            ("metric", "p99"),
            ("class", "00FF00ff00ff00ff"),
            ("page", "2"),
        ]))
        .unwrap();
        assert_eq!(
            names(&p.algorithms),
            "aes-256-gcm,des-ede3-cbc",
            "canonical names, once each"
        );
        assert_eq!(p.class.as_deref(), Some("00ff00ff00ff00ff"));
        let link = with_query("/compare", &p.query_pairs());
        assert_eq!(
            link,
            "/compare?rows=classes&size=1048576&threads=4&direction=decrypt&path=software&provider=openssl\
             &algorithms=aes-256-gcm%2Cdes-ede3-cbc&metric=p99&class=00ff00ff00ff00ff"
        );
        let again = CompareParams::parse(&query(&[
            ("rows", "classes"),
            ("size", "1048576"),
            ("threads", "4"),
            ("direction", "decrypt"),
            ("path", "software"),
            ("provider", "openssl"),
            ("algorithms", "aes-256-gcm,des-ede3-cbc"),
            ("metric", "p99"),
            ("class", "00ff00ff00ff00ff"),
        ]))
        .unwrap();
        assert_eq!(again, CompareParams { page: 1, ..p });
    }

    #[test]
    fn bad_parameters_are_rejected_naming_the_parameter() {
        for (name, value) in [
            ("size", "abc"),
            ("size", "0"),
            ("size", "-5"),
            ("threads", "1.5"),
            ("threads", "0"),
            ("direction", "sideways"),
            ("path", "quantum"),
            ("provider", "libsodium"),
            ("rows", "racks"),
            ("metric", "p50"),
            ("class", "xyz"),
            ("algorithms", "aes-512-gcm"),
            ("page", "zero"),
        ] {
            let err = CompareParams::parse(&query(&[(name, value)])).unwrap_err();
            assert!(matches!(err, WebError::BadRequest(_)), "{name}={value}");
            let message = err.to_string();
            assert!(
                message.contains(name) && message.contains(value),
                "{name}={value}: {message}"
            );
        }
    }
}
