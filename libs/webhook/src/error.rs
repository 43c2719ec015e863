//! What a call can fail with, worded as kube words it: the transport failures as Go's
//! `*url.Error` (`Post "<url>": <cause>`), unexpected statuses as client-go's
//! `NewGenericServerResponse`, undecodable answers as apimachinery's JSON serializer. Callers
//! (admission, conversion) put these texts inside their own, as kube does.

use std::net::SocketAddr;

use bytes::Bytes;
use serde_json::Value;

/// Why a webhook call failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// Not reached or no answer in time: the text is Go's url.Error as kube prints it, e.g.
    /// `Post "https://127.0.0.1:8443/validate?timeout=5s": dial tcp 127.0.0.1:8443: connect: connection refused`,
    /// `Post "https://...?timeout=1s": context deadline exceeded`,
    /// `Post "https://...": tls: failed to verify certificate: x509: certificate signed by unknown authority`,
    /// or a resolution failure (`service "x" not found`).
    #[error("{0}")]
    Call(String),
    /// The webhook answered with a non-2xx status (kube: `the server responded with the status
    /// code N but did not return more information` and its other per-status texts, unless the
    /// body is a metav1.Status, whose message kube uses).
    #[error("{}", status_message(*.code, .body))]
    Status {
        /// The HTTP status code.
        code: u16,
        /// The answer's body.
        body: Bytes,
    },
    /// The answer is not JSON (kube's JSON serializer's `couldn't get version/kind; json parse
    /// error: ...` or client-go's `0-length response ...`).
    #[error("{0}")]
    Decode(String),
}

/// What Go's context package says when a deadline passes.
pub(crate) const DEADLINE_EXCEEDED: &str = "context deadline exceeded";

impl CallError {
    /// true when the call did not complete within its timeout
    pub fn is_timeout(&self) -> bool {
        matches!(self, CallError::Call(text) if text.ends_with(&format!(": {DEADLINE_EXCEEDED}")))
    }

    /// Go's `*url.Error` for a POST to `url`.
    pub(crate) fn post(url: &str, cause: impl std::fmt::Display) -> CallError {
        CallError::Call(format!("Post {}: {cause}", go_quote(url)))
    }
}

/// client-go caps the body text it puts in a message.
const MAX_UNSTRUCTURED_TEXT: usize = 2048;

/// kube's text for an answer of status `code`: a metav1.Status failure's own message, else
/// apimachinery's `NewGenericServerResponse` with client-go's server message (the body's text).
/// client-go takes the body as text only when its Content-Type is empty or text/*, which the
/// error carries no more; a body that parses as JSON is taken as a JSON answer ("unknown").
fn status_message(code: u16, body: &Bytes) -> String {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    if let Some(message) = json.as_ref().and_then(failure_status_message) {
        return message;
    }
    let server_message = if json.is_some() {
        "unknown".to_owned()
    } else {
        String::from_utf8_lossy(&body[..body.len().min(MAX_UNSTRUCTURED_TEXT)]).trim().to_owned()
    };
    match code {
        409 => "the server reported a conflict".into(),
        404 => "the server could not find the requested resource".into(),
        400 => "the server rejected our request for an unknown reason".into(),
        401 => "the server has asked for the client to provide credentials".into(),
        403 | 415 => server_message,
        406 if server_message.is_empty() || server_message == "unknown" => {
            "the server was unable to respond with a content type that the client supports".into()
        }
        406 => server_message,
        405 => "the server does not allow this method on the requested resource".into(),
        422 => "the server rejected our request due to an error in our request".into(),
        503 => "the server is currently unable to handle the request".into(),
        504 => "the server was unable to return a response in the time allotted, but may still be processing the request".into(),
        429 => "the server has received too many requests and has asked us to try again later".into(),
        500.. => format!("an error on the server ({}) has prevented the request from succeeding", go_quote(&server_message)),
        _ => format!("the server responded with the status code {code} but did not return more information"),
    }
}

/// The message of a metav1.Status reporting failure, as client-go's `Result.Error` finds it.
pub(crate) fn failure_status_message(v: &Value) -> Option<String> {
    let is_status = v.get("kind").and_then(Value::as_str) == Some("Status")
        && matches!(v.get("apiVersion").and_then(Value::as_str), None | Some("v1"));
    (is_status && v.get("status").and_then(Value::as_str) == Some("Failure"))
        .then(|| v.get("message").and_then(Value::as_str).unwrap_or_default().to_owned())
}

/// Reads a 2xx answer as kube's JSON serializer does, down to its error texts (its first step
/// finds apiVersion and kind by unmarshalling into an anonymous Go struct).
pub(crate) fn decode(status: u16, content_type: &str, body: &[u8]) -> Result<Value, CallError> {
    if body.is_empty() {
        return Err(CallError::Decode(format!("0-length response with status code: {status} and content type: {content_type}")));
    }
    let parse_error = |why: String| CallError::Decode(format!("couldn't get version/kind; json parse error: {why}"));
    let value: Value = serde_json::from_slice(body).map_err(|e| parse_error(go_json_error(body, &e)))?;
    let wrong = match &value {
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
        Value::Object(_) | Value::Null => return Ok(value),
    };
    Err(parse_error(format!(
        r#"json: cannot unmarshal {wrong} into Go value of type struct {{ APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" }}"#
    )))
}

/// encoding/json's syntax error for the common cases (an empty or truncated document, a body
/// that is not JSON at all); serde's own text otherwise.
fn go_json_error(body: &[u8], e: &serde_json::Error) -> String {
    if e.is_eof() {
        return "unexpected end of JSON input".into();
    }
    let first = body.iter().position(|b| !b" \t\r\n".contains(b));
    match (first, e.line(), e.column()) {
        // serde points at the first offending character: when that is the document's first
        // character, Go was looking for the beginning of a value.
        (Some(at), 1, col) if col == at + 1 => {
            let c = String::from_utf8_lossy(&body[at..]).chars().next().unwrap_or_default();
            format!("invalid character {} looking for beginning of value", go_quote_char(c))
        }
        _ => e.to_string(),
    }
}

/// Go's `%q` of a string.
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        push_escaped(&mut out, c, '"');
    }
    out.push('"');
    out
}

/// encoding/json's `quoteChar`.
fn go_quote_char(c: char) -> String {
    match c {
        '\'' => r"'\''".into(),
        '"' => r#"'"'"#.into(),
        c => {
            let mut out = String::from("'");
            push_escaped(&mut out, c, '\0');
            out.push('\'');
            out
        }
    }
}

fn push_escaped(out: &mut String, c: char, quote: char) {
    match c {
        c if c == quote || c == '\\' => {
            out.push('\\');
            out.push(c);
        }
        '\u{7}' => out.push_str(r"\a"),
        '\u{8}' => out.push_str(r"\b"),
        '\u{c}' => out.push_str(r"\f"),
        '\n' => out.push_str(r"\n"),
        '\r' => out.push_str(r"\r"),
        '\t' => out.push_str(r"\t"),
        '\u{b}' => out.push_str(r"\v"),
        c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!(r"\x{:02x}", c as u32)),
        c if c.is_control() => out.push_str(&format!(r"\u{:04x}", c as u32)),
        c => out.push(c),
    }
}

/// A system call's failure as Go's syscall package words it (`connection refused`).
pub(crate) fn go_errno_text(e: &std::io::Error) -> String {
    let text = e.to_string();
    let text = match (e.raw_os_error(), text.rfind(" (os error ")) {
        (Some(_), Some(at)) => &text[..at],
        _ => &text,
    };
    let mut chars = text.chars();
    chars.next().map(|c| c.to_lowercase().chain(chars).collect()).unwrap_or_default()
}

/// An I/O failure on an open connection as Go's net package words it: `EOF`, or
/// `read tcp <local>-><peer>: read: connection reset by peer`.
pub(crate) fn go_io_error(e: &std::io::Error, op: &str, local: SocketAddr, peer: SocketAddr) -> String {
    match e.kind() {
        std::io::ErrorKind::UnexpectedEof => "EOF".into(),
        _ => format!("{op} tcp {local}->{peer}: {op}: {}", go_errno_text(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_read_as_client_go_words_them() {
        let text = |code, body: &'static str| CallError::Status { code, body: Bytes::from_static(body.as_bytes()) }.to_string();
        assert_eq!(text(418, ""), "the server responded with the status code 418 but did not return more information");
        assert_eq!(text(500, " boom\n"), r#"an error on the server ("boom") has prevented the request from succeeding"#);
        assert_eq!(text(502, r#"{"error": "x"}"#), r#"an error on the server ("unknown") has prevented the request from succeeding"#);
        assert_eq!(text(403, "no you don't"), "no you don't");
        assert_eq!(text(404, "gone"), "the server could not find the requested resource");
        let status = r#"{"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "denied: team quota", "code": 403}"#;
        assert_eq!(text(403, status), "denied: team quota");
    }

    #[test]
    fn undecodable_answers_read_as_apimachinery_words_them() {
        let text = |body: &str| decode(200, "application/json", body.as_bytes()).unwrap_err().to_string();
        assert_eq!(text(""), "0-length response with status code: 200 and content type: application/json");
        assert_eq!(text("  <html>"), "couldn't get version/kind; json parse error: invalid character '<' looking for beginning of value");
        assert_eq!(text(r#"{"kind": "#), "couldn't get version/kind; json parse error: unexpected end of JSON input");
        assert!(text("[1]").ends_with(r#"json: cannot unmarshal array into Go value of type struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" }"#));
        assert_eq!(decode(200, "application/json", br#"{"kind": "X"}"#).unwrap()["kind"], "X");
    }

    #[test]
    fn quoting_is_gos() {
        assert_eq!(go_quote("a\"b\\c\nd\u{1}é"), r#""a\"b\\c\nd\x01é""#);
        assert_eq!(go_quote_char('\''), r"'\''");
        assert_eq!(go_quote_char('"'), r#"'"'"#);
        assert_eq!(go_quote_char('<'), "'<'");
    }
}
