//! `resourceVersion` and `resourceVersionMatch` parsing, and kube's list-option rules.
//!
//! A resource version is the store revision as a decimal `u64`. The checks and messages follow
//! `apimachinery/pkg/apis/meta/internalversion/validation` (422 `ListOptions.meta.k8s.io "" is
//! invalid: ...`) and the storage layer (400 `invalid resource version: ...`).

use serde_json::Value;

use crate::status::{ApiError, Cause};

/// How a list interprets a non-empty `resourceVersion`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceVersionMatch {
    /// Any state at least as new as the revision (the default for a non-empty version).
    NotOlderThan,
    /// Exactly the state at the revision (410 if compacted).
    Exact,
}

impl ResourceVersionMatch {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotOlderThan => "NotOlderThan",
            Self::Exact => "Exact",
        }
    }
}

/// Parses a resource version: `""` is "unset", digits are a revision (`0` means "any").
pub fn parse(rv: &str) -> Result<Option<u64>, ApiError> {
    if rv.is_empty() {
        return Ok(None);
    }
    if !rv.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid_rv(rv, "invalid syntax"));
    }
    rv.parse::<u64>().map(Some).map_err(|_| invalid_rv(rv, "value out of range"))
}

fn invalid_rv(rv: &str, why: &str) -> ApiError {
    // Same text as kube's storage layer, which reports Go's strconv error.
    ApiError::bad_request(format!(
        "invalid resource version: resourceVersion: Invalid value: {rv:?}: strconv.ParseUint: parsing {rv:?}: {why}"
    ))
}

/// Parses `?resourceVersionMatch=`: `""` is unset; anything but `Exact`/`NotOlderThan` is 422.
pub fn parse_match(s: &str) -> Result<Option<ResourceVersionMatch>, ApiError> {
    match s {
        "" => Ok(None),
        "Exact" => Ok(Some(ResourceVersionMatch::Exact)),
        "NotOlderThan" => Ok(Some(ResourceVersionMatch::NotOlderThan)),
        other => Err(list_options_invalid(vec![Cause::not_supported(
            "resourceVersionMatch",
            &Value::from(other),
            &["Exact", "NotOlderThan", ""],
        )])),
    }
}

fn list_options_invalid(causes: Vec<Cause>) -> ApiError {
    ApiError::invalid("meta.k8s.io", "ListOptions", "", causes)
}

/// kube's `ValidateListOptions` for list (`watch=false`) and watch requests, with the WatchList
/// feature (streaming lists via `sendInitialEvents`) enabled.
pub fn validate_list_options(
    rv: Option<&str>,
    rv_match: Option<&str>,
    send_initial_events: Option<bool>,
    watch: bool,
) -> Result<(), ApiError> {
    validate_list_options_with_continue(rv, rv_match, send_initial_events, watch, None)
}

/// [`validate_list_options`] plus the rules that involve `?continue=`.
pub fn validate_list_options_with_continue(
    rv: Option<&str>,
    rv_match: Option<&str>,
    send_initial_events: Option<bool>,
    watch: bool,
    continue_token: Option<&str>,
) -> Result<(), ApiError> {
    let rv = rv.unwrap_or("");
    let m = rv_match.unwrap_or("");
    let has_continue = continue_token.is_some_and(|c| !c.is_empty());
    let field = "resourceVersionMatch";
    let mut causes = Vec::new();
    if watch {
        if send_initial_events.is_some() && m != "NotOlderThan" {
            causes.push(Cause::forbidden(
                field,
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        if !m.is_empty() {
            if send_initial_events.is_none() {
                causes.push(Cause::forbidden(
                    field,
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                ));
            }
            if m != "NotOlderThan" {
                causes.push(Cause::not_supported(field, &Value::from(m), &["NotOlderThan"]));
            }
            if has_continue {
                causes.push(Cause::forbidden(field, "resourceVersionMatch is forbidden when continue is provided"));
            }
        }
    } else {
        if !m.is_empty() {
            if rv.is_empty() {
                causes.push(Cause::forbidden(
                    field,
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                ));
            }
            if has_continue {
                causes.push(Cause::forbidden(field, "resourceVersionMatch is forbidden when continue is provided"));
            }
            if m != "Exact" && m != "NotOlderThan" {
                causes.push(Cause::not_supported(field, &Value::from(m), &["Exact", "NotOlderThan", ""]));
            }
            if m == "Exact" && rv == "0" {
                causes.push(Cause::forbidden(
                    field,
                    "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                ));
            }
        }
        if send_initial_events.is_some() {
            causes.push(Cause::forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"));
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(list_options_invalid(causes))
    }
}

/// The 400 kube's storage answers for a continue token combined with a resource version.
pub fn validate_continue_rv(rv: Option<&str>, continue_token: Option<&str>) -> Result<(), ApiError> {
    let rv = rv.unwrap_or("");
    if continue_token.is_some_and(|c| !c.is_empty()) && !rv.is_empty() && rv != "0" {
        return Err(ApiError::bad_request("specifying resource version is not allowed when using continue"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg<T: std::fmt::Debug>(r: Result<T, ApiError>) -> (u16, String) {
        match r {
            Ok(v) => panic!("expected an error, got {v:?}"),
            Err(e) => (e.code, e.message),
        }
    }

    #[test]
    fn parses_versions() {
        assert_eq!(parse("").ok(), Some(None));
        assert_eq!(parse("0").ok(), Some(Some(0)));
        assert_eq!(parse("18446744073709551615").ok(), Some(Some(u64::MAX)));
        assert_eq!(
            msg(parse("abc")),
            (
                400,
                "invalid resource version: resourceVersion: Invalid value: \"abc\": strconv.ParseUint: parsing \"abc\": invalid syntax"
                    .to_string()
            )
        );
        assert!(msg(parse("18446744073709551616")).1.ends_with("value out of range"));
        assert!(parse("-1").is_err());
        assert!(parse("+1").is_err());
    }

    #[test]
    fn parses_match() {
        assert_eq!(parse_match("").ok(), Some(None));
        assert_eq!(parse_match("Exact").ok(), Some(Some(ResourceVersionMatch::Exact)));
        assert_eq!(parse_match("NotOlderThan").ok(), Some(Some(ResourceVersionMatch::NotOlderThan)));
        let (code, m) = msg(parse_match("foo"));
        assert_eq!(code, 422);
        assert_eq!(
            m,
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Unsupported value: \"foo\": supported values: \"Exact\", \"NotOlderThan\", \"\""
        );
    }

    #[test]
    fn list_rules() {
        assert!(validate_list_options(None, None, None, false).is_ok());
        assert!(validate_list_options(Some("1"), Some("Exact"), None, false).is_ok());
        assert!(validate_list_options(Some("0"), Some("NotOlderThan"), None, false).is_ok());
        assert_eq!(
            msg(validate_list_options(None, Some("Exact"), None, false)),
            (
                422,
                "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
                    .to_string()
            )
        );
        assert_eq!(
            msg(validate_list_options(Some("0"), Some("Exact"), None, false)).1,
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""
        );
        assert_eq!(
            msg(validate_list_options(None, Some("NotARealMatch"), None, false)).1,
            "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided, resourceVersionMatch: Unsupported value: \"NotARealMatch\": supported values: \"Exact\", \"NotOlderThan\", \"\"]"
        );
        assert!(msg(validate_list_options(None, None, Some(true), false))
            .1
            .ends_with("sendInitialEvents is forbidden for list"));
        assert!(msg(validate_list_options_with_continue(Some("5"), Some("NotOlderThan"), None, false, Some("tok")))
            .1
            .contains("resourceVersionMatch is forbidden when continue is provided"));
    }

    #[test]
    fn watch_rules() {
        assert!(validate_list_options(Some("5"), None, None, true).is_ok());
        assert!(validate_list_options(None, Some("NotOlderThan"), Some(true), true).is_ok());
        assert!(msg(validate_list_options(None, None, Some(true), true))
            .1
            .contains("sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"));
        assert!(msg(validate_list_options(None, Some("NotOlderThan"), None, true))
            .1
            .contains("resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"));
        assert!(msg(validate_list_options(None, Some("Exact"), Some(true), true))
            .1
            .contains("Unsupported value: \"Exact\": supported values: \"NotOlderThan\""));
    }

    #[test]
    fn continue_with_rv() {
        assert!(validate_continue_rv(Some("0"), Some("t")).is_ok());
        assert!(validate_continue_rv(None, Some("t")).is_ok());
        assert_eq!(
            msg(validate_continue_rv(Some("7"), Some("t"))),
            (400, "specifying resource version is not allowed when using continue".to_string())
        );
    }
}
