//! The chain runs mutations before validations, in order, only for the operations a plugin
//! handles; the flags pick plugins as kube's do; the configuration file reads as kube's.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use kapi_admission::attributes::Gvx;
use kapi_admission::{enabled_plugins, AdmissionConfig, AdmissionPlugin, Attributes, Chain, Operation, Outcome};
use kapi_apimachinery::ApiError;
use serde_json::{json, Value};

/// Records what it is asked, adds a label when mutating, refuses objects labelled `deny`.
struct Recorder {
    name: &'static str,
    ops: &'static [Operation],
    log: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl AdmissionPlugin for Recorder {
    fn name(&self) -> &'static str {
        self.name
    }

    fn handles(&self, operation: Operation) -> bool {
        self.ops.contains(&operation)
    }

    async fn admit(&self, attrs: &mut Attributes, outcome: &mut Outcome) -> Result<(), ApiError> {
        self.log.lock().expect("log").push(format!("admit {}", self.name));
        if let Some(obj) = attrs.object.as_mut() {
            obj["metadata"]["labels"][self.name] = json!("seen");
        }
        outcome.warn(format!("{} looked", self.name));
        Ok(())
    }

    async fn validate(&self, attrs: &Attributes, outcome: &mut Outcome) -> Result<(), ApiError> {
        self.log.lock().expect("log").push(format!("validate {}", self.name));
        outcome.annotate(format!("{}/checked", self.name.to_lowercase()), "true").map_err(|e| ApiError::internal(e.to_string()))?;
        let denied = attrs.object.as_ref().and_then(|o| o.pointer("/metadata/labels/deny")).is_some();
        if denied {
            return Err(attrs.forbidden(&format!("{} says no", self.name)));
        }
        Ok(())
    }
}

fn attrs(obj: Value) -> Attributes {
    Attributes {
        kind: Gvx { group: "apps".into(), version: "v1".into(), name: "Deployment".into() },
        resource: Gvx { group: "apps".into(), version: "v1".into(), name: "deployments".into() },
        subresource: String::new(),
        namespace: "default".into(),
        name: "web".into(),
        operation: Operation::Create,
        options: json!({}),
        dry_run: false,
        user: kapi_auth::UserInfo::default(),
        object: Some(obj),
        old_object: None,
        reinvocation: Default::default(),
    }
}

fn chain(log: &Arc<Mutex<Vec<String>>>) -> Chain {
    Chain::new(vec![
        Box::new(Recorder { name: "First", ops: &[Operation::Create, Operation::Update], log: log.clone() }),
        Box::new(Recorder { name: "UpdatesOnly", ops: &[Operation::Update], log: log.clone() }),
        Box::new(Recorder { name: "Last", ops: &[Operation::Create], log: log.clone() }),
    ])
}

#[tokio::test]
async fn mutations_then_validations_in_order_for_handled_operations() {
    let log = Arc::default();
    let chain = chain(&log);
    let mut a = attrs(json!({"metadata": {"name": "web"}}));
    let mut outcome = Outcome::default();
    chain.admit(&mut a, &mut outcome).await.expect("admitted");
    chain.validate(&a, &mut outcome).await.expect("valid");
    assert_eq!(*log.lock().expect("log"), ["admit First", "admit Last", "validate First", "validate Last"]);
    assert_eq!(a.object.as_ref().expect("object")["metadata"]["labels"], json!({"First": "seen", "Last": "seen"}));
    assert_eq!(outcome.warnings, ["First looked", "Last looked"]);
    assert_eq!(outcome.annotations.keys().collect::<Vec<_>>(), ["first/checked", "last/checked"]);
    assert!(chain.handles(Operation::Update) && !chain.handles(Operation::Delete));
    assert_eq!(chain.names(), ["First", "UpdatesOnly", "Last"]);
}

#[tokio::test]
async fn the_first_refusal_ends_the_write_with_kubes_forbidden() {
    let log = Arc::default();
    let chain = chain(&log);
    let a = attrs(json!({"metadata": {"name": "web", "labels": {"deny": "yes"}}}));
    let err = chain.validate(&a, &mut Outcome::default()).await.expect_err("refused");
    assert_eq!((err.code, err.message.as_str()), (403, "deployments.apps \"web\" is forbidden: First says no"));
    assert_eq!(*log.lock().expect("log"), ["validate First"], "Last never ran");
}

/// Adds a label once; asks for a second round when it changed the object.
struct Stamper {
    rounds: Arc<Mutex<Vec<bool>>>,
}

#[async_trait]
impl AdmissionPlugin for Stamper {
    fn name(&self) -> &'static str {
        "Stamper"
    }

    fn handles(&self, _operation: Operation) -> bool {
        true
    }

    async fn admit(&self, attrs: &mut Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        self.rounds.lock().expect("rounds").push(attrs.reinvocation.is_reinvoke());
        let obj = attrs.object.as_mut().expect("object");
        if obj.pointer("/metadata/labels/stamped").is_none() {
            obj["metadata"]["labels"]["stamped"] = json!("yes");
            attrs.reinvocation.request();
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_plugin_that_asks_for_it_gets_every_mutating_plugin_run_again() {
    let log = Arc::default();
    let rounds = Arc::default();
    let chain = Chain::new(vec![
        Box::new(Recorder { name: "First", ops: &[Operation::Create], log: Arc::clone(&log) }),
        Box::new(Stamper { rounds: Arc::clone(&rounds) }),
    ]);
    let mut a = attrs(json!({"metadata": {"name": "web"}}));
    chain.admit(&mut a, &mut Outcome::default()).await.expect("admitted");
    assert_eq!(*log.lock().expect("log"), ["admit First", "admit First"], "First saw the stamp in the second round");
    assert_eq!(*rounds.lock().expect("rounds"), [false, true]);

    // Nothing asked: one round.
    let mut again = attrs(json!({"metadata": {"name": "web", "labels": {"stamped": "yes"}}}));
    chain.admit(&mut again, &mut Outcome::default()).await.expect("admitted");
    assert_eq!(rounds.lock().expect("rounds").len(), 3);
}

#[test]
fn annotations_cannot_be_overwritten_with_another_value() {
    let mut outcome = Outcome::default();
    outcome.annotate("a.example.com/k", "1").expect("set");
    outcome.annotate("a.example.com/k", "1").expect("same value again");
    let err = outcome.annotate("a.example.com/k", "2").expect_err("overwrite");
    assert_eq!(err.to_string(), "admission annotations are not allowd to be overwritten, key:\"a.example.com/k\", old value: 1, new value: 2");
}

#[test]
fn flags_pick_plugins_in_kubes_order() {
    let names = |e: &[&str], d: &[&str]| {
        enabled_plugins(&e.iter().map(|s| s.to_string()).collect::<Vec<_>>(), &d.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    };
    let default = names(&[], &[]).expect("defaults");
    assert_eq!(default.first(), Some(&"NamespaceLifecycle"));
    assert_eq!(&default[default.len() - 4..], ["MutatingAdmissionWebhook", "ValidatingAdmissionPolicy", "ValidatingAdmissionWebhook", "ResourceQuota"]);
    assert!(!default.contains(&"AlwaysPullImages"));
    // Order is kube's, whatever the flag's order.
    let more = names(&["AlwaysPullImages", "NamespaceAutoProvision"], &["ResourceQuota"]).expect("valid");
    let at = |n: &str| more.iter().position(|x| *x == n);
    assert!(at("NamespaceAutoProvision") < at("NamespaceLifecycle") && at("NamespaceLifecycle") < at("AlwaysPullImages"));
    assert_eq!(at("ResourceQuota"), None);
    assert_eq!(names(&["Nope"], &[]).expect_err("unknown"), "enable-admission-plugins plugin \"Nope\" is unknown");
    assert_eq!(
        names(&["AlwaysPullImages"], &["AlwaysPullImages", "Bogus"]).expect_err("two errors"),
        "[disable-admission-plugins plugin \"Bogus\" is unknown, [AlwaysPullImages] in enable-admission-plugins and disable-admission-plugins overlapped]"
    );
}

#[test]
fn the_configuration_file_gives_plugins_their_configuration() {
    let dir = std::env::temp_dir().join(format!("kapi-admission-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("quota.yaml"), "apiVersion: resourcequota.admission.k8s.io/v1\nkind: Configuration\nlimitedResources: []\n").expect("write");
    let text = "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: ResourceQuota\n  path: quota.yaml\n- name: EventRateLimit\n  configuration: {kind: Configuration, limits: [{type: Server, qps: 50, burst: 100}]}\n";
    std::fs::write(dir.join("admission.yaml"), text).expect("write");
    let config = AdmissionConfig::load(&dir.join("admission.yaml")).expect("reads");
    assert_eq!(config.config_for("ResourceQuota").expect("file").expect("some")["kind"], "Configuration");
    assert_eq!(config.config_for("EventRateLimit").expect("inline").expect("some")["limits"][0]["qps"], 50);
    assert_eq!(config.config_for("PodSecurity").expect("none"), None);
    let wrong = AdmissionConfig::parse("kind: Nope\n", &dir, "x.yaml").expect_err("wrong kind");
    assert!(wrong.to_string().starts_with("unable to read admission control configuration from \"x.yaml\""), "{wrong}");
    std::fs::remove_dir_all(&dir).ok();
}
