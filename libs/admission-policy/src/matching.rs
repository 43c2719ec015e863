//! Which requests a policy or binding applies to (kube's `policy/matching` and the webhook
//! predicates it reuses): namespace selector, object selector, excluded rules, rules, each
//! with kube's `matchPolicy`.
//!
//! kapi's registry does not default `matchPolicy` or the selectors (kube's v1 defaults set
//! `Equivalent` and `{}`), so absent ones read as those defaults here.

use kapi_admission::attributes::Gvx;
use kapi_admission::Attributes;
use kapi_apimachinery::labels::LabelSelector;
use kapi_apimachinery::{ApiError, GroupResource};
use serde_json::{Map, Value};

use crate::resolver::ParamResolver;

/// The resource and kind a policy matched the request as: the request's own, or an equivalent
/// version's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Matched {
    pub resource: Gvx,
    pub kind: Gvx,
}

/// What matching reads besides the request.
pub(crate) struct MatchInput<'a> {
    pub attrs: &'a Attributes,
    /// The namespace of that name, from the cache.
    pub namespace: &'a dyn Fn(&str) -> Option<Value>,
    pub resolver: &'a dyn ParamResolver,
}

/// The strings of `v[key]`, read in place (matching runs on every write).
fn strings<'a>(v: &'a Value, key: &str) -> impl Iterator<Item = &'a str> {
    v.get(key).and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str)
}

fn exact_or_wildcard<'a>(mut items: impl Iterator<Item = &'a str>, requested: &str) -> bool {
    items.any(|i| i == "*" || i == requested)
}

fn is_namespaces(resource: &Gvx) -> bool {
    resource.group.is_empty() && resource.version == "v1" && resource.name == "namespaces"
}

/// The namespace a request is in; for a Namespace itself, its own name (kube's request info).
pub(crate) fn request_namespace(attrs: &Attributes) -> &str {
    if attrs.namespace.is_empty() && attrs.resource.group.is_empty() && attrs.resource.name == "namespaces" {
        &attrs.name
    } else {
        &attrs.namespace
    }
}

/// kube's `rules.Matcher`: scope, operation, group, version, resource and subresource.
fn rule_matches(rule: &Value, attrs: &Attributes, resource: &Gvx) -> bool {
    let scope = match rule.get("scope").and_then(Value::as_str).unwrap_or("*") {
        "*" => true,
        "Namespaced" => !is_namespaces(resource) && !attrs.namespace.is_empty(),
        "Cluster" => is_namespaces(resource) || attrs.namespace.is_empty(),
        _ => false,
    };
    let operation = exact_or_wildcard(strings(rule, "operations"), attrs.operation.as_str());
    let resources = strings(rule, "resources").any(|r| {
        let (res, sub) = r.split_once('/').unwrap_or((r, ""));
        (res == "*" || res == resource.name) && (sub == "*" || sub == attrs.subresource)
    });
    scope
        && operation
        && exact_or_wildcard(strings(rule, "apiGroups"), &resource.group)
        && exact_or_wildcard(strings(rule, "apiVersions"), &resource.version)
        && resources
}

fn names_match(rule: &Value, attrs: &Attributes) -> bool {
    let mut names = strings(rule, "resourceNames").peekable();
    names.peek().is_none() || names.any(|n| n == attrs.name)
}

/// kube's `matchesResourceRules`: the request's resource first, then, under `Equivalent`, the
/// other versions of the same objects.
fn matches_rules(rules: &[Value], equivalent: bool, input: &MatchInput<'_>) -> Option<Matched> {
    let attrs = input.attrs;
    let own = Matched { resource: attrs.resource.clone(), kind: attrs.kind.clone() };
    if rules.iter().any(|r| rule_matches(r, attrs, &attrs.resource) && names_match(r, attrs)) {
        return Some(own);
    }
    if !equivalent {
        return None;
    }
    let equivalents = input.resolver.equivalents(&attrs.resource, &attrs.subresource);
    for rule in rules {
        for eq in equivalents.iter().filter(|e| e.resource != attrs.resource) {
            if rule_matches(rule, attrs, &eq.resource) && names_match(rule, attrs) {
                return Some(Matched { resource: eq.resource.clone(), kind: eq.kind.clone() });
            }
        }
    }
    None
}

fn selector(mr: &Value, key: &str) -> Result<LabelSelector, String> {
    match mr.get(key) {
        None | Some(Value::Null) => Ok(LabelSelector::everything()),
        Some(sel) => LabelSelector::from_json(sel).map_err(|e| format!("Internal error occurred: {e}")),
    }
}

fn labels(obj: &Value) -> Option<&Map<String, Value>> {
    obj.pointer("/metadata/labels").and_then(Value::as_object)
}

/// kube's `MatchNamespaceSelector`: cluster-scoped requests always match; a Namespace being
/// created or updated is matched by its new labels, anything else by its namespace's.
fn namespace_matches(mr: &Value, input: &MatchInput<'_>) -> Result<bool, String> {
    let attrs = input.attrs;
    let ns = request_namespace(attrs);
    if ns.is_empty() && attrs.resource.name != "namespaces" {
        return Ok(true);
    }
    let sel = selector(mr, "namespaceSelector")?;
    if sel.is_empty() {
        return Ok(true);
    }
    let own = attrs.resource.name == "namespaces"
        && attrs.subresource.is_empty()
        && matches!(attrs.operation, kapi_admission::Operation::Create | kapi_admission::Operation::Update);
    if own {
        return Ok(sel.matches(attrs.object.as_ref().and_then(labels)));
    }
    match (input.namespace)(ns) {
        Some(n) => Ok(sel.matches(labels(&n))),
        None => {
            let gr = GroupResource { group: String::new(), resource: "namespaces".into() };
            Err(ApiError::not_found(&gr, ns).message)
        }
    }
}

/// kube's `MatchObjectSelector`: the new or the old object's labels.
fn object_matches(mr: &Value, attrs: &Attributes) -> Result<bool, String> {
    let sel = selector(mr, "objectSelector")?;
    if sel.is_empty() {
        return Ok(true);
    }
    let m = |o: &Option<Value>| o.as_ref().is_some_and(|o| sel.matches(labels(o)));
    Ok(m(&attrs.object) || m(&attrs.old_object))
}

fn rules<'a>(mr: &'a Value, key: &str) -> &'a [Value] {
    mr.get(key).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// kube's `Matcher.Matches` over `matchConstraints` or a binding's `matchResources`: Ok(None)
/// when the request is not matched; selector errors only once the rules match.
pub(crate) fn matches(mr: &Value, input: &MatchInput<'_>) -> Result<Option<Matched>, String> {
    let ns = namespace_matches(mr, input);
    if matches!(ns, Ok(false)) {
        return Ok(None);
    }
    let obj = object_matches(mr, input.attrs);
    if matches!(obj, Ok(false)) {
        return Ok(None);
    }
    let equivalent = mr.get("matchPolicy").and_then(Value::as_str) != Some("Exact");
    if matches_rules(rules(mr, "excludeResourceRules"), equivalent, input).is_some() {
        return Ok(None);
    }
    let resource_rules = rules(mr, "resourceRules");
    let matched = if resource_rules.is_empty() {
        Matched { resource: input.attrs.resource.clone(), kind: input.attrs.kind.clone() }
    } else {
        match matches_rules(resource_rules, equivalent, input) {
            Some(m) => m,
            None => return Ok(None),
        }
    };
    ns?;
    obj?;
    Ok(Some(matched))
}
