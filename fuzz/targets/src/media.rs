//! The `Accept` and `Content-Type` headers.

use kapi_apimachinery::media::{parse_accept, parse_content_type, MediaRange};

/// A header value, read as both headers. Asserts: ranges are ordered by preference (q
/// descending), carry lowercase token types and a q in (0, 1]; each range, printed with its
/// parameters quoted, parses back to itself; a Content-Type is never a wildcard.
pub fn media_type(data: &[u8]) {
    let Some(text) = crate::text(data) else { return };
    let ranges = parse_accept(text);
    for pair in ranges.windows(2) {
        assert!(pair[0].q >= pair[1].q, "ranges out of preference order: {ranges:?}");
    }
    for r in &ranges {
        assert!(r.q > 0.0 && r.q <= 1.0, "q {} kept", r.q);
        assert!(is_lower_token(&r.type_) && is_lower_token(&r.subtype), "{r:?}");
        round_trip(r, |s| parse_accept(s).into_iter().next());
    }
    if let Some(r) = parse_content_type(text) {
        assert!(r.type_ != "*" && r.subtype != "*", "wildcard Content-Type {r:?}");
        round_trip(&r, parse_content_type);
    }
}

fn is_lower_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| !b.is_ascii_uppercase() && (b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)))
}

/// Prints `r` as a header would carry it and parses it back with `parse`.
fn round_trip(r: &MediaRange, parse: impl Fn(&str) -> Option<MediaRange>) {
    if !r.params.iter().all(|(k, _)| is_lower_token(k)) {
        // A parameter name that is not a token cannot be written back unambiguously.
        return;
    }
    let mut printed = r.essence();
    for (k, v) in &r.params {
        printed.push_str(&format!(";{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"")));
    }
    if r.q < 1.0 {
        printed.push_str(&format!(";q={}", r.q));
    }
    let again = parse(&printed);
    assert_eq!(again.as_ref(), Some(r), "printed as {printed:?}");
}
