//! Reading the report's HTML as the tests do: string search, no parser.

/// The text between the first `start` and the next `end` after it.
pub fn between<'a>(html: &'a str, start: &str, end: &str) -> &'a str {
    let from = html.find(start).unwrap_or_else(|| panic!("{start:?} not in the page")) + start.len();
    let to = html[from..]
        .find(end)
        .unwrap_or_else(|| panic!("{end:?} not after {start:?}"))
        + from;
    &html[from..to]
}

/// Markup without its tags.
pub fn text(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

/// The `<tr …>` element whose opening tag contains `marker`.
pub fn row<'a>(html: &'a str, marker: &str) -> &'a str {
    let at = html.find(marker).unwrap_or_else(|| panic!("no {marker:?} in the page"));
    let start = html[..at].rfind("<tr").expect("the marker sits in a row");
    let end = at + html[at..].find("</tr>").expect("the row ends");
    &html[start..end]
}
