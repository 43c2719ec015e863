//! kube's value types for the `quantity`, `ip`, `cidr` and `url` libraries, as opaque CEL
//! values, with the parsing rules kube applies (no IPv4-mapped IPv6 addresses or zones, URLs
//! that are absolute URIs or absolute paths, Kubernetes quantity syntax).

use std::cmp::Ordering;
use std::net::IpAddr;

use cel::objects::Opaque;

use super::library;

/// A parsed `resource.Quantity`: `mant * 10^exp` (binary suffixes are folded into `mant`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Quantity {
    pub mant: i128,
    pub exp: i32,
}

impl Opaque for Quantity {
    fn runtime_type_name(&self) -> &str {
        library::QUANTITY
    }
}

impl Quantity {
    /// Parses kube's quantity syntax: `<signed number><suffix>` where the suffix is a binary SI
    /// (Ki..Ei), decimal SI (n u m "" k M G T P E) or decimal exponent (e3, E-2) suffix, into
    /// the value `resource.ParseQuantity` keeps: the magnitude rounded up to a whole nano unit
    /// and capped at 2^63-1. Any length of digits and any int32 exponent parse, as in kube
    /// (the decoder accepts them, so `isQuantity` must too).
    pub(crate) fn parse(s: &str) -> Option<Quantity> {
        let num_end = s.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-')).unwrap_or(s.len());
        let (num, suffix) = s.split_at(num_end);
        let (neg, digits) = match num.as_bytes().first() {
            Some(b'-') => (true, &num[1..]),
            Some(b'+') => (false, &num[1..]),
            _ => (false, num),
        };
        if digits.is_empty() || digits.matches('.').count() > 1 || digits.contains(['+', '-']) || digits == "." {
            return None;
        }
        let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
        let (exp10, binary) = match suffix {
            "" => (0, 0),
            "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => (0, 10 * (1 + "KMGTPE".find(&suffix[..1])? as u32)),
            "n" => (-9, 0),
            "u" => (-6, 0),
            "m" => (-3, 0),
            "k" => (3, 0),
            "M" => (6, 0),
            "G" => (9, 0),
            "T" => (12, 0),
            "P" => (15, 0),
            "E" => (18, 0),
            s if s.starts_with(['e', 'E']) => (s[1..].parse::<i32>().ok()?, 0),
            _ => return None,
        };
        let all: String = int.chars().chain(frac.chars()).collect();
        let significant = all.trim_start_matches('0');
        let exp = i64::from(exp10) - frac.len() as i64;
        let magnitude = nano_magnitude(significant, exp, binary);
        Some(Quantity { mant: if neg { -magnitude } else { magnitude }, exp: -9 })
    }

    fn aligned(&self, o: &Quantity) -> Option<(i128, i128)> {
        let e = self.exp.min(o.exp);
        let scale = |q: &Quantity| q.mant.checked_mul(10i128.checked_pow((q.exp - e) as u32)?);
        Some((scale(self)?, scale(o)?))
    }

    pub(crate) fn as_f64(&self) -> f64 {
        self.mant as f64 * 10f64.powi(self.exp)
    }

    pub(crate) fn cmp(&self, o: &Quantity) -> Ordering {
        match self.aligned(o) {
            Some((a, b)) => a.cmp(&b),
            None => self.as_f64().partial_cmp(&o.as_f64()).unwrap_or(Ordering::Equal),
        }
    }

    pub(crate) fn add(&self, o: &Quantity, sign: i128) -> Option<Quantity> {
        let (a, b) = self.aligned(o)?;
        Some(Quantity { mant: a.checked_add(sign.checked_mul(b)?)?, exp: self.exp.min(o.exp) })
    }

    /// The value as an int64, when it is a whole number that fits.
    pub(crate) fn as_i64(&self) -> Option<i64> {
        let v = if self.exp >= 0 {
            self.mant.checked_mul(10i128.checked_pow(self.exp as u32)?)?
        } else {
            let d = 10i128.checked_pow((-self.exp) as u32)?;
            if self.mant % d != 0 {
                return None;
            }
            self.mant / d
        };
        i64::try_from(v).ok()
    }
}

/// kube's cap on a quantity, 2^63-1, in nano units.
const MAX_NANOS: i128 = i64::MAX as i128 * 1_000_000_000;

/// `digits * 10^exp * 2^binary` (digits without leading zeros) in nano units, rounded up and
/// capped at [`MAX_NANOS`], as `resource.ParseQuantity` rounds and caps its exact value.
fn nano_magnitude(digits: &str, exp: i64, binary: u32) -> i128 {
    if digits.is_empty() {
        return 0;
    }
    // Beyond 36 significant digits the value is kept to 36, a dropped non-zero digit rounding
    // the magnitude up (kube keeps every digit, but rounds to nano units and caps at 2^63-1).
    let kept = &digits[..digits.len().min(36)];
    let dropped = &digits[kept.len()..];
    let mut mant: i128 = kept.bytes().fold(0, |m, b| m * 10 + i128::from(b - b'0'));
    let mut exp = exp + dropped.len() as i64 + 9;
    if dropped.bytes().any(|b| b != b'0') {
        mant += 1;
    }
    // Fold in 2^binary, giving up low digits (rounding up) while the product would overflow.
    let factor = 1i128 << binary;
    while mant.checked_mul(factor).is_none() {
        mant = mant / 10 + i128::from(mant % 10 != 0);
        exp += 1;
    }
    mant *= factor;
    if exp >= 0 {
        // 10^exp beyond 38 digits, or a product past the cap, is capped.
        let scale = u32::try_from(exp).ok().and_then(|e| 10i128.checked_pow(e));
        return scale.and_then(|s| mant.checked_mul(s)).map_or(MAX_NANOS, |v| v.min(MAX_NANOS));
    }
    // Below one nano unit: divide, rounding up (a non-zero value is at least 1n).
    match u32::try_from(-exp).ok().and_then(|e| 10i128.checked_pow(e)) {
        Some(d) => (mant / d + i128::from(mant % d != 0)).min(MAX_NANOS),
        None => 1,
    }
}

/// An IP address (kube's `net.IP`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ip(pub IpAddr);

impl Opaque for Ip {
    fn runtime_type_name(&self) -> &str {
        library::IP
    }
}

/// kube's `ip()` parsing: no zones, no IPv4-mapped IPv6.
pub(crate) fn parse_ip(s: &str) -> Result<IpAddr, String> {
    if s.contains('%') {
        return Err(format!("IP address with zone value is not allowed: {s}"));
    }
    let ip: IpAddr = s.parse().map_err(|_| format!("IP Address {s:?} parse error during conversion from string"))?;
    if let IpAddr::V6(v6) = ip {
        if v6.to_ipv4_mapped().is_some() {
            return Err(format!("IPv4-mapped IPv6 address is not allowed: {s}"));
        }
    }
    Ok(ip)
}

/// A CIDR (kube's `net.CIDR`): the address as written and the prefix length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cidr {
    pub ip: IpAddr,
    pub len: u8,
}

impl Opaque for Cidr {
    fn runtime_type_name(&self) -> &str {
        library::CIDR
    }
}

fn bits(ip: &IpAddr) -> (u128, u8) {
    match ip {
        IpAddr::V4(v4) => (u128::from(u32::from(*v4)), 32),
        IpAddr::V6(v6) => (u128::from(*v6), 128),
    }
}

impl Cidr {
    pub(crate) fn parse(s: &str) -> Result<Cidr, String> {
        let err = || format!("network address parse error during conversion from string: {s}");
        let (a, l) = s.split_once('/').ok_or_else(err)?;
        let ip = parse_ip(a).map_err(|_| err())?;
        let len: u8 = l.parse().map_err(|_| err())?;
        if len > bits(&ip).1 || (l.len() > 1 && l.starts_with('0')) {
            return Err(err());
        }
        Ok(Cidr { ip, len })
    }

    fn mask(&self, ip: &IpAddr) -> Option<u128> {
        let (v, width) = bits(ip);
        if width != bits(&self.ip).1 {
            return None;
        }
        let shift = u32::from(width - self.len);
        Some(if shift >= 128 { 0 } else { v >> shift })
    }

    pub(crate) fn contains_ip(&self, ip: &IpAddr) -> bool {
        self.mask(ip).is_some_and(|m| Some(m) == self.mask(&self.ip))
    }

    pub(crate) fn contains_cidr(&self, o: &Cidr) -> bool {
        o.len >= self.len && self.contains_ip(&o.ip)
    }

    pub(crate) fn masked(&self) -> Cidr {
        let (v, width) = bits(&self.ip);
        let shift = u32::from(width - self.len);
        let m = if shift >= 128 { 0 } else { (v >> shift) << shift };
        let ip = match self.ip {
            IpAddr::V4(_) => IpAddr::V4((m as u32).into()),
            IpAddr::V6(_) => IpAddr::V6(m.into()),
        };
        Cidr { ip, len: self.len }
    }
}

/// A parsed URL (kube's `URL`): absolute URIs and absolute paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Url {
    pub scheme: String,
    pub host: String,
    pub path: String,
    pub query: String,
}

impl Opaque for Url {
    fn runtime_type_name(&self) -> &str {
        library::URL
    }
}

impl Url {
    pub(crate) fn parse(s: &str) -> Result<Url, String> {
        let err = || format!("URL {s:?} parse error during conversion from string");
        if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(err());
        }
        let s = s.split_once('#').map_or(s, |(a, _)| a);
        let (rest, query) = s.split_once('?').unwrap_or((s, ""));
        if rest.starts_with('/') {
            return Ok(Url { scheme: String::new(), host: String::new(), path: rest.into(), query: query.into() });
        }
        let (scheme, after) = rest.split_once(':').ok_or_else(err)?;
        let valid_scheme = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
        if !valid_scheme {
            return Err(err());
        }
        let (host, path) = match after.strip_prefix("//") {
            Some(a) => match a.find('/') {
                Some(i) => (&a[..i], &a[i..]),
                None => (a, ""),
            },
            None => ("", after),
        };
        let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
        Ok(Url { scheme: scheme.into(), host: host.into(), path: path.into(), query: query.into() })
    }

    pub(crate) fn hostname(&self) -> &str {
        if let Some(rest) = self.host.strip_prefix('[') {
            return rest.split_once(']').map_or(rest, |(h, _)| h);
        }
        self.host.rsplit_once(':').map_or(&self.host, |(h, _)| h)
    }

    pub(crate) fn port(&self) -> &str {
        let tail = match self.host.rfind(']') {
            Some(i) => &self.host[i + 1..],
            None => &self.host,
        };
        tail.rsplit_once(':').map_or("", |(_, p)| p)
    }
}

/// Percent-decodes a query component (`+` is a space).
pub(crate) fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 3 <= b.len() && s.is_char_boundary(i + 1) && s.is_char_boundary(i + 3) => {
                match u8::from_str_radix(&s[i + 1..i + 3], 16) {
                    Ok(x) => {
                        out.push(x);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
