//! kube's `format` library: named string formats (`format.dns1123Label().validate(s)`) whose
//! validators give apimachinery's messages.

use kapi_apimachinery::validation as v;

/// A named format's validator: the messages for `s`, empty when valid.
pub(crate) type Validator = fn(&str) -> Vec<String>;

fn uuid(s: &str) -> Vec<String> {
    let ok = s.len() == 36
        && s.char_indices().all(|(i, c)| if matches!(i, 8 | 13 | 18 | 23) { c == '-' } else { c.is_ascii_hexdigit() });
    if ok {
        Vec::new()
    } else {
        vec!["does not match the UUID format".to_string()]
    }
}

fn labels_or_subdomain(s: &str) -> Vec<String> {
    v::is_dns1123_subdomain(s)
}

/// The validator of a named format, by its CEL name.
pub(crate) fn named(name: &str) -> Option<Validator> {
    Some(match name {
        "dns1123Label" => v::is_dns1123_label,
        "dns1123Subdomain" => labels_or_subdomain,
        "dns1035Label" => v::is_dns1035_label,
        "qualifiedName" => v::is_qualified_name,
        "labelValue" => v::is_valid_label_value,
        "uuid" => uuid,
        _ => return None,
    })
}
