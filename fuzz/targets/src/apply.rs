//! Server-side apply (`application/apply-patch+yaml` configurations onto live objects) and
//! `metadata.managedFields` (FieldsV1), which clients send back inside objects.

use std::sync::OnceLock;

use kapi_fieldmanager::{apply, decode, encode, FieldSet, Operation, Writer};
use kapi_openapi::{apply_schema, OpenApi};
use serde_json::{json, Value};

use crate::{gvk_of, split_pair};

fn openapi() -> &'static OpenApi {
    static OPENAPI: OnceLock<OpenApi> = OnceLock::new();
    OPENAPI.get_or_init(|| OpenApi::new(Vec::new()))
}

fn writer(manager: &str, api_version: &str) -> Writer {
    Writer {
        manager: manager.to_owned(),
        api_version: api_version.to_owned(),
        subresource: String::new(),
        reset: FieldSet::new(),
        now: "2026-01-01T00:00:00Z".to_owned(),
    }
}

/// `live\0config`: an apply of `config` (the part after the NUL, JSON or YAML) onto `live`
/// (absent when the first part is not an object: a create), typed by the configuration's
/// built-in kind (a Deployment's schema for others). Asserts: refusals are 400, 409 or 422;
/// the result's managedFields decode and record the apply; applying the same configuration
/// again changes nothing and conflicts with nobody; another manager applying the very same
/// values does not conflict either (equal values are shared, not taken).
pub fn server_side_apply(data: &[u8]) {
    let (live, config) = split_pair(data);
    let Some(config) = crate::text(config).and_then(|t| serde_saphyr::from_str::<Value>(t).ok()).filter(Value::is_object) else {
        return;
    };
    let live: Option<Value> = serde_json::from_slice(live).ok().filter(Value::is_object);
    let builtin = gvk_of(&config).filter(|(g, v, k)| apply_schema(g, v, k).is_some());
    let (group, version, kind) = builtin.unwrap_or(("apps", "v1", "Deployment"));
    let Some(schema) = apply_schema(group, version, kind) else { panic!("no apply schema for {kind}") };
    let api_version = if group.is_empty() { version.to_owned() } else { format!("{group}/{version}") };
    let me = writer("fuzz", &api_version);
    let out = match apply(live.as_ref(), &config, &schema, &me, false) {
        Ok(out) => out,
        Err(e) => {
            assert!(matches!(e.code, 400 | 409 | 422), "{}: {}", e.code, e.message);
            return;
        }
    };
    // kube refuses a configuration its typed decoder cannot read before applying it (and
    // kapi's validation refuses what results): only well-typed ones must apply stably.
    let problems = openapi().field_problems(group, version, kind, &config, None);
    if !problems.type_errors.is_empty() {
        return;
    }
    let entries = match decode(&out) {
        Ok(entries) => entries.unwrap_or_default(),
        Err(e) => panic!("apply wrote managedFields that do not decode: {e}"),
    };
    if out.get("metadata").is_some_and(Value::is_object) {
        assert!(
            entries.iter().any(|e| e.manager == "fuzz" && e.operation == Operation::Apply) || entries.is_empty(),
            "the apply is not recorded: {entries:?}"
        );
    }
    match apply(Some(&out), &config, &schema, &me, false) {
        Ok(again) => assert_eq!(again, out, "re-applying the same configuration changed the object"),
        Err(e) => panic!("re-applying the same configuration failed: {}: {}", e.code, e.message),
    }
    if let Err(e) = apply(Some(&out), &config, &schema, &writer("other", &api_version), false) {
        assert_ne!(e.code, 409, "applying the same values conflicts: {}", e.message);
    }
}

/// A `managedFields` list (or one `fieldsV1` object). Asserts: a field set that parses prints
/// back to FieldsV1 that parses to the same set, and lists its paths so that they rebuild it;
/// decoded entries encode to managedFields that decode to the same entries.
pub fn fields_v1(data: &[u8]) {
    let Ok(value) = serde_json::from_slice::<Value>(data) else { return };
    if let Some(set) = FieldSet::from_fields_v1(&value) {
        let printed = set.to_fields_v1();
        assert_eq!(FieldSet::from_fields_v1(&printed).as_ref(), Some(&set), "FieldsV1 round trip: {printed}");
        assert_eq!(FieldSet::from_paths(&set.paths()).to_fields_v1(), printed, "paths do not rebuild the set");
    }
    let obj = json!({"metadata": {"managedFields": value}});
    if let Ok(Some(mut entries)) = decode(&obj) {
        let encoded = encode(entries.clone());
        let again = decode(&json!({"metadata": {"managedFields": encoded}}));
        let Ok(Some(mut again)) = again else { panic!("encoded managedFields do not decode: {again:?}") };
        let key = |e: &kapi_fieldmanager::Entry| (e.operation, e.time.clone(), e.manager.clone(), e.api_version.clone(), e.subresource.clone());
        entries.sort_by_key(key);
        again.sort_by_key(key);
        assert_eq!(again, entries, "managedFields round trip");
    }
}
