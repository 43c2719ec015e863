//! Which FlowSchema a request falls in, and its flow (kube's `rule.go` and the filter's
//! classification): the first schema in matching order with a rule whose subjects include the
//! requester and whose resource or non-resource rules cover the request.

use crate::config::{Config, FlowSchema, NonResourceRule, PolicyRulesWithSubjects, PriorityLevel, ResourceRule, Subject, ALL};

/// What classification looks at: the requester and kube's request info.
#[derive(Debug, Clone, Default)]
pub struct RequestDigest<'a> {
    /// The authenticated user's name.
    pub user: &'a str,
    /// Its groups.
    pub groups: &'a [String],
    /// A request for a resource (else a non-resource path).
    pub is_resource: bool,
    /// kube's verb (`get`, `list`, `watch`, `create`, ...).
    pub verb: &'a str,
    /// API group ("" for the core group).
    pub api_group: &'a str,
    /// Resource.
    pub resource: &'a str,
    /// Subresource ("" for none).
    pub subresource: &'a str,
    /// Namespace ("" for cluster-scoped requests).
    pub namespace: &'a str,
    /// The URL path (non-resource requests).
    pub path: &'a str,
}

/// Where a request goes.
#[derive(Debug, Clone, Copy)]
pub struct Classification<'c> {
    /// The matching schema.
    pub schema: &'c FlowSchema,
    /// Its priority level.
    pub level: &'c PriorityLevel,
}

impl Classification<'_> {
    /// The flow within the level: the schema and, by its distinguisher, the user or the
    /// namespace (kube hashes the same pair to deal the flow its queues).
    pub fn flow(&self, digest: &RequestDigest<'_>) -> (String, String) {
        let distinguisher = match self.schema.distinguisher_method.as_ref().map(|m| m.type_.as_str()) {
            Some("ByUser") => digest.user,
            Some("ByNamespace") => digest.namespace,
            _ => "",
        };
        (self.schema.name.clone(), distinguisher.to_owned())
    }
}

/// A flow's hash for shuffle sharding: FNV-1a over the schema name and the distinguisher (a
/// zero byte apart, so `("ab", "c")` and `("a", "bc")` differ). Stable across processes and
/// builds, so every replica deals a flow the same hand of queues.
pub fn flow_hash(schema: &str, distinguisher: &str) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let bytes = schema.bytes().chain(std::iter::once(0)).chain(distinguisher.bytes());
    bytes.fold(OFFSET, |hash, b| (hash ^ u64::from(b)).wrapping_mul(PRIME))
}

/// The first schema (in matching order) that matches; None only when the configuration lacks
/// the mandatory `catch-all`.
pub fn classify<'c>(config: &'c Config, digest: &RequestDigest<'_>) -> Option<Classification<'c>> {
    config.schemas.iter().find(|s| s.rules.iter().any(|r| rule_matches(r, digest))).and_then(|schema| {
        let level = config.level(&schema.priority_level_configuration.name)?;
        Some(Classification { schema, level })
    })
}

fn rule_matches(rule: &PolicyRulesWithSubjects, digest: &RequestDigest<'_>) -> bool {
    if !rule.subjects.iter().any(|s| subject_matches(s, digest)) {
        return false;
    }
    if digest.is_resource {
        rule.resource_rules.iter().any(|r| resource_rule_matches(r, digest))
    } else {
        rule.non_resource_rules.iter().any(|r| non_resource_rule_matches(r, digest))
    }
}

fn subject_matches(subject: &Subject, digest: &RequestDigest<'_>) -> bool {
    match subject.kind.as_str() {
        "User" => subject.user.as_ref().is_some_and(|u| u.name == ALL || u.name == digest.user),
        "Group" => subject.group.as_ref().is_some_and(|g| g.name == ALL || digest.groups.contains(&g.name)),
        "ServiceAccount" => subject.service_account.as_ref().is_some_and(|sa| {
            let Some(rest) = digest.user.strip_prefix("system:serviceaccount:") else { return false };
            match rest.split_once(':') {
                Some((namespace, name)) => namespace == sa.namespace && (sa.name == ALL || sa.name == name),
                None => false,
            }
        }),
        _ => false,
    }
}

/// kube's `containsString`: a list of exactly the wildcard matches everything.
fn contains(list: &[String], x: &str) -> bool {
    (list.len() == 1 && list[0] == ALL) || list.iter().any(|y| y == x)
}

fn resource_rule_matches(rule: &ResourceRule, digest: &RequestDigest<'_>) -> bool {
    let resource = if digest.subresource.is_empty() { digest.resource.to_owned() } else { format!("{}/{}", digest.resource, digest.subresource) };
    if !contains(&rule.verbs, digest.verb) || !contains(&rule.resources, &resource) || !contains(&rule.api_groups, digest.api_group) {
        return false;
    }
    if digest.namespace.is_empty() {
        return rule.cluster_scope;
    }
    contains(&rule.namespaces, digest.namespace)
}

fn non_resource_rule_matches(rule: &NonResourceRule, digest: &RequestDigest<'_>) -> bool {
    contains(&rule.verbs, digest.verb)
        && rule.non_resource_urls.iter().any(|url| {
            if url == ALL || url == digest.path {
                return true;
            }
            // kube treats every listed path as a subtree too (`/healthz` covers `/healthz/etcd`).
            let mut prefix = url.strip_suffix('*').unwrap_or(url).to_owned();
            if !prefix.ends_with('/') {
                prefix.push('/');
            }
            digest.path.starts_with(&prefix)
        })
}
