//! Levels, versions and the namespace labels that choose them (kube's
//! `k8s.io/pod-security-admission/api`): what a namespace asks for, read as kube reads it,
//! including what an invalid label falls back to.

use std::collections::BTreeMap;
use std::fmt;

use kapi_apimachinery::status::Cause;
use serde_json::Value;

/// Where the labels and audit annotations live.
pub const PREFIX: &str = "pod-security.kubernetes.io/";
/// `pod-security.kubernetes.io/enforce`.
pub const ENFORCE_LABEL: &str = "pod-security.kubernetes.io/enforce";
/// `pod-security.kubernetes.io/enforce-version`.
pub const ENFORCE_VERSION_LABEL: &str = "pod-security.kubernetes.io/enforce-version";
/// `pod-security.kubernetes.io/audit`.
pub const AUDIT_LABEL: &str = "pod-security.kubernetes.io/audit";
/// `pod-security.kubernetes.io/audit-version`.
pub const AUDIT_VERSION_LABEL: &str = "pod-security.kubernetes.io/audit-version";
/// `pod-security.kubernetes.io/warn`.
pub const WARN_LABEL: &str = "pod-security.kubernetes.io/warn";
/// `pod-security.kubernetes.io/warn-version`.
pub const WARN_VERSION_LABEL: &str = "pod-security.kubernetes.io/warn-version";

/// A Pod Security Standards level, least strict first (the derived order is strictness).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Anything goes.
    Privileged,
    /// Known privilege escalations are forbidden.
    Baseline,
    /// Current hardening best practice.
    Restricted,
}

impl Level {
    /// The label value.
    pub fn as_str(&self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }

    /// kube's `ParseLevel`: an unknown value reads as restricted, so that a typo fails closed,
    /// and comes with kube's error text.
    pub fn parse(value: &str) -> (Level, Option<&'static str>) {
        match value {
            "privileged" => (Level::Privileged, None),
            "baseline" => (Level::Baseline, None),
            "restricted" => (Level::Restricted, None),
            _ => (Level::Restricted, Some("must be one of privileged, baseline, restricted")),
        }
    }
}

/// A policy version: `latest` or `v1.<minor>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    /// `v1.<minor>`.
    Minor(u32),
    /// `latest`, newer than any minor.
    Latest,
}

impl Version {
    /// kube's `ParseVersion`: `latest` or `v1.x` (no leading zero); anything else reads as
    /// latest, with kube's error text.
    pub fn parse(value: &str) -> (Version, Option<&'static str>) {
        const ERR: &str = r#"must be "latest" or "v1.x""#;
        if value == "latest" {
            return (Version::Latest, None);
        }
        let Some(minor) = value.strip_prefix("v1.") else { return (Version::Latest, Some(ERR)) };
        let digits = !minor.is_empty() && minor.bytes().all(|b| b.is_ascii_digit());
        if !digits || (minor.len() > 1 && minor.starts_with('0')) {
            return (Version::Latest, Some(ERR));
        }
        match minor.parse() {
            Ok(n) => (Version::Minor(n), None),
            Err(_) => (Version::Latest, Some(ERR)),
        }
    }

    /// The minor the checks are chosen by: latest is `max`, and so is anything newer.
    pub fn capped(&self, max: u32) -> u32 {
        match self {
            Version::Minor(n) => (*n).min(max),
            Version::Latest => max,
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Version::Minor(n) => write!(f, "v1.{n}"),
            Version::Latest => f.write_str("latest"),
        }
    }
}

/// A level at a version (`restricted:latest`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LevelVersion {
    /// The level.
    pub level: Level,
    /// The version.
    pub version: Version,
}

impl LevelVersion {
    /// Privileged at latest, kube's defaults.
    pub const PRIVILEGED: LevelVersion = LevelVersion { level: Level::Privileged, version: Version::Latest };

    /// kube's `Equivalent`: any two privileged ones are, since privileged checks nothing.
    pub fn equivalent(&self, other: &LevelVersion) -> bool {
        (self.level == Level::Privileged && other.level == Level::Privileged) || self == other
    }
}

impl fmt::Display for LevelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.level.as_str(), self.version)
    }
}

/// What a namespace enforces, audits and warns about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Refuses pods.
    pub enforce: LevelVersion,
    /// Annotates the audit event.
    pub audit: LevelVersion,
    /// Warns the client.
    pub warn: LevelVersion,
}

impl Default for Policy {
    fn default() -> Self {
        Policy { enforce: LevelVersion::PRIVILEGED, audit: LevelVersion::PRIVILEGED, warn: LevelVersion::PRIVILEGED }
    }
}

impl Policy {
    /// All three modes privileged: nothing to evaluate.
    pub fn fully_privileged(&self) -> bool {
        [self.enforce, self.audit, self.warn].iter().all(|lv| lv.level == Level::Privileged)
    }

    /// Every mode equivalent.
    pub fn equivalent(&self, other: &Policy) -> bool {
        self.enforce.equivalent(&other.enforce) && self.audit.equivalent(&other.audit) && self.warn.equivalent(&other.warn)
    }
}

/// One invalid label: kube reports it as a field error of `metadata.labels[<label>]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelError {
    /// The label.
    pub label: &'static str,
    /// Its value.
    pub value: String,
    /// kube's reason.
    pub detail: &'static str,
}

impl LabelError {
    /// The 422 cause.
    pub fn cause(&self) -> Cause {
        Cause::invalid(&format!("metadata.labels[{}]", self.label), &Value::String(self.value.clone()), self.detail)
    }
}

/// kube's `ToAggregate().Error()` of the errors: one message alone, several in brackets.
pub fn aggregate(errors: &[LabelError]) -> String {
    let mut messages: Vec<String> = Vec::new();
    for m in errors.iter().map(|e| e.cause().message) {
        if !messages.contains(&m) {
            messages.push(m);
        }
    }
    match messages.len() {
        1 => messages.remove(0),
        _ => format!("[{}]", messages.join(", ")),
    }
}

/// kube's `PolicyToEvaluate`: the namespace's labels over the configured defaults. A valid
/// policy always comes back: an invalid enforce level enforces restricted, an invalid audit or
/// warn level is privileged (they fail open), an invalid version is latest. Warn follows an
/// enforce level set stricter than it, unless warn is labelled itself.
pub fn policy_to_evaluate(labels: &BTreeMap<String, String>, defaults: Policy) -> (Policy, Vec<LabelError>) {
    let mut p = defaults;
    let mut errors = Vec::new();
    if labels.is_empty() {
        return (p, errors);
    }
    let level = |label: &'static str, errors: &mut Vec<LabelError>| -> Option<(Level, bool)> {
        let value = labels.get(label)?;
        let (level, err) = Level::parse(value);
        if let Some(detail) = err {
            errors.push(LabelError { label, value: value.clone(), detail });
        }
        Some((level, err.is_none()))
    };
    let version = |label: &'static str, errors: &mut Vec<LabelError>| -> Option<Version> {
        let value = labels.get(label)?;
        let (version, err) = Version::parse(value);
        if let Some(detail) = err {
            errors.push(LabelError { label, value: value.clone(), detail });
        }
        Some(version)
    };
    let mut has_enforce_level = false;
    if let Some((l, ok)) = level(ENFORCE_LABEL, &mut errors) {
        p.enforce.level = l;
        has_enforce_level = ok;
    }
    if let Some(v) = version(ENFORCE_VERSION_LABEL, &mut errors) {
        p.enforce.version = v;
    }
    if let Some((l, ok)) = level(AUDIT_LABEL, &mut errors) {
        p.audit.level = if ok { l } else { Level::Privileged };
    }
    if let Some(v) = version(AUDIT_VERSION_LABEL, &mut errors) {
        p.audit.version = v;
    }
    let has_warn_level = labels.contains_key(WARN_LABEL);
    let has_warn_version = labels.contains_key(WARN_VERSION_LABEL);
    if let Some((l, ok)) = level(WARN_LABEL, &mut errors) {
        p.warn.level = if ok { l } else { Level::Privileged };
    }
    if let Some(v) = version(WARN_VERSION_LABEL, &mut errors) {
        p.warn.version = v;
    }
    if !has_warn_level && has_enforce_level && p.enforce.level > p.warn.level {
        p.warn.level = p.enforce.level;
        if !has_warn_version {
            p.warn.version = p.enforce.version;
        }
    }
    (p, errors)
}

/// An object's labels as a map (absent or malformed labels are none).
pub fn labels_of(obj: &Value) -> BTreeMap<String, String> {
    obj.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn versions_parse_as_kube_parses_them() {
        assert_eq!(Version::parse("latest"), (Version::Latest, None));
        assert_eq!(Version::parse("v1.0"), (Version::Minor(0), None));
        assert_eq!(Version::parse("v1.25"), (Version::Minor(25), None));
        for bad in ["v1.025", "v1.", "v2.1", "1.25", "v1.x", "Latest", ""] {
            assert_eq!(Version::parse(bad), (Version::Latest, Some(r#"must be "latest" or "v1.x""#)), "{bad}");
        }
        assert_eq!(Version::Minor(40).capped(36), 36);
        assert_eq!(Version::Latest.capped(36), 36);
        assert_eq!(Version::Minor(22).capped(36), 22);
    }

    #[test]
    fn labels_choose_the_policy_and_invalid_values_fall_back_as_in_kube() {
        let (p, errs) = policy_to_evaluate(&labels(&[(ENFORCE_LABEL, "baseline")]), Policy::default());
        assert!(errs.is_empty());
        assert_eq!(p.enforce.to_string(), "baseline:latest");
        // warn follows a stricter enforce level, with its version.
        assert_eq!(p.warn.to_string(), "baseline:latest");
        assert_eq!(p.audit.to_string(), "privileged:latest");

        let (p, _) = policy_to_evaluate(
            &labels(&[(ENFORCE_LABEL, "restricted"), (ENFORCE_VERSION_LABEL, "v1.24"), (WARN_VERSION_LABEL, "v1.30")]),
            Policy::default(),
        );
        assert_eq!((p.enforce.to_string(), p.warn.to_string()), ("restricted:v1.24".into(), "restricted:v1.30".into()));

        let (p, errs) = policy_to_evaluate(
            &labels(&[(ENFORCE_LABEL, "strict"), (AUDIT_LABEL, "loud"), (WARN_LABEL, "x"), (AUDIT_VERSION_LABEL, "v1")]),
            Policy::default(),
        );
        assert_eq!(p.enforce.to_string(), "restricted:latest");
        assert_eq!((p.audit.level, p.warn.level), (Level::Privileged, Level::Privileged));
        assert_eq!(errs.len(), 4);
        assert_eq!(
            errs[0].cause().message,
            r#"metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, baseline, restricted"#
        );
        assert_eq!(
            aggregate(&errs[3..]),
            r#"metadata.labels[pod-security.kubernetes.io/warn]: Invalid value: "x": must be one of privileged, baseline, restricted"#
        );
        assert!(aggregate(&errs).starts_with("[metadata.labels[pod-security.kubernetes.io/enforce]"));
    }
}
