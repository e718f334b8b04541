//! Pages of the admin API's lists (`ListHosts`, `ListFindings`): a page size
//! with a ceiling, and a token that says where the next page starts. Hosts
//! page by name (unique and sorted, so a host that appears meanwhile is
//! neither skipped nor repeated); findings by position.

use tonic::Status;

/// Items per page when the request says 0.
pub const DEFAULT_PAGE_SIZE: usize = 500;
/// Most items per page.
pub const MAX_PAGE_SIZE: usize = 1000;

/// The page size a request asks for, checked.
pub fn page_size(requested: u32) -> Result<usize, Status> {
    match requested as usize {
        0 => Ok(DEFAULT_PAGE_SIZE),
        n if n <= MAX_PAGE_SIZE => Ok(n),
        n => Err(Status::invalid_argument(format!(
            "page_size: {n} is more than {MAX_PAGE_SIZE}"
        ))),
    }
}

/// The page of `items` (sorted by a unique `key`, ascending) after the key
/// `token` (empty: the first page), and the token of the next page (empty: none).
pub fn by_key<T>(
    items: impl IntoIterator<Item = T>,
    key: impl Fn(&T) -> &str,
    token: &str,
    size: usize,
) -> (Vec<T>, String) {
    let mut page: Vec<T> = items
        .into_iter()
        .filter(|item| token.is_empty() || key(item) > token)
        .take(size + 1)
        .collect();
    let next = if page.len() > size {
        page.truncate(size);
        page.last().map(|item| key(item).to_string()).unwrap_or_default()
    } else {
        String::new()
    };
    (page, next)
}

/// The page of `items` starting at the position `token` (empty: 0), and the
/// token of the next page (empty: none).
pub fn by_position<T>(
    items: impl IntoIterator<Item = T>,
    token: &str,
    size: usize,
) -> Result<(Vec<T>, String), Status> {
    let start: usize = match token {
        "" => 0,
        t => t
            .parse()
            .map_err(|_| Status::invalid_argument(format!("page_token: {t:?} is not a token this list gave")))?,
    };
    let mut page: Vec<T> = items.into_iter().skip(start).take(size + 1).collect();
    let next = if page.len() > size {
        page.truncate(size);
        (start + size).to_string()
    } else {
        String::new()
    };
    Ok((page, next))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_pages_cover_every_item_once_and_end_with_an_empty_token() {
        let names: Vec<String> = (0..7).map(|i| format!("host-{i:02}")).collect();
        let mut seen = Vec::new();
        let mut token = String::new();
        loop {
            let (page, next) = by_key(names.clone(), |n| n.as_str(), &token, 3);
            assert!(page.len() <= 3);
            seen.extend(page);
            if next.is_empty() {
                break;
            }
            token = next;
        }
        assert_eq!(seen, names);
        // A host added before the token's key does not shift the next page.
        let (page, _) = by_key(["host-00", "host-01a", "host-02", "host-03"], |n| n, "host-01", 2);
        assert_eq!(page, ["host-01a", "host-02"]);
    }

    #[test]
    fn positional_pages_cover_every_item_and_a_foreign_token_is_refused() {
        let (first, next) = by_position(0..5, "", 2).unwrap();
        assert_eq!((first, next.as_str()), (vec![0, 1], "2"));
        let (last, next) = by_position(0..5, "4", 2).unwrap();
        assert_eq!((last, next.as_str()), (vec![4], ""));
        let (exact, next) = by_position(0..4, "2", 2).unwrap();
        assert_eq!((exact, next.as_str()), (vec![2, 3], ""), "no empty page at the end");
        let err = by_position(0..5, "host-01", 2).unwrap_err();
        assert!(err.message().starts_with("page_token:"), "{err:?}");
    }

    #[test]
    fn page_sizes_default_and_have_a_ceiling() {
        assert_eq!(page_size(0).unwrap(), DEFAULT_PAGE_SIZE);
        assert_eq!(page_size(7).unwrap(), 7);
        assert!(
            page_size(MAX_PAGE_SIZE as u32 + 1)
                .unwrap_err()
                .message()
                .starts_with("page_size:")
        );
    }
}
