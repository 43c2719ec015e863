//! JSON forms of the messages Kubernetes serializes specially: times, durations, quantities.

use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::ProtobufError;

/// Go's zero `time.Time` in Unix seconds: a Time with these seconds and no nanos is "unset".
const GO_ZERO_TIME: i64 = -62_135_596_800;

/// `metav1.Time` / `metav1.MicroTime` JSON: RFC 3339 UTC, seconds or microseconds.
pub(crate) fn format_time(seconds: i64, nanos: i32, micro: bool) -> Option<String> {
    if seconds == GO_ZERO_TIME && nanos == 0 {
        return None;
    }
    let t = OffsetDateTime::from_unix_timestamp(seconds).ok()?;
    let (y, mo, d) = (t.year(), u8::from(t.month()), t.day());
    let (h, mi, s) = (t.hour(), t.minute(), t.second());
    Some(if micro {
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{:06}Z", nanos.max(0) / 1000)
    } else {
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
    })
}

/// Parses kube's RFC 3339 times into Unix seconds and nanos.
pub(crate) fn parse_time(text: &str, field: &str) -> Result<(i64, i32), ProtobufError> {
    let t = OffsetDateTime::parse(text, &Rfc3339)
        .map_err(|e| ProtobufError::value(field, format!("{text:?} is not an RFC 3339 time: {e}")))?;
    Ok((t.unix_timestamp(), t.nanosecond() as i32))
}

/// Go's `time.Duration.String()`: `1h2m3.5s`, `150ms`, `0s`.
pub(crate) fn format_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let neg = nanos < 0;
    let n = nanos.unsigned_abs();
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    if n < 1_000_000_000 {
        // Sub-second: the largest unit that keeps an integer part.
        let (unit, div) = if n < 1_000 {
            ("ns", 1)
        } else if n < 1_000_000 {
            ("µs", 1_000)
        } else {
            ("ms", 1_000_000)
        };
        out.push_str(&frac(n, div));
        out.push_str(unit);
        return out;
    }
    let hours = n / 3_600_000_000_000;
    let minutes = (n / 60_000_000_000) % 60;
    let secs = n % 60_000_000_000;
    if hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if hours > 0 || minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    out.push_str(&frac(secs, 1_000_000_000));
    out.push('s');
    out
}

fn frac(value: u64, div: u64) -> String {
    let whole = value / div;
    let rest = value % div;
    if rest == 0 {
        return whole.to_string();
    }
    let width = div.to_string().len() - 1;
    let digits = format!("{rest:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// Parses Go duration strings (`1h2m3.5s`, `-1.5h`, `300ms`, `0`).
pub(crate) fn parse_duration(text: &str, field: &str) -> Result<i64, ProtobufError> {
    let bad = || ProtobufError::value(field, format!("{text:?} is not a duration"));
    let (neg, mut rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(bad());
    }
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let num_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(bad)?;
        let value: f64 = rest[..num_len].parse().map_err(|_| bad())?;
        rest = &rest[num_len..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return Err(bad()),
        };
        total += value * scale;
        rest = &rest[unit_len..];
    }
    let total = total.round();
    if total > i64::MAX as f64 {
        return Err(bad());
    }
    Ok(if neg { -(total as i64) } else { total as i64 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        assert_eq!(format_time(0, 0, false).as_deref(), Some("1970-01-01T00:00:00Z"));
        assert_eq!(format_time(1_700_000_000, 123_456_789, true).as_deref(), Some("2023-11-14T22:13:20.123456Z"));
        assert_eq!(format_time(GO_ZERO_TIME, 0, false), None);
        assert_eq!(parse_time("2023-11-14T22:13:20Z", "t").unwrap(), (1_700_000_000, 0));
        assert_eq!(parse_time("2023-11-14T22:13:20.123456Z", "t").unwrap(), (1_700_000_000, 123_456_000));
        assert!(parse_time("yesterday", "t").is_err());
    }

    #[test]
    fn durations_like_go() {
        for (ns, text) in [
            (0, "0s"),
            (1_500_000_000, "1.5s"),
            (3_723_000_000_000, "1h2m3s"),
            (60_000_000_000, "1m0s"),
            (300_000_000, "300ms"),
            (-90_000_000_000, "-1m30s"),
        ] {
            assert_eq!(format_duration(ns), text);
            assert_eq!(parse_duration(text, "d").unwrap(), ns, "{text}");
        }
        assert!(parse_duration("5 minutes", "d").is_err());
    }
}
