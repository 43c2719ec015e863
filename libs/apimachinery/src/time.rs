//! Timestamps as Kubernetes writes them, and kubectl's AGE formatting.

use std::time::Duration;

use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::OffsetDateTime;

/// `metav1.Time` form (`2006-01-02T15:04:05Z`): seconds precision, UTC, as creationTimestamp.
pub fn now_rfc3339() -> String {
    format_rfc3339(OffsetDateTime::now_utc())
}

/// `metav1.MicroTime` form (`2006-01-02T15:04:05.000000Z`), as in leases and managedFields.
pub fn now_rfc3339_micro() -> String {
    format_rfc3339_micro(OffsetDateTime::now_utc())
}

/// Formats an instant in `metav1.Time` form (converted to UTC).
pub fn format_rfc3339(t: OffsetDateTime) -> String {
    let fmt = format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
    t.to_offset(time::UtcOffset::UTC).format(&fmt).unwrap_or_default()
}

/// Formats an instant in `metav1.MicroTime` form (converted to UTC).
pub fn format_rfc3339_micro(t: OffsetDateTime) -> String {
    let fmt = format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]Z");
    t.to_offset(time::UtcOffset::UTC).format(&fmt).unwrap_or_default()
}

/// Parses an RFC 3339 timestamp (any offset, optional fraction); `None` when malformed.
pub fn parse_rfc3339(s: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(s, &Rfc3339).ok()
}

/// A short, 2-3 significant figure age as kube's `duration.HumanDuration` prints it.
pub fn human_duration(d: Duration) -> String {
    let seconds = d.as_secs();
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 { format!("{minutes}m") } else { format!("{minutes}m{s}s") };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 { format!("{hours}h") } else { format!("{hours}h{m}m") };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 { format!("{}d", hours / 24) } else { format!("{}d{h}h", hours / 24) };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 { format!("{}y", hours / 24 / 365) } else { format!("{}y{dy}d", hours / 24 / 365) };
    }
    format!("{}y", hours / 24 / 365)
}

/// Age of a timestamp relative to now, as kubectl's AGE column shows it (`<unknown>` when
/// the timestamp is missing or malformed, `<invalid>` when it is more than a second ahead).
pub fn age(timestamp: Option<&str>) -> String {
    let Some(t) = timestamp.and_then(parse_rfc3339) else {
        return "<unknown>".to_string();
    };
    let diff = OffsetDateTime::now_utc() - t;
    if diff.whole_seconds() < -1 {
        return "<invalid>".to_string();
    }
    human_duration(Duration::from_secs(u64::try_from(diff.whole_seconds()).unwrap_or(0)))
}

/// Why a Go duration did not parse; the texts are Go's `time.ParseDuration` errors, which
/// kube-apiserver passes through (flags, `?timeout=`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Not a duration at all.
    #[error("time: invalid duration {0:?}")]
    Invalid(String),
    /// A number without a unit (`10`).
    #[error("time: missing unit in duration {0:?}")]
    MissingUnit(String),
    /// A unit Go does not know.
    #[error("time: unknown unit {unit:?} in duration {input:?}")]
    UnknownUnit {
        /// The unit as written.
        unit: String,
        /// The whole input.
        input: String,
    },
}

/// Parses Go's `time.ParseDuration` syntax (`1h2m3.5s`, `500ms`, `0`), as kube-apiserver's
/// flags and `?timeout=` use it. A negative duration (`-1s`) is `Ok(None)`: every caller here
/// treats it as "no duration" or refuses it.
pub fn parse_go_duration(input: &str) -> Result<Option<Duration>, DurationError> {
    let invalid = || DurationError::Invalid(input.to_owned());
    let (negative, mut rest) = match input.as_bytes().first() {
        Some(b'-') => (true, &input[1..]),
        Some(b'+') => (false, &input[1..]),
        _ => (false, input),
    };
    if rest == "0" {
        return Ok(Some(Duration::ZERO));
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let number = &rest[..number_len];
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return Err(invalid());
        }
        let value: f64 = number.parse().map_err(|_| invalid())?;
        rest = &rest[number_len..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        let seconds_per_unit = match unit {
            "ns" => 1e-9,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => return Err(DurationError::MissingUnit(input.to_owned())),
            other => return Err(DurationError::UnknownUnit { unit: other.to_owned(), input: input.to_owned() }),
        };
        total += value * seconds_per_unit;
        rest = &rest[unit_len..];
    }
    // Go's `time.Duration` is int64 nanoseconds: longer durations (about 292 years) are
    // `invalid duration` there, so they are here, whatever the sign.
    if total * 1e9 >= i64::MAX as f64 {
        return Err(invalid());
    }
    if negative && total > 0.0 {
        return Ok(None);
    }
    Duration::try_from_secs_f64(total).map(Some).map_err(|_| invalid())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_duration_table() {
        let cases: &[(u64, &str)] = &[
            (0, "0s"),
            (5, "5s"),
            (119, "119s"),
            (120, "2m"),
            (182, "3m2s"),
            (9 * 60 + 59, "9m59s"),
            (10 * 60, "10m"),
            (179 * 60 + 59, "179m"),
            (3 * 3600, "3h"),
            (5 * 3600 + 30 * 60, "5h30m"),
            (8 * 3600, "8h"),
            (47 * 3600 + 59 * 60, "47h"),
            (48 * 3600, "2d"),
            (3 * 86400 + 4 * 3600, "3d4h"),
            (8 * 86400, "8d"),
            (729 * 86400, "729d"),
            (2 * 365 * 86400, "2y"),
            (2 * 365 * 86400 + 10 * 86400, "2y10d"),
            (8 * 365 * 86400, "8y"),
            (20 * 365 * 86400 + 40 * 86400, "20y"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(Duration::from_secs(*secs)), *want, "{secs}s");
        }
        assert_eq!(human_duration(Duration::from_millis(1999)), "1s");
    }

    #[test]
    fn go_durations_parse_as_go_parses_them() {
        assert_eq!(parse_go_duration("1m0s"), Ok(Some(Duration::from_secs(60))));
        assert_eq!(parse_go_duration("1h2m3s"), Ok(Some(Duration::from_secs(3723))));
        assert_eq!(parse_go_duration("1.5s"), Ok(Some(Duration::from_millis(1500))));
        assert_eq!(parse_go_duration("500ms"), Ok(Some(Duration::from_millis(500))));
        assert_eq!(parse_go_duration("0"), Ok(Some(Duration::ZERO)));
        assert_eq!(parse_go_duration("-1s"), Ok(None));
        assert_eq!(parse_go_duration("10").unwrap_err().to_string(), "time: missing unit in duration \"10\"");
        assert_eq!(parse_go_duration("abc").unwrap_err().to_string(), "time: invalid duration \"abc\"");
        assert_eq!(parse_go_duration("").unwrap_err().to_string(), "time: invalid duration \"\"");
        assert_eq!(parse_go_duration("3x").unwrap_err().to_string(), "time: unknown unit \"x\" in duration \"3x\"");
    }

    #[test]
    fn go_durations_beyond_int64_nanoseconds_are_invalid() {
        // Found by the go_duration fuzz target: these parsed to centuries Go refuses.
        assert_eq!(parse_go_duration("2562047h"), Ok(Some(Duration::from_secs(2_562_047 * 3600))));
        assert_eq!(parse_go_duration("2562048h").unwrap_err().to_string(), "time: invalid duration \"2562048h\"");
        assert_eq!(parse_go_duration("111111111111111.112m"), Err(DurationError::Invalid("111111111111111.112m".into())));
        assert_eq!(parse_go_duration("-9999999999h"), Err(DurationError::Invalid("-9999999999h".into())));
    }

    #[test]
    fn formats_and_parses() {
        let now = now_rfc3339();
        assert_eq!(now.len(), "2006-01-02T15:04:05Z".len());
        assert!(now.ends_with('Z'));
        let micro = now_rfc3339_micro();
        assert_eq!(micro.len(), "2006-01-02T15:04:05.000000Z".len());
        assert!(parse_rfc3339(&now).is_some());
        assert!(parse_rfc3339(&micro).is_some());
        let t = parse_rfc3339("2024-03-01T10:00:00+02:00").unwrap_or(OffsetDateTime::UNIX_EPOCH);
        assert_eq!(format_rfc3339(t), "2024-03-01T08:00:00Z");
        assert_eq!(format_rfc3339_micro(t), "2024-03-01T08:00:00.000000Z");
        assert!(parse_rfc3339("yesterday").is_none());
        assert_eq!(age(None), "<unknown>");
        assert_eq!(age(Some("2999-01-01T00:00:00Z")), "<invalid>");
        assert_eq!(age(Some(&now)).trim_end_matches('s').parse::<u64>().map(|s| s < 5).ok(), Some(true));
    }
}
