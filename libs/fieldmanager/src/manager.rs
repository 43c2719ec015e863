//! `metadata.managedFields`: who owns which fields, updated on every write (Update
//! operations) and enforced on server-side apply (Apply operations), as kube-apiserver's field
//! manager does with structured-merge-diff underneath.

use kapi_apimachinery::{ApiError, Cause, StatusReason};
use serde_json::{json, Map, Value};

use crate::fieldpath::{FieldSet, Path};
use crate::schema::{Shape, TypeSchema};
use crate::typed::{compare, merge, remove_items, to_field_set, with_typed_skeleton, Comparison};

/// kube keeps at most this many Update entries; older ones are merged into `ancient-changes`.
pub const MAX_UPDATE_MANAGERS: usize = 10;

/// Whether an entry records applies or plain writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    /// Server-side apply.
    Apply,
    /// Create, update and non-apply patches.
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One `managedFields` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The field manager's name.
    pub manager: String,
    /// Apply or Update.
    pub operation: Operation,
    /// The API version the manager spoke.
    pub api_version: String,
    /// When the manager last changed the set (`2006-01-02T15:04:05Z`).
    pub time: Option<String>,
    /// `status`, `scale` or empty for the main resource.
    pub subresource: String,
    /// The owned fields.
    pub fields: FieldSet,
}

impl Entry {
    /// kube identifies an Update entry by manager, version and subresource, an Apply entry by
    /// manager and subresource only.
    fn same_identity(&self, other: &Entry) -> bool {
        self.manager == other.manager
            && self.operation == other.operation
            && self.subresource == other.subresource
            && (self.operation == Operation::Apply || self.api_version == other.api_version)
    }
}

/// Who is writing, and what their write may not claim.
#[derive(Clone, Debug)]
pub struct Writer {
    /// The field manager (`?fieldManager=` or derived from the User-Agent).
    pub manager: String,
    /// The request's `group/version`.
    pub api_version: String,
    /// The subresource written, empty for the main resource.
    pub subresource: String,
    /// Fields this kind of write resets (`status` on the main resource, `spec` on status).
    pub reset: FieldSet,
    /// The write's timestamp.
    pub now: String,
}

/// Paths nobody owns: identity and server-managed metadata (kube's strip-meta set).
fn stripped() -> FieldSet {
    let meta = |f: &str| Path::fields(&["metadata", f]);
    FieldSet::from_paths(&[
        Path::fields(&["apiVersion"]),
        Path::fields(&["kind"]),
        Path::fields(&["metadata"]),
        meta("name"),
        meta("namespace"),
        meta("creationTimestamp"),
        meta("selfLink"),
        meta("uid"),
        meta("clusterName"),
        meta("generation"),
        meta("managedFields"),
        meta("resourceVersion"),
    ])
}

/// Decodes `metadata.managedFields`; None when absent, Err when malformed.
pub fn decode(obj: &Value) -> Result<Option<Vec<Entry>>, String> {
    let Some(raw) = obj.pointer("/metadata/managedFields") else { return Ok(None) };
    let Value::Array(items) = raw else { return Err("managedFields must be a list".into()) };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let s = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
        let operation = match item.get("operation").and_then(Value::as_str) {
            Some("Apply") => Operation::Apply,
            Some("Update") => Operation::Update,
            other => return Err(format!("invalid operation {other:?}")),
        };
        if item.get("fieldsType").and_then(Value::as_str).is_some_and(|t| t != "FieldsV1") {
            return Err("fieldsType must be FieldsV1".into());
        }
        let fields = match item.get("fieldsV1") {
            None => FieldSet::new(),
            Some(v) => FieldSet::from_fields_v1(v).ok_or("invalid fieldsV1")?,
        };
        out.push(Entry {
            manager: s("manager"),
            operation,
            api_version: s("apiVersion"),
            time: item.get("time").and_then(Value::as_str).map(str::to_owned),
            subresource: s("subresource"),
            fields,
        });
    }
    Ok(Some(out))
}

/// Encodes entries in kube's order (Apply before Update, then by time, manager, version).
pub fn encode(mut entries: Vec<Entry>) -> Value {
    entries.sort_by(|a, b| {
        a.operation
            .cmp(&b.operation)
            .then_with(|| a.time.cmp(&b.time))
            .then_with(|| a.manager.cmp(&b.manager))
            .then_with(|| a.api_version.cmp(&b.api_version))
            .then_with(|| a.subresource.cmp(&b.subresource))
    });
    Value::Array(
        entries
            .into_iter()
            .map(|e| {
                let mut m = Map::new();
                m.insert("manager".into(), json!(e.manager));
                m.insert("operation".into(), json!(e.operation.as_str()));
                m.insert("apiVersion".into(), json!(e.api_version));
                if let Some(t) = e.time {
                    m.insert("time".into(), json!(t));
                }
                m.insert("fieldsType".into(), json!("FieldsV1"));
                m.insert("fieldsV1".into(), e.fields.to_fields_v1());
                if !e.subresource.is_empty() {
                    m.insert("subresource".into(), json!(e.subresource));
                }
                Value::Object(m)
            })
            .collect(),
    )
}

fn without_managed_fields(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
    v
}

fn set_managed_fields(obj: &mut Value, entries: Vec<Entry>) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else { return };
    if entries.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert("managedFields".into(), encode(entries));
    }
}

/// Takes what `comparison` changed away from every entry (SMD's `update`): fields another
/// entry owned and this write modified, and fields this write removed. Returns the conflicts
/// (entries' fields this write modified) before removing them, for apply.
fn transfer(entries: &mut Vec<Entry>, comparison: &Comparison, skip: Option<&Entry>) -> Vec<(Entry, FieldSet)> {
    let changed = comparison.modified.union(&comparison.added);
    let mut conflicts = Vec::new();
    for e in entries.iter_mut() {
        if skip.is_some_and(|s| s.same_identity(e)) {
            continue;
        }
        let conflict = e.fields.intersection(&changed);
        if !conflict.is_empty() {
            conflicts.push((e.clone(), conflict.clone()));
            e.fields = e.fields.difference(&conflict);
        }
        e.fields = e.fields.difference(&comparison.removed);
    }
    entries.retain(|e| !e.fields.is_empty());
    conflicts
}

/// Records an Update-operation write: `new` (about to be stored) gets the managedFields that
/// result from `old` (None on create) and the writer's change.
pub fn track_update<S: TypeSchema>(old: Option<&Value>, new: &mut Value, schema: &S, writer: &Writer) {
    let live_entries = old.and_then(|o| decode(o).ok().flatten()).unwrap_or_default();
    let mut entries = if writer.subresource.is_empty() {
        match decode(new) {
            // A single empty entry is kube's way of asking for managedFields to be reset.
            Ok(Some(given)) if given.len() == 1 && given[0].manager.is_empty() && given[0].fields.is_empty() => Vec::new(),
            Ok(Some(given)) if !given.is_empty() => given,
            _ => live_entries,
        }
    } else {
        live_entries
    };
    let empty = json!({});
    let before = with_typed_skeleton(&without_managed_fields(old.unwrap_or(&empty)), schema);
    let after = with_typed_skeleton(&without_managed_fields(new), schema);
    let comparison = compare(Some(&before), Some(&after), schema).exclude(&writer.reset);
    transfer(&mut entries, &comparison, None);
    let owned = comparison
        .modified
        .union(&comparison.added)
        .difference(&comparison.removed)
        .recursive_difference(&writer.reset)
        .difference(&stripped());
    if !owned.is_empty() {
        let mut current = Entry {
            manager: writer.manager.clone(),
            operation: Operation::Update,
            api_version: writer.api_version.clone(),
            time: Some(writer.now.clone()),
            subresource: writer.subresource.clone(),
            fields: owned,
        };
        if let Some(i) = entries.iter().position(|e| e.same_identity(&current)) {
            let previous = entries.remove(i);
            current.fields = current.fields.union(&previous.fields);
        }
        entries.push(current);
    }
    cap_update_entries(&mut entries);
    set_managed_fields(new, entries);
}

/// kube merges the oldest Update entries into one `ancient-changes` entry beyond
/// [`MAX_UPDATE_MANAGERS`].
fn cap_update_entries(entries: &mut Vec<Entry>) {
    let updates = entries.iter().filter(|e| e.operation == Operation::Update).count();
    if updates <= MAX_UPDATE_MANAGERS {
        return;
    }
    let mut idx: Vec<usize> = (0..entries.len()).filter(|&i| entries[i].operation == Operation::Update).collect();
    idx.sort_by(|&a, &b| entries[a].time.cmp(&entries[b].time));
    let excess = updates - MAX_UPDATE_MANAGERS + 1;
    let oldest: Vec<usize> = idx.into_iter().take(excess).collect();
    let mut ancient = Entry {
        manager: "ancient-changes".into(),
        operation: Operation::Update,
        api_version: String::new(),
        time: None,
        subresource: String::new(),
        fields: FieldSet::new(),
    };
    for &i in &oldest {
        ancient.fields = ancient.fields.union(&entries[i].fields);
        ancient.api_version = entries[i].api_version.clone();
        ancient.time = ancient.time.clone().max(entries[i].time.clone());
    }
    let mut i = 0;
    entries.retain(|_| {
        let keep = !oldest.contains(&i);
        i += 1;
        keep
    });
    entries.push(ancient);
}

/// Server-side apply of `config` by `writer` onto `live` (None: the object does not exist yet);
/// returns the object to store, managedFields set. Fails with kube's 409 listing the
/// conflicting fields and their managers unless `force`.
pub fn apply<S: TypeSchema>(live: Option<&Value>, config: &Value, schema: &S, writer: &Writer, force: bool) -> Result<Value, ApiError> {
    if config.pointer("/metadata/managedFields").is_some_and(|m| !m.is_null()) {
        return Err(ApiError::bad_request("metadata.managedFields must be nil"));
    }
    // kube answers this 500 (an error of the conversion); the fault is the request's.
    if let Some(problem) = crate::typed::missing_list_key(config, schema) {
        let text = |p: &str| config.pointer(p).and_then(Value::as_str).unwrap_or_default();
        return Err(ApiError::bad_request(format!(
            "failed to create typed patch object ({}, Kind={}) {}/{}: {problem}",
            text("/apiVersion"),
            text("/kind"),
            text("/metadata/namespace"),
            text("/metadata/name")
        )));
    }
    let mut entries = live.and_then(|o| decode(o).ok().flatten()).unwrap_or_default();
    let empty = json!({});
    let live_obj = without_managed_fields(live.unwrap_or(&empty));

    let config_set = to_field_set(config, schema).recursive_difference(&writer.reset).difference(&stripped());
    let me = Entry {
        manager: writer.manager.clone(),
        operation: Operation::Apply,
        api_version: writer.api_version.clone(),
        time: Some(writer.now.clone()),
        subresource: writer.subresource.clone(),
        fields: config_set.clone(),
    };
    let last = entries.iter().position(|e| e.same_identity(&me)).map(|i| entries.remove(i));

    let mut merged = merge(&live_obj, config, schema);
    // Fields this manager applied last time and no longer applies go away, unless someone
    // else (or this configuration) still owns them.
    if let Some(last) = &last {
        let others = entries.iter().fold(config_set.clone(), |acc, e| acc.union(&e.fields));
        let gone = last.fields.difference(&others).without_ancestors_of(&others);
        if !gone.is_empty() {
            merged = drop_emptied(&remove_items(&merged, &gone, schema), &merged, schema);
        }
    }

    let before = with_typed_skeleton(&live_obj, schema);
    let after = with_typed_skeleton(&merged, schema);
    let comparison = compare(Some(&before), Some(&after), schema).exclude(&writer.reset);
    let mut trial = entries.clone();
    let conflicts = transfer(&mut trial, &comparison, Some(&me));
    if !conflicts.is_empty() && !force {
        // kubectl's own applies may take over what its client-side applies set, as long as
        // the live object still matches the last client-side configuration.
        let allowed = (writer.manager == KUBECTL).then(|| allowed_from_last_applied(&live_obj, schema)).flatten();
        let remaining: Vec<(Entry, FieldSet)> = conflicts
            .into_iter()
            .map(|(e, set)| {
                let left = match &allowed {
                    Some(a) => set.difference(a),
                    None => set,
                };
                (e, left)
            })
            .filter(|(_, set)| !set.is_empty())
            .collect();
        if !remaining.is_empty() {
            return Err(conflict_error(&remaining));
        }
    }
    entries = trial;
    let unchanged = merged == live_obj;
    let mut me = me;
    if unchanged {
        // kube stamps the time only when the apply changed the object.
        me.time = last.as_ref().and_then(|l| l.time.clone());
    }
    if !me.fields.is_empty() {
        entries.push(me);
    }
    set_managed_fields_creating(&mut merged, entries);
    if writer.manager == KUBECTL && last_applied(&live_obj).is_some() {
        sync_last_applied(&mut merged, config);
    }
    Ok(merged)
}

/// kubectl's server-side apply manager, the one kube lets upgrade client-side applies.
const KUBECTL: &str = "kubectl";

/// The annotation client-side `kubectl apply` keeps its last configuration in.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

fn last_applied(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/annotations")?.get(LAST_APPLIED)?.as_str()
}

/// The fields of the last client-side configuration, if the live object still has the values
/// it set (kube's lastAppliedManager).
fn allowed_from_last_applied<S: TypeSchema>(live: &Value, schema: &S) -> Option<FieldSet> {
    let last: Value = serde_json::from_str(last_applied(live)?).ok()?;
    // The annotation is plain JSON (no typed zero values); the live object is typed.
    let comparison = compare(Some(&last), Some(&with_typed_skeleton(live, schema)), schema);
    comparison.modified.is_empty().then(|| to_field_set(&last, schema))
}

/// Keeps the client-side annotation in step with kubectl's server-side applies, so a later
/// client-side apply computes its patch from what was really applied (kube's
/// lastAppliedUpdater).
fn sync_last_applied(obj: &mut Value, config: &Value) {
    let mut applied = config.clone();
    if let Some(annotations) = applied.pointer_mut("/metadata/annotations").and_then(Value::as_object_mut) {
        annotations.remove(LAST_APPLIED);
        if annotations.is_empty() {
            if let Some(meta) = applied.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("annotations");
            }
        }
    }
    let text = applied.to_string();
    if let Some(annotations) = obj.pointer_mut("/metadata/annotations").and_then(Value::as_object_mut) {
        annotations.insert(LAST_APPLIED.into(), Value::String(text));
    }
}

fn set_managed_fields_creating(obj: &mut Value, entries: Vec<Entry>) {
    if let Some(o) = obj.as_object_mut() {
        o.entry("metadata").or_insert_with(|| json!({}));
    }
    set_managed_fields(obj, entries);
}

/// Go omits empty maps and lists (`omitempty`): a map or list that removal emptied disappears.
fn drop_emptied<S: TypeSchema>(pruned: &Value, original: &Value, schema: &S) -> Value {
    match (pruned, original) {
        (Value::Object(p), Value::Object(o)) => {
            let mut out = Map::new();
            for (k, v) in p {
                let child_schema = schema.field(k).0;
                let was = o.get(k);
                let v2 = match was {
                    Some(w) => drop_emptied(v, w, &child_schema),
                    None => v.clone(),
                };
                let emptied = match (&v2, was) {
                    (Value::Object(m), Some(Value::Object(w))) => {
                        m.is_empty() && !w.is_empty() && matches!(child_schema.shape(), Shape::Map { .. } | Shape::Untyped)
                    }
                    (Value::Array(a), Some(Value::Array(w))) => a.is_empty() && !w.is_empty(),
                    _ => false,
                };
                if !emptied {
                    out.insert(k.clone(), v2);
                }
            }
            Value::Object(out)
        }
        _ => pruned.clone(),
    }
}

fn manager_label(e: &Entry) -> String {
    let mut s = format!("{:?}", e.manager);
    if !e.subresource.is_empty() {
        s = format!("{s} with subresource {:?}", e.subresource);
    }
    match (e.operation, &e.time) {
        (Operation::Update, Some(t)) => format!("{s} using {} at {t}", e.api_version),
        (Operation::Update, None) => format!("{s} using {}", e.api_version),
        (Operation::Apply, _) => s,
    }
}

/// kube's apply conflict: 409 Conflict, one cause per field, the message listing them.
fn conflict_error(conflicts: &[(Entry, FieldSet)]) -> ApiError {
    let mut causes = Vec::new();
    let mut by_manager: Vec<(String, Vec<String>)> = Vec::new();
    for (entry, set) in conflicts {
        let label = manager_label(entry);
        let paths: Vec<String> = set.paths().iter().map(ToString::to_string).collect();
        for p in &paths {
            causes.push(Cause { reason: "FieldManagerConflict".into(), message: format!("conflict with {label}"), field: p.clone() });
        }
        by_manager.push((label, paths));
    }
    by_manager.sort();
    let message = if causes.len() == 1 {
        format!("Apply failed with 1 conflict: {}: {}", causes[0].message, causes[0].field)
    } else {
        let mut lines = Vec::new();
        for (label, paths) in &by_manager {
            lines.push(format!("conflicts with {label}:"));
            lines.extend(paths.iter().map(|p| format!("- {p}")));
        }
        format!("Apply failed with {} conflicts: {}", causes.len(), lines.join("\n"))
    };
    let mut err = ApiError::new(409, StatusReason::Conflict, message);
    err.details = Some(Box::new(kapi_apimachinery::status::Details { causes, ..Default::default() }));
    err
}
