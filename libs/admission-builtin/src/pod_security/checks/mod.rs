//! The Pod Security Standards checks (kube's `k8s.io/pod-security-admission/policy`) and the
//! registry that picks them for a level and version.
//!
//! Each check has kube's ID, level and versions: a pinned `v1.x` runs each check as it was at
//! that minor (the newest revision whose minimum version is not after it), so a namespace
//! pinned to an old version keeps the rules it was labelled for. `latest`, and any version newer
//! than kapi's, runs the revisions of the Kubernetes minor kapi serves ([`EMULATED_MINOR`]),
//! as kube's evaluator caps them at its emulation version. Restricted runs every baseline check
//! except those a restricted check overrides (capabilities, hostPath, seccomp, procMount). The
//! order of violations is kube's: baseline checks by ID, then restricted checks by ID.
//!
//! Pods are read as JSON, so Go's nil pointers are absent or `null` fields.

mod baseline;
mod restricted;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::sync::OnceLock;

use serde_json::Value;

use super::api::{Level, LevelVersion};

/// The Kubernetes minor kapi serves (`/version`): `latest` means this minor's checks.
pub const EMULATED_MINOR: u32 = 36;

/// Why a check refuses a pod: kube's short reason and, when it has one, its detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// kube's `ForbiddenReason` (`privileged`, `unrestricted capabilities`, ...).
    pub reason: String,
    /// kube's `ForbiddenDetail` (which containers, which values); may be empty.
    pub detail: String,
}

impl Violation {
    fn new(reason: &str, detail: String) -> Option<Violation> {
        Some(Violation { reason: reason.to_owned(), detail })
    }
}

/// A check revision: the pod's metadata and spec in, a violation out.
type CheckFn = fn(&Value, &Value) -> Option<Violation>;

/// One revision of a check, from `min` (a v1 minor) on.
pub(crate) struct Revision {
    min: u32,
    check: CheckFn,
    /// Baseline checks this one replaces in the restricted level.
    overrides: &'static [&'static str],
}

/// A check: kube's ID, its level and its revisions, oldest first.
pub(crate) struct Check {
    id: &'static str,
    level: Level,
    revisions: &'static [Revision],
}

impl Check {
    fn at(&self, minor: u32) -> Option<&Revision> {
        self.revisions.iter().rev().find(|r| r.min <= minor)
    }
}

const fn rev(min: u32, check: CheckFn) -> Revision {
    Revision { min, check, overrides: &[] }
}

const fn rev_over(min: u32, check: CheckFn, overrides: &'static [&'static str]) -> Revision {
    Revision { min, check, overrides }
}

/// Every check, in kube's order.
fn registry() -> &'static [&'static Check] {
    static ORDERED: OnceLock<Vec<&'static Check>> = OnceLock::new();
    ORDERED.get_or_init(|| {
        let mut all: Vec<&'static Check> = baseline::CHECKS.iter().chain(restricted::CHECKS.iter()).collect();
        all.sort_by(|a, b| (a.level, a.id).cmp(&(b.level, b.id)));
        all
    })
}

/// The newest minor any check revision starts at, or kapi's minor if that is older.
fn max_minor() -> u32 {
    let newest = registry().iter().flat_map(|c| c.revisions.iter().map(|r| r.min)).max().unwrap_or(0);
    newest.min(EMULATED_MINOR)
}

/// kube's `EvaluatePod` aggregated: the violations of `metadata` and `spec` at `lv`, in
/// kube's order (none for privileged).
pub fn evaluate(lv: LevelVersion, metadata: &Value, spec: &Value) -> Vec<Violation> {
    if lv.level == Level::Privileged {
        return Vec::new();
    }
    let minor = lv.version.capped(max_minor());
    let checks = registry();
    let overridden: BTreeSet<&str> = if lv.level == Level::Restricted {
        checks
            .iter()
            .filter(|c| c.level == Level::Restricted)
            .filter_map(|c| c.at(minor))
            .flat_map(|r| r.overrides.iter().copied())
            .collect()
    } else {
        BTreeSet::new()
    };
    checks
        .iter()
        .filter(|c| c.level <= lv.level && !(c.level == Level::Baseline && overridden.contains(c.id)))
        .filter_map(|c| c.at(minor))
        .filter_map(|r| (r.check)(metadata, spec))
        .collect()
}

/// kube's `ForbiddenDetail()`: each reason with its detail in parentheses.
pub fn detail(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(|v| if v.detail.is_empty() { v.reason.clone() } else { format!("{} ({})", v.reason, v.detail) })
        .collect::<Vec<_>>()
        .join(", ")
}

/// kube's `ForbiddenReason()`: the reasons alone, for the summary of many pods.
pub fn reasons(violations: &[Violation]) -> String {
    violations.iter().map(|v| v.reason.as_str()).collect::<Vec<_>>().join(", ")
}

// Reading pods as kube's typed structs would: a `null` is the same as an absent field.

/// A field that is set (not absent, not null).
pub(crate) fn field<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.get(key).filter(|f| !f.is_null())
}

/// A string field, "" when unset.
pub(crate) fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// A `*bool` field.
pub(crate) fn bool_of(v: &Value, key: &str) -> Option<bool> {
    v.get(key).and_then(Value::as_bool)
}

/// The strings of a list field.
pub(crate) fn strings<'a>(v: &'a Value, key: &str) -> impl Iterator<Item = &'a str> {
    v.get(key).and_then(Value::as_array).into_iter().flatten().map(|s| s.as_str().unwrap_or(""))
}

/// The items of a list field.
pub(crate) fn items<'a>(v: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    v.get(key).and_then(Value::as_array).into_iter().flatten()
}

/// Init containers, containers, then ephemeral containers, as kube's `visitContainers`.
pub(crate) fn containers(spec: &Value) -> impl Iterator<Item = &Value> {
    items(spec, "initContainers").chain(items(spec, "containers")).chain(items(spec, "ephemeralContainers"))
}

/// A container's (or the pod's) security context, if set.
pub(crate) fn security_context(v: &Value) -> Option<&Value> {
    field(v, "securityContext")
}

/// The pod-level security context, if set.
pub(crate) fn pod_security_context(spec: &Value) -> Option<&Value> {
    field(spec, "securityContext")
}

/// A container's name.
pub(crate) fn name(c: &Value) -> String {
    str_of(c, "name").to_owned()
}

/// Pods that say they run on Windows skip the Linux-only restricted checks (kube's 1.25+).
pub(crate) fn is_windows(spec: &Value) -> bool {
    spec.pointer("/os/name").and_then(Value::as_str) == Some("windows")
}

/// A pod in a user namespace (`hostUsers: false`) is relaxed by some checks (kube's 1.35+).
pub(crate) fn in_user_namespace(spec: &Value) -> bool {
    bool_of(spec, "hostUsers") == Some(false)
}

/// kube's `joinQuote`: `"a", "b"`.
pub(crate) fn join_quote<S: AsRef<str>>(items: impl IntoIterator<Item = S>) -> String {
    let quoted: Vec<String> = items.into_iter().map(|s| format!("\"{}\"", s.as_ref())).collect();
    quoted.join(", ")
}

/// kube's `pluralize`.
pub(crate) fn plural(singular: &'static str, plural: &'static str, count: usize) -> &'static str {
    if count == 1 {
        singular
    } else {
        plural
    }
}

/// `container "a"` / `containers "a", "b"`.
pub(crate) fn containers_named(names: &[String]) -> String {
    format!("{} {}", plural("container", "containers", names.len()), join_quote(names))
}

/// Go's `%q` of a string: quoted with Go's escapes.
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
