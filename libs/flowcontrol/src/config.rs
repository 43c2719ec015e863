//! FlowSchemas and PriorityLevelConfigurations as typed values, read from the stored objects
//! (`flowcontrol.apiserver.k8s.io/v1`). Objects that do not read are skipped by the caller, as
//! kube's config controller ignores what it cannot digest.

use serde::Deserialize;
use serde_json::Value;

/// `*` in verbs, API groups, resources, namespaces, subject names.
pub const ALL: &str = "*";

/// A FlowSchema's spec and name.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FlowSchema {
    /// From `metadata.name`.
    #[serde(skip)]
    pub name: String,
    /// The priority level its requests go to.
    pub priority_level_configuration: LevelRef,
    /// Lower matches first; ties go by name.
    #[serde(default)]
    pub matching_precedence: i32,
    /// How requests are split into flows; None: one flow.
    #[serde(default)]
    pub distinguisher_method: Option<DistinguisherMethod>,
    /// Any matching rule puts a request in this schema.
    #[serde(default)]
    pub rules: Vec<PolicyRulesWithSubjects>,
}

/// A reference to a priority level by name.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct LevelRef {
    /// The PriorityLevelConfiguration's name.
    pub name: String,
}

/// `ByUser` or `ByNamespace`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct DistinguisherMethod {
    /// The method's type.
    #[serde(rename = "type")]
    pub type_: String,
}

/// Subjects and the requests of theirs a rule matches.
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRulesWithSubjects {
    /// Who the rule is about.
    #[serde(default)]
    pub subjects: Vec<Subject>,
    /// Resource requests it matches.
    #[serde(default)]
    pub resource_rules: Vec<ResourceRule>,
    /// Non-resource requests it matches.
    #[serde(default)]
    pub non_resource_rules: Vec<NonResourceRule>,
}

/// A user, a group or a service account.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Subject {
    /// `User`, `Group` or `ServiceAccount`.
    pub kind: String,
    /// For `User`.
    #[serde(default)]
    pub user: Option<Named>,
    /// For `Group`.
    #[serde(default)]
    pub group: Option<Named>,
    /// For `ServiceAccount`.
    #[serde(default)]
    pub service_account: Option<ServiceAccountRef>,
}

/// A name (`*` for all).
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Named {
    /// The name.
    pub name: String,
}

/// A service account (`name: *` for every one of the namespace).
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct ServiceAccountRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

/// Resource requests a rule matches.
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRule {
    /// Verbs (`*`: all).
    #[serde(default)]
    pub verbs: Vec<String>,
    /// API groups (`*`: all; "" is the core group).
    #[serde(default)]
    pub api_groups: Vec<String>,
    /// Resources, `resource/subresource` for subresources (`*`: all).
    #[serde(default)]
    pub resources: Vec<String>,
    /// Whether requests without a namespace match.
    #[serde(default)]
    pub cluster_scope: bool,
    /// Namespaces (`*`: every one).
    #[serde(default)]
    pub namespaces: Vec<String>,
}

/// Non-resource requests a rule matches.
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct NonResourceRule {
    /// Verbs (`*`: all).
    #[serde(default)]
    pub verbs: Vec<String>,
    /// Paths, `/prefix/*` for a subtree, `*` for all.
    #[serde(default, rename = "nonResourceURLs")]
    pub non_resource_urls: Vec<String>,
}

/// A priority level: exempt, or limited with its share of the server's concurrency and what
/// happens to requests beyond it.
#[derive(Debug, Clone, PartialEq)]
pub struct PriorityLevel {
    /// From `metadata.name`.
    pub name: String,
    /// Exempt levels are never limited or queued.
    pub exempt: bool,
    /// Its share of the server's concurrency (kube's default 30 for limited levels).
    pub nominal_concurrency_shares: u32,
    /// The percent of its nominal concurrency other levels may borrow.
    pub lendable_percent: u32,
    /// The percent of its nominal concurrency it may borrow (None: no limit).
    pub borrowing_limit_percent: Option<u32>,
    /// Queue, or reject at once, what it cannot run now.
    pub queuing: Option<Queuing>,
}

/// A limited level's queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queuing {
    /// The number of queues.
    pub queues: u32,
    /// How many queues a flow's requests are dealt (shuffle sharding).
    pub hand_size: u32,
    /// How many requests a queue holds before new ones are rejected.
    pub queue_length_limit: u32,
}

/// kube's default `nominalConcurrencyShares` of a limited level.
const DEFAULT_SHARES: u32 = 30;
/// kube's defaults of a level's queues.
const DEFAULT_QUEUING: Queuing = Queuing { queues: 64, hand_size: 8, queue_length_limit: 50 };

fn name_of(obj: &Value) -> Option<String> {
    obj.pointer("/metadata/name").and_then(Value::as_str).filter(|n| !n.is_empty()).map(str::to_owned)
}

fn u32_at(v: &Value, field: &str) -> Option<u32> {
    v.get(field).and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok())
}

impl FlowSchema {
    /// Reads a stored FlowSchema; None when it does not read as one.
    pub fn from_object(obj: &Value) -> Option<FlowSchema> {
        let mut schema: FlowSchema = serde_json::from_value(obj.get("spec")?.clone()).ok()?;
        schema.name = name_of(obj)?;
        Some(schema)
    }
}

impl PriorityLevel {
    /// Reads a stored PriorityLevelConfiguration (with kube's defaults for what it omits);
    /// None when it does not read as one.
    pub fn from_object(obj: &Value) -> Option<PriorityLevel> {
        let name = name_of(obj)?;
        let spec = obj.get("spec")?;
        match spec.get("type").and_then(Value::as_str)? {
            "Exempt" => {
                let exempt = spec.get("exempt").cloned().unwrap_or(Value::Null);
                Some(PriorityLevel {
                    name,
                    exempt: true,
                    nominal_concurrency_shares: u32_at(&exempt, "nominalConcurrencyShares").unwrap_or(0),
                    lendable_percent: u32_at(&exempt, "lendablePercent").unwrap_or(0),
                    borrowing_limit_percent: None,
                    queuing: None,
                })
            }
            "Limited" => {
                let limited = spec.get("limited")?;
                let response = limited.get("limitResponse");
                let queuing = match response.and_then(|r| r.get("type")).and_then(Value::as_str) {
                    Some("Reject") => None,
                    _ => {
                        let q = response.and_then(|r| r.get("queuing")).cloned().unwrap_or(Value::Null);
                        // kube's v1 defaulting fills zeros as well as absent fields.
                        let or_default = |field: &str, default: u32| u32_at(&q, field).filter(|&n| n != 0).unwrap_or(default);
                        Some(Queuing {
                            queues: or_default("queues", DEFAULT_QUEUING.queues),
                            hand_size: or_default("handSize", DEFAULT_QUEUING.hand_size),
                            queue_length_limit: or_default("queueLengthLimit", DEFAULT_QUEUING.queue_length_limit),
                        })
                    }
                };
                Some(PriorityLevel {
                    name,
                    exempt: false,
                    nominal_concurrency_shares: u32_at(limited, "nominalConcurrencyShares").unwrap_or(DEFAULT_SHARES),
                    lendable_percent: u32_at(limited, "lendablePercent").unwrap_or(0),
                    borrowing_limit_percent: u32_at(limited, "borrowingLimitPercent"),
                    queuing,
                })
            }
            _ => None,
        }
    }
}

/// The configuration in force: schemas in matching order (precedence, then name) and the
/// levels they reference.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// In matching order.
    pub schemas: Vec<FlowSchema>,
    /// By name order.
    pub levels: Vec<PriorityLevel>,
}

impl Config {
    /// The configuration of the stored objects. Schemas whose level does not exist are kept
    /// out of matching (kube marks them `Dangling` and skips them).
    pub fn from_objects<'a>(schemas: impl IntoIterator<Item = &'a Value>, levels: impl IntoIterator<Item = &'a Value>) -> Config {
        let mut levels: Vec<PriorityLevel> = levels.into_iter().filter_map(PriorityLevel::from_object).collect();
        levels.sort_by(|a, b| a.name.cmp(&b.name));
        let mut schemas: Vec<FlowSchema> = schemas
            .into_iter()
            .filter_map(FlowSchema::from_object)
            .filter(|s| levels.iter().any(|l| l.name == s.priority_level_configuration.name))
            .collect();
        schemas.sort_by(|a, b| (a.matching_precedence, &a.name).cmp(&(b.matching_precedence, &b.name)));
        Config { schemas, levels }
    }

    /// The level called `name`.
    pub fn level(&self, name: &str) -> Option<&PriorityLevel> {
        self.levels.iter().find(|l| l.name == name)
    }
}
