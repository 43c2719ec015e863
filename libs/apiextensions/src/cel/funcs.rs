//! The CEL environment kube gives rules, built once: CEL's standard library and macros, the
//! strings, lists and math extensions of the cel crate, and kube's libraries implemented here
//! (regex `find`/`findAll`, lists, url, quantity, ip, cidr, format, sets). Durations and
//! timestamps are the cel crate's (its `chrono` feature), with cel-go's `int(duration)` added.

use std::cmp::Ordering;
use std::sync::{Arc, OnceLock};

use cel::common::types::{DURATION_TYPE, DYN_TYPE, LIST_TYPE, STRING_TYPE};
use cel::common::value::{CowVal, Val};
use cel::objects::{Key, Map, OptionalValue};
use cel::{Env, ExecutionError, Value};

use super::formats;
use super::net::{parse_ip, unescape, Cidr, Ip, Quantity, Url};

type R = Result<Value, ExecutionError>;

fn fail(f: &str, msg: impl ToString) -> ExecutionError {
    ExecutionError::function_error(f, msg)
}

fn string<'a>(f: &str, v: &'a Value) -> Result<&'a str, ExecutionError> {
    match v {
        Value::String(s) => Ok(s.as_str()),
        _ => Err(fail(f, "expected a string")),
    }
}

fn opaque<'a, T: 'static>(f: &str, v: &'a Value) -> Result<&'a T, ExecutionError> {
    match v {
        Value::Opaque(o) => o.downcast_ref::<T>().ok_or_else(|| fail(f, "no such overload")),
        _ => Err(fail(f, "no such overload")),
    }
}

fn list<'a>(f: &str, v: &'a Value) -> Result<&'a [Value], ExecutionError> {
    match v {
        Value::List(l) => Ok(l.as_slice()),
        _ => Err(fail(f, "expected a list")),
    }
}

fn opaque_val<T: cel::objects::Opaque>(t: T) -> Value {
    Value::Opaque(Arc::new(t))
}

macro_rules! wrap {
    ($($name:ident => $imp:expr;)*) => {$(
        fn $name<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
            let vals = args.iter().map(|a| Value::try_from(a.as_ref())).collect::<Result<Vec<_>, _>>()?;
            let out: Box<dyn Val> = ($imp)(&vals[..])?.try_into()?;
            Ok(CowVal::Owned(out))
        }
    )*};
}

fn regex(f: &str, re: &Value) -> Result<regex::Regex, ExecutionError> {
    regex::Regex::new(string(f, re)?).map_err(|e| fail(f, e))
}

fn cmp_values(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
        (Value::UInt(x), Value::UInt(y)) => Some(x.cmp(y)),
        (Value::Float(x), Value::Float(y)) => x.partial_cmp(y),
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        (Value::Bytes(x), Value::Bytes(y)) => Some(x.cmp(y)),
        (Value::Opaque(_), Value::Opaque(_)) => {
            let q = |v: &Value| opaque::<Quantity>("compareTo", v).ok().cloned();
            Some(q(a)?.cmp(&q(b)?))
        }
        _ => None,
    }
}

fn extreme(f: &str, a: &[Value], want: Ordering) -> R {
    let items = list(f, &a[0])?;
    let mut best = items.first().ok_or_else(|| fail(f, format!("{f}(list) called on empty list")))?;
    for x in &items[1..] {
        match cmp_values(x, best) {
            Some(o) if o == want => best = x,
            Some(_) => {}
            None => return Err(fail(f, "no such overload")),
        }
    }
    Ok(best.clone())
}

fn index_of(f: &str, a: &[Value], last: bool) -> R {
    let items = list(f, &a[0])?;
    let pos = if last { items.iter().rposition(|x| *x == a[1]) } else { items.iter().position(|x| *x == a[1]) };
    Ok(Value::Int(pos.map_or(-1, |p| p as i64)))
}

fn sum(a: &[Value]) -> R {
    let items = list("sum", &a[0])?;
    let mut acc = match items.first() {
        None | Some(Value::Int(_)) => Value::Int(0),
        Some(Value::UInt(_)) => Value::UInt(0),
        Some(Value::Float(_)) => Value::Float(0.0),
        Some(Value::Opaque(_)) => opaque_val(Quantity { mant: 0, exp: 0 }),
        Some(_) => return Err(fail("sum", "no such overload")),
    };
    for x in items {
        acc = match (&acc, x) {
            (Value::Int(s), Value::Int(v)) => {
                Value::Int(s.checked_add(*v).ok_or_else(|| fail("sum", "integer overflow"))?)
            }
            (Value::UInt(s), Value::UInt(v)) => {
                Value::UInt(s.checked_add(*v).ok_or_else(|| fail("sum", "integer overflow"))?)
            }
            (Value::Float(s), Value::Float(v)) => Value::Float(s + v),
            (Value::Opaque(_), Value::Opaque(_)) => {
                let (s, v) = (opaque::<Quantity>("sum", &acc)?, opaque::<Quantity>("sum", x)?);
                opaque_val(s.add(v, 1).ok_or_else(|| fail("sum", "overflow"))?)
            }
            _ => return Err(fail("sum", "no such overload")),
        };
    }
    Ok(acc)
}

fn quantity_arg(f: &str, v: &Value) -> Result<Quantity, ExecutionError> {
    match v {
        Value::Int(i) => Ok(Quantity { mant: i128::from(*i), exp: 0 }),
        _ => opaque::<Quantity>(f, v).cloned(),
    }
}

fn url_of(a: &[Value]) -> Result<&Url, ExecutionError> {
    opaque::<Url>("url", &a[0])
}

fn query(a: &[Value]) -> R {
    let u = url_of(a)?;
    let mut out: std::collections::HashMap<Key, Vec<Value>> = std::collections::HashMap::new();
    for pair in u.query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        out.entry(Key::String(Arc::new(unescape(k)))).or_default().push(Value::String(Arc::new(unescape(v))));
    }
    let map = out.into_iter().map(|(k, v)| (k, Value::List(Arc::new(v)))).collect();
    Ok(Value::Map(Map { map: Arc::new(map) }))
}

fn ip_or_string(f: &str, v: &Value) -> Result<std::net::IpAddr, ExecutionError> {
    match v {
        Value::String(s) => parse_ip(s).map_err(|e| fail(f, e)),
        _ => Ok(opaque::<Ip>(f, v)?.0),
    }
}

fn cidr_or_string(f: &str, v: &Value) -> Result<Cidr, ExecutionError> {
    match v {
        Value::String(s) => Cidr::parse(s).map_err(|e| fail(f, e)),
        _ => opaque::<Cidr>(f, v).cloned(),
    }
}

fn validate_format(a: &[Value]) -> R {
    let f = opaque::<NamedFormat>("validate", &a[0])?;
    let validator = formats::named(&f.0).ok_or_else(|| fail("validate", "no such format"))?;
    let errs = validator(string("validate", &a[1])?);
    Ok(if errs.is_empty() {
        opaque_val(OptionalValue::none())
    } else {
        let l = errs.into_iter().map(|e| Value::String(Arc::new(e))).collect();
        opaque_val(OptionalValue::of(Value::List(Arc::new(l))))
    })
}

/// A named format of kube's `format` library.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NamedFormat(String);

impl cel::objects::Opaque for NamedFormat {
    fn runtime_type_name(&self) -> &str {
        super::library::FORMAT
    }
}

fn format_by_name(name: &str) -> R {
    formats::named(name)
        .map(|_| opaque_val(NamedFormat(name.to_string())))
        .ok_or_else(|| fail("format", "no such format"))
}

fn sets(a: &[Value], f: &str) -> R {
    let (x, y) = (list(f, &a[0])?, list(f, &a[1])?);
    let contains = |l: &[Value], m: &[Value]| m.iter().all(|v| l.contains(v));
    Ok(Value::Bool(match f {
        "sets.contains" => contains(x, y),
        "sets.equivalent" => contains(x, y) && contains(y, x),
        _ => y.iter().any(|v| x.contains(v)),
    }))
}

wrap! {
    find_fn => |a: &[Value]| -> R {
        let re = regex("find", &a[1])?;
        Ok(Value::String(Arc::new(re.find(string("find", &a[0])?).map_or("", |m| m.as_str()).to_string())))
    };
    find_all_fn => |a: &[Value]| -> R {
        let re = regex("findAll", &a[1])?;
        let limit = match a.get(2) { Some(Value::Int(n)) if *n >= 0 => *n as usize, _ => usize::MAX };
        let found = re.find_iter(string("findAll", &a[0])?).take(limit).map(|m| Value::String(Arc::new(m.as_str().into())));
        Ok(Value::List(Arc::new(found.collect())))
    };
    is_sorted_fn => |a: &[Value]| -> R {
        let items = list("isSorted", &a[0])?;
        Ok(Value::Bool(items.windows(2).all(|w| cmp_values(&w[0], &w[1]).is_some_and(|o| o != Ordering::Greater))))
    };
    sum_fn => sum;
    min_fn => |a: &[Value]| extreme("min", a, Ordering::Less);
    max_fn => |a: &[Value]| extreme("max", a, Ordering::Greater);
    index_of_fn => |a: &[Value]| index_of("indexOf", a, false);
    last_index_of_fn => |a: &[Value]| index_of("lastIndexOf", a, true);
    url_fn => |a: &[Value]| -> R { Ok(opaque_val(Url::parse(string("url", &a[0])?).map_err(|e| fail("url", e))?)) };
    is_url_fn => |a: &[Value]| -> R { Ok(Value::Bool(Url::parse(string("isURL", &a[0])?).is_ok())) };
    get_scheme_fn => |a: &[Value]| -> R { Ok(Value::String(Arc::new(url_of(a)?.scheme.clone()))) };
    get_host_fn => |a: &[Value]| -> R { Ok(Value::String(Arc::new(url_of(a)?.host.clone()))) };
    get_hostname_fn => |a: &[Value]| -> R { Ok(Value::String(Arc::new(url_of(a)?.hostname().to_string()))) };
    get_port_fn => |a: &[Value]| -> R { Ok(Value::String(Arc::new(url_of(a)?.port().to_string()))) };
    get_escaped_path_fn => |a: &[Value]| -> R { Ok(Value::String(Arc::new(url_of(a)?.path.clone()))) };
    get_query_fn => query;
    quantity_fn => |a: &[Value]| -> R {
        Quantity::parse(string("quantity", &a[0])?).map(opaque_val).ok_or_else(|| fail("quantity", "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"))
    };
    is_quantity_fn => |a: &[Value]| -> R { Ok(Value::Bool(Quantity::parse(string("isQuantity", &a[0])?).is_some())) };
    compare_to_fn => |a: &[Value]| -> R {
        let (x, y) = (quantity_arg("compareTo", &a[0])?, quantity_arg("compareTo", &a[1])?);
        Ok(Value::Int(x.cmp(&y) as i64))
    };
    is_less_than_fn => |a: &[Value]| -> R { Ok(Value::Bool(quantity_arg("isLessThan", &a[0])?.cmp(&quantity_arg("isLessThan", &a[1])?) == Ordering::Less)) };
    is_greater_than_fn => |a: &[Value]| -> R { Ok(Value::Bool(quantity_arg("isGreaterThan", &a[0])?.cmp(&quantity_arg("isGreaterThan", &a[1])?) == Ordering::Greater)) };
    add_fn => |a: &[Value]| -> R { quantity_arg("add", &a[0])?.add(&quantity_arg("add", &a[1])?, 1).map(opaque_val).ok_or_else(|| fail("add", "overflow")) };
    sub_fn => |a: &[Value]| -> R { quantity_arg("sub", &a[0])?.add(&quantity_arg("sub", &a[1])?, -1).map(opaque_val).ok_or_else(|| fail("sub", "overflow")) };
    as_integer_fn => |a: &[Value]| -> R { quantity_arg("asInteger", &a[0])?.as_i64().map(Value::Int).ok_or_else(|| fail("asInteger", "cannot convert value to integer")) };
    as_float_fn => |a: &[Value]| -> R { Ok(Value::Float(quantity_arg("asApproximateFloat", &a[0])?.as_f64())) };
    is_integer_fn => |a: &[Value]| -> R { Ok(Value::Bool(quantity_arg("isInteger", &a[0])?.as_i64().is_some())) };
    sign_fn => |a: &[Value]| -> R { Ok(Value::Int(quantity_arg("sign", &a[0])?.mant.signum() as i64)) };
    ip_fn => |a: &[Value]| -> R { Ok(opaque_val(Ip(parse_ip(string("ip", &a[0])?).map_err(|e| fail("ip", e))?))) };
    is_ip_fn => |a: &[Value]| -> R { Ok(Value::Bool(parse_ip(string("isIP", &a[0])?).is_ok())) };
    family_fn => |a: &[Value]| -> R { Ok(Value::Int(if opaque::<Ip>("family", &a[0])?.0.is_ipv4() { 4 } else { 6 })) };
    is_loopback_fn => |a: &[Value]| -> R { Ok(Value::Bool(opaque::<Ip>("isLoopback", &a[0])?.0.is_loopback())) };
    is_unspecified_fn => |a: &[Value]| -> R { Ok(Value::Bool(opaque::<Ip>("isUnspecified", &a[0])?.0.is_unspecified())) };
    cidr_fn => |a: &[Value]| -> R { Ok(opaque_val(Cidr::parse(string("cidr", &a[0])?).map_err(|e| fail("cidr", e))?)) };
    is_cidr_fn => |a: &[Value]| -> R { Ok(Value::Bool(Cidr::parse(string("isCIDR", &a[0])?).is_ok())) };
    contains_ip_fn => |a: &[Value]| -> R { Ok(Value::Bool(opaque::<Cidr>("containsIP", &a[0])?.contains_ip(&ip_or_string("containsIP", &a[1])?))) };
    contains_cidr_fn => |a: &[Value]| -> R { Ok(Value::Bool(opaque::<Cidr>("containsCIDR", &a[0])?.contains_cidr(&cidr_or_string("containsCIDR", &a[1])?))) };
    prefix_length_fn => |a: &[Value]| -> R { Ok(Value::Int(i64::from(opaque::<Cidr>("prefixLength", &a[0])?.len))) };
    masked_fn => |a: &[Value]| -> R { Ok(opaque_val(opaque::<Cidr>("masked", &a[0])?.masked())) };
    cidr_ip_fn => |a: &[Value]| -> R {
        match &a[0] {
            Value::Opaque(_) => Ok(opaque_val(Ip(opaque::<Cidr>("ip", &a[0])?.ip))),
            _ => Err(fail("ip", "no such overload")),
        }
    };
    validate_fn => validate_format;
    format_named_fn => |a: &[Value]| -> R {
        Ok(opaque_val(match format_by_name(string("format.named", &a[0])?) {
            Ok(v) => OptionalValue::of(v),
            Err(_) => OptionalValue::none(),
        }))
    };
    f_dns1123_label => |_: &[Value]| format_by_name("dns1123Label");
    f_dns1123_subdomain => |_: &[Value]| format_by_name("dns1123Subdomain");
    f_dns1035_label => |_: &[Value]| format_by_name("dns1035Label");
    f_qualified_name => |_: &[Value]| format_by_name("qualifiedName");
    f_label_value => |_: &[Value]| format_by_name("labelValue");
    f_uuid => |_: &[Value]| format_by_name("uuid");
    sets_contains_fn => |a: &[Value]| sets(a, "sets.contains");
    sets_equivalent_fn => |a: &[Value]| sets(a, "sets.equivalent");
    sets_intersects_fn => |a: &[Value]| sets(a, "sets.intersects");
    int_from_duration_fn => |a: &[Value]| -> R {
        match &a[0] {
            Value::Duration(d) => d.num_nanoseconds().map(Value::Int).ok_or_else(|| fail("int", "integer overflow")),
            _ => Err(fail("int", "no such overload")),
        }
    };
}

type F = cel::common::functions::Function;

fn build() -> Result<Env, cel::DeclarationError> {
    let mut env = Env::stdlib();
    env.add_extension(cel::extensions::strings)?;
    env.add_extension(cel::extensions::lists)?;
    env.add_extension(cel::extensions::math)?;
    let members: &[(&str, usize, F)] = &[
        ("find", 1, find_fn),
        ("findAll", 1, find_all_fn),
        ("findAll", 2, find_all_fn),
        ("isSorted", 0, is_sorted_fn),
        ("sum", 0, sum_fn),
        ("min", 0, min_fn),
        ("max", 0, max_fn),
        ("indexOf", 1, index_of_fn),
        ("lastIndexOf", 1, last_index_of_fn),
        ("getScheme", 0, get_scheme_fn),
        ("getHost", 0, get_host_fn),
        ("getHostname", 0, get_hostname_fn),
        ("getPort", 0, get_port_fn),
        ("getEscapedPath", 0, get_escaped_path_fn),
        ("getQuery", 0, get_query_fn),
        ("compareTo", 1, compare_to_fn),
        ("isLessThan", 1, is_less_than_fn),
        ("isGreaterThan", 1, is_greater_than_fn),
        ("add", 1, add_fn),
        ("sub", 1, sub_fn),
        ("asInteger", 0, as_integer_fn),
        ("asApproximateFloat", 0, as_float_fn),
        ("isInteger", 0, is_integer_fn),
        ("sign", 0, sign_fn),
        ("family", 0, family_fn),
        ("isLoopback", 0, is_loopback_fn),
        ("isUnspecified", 0, is_unspecified_fn),
        ("containsIP", 1, contains_ip_fn),
        ("containsCIDR", 1, contains_cidr_fn),
        ("prefixLength", 0, prefix_length_fn),
        ("masked", 0, masked_fn),
        ("ip", 0, cidr_ip_fn),
        ("validate", 1, validate_fn),
    ];
    for (name, n, f) in members {
        let target = if matches!(*name, "find" | "findAll") { STRING_TYPE } else { DYN_TYPE };
        let target = if matches!(*name, "isSorted" | "sum" | "min" | "max" | "indexOf" | "lastIndexOf") {
            LIST_TYPE
        } else {
            target
        };
        env.add_member_overload(name, &format!("kube_{name}_{n}"), target, (0..*n).map(|_| DYN_TYPE).collect(), *f)?;
    }
    let globals: &[(&str, usize, F)] = &[
        ("url", 1, url_fn),
        ("isURL", 1, is_url_fn),
        ("quantity", 1, quantity_fn),
        ("isQuantity", 1, is_quantity_fn),
        ("ip", 1, ip_fn),
        ("isIP", 1, is_ip_fn),
        ("cidr", 1, cidr_fn),
        ("isCIDR", 1, is_cidr_fn),
        ("format.named", 1, format_named_fn),
        ("format.dns1123Label", 0, f_dns1123_label),
        ("format.dns1123Subdomain", 0, f_dns1123_subdomain),
        ("format.dns1035Label", 0, f_dns1035_label),
        ("format.qualifiedName", 0, f_qualified_name),
        ("format.labelValue", 0, f_label_value),
        ("format.uuid", 0, f_uuid),
        ("sets.contains", 2, sets_contains_fn),
        ("sets.equivalent", 2, sets_equivalent_fn),
        ("sets.intersects", 2, sets_intersects_fn),
    ];
    for (name, n, f) in globals {
        env.add_overload(name, &format!("kube_{name}_{n}"), (0..*n).map(|_| DYN_TYPE).collect(), *f)?;
    }
    // cel-go's `int(duration)`, in nanoseconds, which the cel crate lacks
    env.add_overload("int", "kube_duration_to_int", vec![DURATION_TYPE], int_from_duration_fn)?;
    Ok(env)
}

/// The CEL environment of `x-kubernetes-validations` (and, later, ValidatingAdmissionPolicy),
/// built once per process and shared: functions are plain function pointers, so one
/// environment serves every thread. `None` only if the libraries clash (a programming error,
/// caught by the tests).
pub fn environment() -> Option<Arc<Env>> {
    static ENV: OnceLock<Option<Arc<Env>>> = OnceLock::new();
    ENV.get_or_init(|| build().ok().map(Arc::new)).clone()
}
