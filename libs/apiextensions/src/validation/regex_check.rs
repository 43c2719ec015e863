//! Whether a schema `pattern` compiles, worded as Go's `regexp` parser words its errors.
//!
//! kube compiles patterns with Go's RE2; the `regex` crate implements the same syntax, so a
//! compile failure is a failure in both. Two differences are smoothed over: this crate is
//! built without the Unicode property tables (`\p{L}`), which Go has, so such patterns are
//! accepted; and the crate's compiled-size limit, which Go does not have.

/// Go's `error parsing regexp: ...` for an invalid `pattern`, `None` when it is valid.
pub(crate) fn regex_error(pattern: &str) -> Option<String> {
    let err = match regex::Regex::new(pattern) {
        Ok(_) => return None,
        Err(regex::Error::CompiledTooBig(_)) => return None,
        Err(e) => e.to_string(),
    };
    if err.contains("Unicode")
        && (err.contains("not found") || err.contains("unavailable") || err.contains("not enabled"))
    {
        return None;
    }
    let code = if err.contains("unclosed group") {
        format!("missing closing ): `{pattern}`")
    } else if err.contains("unopened group") {
        format!("unexpected ): `{pattern}`")
    } else if err.contains("unclosed character class") {
        let from = pattern.rfind('[').unwrap_or(0);
        format!("missing closing ]: `{}`", &pattern[from..])
    } else if err.contains("repetition operator missing expression") {
        let op = pattern.chars().find(|c| "*+?".contains(*c)).unwrap_or('*');
        format!("missing argument to repetition operator: `{op}`")
    } else if err.contains("unrecognized escape sequence") || err.contains("incomplete escape sequence") {
        let at = pattern.find('\\').unwrap_or(0);
        let esc: String = pattern[at..].chars().take(2).collect();
        format!("invalid escape sequence: `{esc}`")
    } else if err.contains("invalid character class range") {
        format!("invalid character class range: `{pattern}`")
    } else {
        // a kind Go words differently: the crate's own explanation, first line
        let detail = err.lines().rev().find(|l| l.starts_with("error:")).unwrap_or("error: invalid pattern");
        format!("{}: `{pattern}`", detail.trim_start_matches("error:").trim())
    };
    Some(format!("error parsing regexp: {code}"))
}

#[cfg(test)]
mod tests {
    use super::regex_error;

    #[test]
    fn go_wording() {
        assert_eq!(regex_error("^[a-z]+$"), None);
        assert_eq!(regex_error("(abc").unwrap(), "error parsing regexp: missing closing ): `(abc`");
        assert_eq!(regex_error("abc)").unwrap(), "error parsing regexp: unexpected ): `abc)`");
        assert_eq!(regex_error("a[b").unwrap(), "error parsing regexp: missing closing ]: `[b`");
        assert_eq!(regex_error("*a").unwrap(), "error parsing regexp: missing argument to repetition operator: `*`");
        // Go knows the Unicode classes this build leaves out
        assert_eq!(regex_error(r"^\p{L}+$"), None);
    }
}
