//! Static signatures and costs of the functions rules may call: CEL's standard functions, the
//! strings and lists extensions, and kube's libraries (regex, lists, url, quantity, ip, cidr,
//! format, optional, sets). The run-time implementations live in [`super::funcs`].

use super::check::{factor, Est, TypeError};
use super::types::{Decl, Ty, MAX_REQUEST_SIZE_BYTES};

pub(crate) const QUANTITY: &str = "kubernetes.Quantity";
pub(crate) const URL: &str = "kubernetes.URL";
pub(crate) const IP: &str = "net.IP";
pub(crate) const CIDR: &str = "net.CIDR";
pub(crate) const FORMAT: &str = "kubernetes.NamedFormat";

/// Identifiers that name types (`type(x) == string`).
pub(crate) fn is_type_name(name: &str) -> bool {
    matches!(
        name,
        "int" | "uint" | "double" | "string" | "bytes" | "bool" | "list" | "map" | "null_type" | "type" | "dyn"
    )
}

/// Namespaces of qualified global functions.
pub(crate) fn is_namespace(name: &str) -> bool {
    matches!(name, "optional" | "format" | "sets" | "math" | "strings" | "lists")
}

fn e(ty: Ty, max: u64, cost: u64) -> Result<Est, TypeError> {
    Ok(Est { d: Decl::new(ty, max), cost })
}

fn no_overload(id: u64, f: &str, member: bool, a: &[&Est]) -> TypeError {
    let names: Vec<String> = a.iter().map(|x| x.d.ty.name()).collect();
    let sig = if member && !names.is_empty() {
        format!("{}.({})", names[0], names[1..].join(", "))
    } else {
        format!("({})", names.join(", "))
    };
    TypeError { id, msg: format!("found no matching overload for '{f}' applied to '{sig}'") }
}

fn is(t: &Ty, want: &Ty) -> bool {
    matches!(t, Ty::Dyn) || t == want
}

fn is_opaque(t: &Ty, name: &'static str) -> bool {
    matches!(t, Ty::Dyn) || *t == Ty::Opaque(name)
}

fn strings_ok(a: &[&Est]) -> bool {
    a.iter().all(|x| is(&x.d.ty, &Ty::String))
}

fn string_cost(a: &Est) -> u64 {
    factor(a.d.max, 0.1) + 1
}

fn list_elem(t: &Ty) -> Option<Decl> {
    match t {
        Ty::List(e) => Some((**e).clone()),
        Ty::Dyn => Some(Decl::dyn_()),
        _ => None,
    }
}

/// Qualified global functions (`optional.none()`, `format.dns1123Label()`, `sets.contains`).
pub(crate) fn global(id: u64, f: &str, a: &[&Est]) -> Result<Est, TypeError> {
    let base: u64 = a.iter().map(|x| x.cost).sum();
    let r = match (f, a.len()) {
        ("optional.none", 0) => e(Ty::Optional(Box::new(Ty::Dyn)), 0, 1),
        ("optional.of" | "optional.ofNonZeroValue", 1) => e(Ty::Optional(Box::new(a[0].d.ty.clone())), a[0].d.max, 1),
        ("format.named", 1) => e(Ty::Optional(Box::new(Ty::Opaque(FORMAT))), 0, 1),
        (f, 0) if f.starts_with("format.") && super::formats::named(&f["format.".len()..]).is_some() => {
            e(Ty::Opaque(FORMAT), 0, 1)
        }
        ("sets.contains" | "sets.equivalent" | "sets.intersects", 2) => {
            e(Ty::Bool, 0, a[0].d.max.max(1).saturating_mul(a[1].d.max.max(1)))
        }
        ("strings.quote", 1) => e(Ty::String, a[0].d.max * 2 + 2, string_cost(a[0])),
        ("math.greatest" | "math.least" | "math.abs" | "math.sign", _) => e(Ty::Dyn, 0, a.len() as u64 + 1),
        ("math.ceil" | "math.floor" | "math.round" | "math.trunc", 1) => e(Ty::Double, 0, 1),
        ("lists.range", 1) => e(Ty::List(Box::new(Decl::scalar(Ty::Int))), MAX_REQUEST_SIZE_BYTES, 1),
        _ => Err(TypeError { id, msg: format!("undeclared reference to '{f}' (in container '')") }),
    };
    r.map(|mut x| {
        x.cost = x.cost.saturating_add(base);
        x
    })
}

/// Unqualified functions and member functions; `a` holds the receiver first for members.
pub(crate) fn function(id: u64, f: &str, member: bool, a: &[&Est]) -> Result<Est, TypeError> {
    let t0 = a.first().map(|x| x.d.ty.clone()).unwrap_or(Ty::Dyn);
    let bad = || no_overload(id, f, member, a);
    let n = a.len();
    match f {
        "size" if n == 1 => match t0 {
            Ty::String | Ty::Bytes | Ty::List(_) | Ty::Map(_) | Ty::Object(_) | Ty::Dyn => e(Ty::Int, 0, 1),
            _ => Err(bad()),
        },
        "int" | "uint" | "double" | "bool" | "bytes" | "dyn" | "type" if n == 1 && !member => {
            let ty = match f {
                "int" => Ty::Int,
                "uint" => Ty::Uint,
                "double" => Ty::Double,
                "bool" => Ty::Bool,
                "bytes" => Ty::Bytes,
                "type" => Ty::Type,
                _ => a[0].d.ty.clone(),
            };
            e(ty, a[0].d.max, 1)
        }
        "string" if n == 1 && !member => e(Ty::String, a[0].d.max.max(20), 1),
        "duration" if n == 1 && !member => match t0 {
            Ty::String | Ty::Duration | Ty::Dyn => e(Ty::Duration, 0, 1),
            _ => Err(bad()),
        },
        "timestamp" if n == 1 && !member => match t0 {
            Ty::String | Ty::Timestamp | Ty::Int | Ty::Dyn => e(Ty::Timestamp, 0, 1),
            _ => Err(bad()),
        },
        "getHours" | "getMinutes" | "getSeconds" | "getMilliseconds" if member && n == 1 && t0 == Ty::Duration => {
            e(Ty::Int, 0, 1)
        }
        "getHours" | "getMinutes" | "getSeconds" | "getMilliseconds" | "getFullYear" | "getMonth" | "getDayOfMonth"
        | "getDayOfWeek" | "getDayOfYear" | "getDate"
            if member && (n == 1 || (n == 2 && is(&a[1].d.ty, &Ty::String))) && is(&t0, &Ty::Timestamp) =>
        {
            e(Ty::Int, 0, 1)
        }
        "matches" | "find" | "findAll" if (2..=3).contains(&n) && strings_ok(&a[..2]) => {
            let cost = factor(a[0].d.max, 0.1).max(1).saturating_mul(factor(a[1].d.max, 0.25).max(1));
            let ty = match f {
                "matches" => Ty::Bool,
                "find" => Ty::String,
                _ => Ty::List(Box::new(Decl::new(Ty::String, a[0].d.max))),
            };
            e(ty, a[0].d.max, cost)
        }
        "contains" | "startsWith" | "endsWith" if n == 2 && strings_ok(a) => e(Ty::Bool, 0, string_cost(a[0])),
        "lowerAscii" | "upperAscii" | "trim" if n == 1 && strings_ok(a) => e(Ty::String, a[0].d.max, string_cost(a[0])),
        "reverse" if n == 1 => match t0 {
            Ty::String | Ty::List(_) | Ty::Dyn => e(t0, a[0].d.max, string_cost(a[0])),
            _ => Err(bad()),
        },
        "replace" if (3..=4).contains(&n) && strings_ok(&a[..3]) => {
            let max = a[0].d.max.saturating_mul(a[2].d.max.max(1));
            e(Ty::String, max, string_cost(a[0]).saturating_add(factor(max, 0.1)))
        }
        "split" if (2..=3).contains(&n) && strings_ok(&a[..2]) => {
            e(Ty::List(Box::new(Decl::new(Ty::String, a[0].d.max))), a[0].d.max, string_cost(a[0]))
        }
        "join" if (1..=2).contains(&n) && list_elem(&t0).is_some() => {
            let el = list_elem(&t0).map_or(0, |d| d.max);
            let sep = a.get(1).map_or(0, |s| s.d.max);
            let max = a[0].d.max.saturating_mul(el.saturating_add(sep));
            e(Ty::String, max, factor(max, 0.1) + 1)
        }
        "indexOf" | "lastIndexOf" if (2..=3).contains(&n) => match t0 {
            Ty::String => e(Ty::Int, 0, string_cost(a[0])),
            Ty::List(_) | Ty::Dyn => e(Ty::Int, 0, a[0].d.max.saturating_add(1)),
            _ => Err(bad()),
        },
        "substring" | "charAt" if (2..=3).contains(&n) && is(&t0, &Ty::String) => {
            e(Ty::String, a[0].d.max, string_cost(a[0]))
        }
        "format" if n == 2 && is(&t0, &Ty::String) => e(
            Ty::String,
            a[0].d.max.saturating_add(a[1].d.max.saturating_mul(20)),
            string_cost(a[0]).saturating_add(a[1].d.max),
        ),
        "isSorted" if n == 1 && list_elem(&t0).is_some() => e(Ty::Bool, 0, a[0].d.max.saturating_add(1)),
        "sum" | "min" | "max" if n == 1 && member && list_elem(&t0).is_some() => {
            let el = list_elem(&t0).map(|d| d.ty).unwrap_or(Ty::Dyn);
            e(el, 0, a[0].d.max.saturating_add(1))
        }
        "slice" | "flatten" | "distinct" | "sort" if member && list_elem(&t0).is_some() => {
            let cost = if f == "distinct" { a[0].d.max.saturating_mul(a[0].d.max) } else { a[0].d.max };
            e(t0, a[0].d.max, cost.saturating_add(1))
        }
        "url" | "isURL" if n == 1 && strings_ok(a) => {
            e(if f == "url" { Ty::Opaque(URL) } else { Ty::Bool }, 0, string_cost(a[0]))
        }
        "getScheme" | "getHost" | "getHostname" | "getPort" | "getEscapedPath" if n == 1 && is_opaque(&t0, URL) => {
            e(Ty::String, MAX_REQUEST_SIZE_BYTES, 1)
        }
        "getQuery" if n == 1 && is_opaque(&t0, URL) => {
            let strings =
                Decl::new(Ty::List(Box::new(Decl::new(Ty::String, MAX_REQUEST_SIZE_BYTES))), MAX_REQUEST_SIZE_BYTES);
            e(Ty::Map(Box::new(strings)), MAX_REQUEST_SIZE_BYTES, 1)
        }
        "quantity" | "isQuantity" if n == 1 && strings_ok(a) => {
            e(if f == "quantity" { Ty::Opaque(QUANTITY) } else { Ty::Bool }, 0, string_cost(a[0]))
        }
        "compareTo" | "isLessThan" | "isGreaterThan" | "add" | "sub" | "asInteger" | "asApproximateFloat"
        | "isInteger" | "sign"
            if member && is_opaque(&t0, QUANTITY) =>
        {
            let ty = match f {
                "compareTo" | "asInteger" | "sign" => Ty::Int,
                "asApproximateFloat" => Ty::Double,
                "add" | "sub" => Ty::Opaque(QUANTITY),
                _ => Ty::Bool,
            };
            e(ty, 0, 1)
        }
        "ip" | "isIP" | "cidr" | "isCIDR" if n == 1 && !member && strings_ok(a) => {
            let ty = match f {
                "ip" => Ty::Opaque(IP),
                "cidr" => Ty::Opaque(CIDR),
                _ => Ty::Bool,
            };
            e(ty, 0, string_cost(a[0]))
        }
        "isCanonical" if n == 2 => e(Ty::Bool, 0, string_cost(a[1])),
        "family"
        | "isUnspecified"
        | "isLoopback"
        | "isLinkLocalMulticast"
        | "isLinkLocalUnicast"
        | "isGlobalUnicast"
            if n == 1 && is_opaque(&t0, IP) =>
        {
            e(if f == "family" { Ty::Int } else { Ty::Bool }, 0, 1)
        }
        "containsIP" | "containsCIDR" | "prefixLength" | "masked" | "ip" if member && is_opaque(&t0, CIDR) => {
            let ty = match f {
                "prefixLength" => Ty::Int,
                "masked" => Ty::Opaque(CIDR),
                "ip" => Ty::Opaque(IP),
                _ => Ty::Bool,
            };
            e(ty, 0, 1)
        }
        "validate" if n == 2 && is_opaque(&t0, FORMAT) => {
            e(Ty::Optional(Box::new(Ty::List(Box::new(Decl::new(Ty::String, 256))))), 0, string_cost(a[1]))
        }
        "hasValue" if n == 1 => e(Ty::Bool, 0, 1),
        "value" if n == 1 => match t0 {
            Ty::Optional(inner) => e(*inner, MAX_REQUEST_SIZE_BYTES, 1),
            _ => e(Ty::Dyn, MAX_REQUEST_SIZE_BYTES, 1),
        },
        "orValue" if n == 2 => e(a[1].d.ty.clone(), a[1].d.max.max(MAX_REQUEST_SIZE_BYTES), 1),
        "or" if n == 2 => e(t0, 0, 1),
        _ => {
            if known_name(f) {
                Err(bad())
            } else {
                Err(TypeError { id, msg: format!("undeclared reference to '{f}' (in container '')") })
            }
        }
    }
}

fn known_name(f: &str) -> bool {
    const NAMES: &[&str] = &[
        "size",
        "int",
        "uint",
        "double",
        "bool",
        "bytes",
        "dyn",
        "type",
        "string",
        "matches",
        "find",
        "findAll",
        "contains",
        "startsWith",
        "endsWith",
        "lowerAscii",
        "upperAscii",
        "trim",
        "reverse",
        "replace",
        "split",
        "join",
        "indexOf",
        "lastIndexOf",
        "substring",
        "charAt",
        "format",
        "isSorted",
        "sum",
        "min",
        "max",
        "slice",
        "flatten",
        "distinct",
        "sort",
        "url",
        "isURL",
        "getScheme",
        "getHost",
        "getHostname",
        "getPort",
        "getEscapedPath",
        "getQuery",
        "quantity",
        "isQuantity",
        "compareTo",
        "isLessThan",
        "isGreaterThan",
        "add",
        "sub",
        "asInteger",
        "asApproximateFloat",
        "isInteger",
        "sign",
        "ip",
        "isIP",
        "cidr",
        "isCIDR",
        "isCanonical",
        "family",
        "isUnspecified",
        "isLoopback",
        "isLinkLocalMulticast",
        "isLinkLocalUnicast",
        "isGlobalUnicast",
        "containsIP",
        "containsCIDR",
        "prefixLength",
        "masked",
        "validate",
        "hasValue",
        "value",
        "orValue",
        "or",
        "duration",
        "timestamp",
        "getHours",
        "getMinutes",
        "getSeconds",
        "getMilliseconds",
        "getFullYear",
        "getMonth",
        "getDayOfMonth",
        "getDayOfWeek",
        "getDayOfYear",
        "getDate",
    ];
    NAMES.contains(&f)
}
