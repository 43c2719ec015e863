//! Rule matching (kube's `RuleAllows`) and rule coverage for escalation checks (kube's
//! `Covers`, `BreakdownRule`, `CompactString`).

use super::types::PolicyRule;
use crate::authz::Attributes;

const ALL: &str = "*";

fn has(list: &[String], item: &str) -> bool {
    list.iter().any(|x| x == item)
}

fn has_all(list: &[String], items: &[String]) -> bool {
    items.iter().all(|i| has(list, i))
}

/// Whether `rule` allows the request described by `attrs`.
pub fn rule_allows(attrs: &Attributes, rule: &PolicyRule) -> bool {
    let verb = has(&rule.verbs, ALL) || has(&rule.verbs, &attrs.verb);
    if !verb {
        return false;
    }
    if !attrs.resource_request {
        return rule.non_resource_urls.iter().any(|u| url_matches(u, &attrs.path));
    }
    (has(&rule.api_groups, ALL) || has(&rule.api_groups, &attrs.api_group))
        && resource_matches(rule, &attrs.resource, &attrs.subresource)
        && (rule.resource_names.is_empty() || has(&rule.resource_names, &attrs.name))
}

fn url_matches(rule_url: &str, path: &str) -> bool {
    rule_url == ALL || rule_url == path || rule_url.strip_suffix('*').is_some_and(|prefix| path.starts_with(prefix))
}

fn resource_matches(rule: &PolicyRule, resource: &str, subresource: &str) -> bool {
    rule.resources.iter().any(|r| {
        if r == ALL {
            return true;
        }
        if subresource.is_empty() {
            return r == resource;
        }
        // "resource/subresource" exactly, or "*/subresource".
        match r.split_once('/') {
            Some((res, sub)) => sub == subresource && (res == resource || res == ALL),
            None => false,
        }
    })
}

/// Splits a rule into rules of one group, resource, verb and resource name (or one
/// non-resource URL and verb), the unit coverage is decided on.
pub fn breakdown(rule: &PolicyRule) -> Vec<PolicyRule> {
    let mut out = Vec::new();
    for group in &rule.api_groups {
        for resource in &rule.resources {
            for verb in &rule.verbs {
                let one = |names: Vec<String>| PolicyRule {
                    verbs: vec![verb.clone()],
                    api_groups: vec![group.clone()],
                    resources: vec![resource.clone()],
                    resource_names: names,
                    non_resource_urls: Vec::new(),
                };
                if rule.resource_names.is_empty() {
                    out.push(one(Vec::new()));
                } else {
                    out.extend(rule.resource_names.iter().map(|n| one(vec![n.clone()])));
                }
            }
        }
    }
    for url in &rule.non_resource_urls {
        for verb in &rule.verbs {
            out.push(PolicyRule { verbs: vec![verb.clone()], non_resource_urls: vec![url.clone()], ..PolicyRule::default() });
        }
    }
    out
}

fn resource_covers(owner: &[String], requested: &str) -> bool {
    if has(owner, ALL) || has(owner, requested) {
        return true;
    }
    // "resource/*" covers every subresource of resource; "*/sub" covers sub of every resource.
    let Some((res, sub)) = requested.split_once('/') else { return false };
    owner.iter().any(|o| o.strip_suffix("/*") == Some(res) || o.strip_prefix("*/") == Some(sub))
}

fn url_covers(owner: &str, requested: &str) -> bool {
    owner == requested || owner.strip_suffix('*').is_some_and(|prefix| requested.starts_with(prefix))
}

/// kube's `ruleCovers`: whether `owner` grants everything `sub` (one broken-down rule) grants.
fn rule_covers(owner: &PolicyRule, sub: &PolicyRule) -> bool {
    let verbs = has(&owner.verbs, ALL) || has_all(&owner.verbs, &sub.verbs);
    let groups = has(&owner.api_groups, ALL) || has_all(&owner.api_groups, &sub.api_groups);
    let resources = sub.resources.iter().all(|r| resource_covers(&owner.resources, r));
    let urls = sub.non_resource_urls.iter().all(|u| owner.non_resource_urls.iter().any(|o| url_covers(o, u)));
    let names = if sub.resource_names.is_empty() {
        owner.resource_names.is_empty()
    } else {
        owner.resource_names.is_empty() || has_all(&owner.resource_names, &sub.resource_names)
    };
    verbs && groups && resources && urls && names
}

/// Whether `owner` rules cover every right in `requested`; the uncovered broken-down rules
/// otherwise.
pub fn covers(owner: &[PolicyRule], requested: &[PolicyRule]) -> Result<(), Vec<PolicyRule>> {
    let missing: Vec<PolicyRule> = requested
        .iter()
        .flat_map(breakdown)
        .filter(|sub| !owner.iter().any(|o| rule_covers(o, sub)))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(missing)
    }
}

/// kube's `CompactRules`: broken-down rules of one group and one resource without names merge
/// their verbs, so a missing-rights message lists `Verbs:["get" "list"]` once.
pub fn compact(rules: Vec<PolicyRule>) -> Vec<PolicyRule> {
    let mut out: Vec<PolicyRule> = Vec::new();
    for rule in rules {
        let simple = rule.api_groups.len() == 1
            && rule.resources.len() == 1
            && rule.resource_names.is_empty()
            && rule.non_resource_urls.is_empty();
        if simple {
            if let Some(existing) = out.iter_mut().find(|r| {
                r.api_groups == rule.api_groups
                    && r.resources == rule.resources
                    && r.resource_names.is_empty()
                    && r.non_resource_urls.is_empty()
            }) {
                for v in rule.verbs {
                    if !has(&existing.verbs, &v) {
                        existing.verbs.push(v);
                    }
                }
                continue;
            }
        }
        out.push(rule);
    }
    out
}

/// Go's `%q` of a `[]string`: `["a" "b"]`.
fn quoted_list(items: &[String]) -> String {
    let parts: Vec<String> = items.iter().map(|s| serde_json::to_string(s).unwrap_or_default()).collect();
    format!("[{}]", parts.join(" "))
}

/// kube's `CompactString` of a rule: `{APIGroups:[""], Resources:["pods"], Verbs:["get"]}`.
pub fn compact_string(rule: &PolicyRule) -> String {
    let mut parts = Vec::new();
    for (label, list) in [
        ("APIGroups", &rule.api_groups),
        ("Resources", &rule.resources),
        ("NonResourceURLs", &rule.non_resource_urls),
        ("ResourceNames", &rule.resource_names),
        ("Verbs", &rule.verbs),
    ] {
        if !list.is_empty() {
            parts.push(format!("{label}:{}", quoted_list(list)));
        }
    }
    format!("{{{}}}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> PolicyRule {
        let v = |l: &[&str]| l.iter().map(|s| (*s).to_owned()).collect();
        PolicyRule { verbs: v(verbs), api_groups: v(groups), resources: v(resources), resource_names: v(names), non_resource_urls: vec![] }
    }

    fn url_rule(verbs: &[&str], urls: &[&str]) -> PolicyRule {
        PolicyRule {
            verbs: verbs.iter().map(|s| (*s).to_owned()).collect(),
            non_resource_urls: urls.iter().map(|s| (*s).to_owned()).collect(),
            ..PolicyRule::default()
        }
    }

    fn req(verb: &str, group: &str, resource: &str, sub: &str, name: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            api_group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            name: name.into(),
            resource_request: true,
            ..Attributes::default()
        }
    }

    fn path(verb: &str, p: &str) -> Attributes {
        Attributes { verb: verb.into(), path: p.into(), ..Attributes::default() }
    }

    #[test]
    fn resource_rules() {
        let pods = rule(&["get", "list"], &[""], &["pods"], &[]);
        assert!(rule_allows(&req("get", "", "pods", "", "x"), &pods));
        assert!(!rule_allows(&req("delete", "", "pods", "", "x"), &pods));
        assert!(!rule_allows(&req("get", "apps", "pods", "", "x"), &pods));
        assert!(!rule_allows(&req("get", "", "pods", "log", "x"), &pods), "subresources need their own rule");
        let logs = rule(&["get"], &[""], &["pods/log"], &[]);
        assert!(rule_allows(&req("get", "", "pods", "log", "x"), &logs));
        assert!(!rule_allows(&req("get", "", "pods", "", "x"), &logs));
        let any_scale = rule(&["update"], &["*"], &["*/scale"], &[]);
        assert!(rule_allows(&req("update", "apps", "deployments", "scale", "d"), &any_scale));
        assert!(!rule_allows(&req("update", "apps", "deployments", "status", "d"), &any_scale));
        let all = rule(&["*"], &["*"], &["*"], &[]);
        assert!(rule_allows(&req("escalate", "x.io", "things", "sub", "n"), &all));
    }

    #[test]
    fn resource_names_limit_and_need_a_name() {
        let one = rule(&["get", "list"], &[""], &["configmaps"], &["cm1"]);
        assert!(rule_allows(&req("get", "", "configmaps", "", "cm1"), &one));
        assert!(!rule_allows(&req("get", "", "configmaps", "", "cm2"), &one));
        assert!(!rule_allows(&req("list", "", "configmaps", "", ""), &one), "a list has no name");
    }

    #[test]
    fn non_resource_rules() {
        let r = url_rule(&["get"], &["/healthz", "/apis/*"]);
        assert!(rule_allows(&path("get", "/healthz"), &r));
        assert!(!rule_allows(&path("get", "/healthz/ping"), &r));
        assert!(rule_allows(&path("get", "/apis/apps/v1"), &r));
        assert!(!rule_allows(&path("post", "/healthz"), &r));
        assert!(!rule_allows(&req("get", "", "pods", "", ""), &r), "URL rules never match resources");
        assert!(!rule_allows(&path("get", "/healthz"), &rule(&["get"], &["*"], &["*"], &[])), "resource rules never match paths");
    }

    #[test]
    fn coverage() {
        let owner = vec![rule(&["get", "list"], &[""], &["pods", "pods/*"], &[]), url_rule(&["get"], &["/logs/*"])];
        assert!(covers(&owner, &[rule(&["get"], &[""], &["pods", "pods/log"], &[])]).is_ok());
        assert!(covers(&owner, &[rule(&["get"], &[""], &["pods"], &["p1", "p2"])]).is_ok());
        assert!(covers(&owner, &[url_rule(&["get"], &["/logs/kubelet"])]).is_ok());
        let missing = covers(&owner, &[rule(&["get", "delete", "watch"], &["", "apps"], &["pods"], &[])]).unwrap_err();
        assert_eq!(missing.len(), 5);
        let compacted = compact(missing);
        let text: Vec<String> = compacted.iter().map(compact_string).collect();
        assert_eq!(
            text,
            vec![
                r#"{APIGroups:[""], Resources:["pods"], Verbs:["delete" "watch"]}"#,
                r#"{APIGroups:["apps"], Resources:["pods"], Verbs:["get" "delete" "watch"]}"#,
            ]
        );
        let named_owner = vec![rule(&["get"], &[""], &["secrets"], &["s1"])];
        assert!(covers(&named_owner, &[rule(&["get"], &[""], &["secrets"], &["s1"])]).is_ok());
        assert!(covers(&named_owner, &[rule(&["get"], &[""], &["secrets"], &[])]).is_err(), "a named grant does not cover all names");
        let star = vec![rule(&["*"], &["*"], &["*"], &[]), url_rule(&["*"], &["*"])];
        assert!(covers(&star, &[rule(&["bind"], &["rbac.authorization.k8s.io"], &["clusterroles"], &["x"]), url_rule(&["get"], &["/metrics"])]).is_ok());
    }

    #[test]
    fn compact_string_shape() {
        let r = PolicyRule { verbs: vec!["get".into()], non_resource_urls: vec!["/metrics".into()], ..PolicyRule::default() };
        assert_eq!(compact_string(&r), r#"{NonResourceURLs:["/metrics"], Verbs:["get"]}"#);
        let r = rule(&["get"], &[""], &["secrets"], &["a", "b"]);
        assert_eq!(compact_string(&r), r#"{APIGroups:[""], Resources:["secrets"], ResourceNames:["a" "b"], Verbs:["get"]}"#);
    }
}
