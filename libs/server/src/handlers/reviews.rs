//! The review APIs, which create nothing and answer a question (kube's `authorization.k8s.io`
//! and `authentication.k8s.io` virtual resources): SubjectAccessReview, LocalSubjectAccessReview,
//! SelfSubjectAccessReview, SelfSubjectRulesReview, SelfSubjectReview and TokenReview.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use http::{Response, StatusCode};
use kapi_apimachinery::{ApiError, Cause, GroupResource};
use kapi_auth::rbac::PolicyRule;
use kapi_auth::{Attributes, UserInfo};
use kapi_registry::catalog::ResourceSpec;
use serde_json::{json, Map, Value};

use crate::handlers::Caller;
use crate::negotiation::{decode_body, Output};
use crate::request_info::RequestInfo;
use crate::response::{self, Body};
use crate::state::{ApiServer, AuthorizationMode};

type HandlerResult = Result<Response<Body>, ApiError>;

/// POST of a review: decodes the body, answers with it and its status (201, as kube).
pub async fn create(
    srv: &Arc<ApiServer>,
    spec: &'static ResourceSpec,
    info: &RequestInfo,
    output: Output,
    content_type: Option<&str>,
    caller: &Caller<'_>,
    body: &Bytes,
) -> HandlerResult {
    let gr = GroupResource::new(spec.group, spec.resource);
    if info.verb != "create" {
        return Err(ApiError::method_not_supported(&gr, &info.verb));
    }
    let mut review = decode_body(content_type, body)?;
    if !review.get("metadata").is_some_and(Value::is_object) {
        review["metadata"] = json!({});
    }
    let expected = spec.api_version();
    let api_version = review.get("apiVersion").and_then(Value::as_str).unwrap_or(&expected).to_owned();
    let kind = review.get("kind").and_then(Value::as_str).unwrap_or(spec.kind).to_owned();
    if api_version != expected || kind != spec.kind {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({expected})"
        )));
    }
    let status = match spec.resource {
        "subjectaccessreviews" => subject_access_review(srv, &review, spec, None).await?,
        "localsubjectaccessreviews" => subject_access_review(srv, &review, spec, Some(&info.namespace)).await?,
        "selfsubjectaccessreviews" => decide(srv, &review_attributes(spec, &review, caller.user.clone(), false)?).await,
        "selfsubjectrulesreviews" => self_subject_rules_review(srv, &review, caller.user)?,
        "selfsubjectreviews" => {
            review["metadata"]["creationTimestamp"] = Value::String(kapi_apimachinery::time::now_rfc3339());
            json!({"userInfo": user_info_json(caller.user)})
        }
        "tokenreviews" => {
            if review.pointer("/spec/token").and_then(Value::as_str).is_none_or(str::is_empty) {
                return Err(invalid(spec, &review, vec![Cause::required("spec.token", "")]));
            }
            srv.service_accounts.token_review(&review).await
        }
        _ => return Err(ApiError::method_not_supported(&gr, &info.verb)),
    };
    review["apiVersion"] = Value::String(expected);
    review["kind"] = Value::String(spec.kind.to_owned());
    review["status"] = status;
    Ok(response::object(StatusCode::CREATED, &review, output))
}

/// `authentication/v1.UserInfo` of a user.
pub fn user_info_json(user: &UserInfo) -> Value {
    let mut m = Map::new();
    m.insert("username".into(), Value::String(user.name.clone()));
    if !user.uid.is_empty() {
        m.insert("uid".into(), Value::String(user.uid.clone()));
    }
    if !user.groups.is_empty() {
        m.insert("groups".into(), json!(user.groups));
    }
    if !user.extra.is_empty() {
        m.insert("extra".into(), json!(user.extra));
    }
    Value::Object(m)
}

fn invalid(spec: &ResourceSpec, review: &Value, causes: Vec<Cause>) -> ApiError {
    let name = review.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    ApiError::invalid(spec.group, spec.kind, name, causes)
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect()).unwrap_or_default()
}

fn str_field<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// The attributes a review's spec asks about (kube's `ResourceAttributesFrom` /
/// `NonResourceAttributesFrom`), checked as kube's validation does.
fn review_attributes(spec: &ResourceSpec, review: &Value, user: UserInfo, need_user: bool) -> Result<Attributes, ApiError> {
    let s = review.get("spec").cloned().unwrap_or(Value::Null);
    let resource = s.get("resourceAttributes").filter(|v| !v.is_null());
    let non_resource = s.get("nonResourceAttributes").filter(|v| !v.is_null());
    let mut causes = Vec::new();
    match (resource, non_resource) {
        (Some(_), Some(nr)) => causes.push(Cause::invalid(
            "spec.nonResourceAttributes",
            nr,
            "cannot be specified in combination with resourceAttributes",
        )),
        (None, None) => causes.push(Cause::invalid(
            "spec.resourceAttributes",
            &Value::Null,
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
        _ => {}
    }
    if need_user && user.name.is_empty() && user.groups.is_empty() {
        causes.push(Cause::invalid("spec.user", &Value::String(String::new()), "at least one of user or group must be specified"));
    }
    if !causes.is_empty() {
        return Err(invalid(spec, review, causes));
    }
    Ok(match (resource, non_resource) {
        (Some(r), _) => Attributes {
            user,
            verb: str_field(r, "verb").to_owned(),
            namespace: str_field(r, "namespace").to_owned(),
            api_group: str_field(r, "group").to_owned(),
            api_version: str_field(r, "version").to_owned(),
            resource: str_field(r, "resource").to_owned(),
            subresource: str_field(r, "subresource").to_owned(),
            name: str_field(r, "name").to_owned(),
            resource_request: true,
            path: String::new(),
            field_selector: r.pointer("/fieldSelector/rawSelector").and_then(Value::as_str).unwrap_or_default().to_owned(),
        },
        (_, Some(nr)) => Attributes {
            user,
            verb: str_field(nr, "verb").to_owned(),
            path: str_field(nr, "path").to_owned(),
            resource_request: false,
            ..Attributes::default()
        },
        (None, None) => unreachable!("rejected above"),
    })
}

async fn decide(srv: &ApiServer, attrs: &Attributes) -> Value {
    let decision = srv.authorizer.authorize_async(attrs).await;
    let mut status = Map::new();
    status.insert("allowed".into(), Value::Bool(decision.is_allowed()));
    if matches!(decision, kapi_auth::Decision::Deny(_)) {
        status.insert("denied".into(), Value::Bool(true));
    }
    if !decision.reason().is_empty() {
        status.insert("reason".into(), Value::String(decision.reason().to_owned()));
    }
    Value::Object(status)
}

fn spec_user(review: &Value) -> UserInfo {
    let s = review.get("spec").cloned().unwrap_or(Value::Null);
    let extra: BTreeMap<String, Vec<String>> = s
        .get("extra")
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), strings(Some(v)))).collect())
        .unwrap_or_default();
    UserInfo { name: str_field(&s, "user").to_owned(), uid: str_field(&s, "uid").to_owned(), groups: strings(s.get("groups")), extra }
}

async fn subject_access_review(srv: &ApiServer, review: &Value, spec: &ResourceSpec, url_namespace: Option<&str>) -> Result<Value, ApiError> {
    if let Some(ns) = url_namespace {
        let meta_ns = review.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default();
        if meta_ns != ns {
            return Err(ApiError::bad_request(format!("spec.resourceAttributes.namespace must match namespace: {ns}")));
        }
        let attr_ns = review.pointer("/spec/resourceAttributes/namespace").and_then(Value::as_str);
        if review.pointer("/spec/resourceAttributes").is_some_and(|v| !v.is_null()) && attr_ns != Some(ns) {
            return Err(invalid(
                spec,
                review,
                vec![Cause::invalid(
                    "spec.resourceAttributes.namespace",
                    &Value::String(attr_ns.unwrap_or_default().to_owned()),
                    "must match metadata.namespace",
                )],
            ));
        }
        if review.pointer("/spec/nonResourceAttributes").is_some_and(|v| !v.is_null()) {
            return Err(invalid(
                spec,
                review,
                vec![Cause::invalid("spec.nonResourceAttributes", &Value::Null, "disallowed on this kind of request")],
            ));
        }
    }
    Ok(decide(srv, &review_attributes(spec, review, spec_user(review), true)?).await)
}

/// SelfSubjectRulesReview: what the caller may do in `spec.namespace`, from every authorization
/// mode that can list rules (kube's rule resolvers, privileged groups first).
fn self_subject_rules_review(srv: &ApiServer, review: &Value, user: &UserInfo) -> Result<Value, ApiError> {
    let namespace = review.pointer("/spec/namespace").and_then(Value::as_str).unwrap_or_default();
    let mut resource_rules = Vec::new();
    let mut non_resource_rules = Vec::new();
    let mut errors = Vec::new();
    let mut incomplete = false;
    let mut add = |rules: Vec<PolicyRule>| {
        for rule in rules {
            if rule.non_resource_urls.is_empty() {
                resource_rules.push(json!({
                    "verbs": rule.verbs,
                    "apiGroups": rule.api_groups,
                    "resources": rule.resources,
                    "resourceNames": rule.resource_names,
                }));
            } else {
                non_resource_rules.push(json!({"verbs": rule.verbs, "nonResourceURLs": rule.non_resource_urls}));
            }
        }
    };
    if user.in_group(kapi_auth::user::SYSTEM_MASTERS) {
        add(PolicyRule::full_authority());
    }
    for mode in &srv.authorization_modes {
        match mode {
            AuthorizationMode::AlwaysAllow => add(PolicyRule::full_authority()),
            AuthorizationMode::AlwaysDeny => {}
            // kube's node authorizer does not enumerate a node's rules: incomplete, with its error.
            AuthorizationMode::Node => {
                if kapi_auth::node::node_identity(user).is_some() {
                    incomplete = true;
                    errors.push("node authorizer does not support user rule resolution".to_owned());
                }
            }
            // kube's webhook authorizer cannot enumerate rules either.
            AuthorizationMode::Webhook(_) => {
                incomplete = true;
                errors.push("webhook authorizer does not support user rule resolution".to_owned());
            }
            AuthorizationMode::Rbac => {
                if let Some(rbac) = &srv.rbac {
                    let (rules, errs) = rbac.rules_for(user, namespace);
                    add(rules);
                    errors.extend(errs);
                }
            }
        }
    }
    // Empty lists are omitted as kube's omitempty does.
    let strip_empty = |mut v: Vec<Value>| {
        for r in &mut v {
            if let Some(m) = r.as_object_mut() {
                m.retain(|_, v| v.as_array().is_none_or(|a| !a.is_empty()));
            }
        }
        v
    };
    // Modes other than Node list their rules completely; dangling role references are reported
    // as an evaluation error (utilerrors' aggregate format), as kube's rule resolvers do.
    let mut status = json!({
        "resourceRules": strip_empty(resource_rules),
        "nonResourceRules": strip_empty(non_resource_rules),
        "incomplete": incomplete,
    });
    match errors.len() {
        0 => {}
        1 => status["evaluationError"] = Value::String(errors.remove(0)),
        _ => status["evaluationError"] = Value::String(format!("[{}]", errors.join(", "))),
    }
    Ok(status)
}
