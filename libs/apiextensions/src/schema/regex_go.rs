//! `pattern` as kube evaluates it: Go's RE2 `regexp`, unanchored `MatchString`.
//!
//! The `regex` crate is RE2-like; two differences matter for CRDs and are bridged here:
//! Go's Perl classes (`\d`, `\w`, `\s`) are ASCII-only, and a pattern that does not compile
//! is reported in the object's error with Go's wording (`error parsing regexp: missing
//! argument to repetition operator: `+``), so the compile error is translated.

use regex::Regex;

/// Rewrites Go's ASCII Perl classes into explicit classes (nested classes are fine in Rust).
fn translate(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('d') => out.push_str("[0-9]"),
            Some('D') => out.push_str("[^0-9]"),
            Some('w') => out.push_str("[0-9A-Za-z_]"),
            Some('W') => out.push_str("[^0-9A-Za-z_]"),
            Some('s') => out.push_str("[\\t\\n\\f\\r ]"),
            Some('S') => out.push_str("[^\\t\\n\\f\\r ]"),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// The offending fragment of `pattern` that Rust's error points at (single-line patterns).
fn span_fragment(pattern: &str, rendered: &str) -> Option<(usize, usize)> {
    let lines: Vec<&str> = rendered.lines().collect();
    let caret = lines.iter().find(|l| {
        l.trim_start().starts_with('^') && l.trim().chars().all(|c| c == '^' || c == '-')
    })?;
    let start = caret.find('^')?.checked_sub(4)?;
    let end = caret.rfind('^')?.checked_sub(4)? + 1;
    let count = pattern.chars().count();
    (start <= count).then_some((start, end.min(count)))
}

fn chars_between(pattern: &str, start: usize, end: usize) -> String {
    pattern
        .chars()
        .skip(start)
        .take(end.saturating_sub(start))
        .collect()
}

/// Go's `regexp.Compile` error text for a pattern the `regex` crate rejected.
fn go_error(pattern: &str, rendered: &str) -> String {
    let rust_msg = rendered
        .lines()
        .find_map(|l| l.strip_prefix("error: "))
        .unwrap_or(rendered)
        .trim();
    let span = span_fragment(pattern, rendered);
    let frag = |whole_tail: bool| match span {
        Some((s, _)) if whole_tail => chars_between(pattern, s, usize::MAX),
        Some((s, e)) => chars_between(pattern, s, e),
        None => pattern.to_string(),
    };
    let (code, expr) = if rust_msg.contains("repetition operator missing expression") {
        ("missing argument to repetition operator", frag(false))
    } else if rust_msg.contains("unclosed group") {
        ("missing closing )", pattern.to_string())
    } else if rust_msg.contains("unopened group") {
        ("unexpected )", pattern.to_string())
    } else if rust_msg.contains("unclosed character class") {
        ("missing closing ]", frag(true))
    } else if rust_msg.contains("incomplete escape sequence") {
        ("trailing backslash at end of expression", String::new())
    } else if rust_msg.contains("unrecognized escape sequence") {
        ("invalid escape sequence", frag(false))
    } else if rust_msg.contains("invalid character class range") {
        ("invalid character class range", frag(false))
    } else if rust_msg.contains("repetition count range")
        || rust_msg.contains("repetition quantifier")
    {
        ("invalid repeat count", frag(false))
    } else if rust_msg.contains("look-around") || rust_msg.contains("unrecognized flag") {
        ("invalid or unsupported Perl syntax", frag(false))
    } else if rust_msg.contains("size limit") {
        return "expression too large".to_string();
    } else {
        return format!("error parsing regexp: {rust_msg}: `{pattern}`");
    };
    format!("error parsing regexp: {code}: `{expr}`")
}

/// Compiles a CRD `pattern` with Go's semantics, or returns Go's error message.
pub(crate) fn compile(pattern: &str) -> Result<Regex, String> {
    if let Err(e) = Regex::new(pattern) {
        return Err(go_error(pattern, &e.to_string()));
    }
    Regex::new(&translate(pattern)).map_err(|e| go_error(pattern, &e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_read_like_go() {
        assert_eq!(
            compile("+").err().as_deref(),
            Some("error parsing regexp: missing argument to repetition operator: `+`")
        );
        assert_eq!(
            compile("(ab").err().as_deref(),
            Some("error parsing regexp: missing closing ): `(ab`")
        );
        assert_eq!(
            compile("a[b-").err().as_deref(),
            Some("error parsing regexp: missing closing ]: `[b-`")
        );
        assert_eq!(
            compile("ab)").err().as_deref(),
            Some("error parsing regexp: unexpected ): `ab)`")
        );
    }

    #[test]
    fn perl_classes_are_ascii() {
        let re = compile(r"^\d+$").expect("compiles");
        assert!(re.is_match("123"));
        assert!(!re.is_match("١٢٣"));
        let re = compile(r"^[\w.]+\\d$").expect("compiles");
        assert!(re.is_match("a.b\\d"));
    }
}
