//! String formats kube validates in custom resources (kube-openapi's `strfmt.Default`).
//!
//! kube strips a format the CRD's type does not support before validating (apiextensions'
//! `StripUnsupportedFormatsPostProcessor`), so an unknown format never fails an object; the
//! supported ones are checked with the same rules as Go's parsers (`net.ParseIP`,
//! `url.ParseRequestURI`, `time.Parse`, ...), reimplemented here.

use std::sync::OnceLock;

use regex::Regex;

use super::formats_net::{is_cidr, is_email, is_ipv4, is_ipv6, is_mac, is_request_uri};

/// String formats validated at kube's current compatibility version, as normalized names
/// (go-openapi drops `-`: `date-time` is `datetime`).
const SUPPORTED: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
    "k8sshortname",
    "k8slongname",
];

fn normalize(format: &str) -> String {
    format.replace('-', "")
}

/// The format kube keeps for validation given the node's kube-openapi types, or `None`.
pub(crate) fn effective_format<'a>(types: &[&str], format: &'a str) -> Option<&'a str> {
    if format.is_empty() {
        return None;
    }
    let schema_type = if types.len() == 1 { types[0] } else { "" };
    let keep = match schema_type {
        "" | "string" => SUPPORTED.contains(&normalize(format).as_str()),
        "integer" => format == "int32" || format == "int64",
        "number" => format == "float" || format == "double",
        _ => false,
    };
    keep.then_some(format)
}

/// Whether `format` names a string format of the registry (the format validator applies).
pub(crate) fn is_string_format(format: &str) -> bool {
    SUPPORTED.contains(&normalize(format).as_str())
}

fn re(cell: &'static OnceLock<Option<Regex>>, pattern: &str) -> Option<&'static Regex> {
    cell.get_or_init(|| Regex::new(pattern).ok()).as_ref()
}

macro_rules! matcher {
    ($name:ident, $pat:expr) => {
        fn $name(s: &str) -> bool {
            static CELL: OnceLock<Option<Regex>> = OnceLock::new();
            re(&CELL, $pat).is_some_and(|r| r.is_match(s))
        }
    };
}

matcher!(
    is_uuid,
    r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$"
);
matcher!(
    is_uuid3,
    r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$"
);
matcher!(
    is_uuid4,
    r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$"
);
matcher!(
    is_uuid5,
    r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$"
);
matcher!(
    rx_credit_card,
    r"^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35[0-9]{3})[0-9]{11})$"
);
matcher!(is_hexcolor, r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$");
matcher!(
    is_rgbcolor,
    r"^rgb\(\s*(0|[1-9][0-9]?|1[0-9][0-9]?|2[0-4][0-9]|25[0-5])\s*,\s*(0|[1-9][0-9]?|1[0-9][0-9]?|2[0-4][0-9]|25[0-5])\s*,\s*(0|[1-9][0-9]?|1[0-9][0-9]?|2[0-4][0-9]|25[0-5])\s*\)$"
);
matcher!(
    is_base64,
    r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$"
);
matcher!(rx_ssn, r"^[0-9]{3}[- ]?[0-9]{2}[- ]?[0-9]{4}$");
matcher!(is_short_name_rx, r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$");
matcher!(
    is_long_name_rx,
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
);
// kube-openapi's HostnamePattern; `\p{L}`/`\p{S}` approximated by "any non-ASCII, non-space".
matcher!(
    rx_hostname,
    r"^([a-zA-Z0-9[^\x00-\x7F\s]]((-?[a-zA-Z0-9[^\x00-\x7F\s]]{0,62})?)|([a-zA-Z0-9[^\x00-\x7F\s]](([a-zA-Z0-9\-[^\x00-\x7F\s]]{0,61}[a-zA-Z0-9[^\x00-\x7F\s]])?)(\.)){1,}([a-zA-Z[^\x00-\x7F\s]]){2,63})$"
);
matcher!(
    rx_datetime_time,
    r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$"
);
matcher!(rx_date, r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$");

fn is_hostname(s: &str) -> bool {
    rx_hostname(s) && s.len() <= 255 && s.split('.').all(|p| p.len() <= 63)
}

fn is_isbn10(s: &str) -> bool {
    let c: Vec<u8> = s
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b'-')
        .collect();
    if c.len() != 10
        || !c[..9].iter().all(u8::is_ascii_digit)
        || !(c[9].is_ascii_digit() || c[9] == b'X')
    {
        return false;
    }
    let mut sum: u32 = (0..9)
        .map(|i| (i as u32 + 1) * u32::from(c[i] - b'0'))
        .sum();
    sum += 10
        * if c[9] == b'X' {
            10
        } else {
            u32::from(c[9] - b'0')
        };
    sum.is_multiple_of(11)
}

fn is_isbn13(s: &str) -> bool {
    let c: Vec<u8> = s
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b'-')
        .collect();
    if c.len() != 13 || !c.iter().all(u8::is_ascii_digit) {
        return false;
    }
    let sum: u32 = (0..12)
        .map(|i| if i % 2 == 0 { 1 } else { 3 } * u32::from(c[i] - b'0'))
        .sum();
    u32::from(c[12] - b'0') == (10 - sum % 10) % 10
}

fn is_credit_card(s: &str) -> bool {
    let digits: String = s.chars().filter(char::is_ascii_digit).collect();
    if !rx_credit_card(&digits) {
        return false;
    }
    let mut sum = 0u32;
    for (i, d) in digits.bytes().rev().enumerate() {
        let mut n = u32::from(d - b'0');
        if i % 2 == 1 {
            n *= 2;
            if n >= 10 {
                n = n % 10 + 1;
            }
        }
        sum += n;
    }
    sum.is_multiple_of(10)
}

fn days_in(month: u32, year: u32) -> u32 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Go's `time.Parse("2006-01-02", s)`.
fn is_date(s: &str) -> bool {
    if !rx_date(s) {
        return false;
    }
    let num = |r: std::ops::Range<usize>| s[r].parse::<u32>().unwrap_or(0);
    let (y, m, d) = (num(0..4), num(5..7), num(8..10));
    (1..=12).contains(&m) && d >= 1 && d <= days_in(m, y)
}

/// kube-openapi's `IsDateTime`.
fn is_datetime(s: &str) -> bool {
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_lowercase();
    let parts: Vec<&str> = lower.split('t').collect();
    if parts.len() < 2 || !is_date(parts[0]) || !rx_datetime_time(parts[1]) {
        return false;
    }
    let t = parts[1];
    t.get(0..2).is_some_and(|h| h <= "23")
        && t.get(3..5).is_some_and(|m| m <= "59")
        && t.get(6..8).is_some_and(|x| x <= "59")
}

/// Go's `time.ParseDuration` grammar.
fn is_go_duration(s: &str) -> bool {
    let mut rest = s.strip_prefix(['-', '+']).unwrap_or(s);
    if rest == "0" {
        return true;
    }
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let mut frac_len = 0;
        let mut after = &rest[int_len..];
        if let Some(f) = after.strip_prefix('.') {
            frac_len = f.bytes().take_while(u8::is_ascii_digit).count();
            after = &f[frac_len..];
        }
        if int_len == 0 && frac_len == 0 {
            return false;
        }
        let unit_len = after
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(after.len());
        if !matches!(
            &after[..unit_len],
            "ns" | "us" | "µs" | "μs" | "ms" | "s" | "m" | "h"
        ) {
            return false;
        }
        rest = &after[unit_len..];
    }
    true
}

/// kube-openapi's `ParseDuration`: Go's syntax, or `<n> <unit>` groups such as `3 days`.
fn is_duration(s: &str) -> bool {
    if is_go_duration(s) {
        return true;
    }
    static CELL: OnceLock<Option<Regex>> = OnceLock::new();
    let Some(rx) = re(&CELL, r"(([0-9]+)\s*([A-Za-zµ]+))") else {
        return false;
    };
    const UNITS: &[&[&str]] = &[
        &["ns", "nano"],
        &["us", "µs", "micro"],
        &["ms", "milli"],
        &["s", "sec"],
        &["m", "min"],
        &["h", "hr", "hour"],
        &["d", "day"],
        &["w", "wk", "week"],
    ];
    let mut ok = false;
    for cap in rx.captures_iter(s) {
        if cap
            .get(2)
            .is_some_and(|d| d.as_str().parse::<i64>().is_err())
        {
            return false;
        }
        let unit = cap
            .get(3)
            .map(|u| u.as_str().trim().to_lowercase())
            .unwrap_or_default();
        for variants in UNITS {
            let last = variants.len() - 1;
            for (i, v) in variants.iter().enumerate() {
                if (i == last && unit.starts_with(v)) || v.eq_ignore_ascii_case(&unit) {
                    ok = true;
                }
            }
        }
    }
    ok
}

/// Whether `s` is valid for the (supported, string) `format`.
pub(crate) fn validates(format: &str, s: &str) -> bool {
    match normalize(format).as_str() {
        "bsonobjectid" => s.len() == 24 && s.bytes().all(|b| b.is_ascii_hexdigit()),
        "uri" => is_request_uri(s),
        "email" => is_email(s),
        "hostname" => is_hostname(s),
        "ipv4" => is_ipv4(s),
        "ipv6" => is_ipv6(s),
        "cidr" => is_cidr(s),
        "mac" => is_mac(s),
        "uuid" => is_uuid(s),
        "uuid3" => is_uuid3(s),
        "uuid4" => is_uuid4(s),
        "uuid5" => is_uuid5(s),
        "isbn" => is_isbn10(s) || is_isbn13(s),
        "isbn10" => is_isbn10(s),
        "isbn13" => is_isbn13(s),
        "creditcard" => is_credit_card(s),
        "ssn" => s.len() == 11 && rx_ssn(s),
        "hexcolor" => is_hexcolor(s),
        "rgbcolor" => is_rgbcolor(s),
        "byte" => is_base64(s),
        "password" => true,
        "date" => is_date(s),
        "duration" => is_duration(s),
        "datetime" => is_datetime(s),
        "k8sshortname" => s.len() <= 63 && is_short_name_rx(s),
        "k8slongname" => s.len() <= 253 && is_long_name_rx(s),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::validates;

    #[test]
    fn formats_accept_and_reject_like_kube() {
        let ok = [
            ("ipv4", "10.0.0.1"),
            ("ipv4", "010.000.000.001"),
            ("ipv6", "::1"),
            ("ipv6", "::ffff:1.2.3.4"),
            ("cidr", "10.0.0.0/8"),
            ("cidr", "fd00::/64"),
            ("mac", "00:1a:2B:3c:4d:5e"),
            ("mac", "0000.5e00.5301"),
            ("uuid", "123e4567-e89b-12d3-a456-426614174000"),
            ("uuid", "123E4567E89B12D3A456426614174000"),
            ("date", "2024-02-29"),
            ("date-time", "2024-02-29T10:00:00Z"),
            ("datetime", "2024-02-29t10:00:00.5+02:00"),
            ("duration", "1h30m"),
            ("duration", "3 days"),
            ("duration", "0"),
            ("email", "a.b+c@example.com"),
            ("email", "Jane <jane@example.com>"),
            ("hostname", "example.com"),
            ("hostname", "localhost"),
            ("uri", "https://example.com/a%20b?x=1"),
            ("uri", "/absolute/path"),
            ("uri", "mailto:x@y"),
            ("byte", "aGVsbG8="),
            ("bsonobjectid", "507f1f77bcf86cd799439011"),
            ("isbn", "0321751043"),
            ("isbn13", "978-0321751041"),
            ("creditcard", "4111 1111 1111 1111"),
            ("ssn", "123-45-6789"),
            ("hexcolor", "#FFF"),
            ("rgbcolor", "rgb(255, 0, 10)"),
            ("k8s-short-name", "a-b"),
            ("k8s-long-name", "a.b-c"),
        ];
        for (f, s) in ok {
            assert!(validates(f, s), "{f} should accept {s:?}");
        }
        let bad = [
            ("ipv4", "::1"),
            ("ipv4", "256.0.0.1"),
            ("ipv6", "1.2.3.4"),
            ("cidr", "10.0.0.0/33"),
            ("mac", "00:1a:2b"),
            ("uuid", "123"),
            ("date", "2023-02-29"),
            ("date", "2024-1-01"),
            ("datetime", "2024-01-01T25:00:00Z"),
            ("duration", "forever"),
            ("email", "nope"),
            ("hostname", "-bad-.com"),
            ("uri", "relative/path"),
            ("uri", "http://a b"),
            ("byte", "abc"),
            ("isbn10", "0321751044"),
            ("ssn", "123456789"),
            ("hexcolor", "#GGG"),
            ("k8s-short-name", "a-"),
            ("k8s-long-name", "a.-"),
        ];
        for (f, s) in bad {
            assert!(!validates(f, s), "{f} should reject {s:?}");
        }
    }
}
