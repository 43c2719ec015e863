//! The audit policy (audit.k8s.io/v1 `Policy`): rules checked in order, the first that matches a
//! request gives its level; no match is level None (not audited).

use std::path::Path;

use serde::Deserialize;

/// How much of a request is recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
pub enum Level {
    /// Not recorded.
    None,
    /// Who, what, when, and the outcome; no bodies.
    Metadata,
    /// Metadata and the request object.
    Request,
    /// Metadata, the request and the response objects.
    RequestResponse,
}

impl Level {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::None => "None",
            Level::Metadata => "Metadata",
            Level::Request => "Request",
            Level::RequestResponse => "RequestResponse",
        }
    }
}

/// When in a request's life an event is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Stage {
    /// As soon as the request is received (before the handler).
    RequestReceived,
    /// Once the response headers are sent, for long-running requests (watches).
    ResponseStarted,
    /// Once the response is complete.
    ResponseComplete,
    /// When the handler panicked.
    Panic,
}

impl Stage {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::RequestReceived => "RequestReceived",
            Stage::ResponseStarted => "ResponseStarted",
            Stage::ResponseComplete => "ResponseComplete",
            Stage::Panic => "Panic",
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct GroupResources {
    #[serde(default)]
    group: String,
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    resource_names: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Rule {
    level: Level,
    #[serde(default)]
    users: Vec<String>,
    #[serde(default)]
    user_groups: Vec<String>,
    #[serde(default)]
    verbs: Vec<String>,
    #[serde(default)]
    resources: Vec<GroupResources>,
    #[serde(default)]
    namespaces: Vec<String>,
    #[serde(default, rename = "nonResourceURLs")]
    non_resource_urls: Vec<String>,
    #[serde(default)]
    omit_stages: Vec<Stage>,
    #[serde(default)]
    omit_managed_fields: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct File {
    api_version: Option<String>,
    kind: Option<String>,
    #[serde(default)]
    rules: Vec<Rule>,
    #[serde(default)]
    omit_stages: Vec<Stage>,
    #[serde(default)]
    omit_managed_fields: bool,
}

/// Why a policy file cannot be used; start-up stops with it.
#[derive(Debug, thiserror::Error)]
#[error("loading audit policy file: {0}")]
pub struct PolicyError(String);

/// The loaded policy.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    rules: Vec<Rule>,
    omit_stages: Vec<Stage>,
    omit_managed_fields: bool,
}

/// What a rule looks at in a request.
#[derive(Debug, Clone, Default)]
pub struct RequestAttributes<'a> {
    /// The authenticated user's name.
    pub user: &'a str,
    /// Its groups.
    pub groups: &'a [String],
    /// kube's verb (get, list, watch, create, ...), or the lowercased method for non-resource
    /// requests.
    pub verb: &'a str,
    /// Whether the request is for a resource (else a non-resource URL).
    pub resource_request: bool,
    /// API group.
    pub api_group: &'a str,
    /// Resource.
    pub resource: &'a str,
    /// Subresource.
    pub subresource: &'a str,
    /// Namespace ("" for cluster-scoped).
    pub namespace: &'a str,
    /// Object name.
    pub name: &'a str,
    /// URL path (non-resource rules).
    pub path: &'a str,
}

/// What the policy decides for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The level.
    pub level: Level,
    /// Stages not recorded (the policy's and the rule's).
    pub omit_stages: Vec<Stage>,
    /// Whether managedFields are dropped from recorded objects.
    pub omit_managed_fields: bool,
}

const VERSIONS: &[&str] = &["audit.k8s.io/v1", "audit.k8s.io/v1beta1", "audit.k8s.io/v1alpha1"];

impl Policy {
    /// Reads `--audit-policy-file` (YAML or JSON).
    pub fn load(path: &Path) -> Result<Policy, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|e| PolicyError(format!("failed to read file path {:?}: {e}", path.display().to_string())))?;
        Self::parse(&text).map_err(|e| PolicyError(format!("failed decoding file {:?}: {}", path.display().to_string(), e.0)))
    }

    /// Parses a policy's text.
    pub fn parse(text: &str) -> Result<Policy, PolicyError> {
        let file: File = serde_saphyr::from_str(text).map_err(|e| PolicyError(e.to_string()))?;
        let version = file.api_version.unwrap_or_default();
        if file.kind.as_deref() != Some("Policy") || !VERSIONS.contains(&version.as_str()) {
            return Err(PolicyError(format!("no kind {:?} is registered for version {version:?}", file.kind.unwrap_or_default())));
        }
        if file.rules.is_empty() {
            return Err(PolicyError("loaded illegal policy with 0 rules".into()));
        }
        Ok(Policy { rules: file.rules, omit_stages: file.omit_stages, omit_managed_fields: file.omit_managed_fields })
    }

    /// kube's policy rule evaluator.
    pub fn decide(&self, attrs: &RequestAttributes<'_>) -> Decision {
        for rule in &self.rules {
            if rule.matches(attrs) {
                let mut omit_stages = self.omit_stages.clone();
                omit_stages.extend(rule.omit_stages.iter().copied().filter(|s| !self.omit_stages.contains(s)));
                return Decision {
                    level: rule.level,
                    omit_stages,
                    omit_managed_fields: rule.omit_managed_fields.unwrap_or(self.omit_managed_fields),
                };
            }
        }
        Decision { level: Level::None, omit_stages: Vec::new(), omit_managed_fields: self.omit_managed_fields }
    }
}

impl Rule {
    fn matches(&self, a: &RequestAttributes<'_>) -> bool {
        if !self.users.is_empty() && !self.users.iter().any(|u| u == a.user) {
            return false;
        }
        if !self.user_groups.is_empty() && !self.user_groups.iter().any(|g| a.groups.contains(g)) {
            return false;
        }
        if !self.verbs.is_empty() && !self.verbs.iter().any(|v| v == a.verb) {
            return false;
        }
        // A rule naming resources or namespaces is for resource requests; one naming URLs for
        // the others; one naming neither, for both.
        if !self.namespaces.is_empty() || !self.resources.is_empty() {
            return self.rule_matches_resource(a);
        }
        if !self.non_resource_urls.is_empty() {
            return !a.resource_request && self.non_resource_urls.iter().any(|u| url_matches(u, a.path));
        }
        true
    }

    fn rule_matches_resource(&self, a: &RequestAttributes<'_>) -> bool {
        if !a.resource_request {
            return false;
        }
        if !self.namespaces.is_empty() && !self.namespaces.iter().any(|n| n == a.namespace) {
            return false;
        }
        if self.resources.is_empty() {
            return true;
        }
        let combined = if a.subresource.is_empty() { a.resource.to_owned() } else { format!("{}/{}", a.resource, a.subresource) };
        self.resources.iter().any(|gr| {
            if gr.group != a.api_group {
                return false;
            }
            if gr.resources.is_empty() {
                return true;
            }
            gr.resources.iter().any(|r| {
                let resource_ok = r == &combined
                    || r == "*"
                    || (!a.subresource.is_empty() && r.strip_prefix("*/").is_some_and(|sub| sub == a.subresource))
                    || (r.strip_suffix("/*").is_some_and(|res| res == a.resource));
                resource_ok && (gr.resource_names.is_empty() || gr.resource_names.iter().any(|n| n == a.name))
            })
        })
    }
}

/// kube's non-resource URL rule: exact, or a prefix ending in `*`.
fn url_matches(rule: &str, path: &str) -> bool {
    match rule.strip_suffix('*') {
        Some(prefix) => path.starts_with(prefix),
        None => rule == path,
    }
}
