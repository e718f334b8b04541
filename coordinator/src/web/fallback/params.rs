//! The filters of `/fallback` and its API: what the query string may say,
//! checked once, the point every row is measured at, and the links that
//! keep the view (defaults left out, so a parsed link gives the same view).

use cipherfleet_core::provider::Provider;
use cipherfleet_core::spec::{Direction, KeyMode};
use serde::Deserialize;

use super::super::params::{
    DEFAULT_SIZE_BYTES, LabelFilter, given, label, label_matches, label_text, require, require_one_of, spelled_size,
    thread_count,
};
use super::super::{WebError, format};
use crate::findings::REASONS;
use crate::report::fallback::{FallbackHost, PathPoint};
use crate::report::fallback_hosts::Keep;

/// The `reason` filter value for rows no open finding explains.
pub(super) const NO_REASON: &str = "none";
/// A generous cap on `threads` (the agent allows far fewer): only to refuse nonsense early.
const MAX_THREADS: i32 = 4096;

/// The filters of `/fallback` as sent; blank fields mean the default or "any".
#[derive(Debug, Default, Deserialize)]
pub struct FallbackQuery {
    size: Option<String>,
    threads: Option<String>,
    direction: Option<String>,
    key_mode: Option<String>,
    /// Whose figures: one of [`Provider`]; RustCrypto, the built-in crates, by default.
    provider: Option<String>,
    /// `key=value`, or `key` alone for "has the label".
    label: Option<String>,
    pub(super) arch: Option<String>,
    /// One of [`REASONS`], or [`NO_REASON`].
    reason: Option<String>,
    pub(super) page: Option<String>,
    /// Page of the "at software speed" list.
    pub(super) spage: Option<String>,
    /// Page of the open-findings list.
    pub(super) fpage: Option<String>,
}

/// The filters, checked.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Filters {
    pub(super) size_bytes: u64,
    pub(super) threads: u32,
    pub(super) direction: Direction,
    pub(super) key_mode: KeyMode,
    pub(super) provider: Provider,
    pub(super) label: Option<LabelFilter>,
    pub(super) arch: Option<String>,
    pub(super) reason: Option<&'static str>,
}

impl Filters {
    pub(super) fn parse(q: &FallbackQuery) -> Result<Self, WebError> {
        let size_bytes = match given(&q.size) {
            None => DEFAULT_SIZE_BYTES,
            Some(s) => spelled_size(s)
                .ok()
                .filter(|n| i64::try_from(*n).is_ok())
                .ok_or_else(|| {
                    WebError::BadRequest(format!(
                        "size={s:?} is not a payload size (bytes, or with a unit: 11, 16KiB, 10MiB)"
                    ))
                })?,
        };
        let threads = match given(&q.threads) {
            None => 1,
            Some(t) => thread_count(t, MAX_THREADS)
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| WebError::BadRequest(format!("threads={t:?} is not a thread count (1, 2, 4, …)")))?,
        };
        let reasons: Vec<&'static str> = REASONS.iter().copied().chain([NO_REASON]).collect();
        Ok(Filters {
            size_bytes,
            threads,
            direction: given(&q.direction).map_or(Ok(Direction::Encrypt), |d| require("direction", d))?,
            key_mode: given(&q.key_mode).map_or(Ok(KeyMode::Static), |k| require("key_mode", k))?,
            provider: super::super::compare::provider(&q.provider)?,
            label: given(&q.label).map(label),
            arch: given(&q.arch).map(str::to_string),
            reason: given(&q.reason)
                .map(|r| require_one_of("reason", r, &reasons))
                .transpose()?,
        })
    }

    pub(super) fn point(&self) -> PathPoint {
        PathPoint {
            size_bytes: self.size_bytes,
            threads: self.threads,
            direction: self.direction,
            key_mode: self.key_mode,
            provider: self.provider,
        }
    }

    pub(super) fn matches_host(&self, host: &FallbackHost) -> bool {
        label_matches(&self.label, &host.labels.0) && self.arch.as_ref().is_none_or(|a| host.arch.as_ref() == Some(a))
    }

    /// The host filter, when the filters leave hosts out.
    pub(super) fn keep(&self) -> Option<Box<Keep<'_>>> {
        (self.label.is_some() || self.arch.is_some())
            .then(|| Box::new(|h: &FallbackHost| self.matches_host(h)) as Box<Keep<'_>>)
    }

    /// The filters as query parameters (defaults left out), for links that keep the view.
    pub(super) fn query_pairs(&self) -> Vec<(&'static str, String)> {
        let or_blank = |v: String, default: &str| if v == default { String::new() } else { v };
        let label = label_text(&self.label);
        vec![
            (
                "size",
                or_blank(self.size_bytes.to_string(), &DEFAULT_SIZE_BYTES.to_string()),
            ),
            ("threads", or_blank(self.threads.to_string(), "1")),
            (
                "direction",
                or_blank(self.direction.to_string(), Direction::Encrypt.as_str()),
            ),
            (
                "key_mode",
                or_blank(self.key_mode.to_string(), KeyMode::Static.as_str()),
            ),
            (
                "provider",
                or_blank(self.provider.to_string(), Provider::RustCrypto.as_str()),
            ),
            ("label", label),
            ("arch", self.arch.clone().unwrap_or_default()),
            ("reason", self.reason.unwrap_or_default().to_string()),
        ]
    }

    /// "16 KiB, 1 thread, encrypt, static key": the point every row is
    /// measured at, with ", on openssl" for a provider other than the built-in crates.
    pub(super) fn describe(&self) -> String {
        let threads = if self.threads == 1 {
            "1 thread".into()
        } else {
            format!("{} threads", self.threads)
        };
        let on = if self.provider.is_rustcrypto() {
            String::new()
        } else {
            format!(", on {}", self.provider)
        };
        format!(
            "{}, {threads}, {}, {} key{on}",
            format::bytes(self.size_bytes),
            self.direction,
            self.key_mode
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::paging::with_query;
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> FallbackQuery {
        super::super::super::params::query_from(pairs)
    }

    #[test]
    fn filters_default_to_16_kib_one_thread_encrypt_and_refuse_nonsense() {
        let f = Filters::parse(&query(&[])).unwrap();
        assert_eq!(
            (f.size_bytes, f.threads, f.direction, f.key_mode),
            (16384, 1, Direction::Encrypt, KeyMode::Static)
        );
        assert_eq!(f.describe(), "16 KiB, 1 thread, encrypt, static key");
        let f = Filters::parse(&query(&[("size", "1MiB"), ("threads", "4"), ("label", "rack = b7")])).unwrap();
        assert_eq!((f.size_bytes, f.threads), (1 << 20, 4));
        assert_eq!(f.label, Some(("rack".into(), Some("b7".into()))));
        assert_eq!(
            with_query("/fallback", &f.query_pairs()),
            "/fallback?size=1048576&threads=4&label=rack%3Db7"
        );
        for (k, v) in [
            ("size", "0"),
            ("size", "huge"),
            ("threads", "0"),
            ("threads", "-2"),
            ("direction", "sideways"),
            ("key_mode", "none"),
            ("reason", "gremlins"),
        ] {
            let err = Filters::parse(&query(&[(k, v)])).unwrap_err();
            assert!(matches!(err, WebError::BadRequest(_)), "{k}={v}");
            assert!(err.to_string().contains(v), "{k}={v}: {err}");
        }
        assert_eq!(
            Filters::parse(&query(&[("reason", "none")])).unwrap().reason,
            Some(NO_REASON)
        );
    }
}
