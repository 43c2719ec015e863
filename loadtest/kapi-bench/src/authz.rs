//! Authorization cost: RBAC decision latency over a large policy (10,000 RoleBindings, 1,000
//! ClusterRoles; in process, the authorizer kapi runs), and an authorized GET through RBAC
//! beside the same GET on a server in `AlwaysAllow` mode, measured in the same run.

use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, StatusCode};
use kapi_auth::rbac::RbacAuthorizer;
use kapi_auth::{Attributes, Authorizer, UserInfo};
use serde_json::{json, Value};

use crate::stats::{ms, Samples};
use crate::{check, drive, Kapi};

struct Plan {
    role_bindings: usize,
    cluster_roles: usize,
    namespaces: usize,
    decisions: usize,
    gets: usize,
    concurrency: usize,
}

impl Plan {
    fn new(quick: bool) -> Self {
        if quick {
            Plan { role_bindings: 200, cluster_roles: 20, namespaces: 10, decisions: 2_000, gets: 200, concurrency: 4 }
        } else {
            Plan { role_bindings: 10_000, cluster_roles: 1_000, namespaces: 100, decisions: 200_000, gets: 10_000, concurrency: 32 }
        }
    }
}

const RBAC: &str = "/apis/rbac.authorization.k8s.io/v1";

fn cluster_role(i: usize) -> Value {
    let rules: Vec<Value> = (0..5)
        .map(|j| json!({"apiGroups": [format!("g{j}.example.com")], "resources": [format!("res-{i}-{j}"), format!("res-{i}-{j}/status")], "verbs": ["get", "list", "watch"]}))
        .collect();
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": format!("cr-{i}")}, "rules": rules})
}

fn role_binding(plan: &Plan, i: usize) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": format!("rb-{i}"), "namespace": format!("ns-{}", i % plan.namespaces)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": format!("cr-{}", i % plan.cluster_roles)},
        "subjects": [
            {"kind": "User", "name": format!("user-{i}"), "apiGroup": "rbac.authorization.k8s.io"},
            {"kind": "Group", "name": format!("team-{}", i % 50), "apiGroup": "rbac.authorization.k8s.io"}
        ]
    })
}

/// Decision latency of the RBAC authorizer itself, allowed and denied requests.
fn decisions(plan: &Plan) -> Result<(Samples, Samples), String> {
    let authz = RbacAuthorizer::new();
    {
        let mut index = authz.index().write().map_err(|e| e.to_string())?;
        for i in 0..plan.cluster_roles {
            index.put_cluster_role(&cluster_role(i)).map_err(|e| e.to_string())?;
        }
        for i in 0..plan.role_bindings {
            index.put_role_binding(&role_binding(plan, i)).map_err(|e| e.to_string())?;
        }
    }
    let mut allowed = Vec::with_capacity(plan.decisions);
    let mut denied = Vec::with_capacity(plan.decisions);
    let (mut allowed_time, mut denied_time) = (Duration::ZERO, Duration::ZERO);
    for n in 0..plan.decisions {
        let i = (n * 7919) % plan.role_bindings;
        let user = UserInfo::new(format!("user-{i}"), [format!("team-{}", i % 50), "system:authenticated".to_owned()]);
        let attrs = Attributes {
            user,
            verb: "list".into(),
            namespace: format!("ns-{}", i % plan.namespaces),
            api_group: "g3.example.com".into(),
            resource: format!("res-{}-3", i % plan.cluster_roles),
            resource_request: true,
            ..Attributes::default()
        };
        let t = Instant::now();
        let ok = authz.authorize(&attrs).is_allowed();
        let d = t.elapsed();
        if !ok {
            return Err(format!("user-{i} should be allowed"));
        }
        allowed.push(d);
        allowed_time += d;
        let attrs = Attributes { verb: "delete".into(), ..attrs };
        let t = Instant::now();
        let ok = authz.authorize(&attrs).is_allowed();
        let d = t.elapsed();
        if ok {
            return Err(format!("user-{i} should be denied"));
        }
        denied.push(d);
        denied_time += d;
    }
    Ok((Samples::with(allowed, allowed_time), Samples::with(denied, denied_time)))
}

async fn post_all(kapi: &Kapi, items: Vec<(String, Value)>, concurrency: usize, what: &'static str) -> Result<(), String> {
    let items = std::sync::Arc::new(items);
    drive(&kapi.target, items.len(), concurrency, move |mut conn, i| {
        let items = items.clone();
        async move {
            let (path, body) = &items[i];
            let (status, resp) = conn.send(Method::POST, path, Some(Bytes::from(body.to_string()))).await?;
            check(status, StatusCode::CREATED, &resp, what)?;
            Ok(conn)
        }
    })
    .await
    .map(|_| ())
}

/// Namespace "bench-authz" with one ConfigMap, which "reader" may get.
async fn prepare(kapi: &Kapi) -> Result<(), String> {
    let items = vec![
        ("/api/v1/namespaces".to_owned(), json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench-authz"}})),
        (
            "/api/v1/namespaces/bench-authz/configmaps".to_owned(),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"k": "v"}}),
        ),
        (
            format!("{RBAC}/namespaces/bench-authz/roles"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "cm-reader"},
                   "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
        ),
        (
            format!("{RBAC}/namespaces/bench-authz/rolebindings"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "reader"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"},
                   "subjects": [{"kind": "User", "name": "reader", "apiGroup": "rbac.authorization.k8s.io"}]}),
        ),
    ];
    for item in items {
        post_all(kapi, vec![item], 1, "prepare").await?;
    }
    Ok(())
}

async fn reader_gets(kapi: &Kapi, plan: &Plan) -> Result<Samples, String> {
    let target = kapi.target_for("reader", &["readers"])?;
    // The binding reaches the RBAC index through the watch cache; wait until it answers.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut conn = target.connect().await?;
        let (status, _) = conn.send(Method::GET, "/api/v1/namespaces/bench-authz/configmaps/cm", None).await?;
        if status == StatusCode::OK {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("reader still gets {status}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drive(&target, plan.gets, plan.concurrency, |mut conn, _| async move {
        let (status, body) = conn.send(Method::GET, "/api/v1/namespaces/bench-authz/configmaps/cm", None).await?;
        check(status, StatusCode::OK, &body, "authorized get")?;
        Ok(conn)
    })
    .await
}

/// The markdown section.
pub async fn run(bin: &Path, quick: bool) -> Result<String, String> {
    let plan = Plan::new(quick);
    let (allowed, denied) = decisions(&plan)?;

    let always = Kapi::start_with(bin, &["--authorization-mode=AlwaysAllow"])?;
    prepare(&always).await?;
    let baseline = reader_gets(&always, &plan).await.map_err(|e| format!("AlwaysAllow gets: {e}"))?;
    drop(always);

    let rbac = Kapi::start(bin)?;
    let mut policy: Vec<(String, Value)> = (0..plan.namespaces)
        .map(|n| ("/api/v1/namespaces".to_owned(), json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("ns-{n}")}})))
        .collect();
    policy.extend((0..plan.cluster_roles).map(|i| (format!("{RBAC}/clusterroles"), cluster_role(i))));
    post_all(&rbac, policy, plan.concurrency, "policy").await?;
    let mut bindings: Vec<(String, Value)> = (0..plan.role_bindings)
        .map(|i| (format!("{RBAC}/namespaces/ns-{}/rolebindings", i % plan.namespaces), role_binding(&plan, i)))
        .collect();
    // A share of the bindings sit in the GET's own namespace, for other users.
    bindings.extend((0..plan.role_bindings / plan.namespaces).map(|i| {
        let mut b = role_binding(&plan, plan.role_bindings + i);
        b["metadata"]["namespace"] = json!("bench-authz");
        (format!("{RBAC}/namespaces/bench-authz/rolebindings"), b)
    }));
    prepare(&rbac).await?;
    post_all(&rbac, bindings, plan.concurrency, "bindings").await?;
    let (rss, _) = rbac.memory();
    let authorized = reader_gets(&rbac, &plan).await.map_err(|e| format!("RBAC gets: {e}"))?;
    drop(rbac);

    let mut out = format!(
        "\n## Authorization\n\nRBAC decisions in process over {} RoleBindings and {} ClusterRoles (5 rules each) in {} namespaces; \
         each decision looks up the caller's bindings by subject.\n\n| decision | count | p50 | p99 |\n|---|---|---|---|\n",
        plan.role_bindings, plan.cluster_roles, plan.namespaces
    );
    for (what, s) in [("allowed (RoleBinding → ClusterRole)", &allowed), ("denied (no rule matches)", &denied)] {
        out.push_str(&format!("| {what} | {} | {} | {} |\n", s.count(), micros(s.percentile(0.5)), micros(s.percentile(0.99))));
    }
    out.push_str(&format!(
        "\nAn authorized GET of one ConfigMap by a non-admin user (client certificate, {} connections), on a server holding the \
         policy above (RSS {rss:.1} MiB) and on one started with `--authorization-mode=AlwaysAllow`:\n\n\
         | mode | GETs | rate | p50 | p99 | RBAC / AlwaysAllow |\n|---|---|---|---|---|---|\n",
        plan.concurrency
    ));
    out.push_str(&format!(
        "| AlwaysAllow (baseline) | {} | {:.0}/s | {} | {} | — |\n",
        baseline.count(),
        baseline.per_second(),
        ms(baseline.percentile(0.5)),
        ms(baseline.percentile(0.99))
    ));
    out.push_str(&format!(
        "| RBAC | {} | {:.0}/s | {} | {} | {:.2} |\n",
        authorized.count(),
        authorized.per_second(),
        ms(authorized.percentile(0.5)),
        ms(authorized.percentile(0.99)),
        authorized.per_second() / baseline.per_second()
    ));
    Ok(out)
}

fn micros(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}
