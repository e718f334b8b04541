//! Pagination of long tables (`?page=N`, 1-based), the query strings of
//! the links that keep a page's filters while moving between pages, and the
//! numeric ids in paths (`/hosts/{id}`).

use super::WebError;

/// Where a page sits in a table of `total` rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pager {
    /// 1-based, clamped to the last page so a stale link still shows rows.
    pub page: u64,
    pub per_page: u64,
    pub total: u64,
}

impl Pager {
    /// Reads `?page=`: absent or empty is page 1; anything but a positive
    /// integer is a bad request naming what was sent.
    pub fn parse_page(raw: Option<&str>) -> Result<u64, WebError> {
        match raw.map(str::trim) {
            None | Some("") => Ok(1),
            Some(text) => match text.parse::<u64>() {
                Ok(n) if n >= 1 => Ok(n),
                _ => Err(WebError::BadRequest(format!(
                    "page={text:?} is not a page number (1, 2, 3, …)"
                ))),
            },
        }
    }

    pub fn new(page: u64, per_page: u64, total: u64) -> Self {
        let per_page = per_page.max(1);
        let last = total.div_ceil(per_page).max(1);
        Pager {
            page: page.clamp(1, last),
            per_page,
            total,
        }
    }

    pub fn last_page(&self) -> u64 {
        self.total.div_ceil(self.per_page).max(1)
    }

    /// Rows to skip, for SQL `OFFSET` or `skip()`.
    pub fn offset(&self) -> u64 {
        (self.page - 1) * self.per_page
    }

    /// "showing 51–100 of 230", or "none" for an empty table.
    pub fn summary(&self) -> String {
        if self.total == 0 {
            return "showing 0 of 0".into();
        }
        let first = self.offset() + 1;
        let last = (self.offset() + self.per_page).min(self.total);
        format!("showing {first}–{last} of {}", self.total)
    }

    /// The link to `page` of the same view: `base` is the page's path and
    /// `filters` its other query parameters (empty ones are left out).
    pub fn href(&self, base: &str, filters: &[(&str, String)], page: u64) -> String {
        let mut pairs: Vec<(&str, String)> = filters.to_vec();
        if page > 1 {
            pairs.push(("page", page.to_string()));
        }
        with_query(base, &pairs)
    }

    pub fn prev_href(&self, base: &str, filters: &[(&str, String)]) -> Option<String> {
        (self.page > 1).then(|| self.href(base, filters, self.page - 1))
    }

    pub fn next_href(&self, base: &str, filters: &[(&str, String)]) -> Option<String> {
        (self.page < self.last_page()).then(|| self.href(base, filters, self.page + 1))
    }
}

/// A numeric id from a path: anything else is a bad request that says so
/// (axum's own rejection would be a bare text line, not the error page).
pub fn parse_id(raw: &str, what: &str) -> Result<i64, WebError> {
    raw.trim()
        .parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| WebError::BadRequest(format!("{raw:?} is not a {what} id: ids are positive integers")))
}

/// `base?k=v&…` with every value percent-encoded; pairs with an empty value
/// are dropped (a blank filter means "any").
pub fn with_query(base: &str, pairs: &[(&str, String)]) -> String {
    let query: Vec<String> = pairs
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect();
    if query.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", query.join("&"))
    }
}

/// Percent-encodes everything but RFC 3986 unreserved characters, so an
/// agent-supplied value (a CPU model with `&` or `#`) cannot end or extend
/// the query. HTML escaping of the whole link is the template's job.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_numbers_are_positive_integers_or_absent() {
        for (raw, want) in [
            (None, Some(1)),
            (Some(""), Some(1)),
            (Some("3"), Some(3)),
            (Some(" 2 "), Some(2)),
        ] {
            assert_eq!(Pager::parse_page(raw).ok(), want, "{raw:?}");
        }
        for raw in ["0", "-1", "two", "1.5"] {
            let err = Pager::parse_page(Some(raw)).unwrap_err();
            assert!(matches!(err, WebError::BadRequest(_)), "{raw}");
            assert!(err.to_string().contains(raw), "{err}");
        }
    }

    #[test]
    fn the_summary_counts_rows_of_the_page_shown() {
        for (page, per_page, total, want_page, want) in [
            (1, 50, 0, 1, "showing 0 of 0"),
            (1, 50, 7, 1, "showing 1–7 of 7"),
            (1, 50, 230, 1, "showing 1–50 of 230"),
            (2, 50, 230, 2, "showing 51–100 of 230"),
            (5, 50, 230, 5, "showing 201–230 of 230"),
            // A page past the end shows the last one.
            (9, 50, 230, 5, "showing 201–230 of 230"),
            (3, 50, 100, 2, "showing 51–100 of 100"),
        ] {
            let pager = Pager::new(page, per_page, total);
            assert_eq!(pager.page, want_page, "page {page} of {total}");
            assert_eq!(pager.summary(), want, "page {page} of {total}");
        }
    }

    #[test]
    fn page_links_keep_the_filters_and_stop_at_the_ends() {
        let filters = [
            ("arch", "x86_64".to_string()),
            ("label", "class=a&b".to_string()),
            ("status", String::new()),
        ];
        let first = Pager::new(1, 50, 120);
        assert_eq!(first.prev_href("/hosts", &filters), None);
        assert_eq!(
            first.next_href("/hosts", &filters).as_deref(),
            Some("/hosts?arch=x86_64&label=class%3Da%26b&page=2")
        );
        let last = Pager::new(3, 50, 120);
        assert_eq!(last.next_href("/hosts", &filters), None);
        assert_eq!(last.prev_href("/hosts", &[]).as_deref(), Some("/hosts?page=2"));
        // Page 1 needs no parameter.
        assert_eq!(
            Pager::new(2, 50, 120).prev_href("/hosts", &[]).as_deref(),
            Some("/hosts")
        );
    }

    #[test]
    fn ids_are_positive_integers() {
        assert_eq!(parse_id("42", "host").ok(), Some(42));
        for raw in ["0", "-3", "abc", "4.2", "", "99999999999999999999"] {
            let err = parse_id(raw, "host").unwrap_err();
            assert!(matches!(err, WebError::BadRequest(_)), "{raw}");
            assert!(err.to_string().contains("not a host id"), "{err}");
        }
    }

    #[test]
    fn query_values_cannot_break_out_of_the_link() {
        assert_eq!(
            encode("Intel(R) Xeon #1 & \"x\""),
            "Intel%28R%29%20Xeon%20%231%20%26%20%22x%22"
        );
        assert_eq!(encode("ü/<"), "%C3%BC%2F%3C");
    }
}
