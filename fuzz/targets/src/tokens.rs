//! `?resourceVersion=`, `?resourceVersionMatch=` and `?continue=`.

use kapi_apimachinery::continue_token::{self, ContinueToken};
use kapi_apimachinery::resource_version::{parse, parse_match, validate_continue_rv, validate_list_options_with_continue};

/// A list's version options, one per line: resourceVersion, resourceVersionMatch, continue,
/// then `w` (watch) and `s`/`S` (sendInitialEvents false/true) anywhere in the fourth line.
/// Asserts: a parsed version prints back to the same number; every refusal is kube's 400 or
/// 422 with its causes; accepted combinations obey kube's rules.
pub fn resource_version(data: &[u8]) {
    let Some(text) = crate::text(data) else { return };
    let mut lines = text.split('\n');
    let rv = lines.next().unwrap_or("");
    let rv_match = lines.next().unwrap_or("");
    let token = lines.next().unwrap_or("");
    let flags = lines.next().unwrap_or("");
    match parse(rv) {
        Ok(None) => assert!(rv.is_empty()),
        Ok(Some(n)) => {
            assert!(rv.bytes().all(|b| b.is_ascii_digit()), "{rv:?} parsed");
            assert_eq!(parse(&n.to_string()).ok().flatten(), Some(n));
        }
        Err(e) => assert_eq!(e.code, 400, "{rv:?}: {}", e.message),
    }
    if let Err(e) = parse_match(rv_match) {
        assert_eq!(e.code, 422);
    }
    let watch = flags.contains('w');
    let send_initial_events = if flags.contains('S') { Some(true) } else if flags.contains('s') { Some(false) } else { None };
    match validate_list_options_with_continue(opt(rv), opt(rv_match), send_initial_events, watch, opt(token)) {
        Ok(()) if watch => assert!(rv_match.is_empty() || rv_match == "NotOlderThan"),
        Ok(()) => {
            assert!(send_initial_events.is_none(), "sendInitialEvents accepted on a list");
            assert!(rv_match.is_empty() || (matches!(rv_match, "Exact" | "NotOlderThan") && !rv.is_empty() && token.is_empty()));
        }
        Err(e) => {
            assert_eq!(e.code, 422);
            assert!(e.details.is_some_and(|d| !d.causes.is_empty()), "422 without causes");
        }
    }
    if let Err(e) = validate_continue_rv(opt(rv), opt(token)) {
        assert_eq!(e.code, 400);
        assert!(!token.is_empty() && !rv.is_empty() && rv != "0");
    }
}

/// `None` for an absent (empty) query parameter.
fn opt(s: &str) -> Option<&str> {
    (!s.is_empty()).then_some(s)
}

/// A continue token, and the same text as the last key of a page. Asserts: a token that
/// decodes re-encodes to one that decodes the same; a token kapi mints for a clean key
/// decodes to that key and revision; refusals are 400 with kube's prefix.
pub fn continue_token(data: &[u8]) {
    let Some(text) = crate::text(data) else { return };
    match continue_token::decode(text) {
        Ok(token) => {
            let again = continue_token::decode(&continue_token::encode(token.revision, &token.start_after_key));
            assert_eq!(again.ok(), Some(token.clone()), "{text:?}");
        }
        Err(e) => {
            assert_eq!(e.code, 400);
            assert!(e.message.starts_with("invalid continue token: "), "{}", e.message);
        }
    }
    let revision = 1 + data.len() as u64;
    let key = text.trim_start_matches('/');
    let minted = continue_token::decode(&continue_token::encode(revision, text));
    if is_clean(key) {
        let want = ContinueToken { revision, start_after_key: key.to_owned() };
        assert_eq!(minted.ok(), Some(want), "a token for the clean key {key:?}");
    } else if let Ok(token) = minted {
        assert_eq!((token.revision, token.start_after_key.as_str()), (revision, key));
    }
}

/// A key Go's `path.Clean` leaves as it is (relative, without empty, `.` or `..` segments).
fn is_clean(key: &str) -> bool {
    !key.is_empty() && key.split('/').all(|seg| !seg.is_empty() && seg != "." && seg != "..")
}
