//! Durations and timestamps as kube hands them to rules: strings of a `format: duration`,
//! `date` or `date-time` schema become CEL `google.protobuf.Duration` and `Timestamp` values,
//! parsed as kube-openapi parses them (`strfmt.ParseDuration`, `time.Parse("2006-01-02")`,
//! `strfmt.ParseDateTime`), and `duration('...')` literals are checked with Go's
//! `time.ParseDuration`, as cel-go's literal validators do when a rule compiles.

use std::sync::OnceLock;

use chrono::{DateTime, Datelike, FixedOffset, NaiveDate, NaiveDateTime, TimeZone, Utc};
use regex::Regex;

const NANOS_PER_UNIT: &[(&str, u128)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("\u{b5}s", 1_000),
    ("\u{3bc}s", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// Go's `time.ParseDuration`, in nanoseconds: `None` where Go reports an error (no unit, an
/// unknown unit, a value outside an `int64` of nanoseconds).
pub(crate) fn go_duration(s: &str) -> Option<i64> {
    let (negative, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (int, after) = rest.split_at(int_len);
        let (frac, after) = match after.strip_prefix('.') {
            Some(f) => f.split_at(f.bytes().take_while(u8::is_ascii_digit).count()),
            None => ("", after),
        };
        if int.is_empty() && frac.is_empty() {
            return None;
        }
        let unit_len = after.find(|c: char| c == '.' || c.is_ascii_digit()).unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let per = NANOS_PER_UNIT.iter().find(|(u, _)| *u == unit)?.1;
        let whole: u128 = if int.is_empty() { 0 } else { int.parse().ok()? };
        let mut nanos = whole.checked_mul(per)?;
        if !frac.is_empty() {
            // digits past the 30th cannot change a nanosecond count
            let digits = &frac[..frac.len().min(30)];
            let scale = 10u128.checked_pow(digits.len() as u32)?;
            nanos = nanos.checked_add(digits.parse::<u128>().ok()?.checked_mul(per)? / scale)?;
        }
        total = total.checked_add(nanos)?;
        if total > 1u128 << 63 {
            return None;
        }
        rest = next;
    }
    if negative {
        Some(i64::try_from(-(total as i128)).ok()?)
    } else {
        i64::try_from(total).ok()
    }
}

/// kube-openapi's `ParseDuration`: Go's syntax, else every `<n> <unit>` group (`3 days`,
/// `1 week 2h`) summed, units matched as the Scala-style names it knows.
pub(crate) fn openapi_duration(s: &str) -> Option<i64> {
    if let Some(d) = go_duration(s) {
        return Some(d);
    }
    const UNITS: &[(&[&str], i64)] = &[
        (&["ns", "nano"], 1),
        (&["us", "\u{b5}s", "micro"], 1_000),
        (&["ms", "milli"], 1_000_000),
        (&["s", "sec"], 1_000_000_000),
        (&["m", "min"], 60_000_000_000),
        (&["h", "hr", "hour"], 3_600_000_000_000),
        (&["d", "day"], 86_400_000_000_000),
        (&["w", "wk", "week"], 604_800_000_000_000),
    ];
    static GROUP: OnceLock<Option<Regex>> = OnceLock::new();
    let group = GROUP.get_or_init(|| Regex::new(r"(([0-9]+)\s*([A-Za-z\x{b5}]+))").ok()).as_ref()?;
    let mut total: i64 = 0;
    let mut ok = false;
    for cap in group.captures_iter(s) {
        let factor: i64 = cap.get(2)?.as_str().parse().ok()?;
        let unit = cap.get(3)?.as_str().to_lowercase();
        for (variants, per) in UNITS {
            let last = variants.len() - 1;
            for (i, v) in variants.iter().enumerate() {
                if (i == last && unit.starts_with(v)) || v.eq_ignore_ascii_case(&unit) {
                    ok = true;
                    total = total.wrapping_add(factor.wrapping_mul(*per));
                }
            }
        }
    }
    ok.then_some(total)
}

/// `timestamp(string)`'s grammar and range (RFC 3339, years 1 to 9999), as cel-go parses it.
pub(crate) fn rfc3339(s: &str) -> Option<DateTime<FixedOffset>> {
    let t = DateTime::parse_from_rfc3339(s).ok()?;
    (1..=9999).contains(&t.naive_utc().year()).then_some(t)
}

fn utc(t: NaiveDateTime) -> DateTime<FixedOffset> {
    Utc.from_utc_datetime(&t).fixed_offset()
}

/// `time.Parse("2006-01-02", s)`: midnight UTC of that day.
pub(crate) fn date(s: &str) -> Option<DateTime<FixedOffset>> {
    if s.len() != 10 {
        return None;
    }
    NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()?.and_hms_opt(0, 0, 0).map(utc)
}

/// kube-openapi's `ParseDateTime`: RFC 3339 with `Z` or a `±hh:mm` offset, or a local time
/// without one (read as UTC), seconds optionally fractional; the empty string is the Unix epoch.
pub(crate) fn date_time(s: &str) -> Option<DateTime<FixedOffset>> {
    if s.is_empty() {
        return DateTime::from_timestamp(0, 0).map(|t| t.fixed_offset());
    }
    let b = s.as_bytes();
    let shape = b.len() >= 19
        && [4, 7].iter().all(|&i| b[i] == b'-')
        && b[10] == b'T'
        && [13, 16].iter().all(|&i| b[i] == b':')
        && [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18].iter().all(|&i| b[i].is_ascii_digit());
    if !shape {
        return None;
    }
    let naive = |t: &str| NaiveDateTime::parse_from_str(t, "%Y-%m-%dT%H:%M:%S%.f").ok();
    if let Some(t) = s.strip_suffix('Z') {
        return naive(t).map(utc);
    }
    let zone_at = s.len().saturating_sub(6);
    if s.len() >= 25 && matches!(b[zone_at], b'+' | b'-') && b[zone_at + 3] == b':' {
        return DateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f%:z").ok();
    }
    naive(s).map(utc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(go_duration("1h30m"), Some(5_400_000_000_000));
        assert_eq!(go_duration("-1.5s"), Some(-1_500_000_000));
        assert_eq!(go_duration("0"), Some(0));
        assert_eq!(go_duration(".5ms"), Some(500_000));
        assert_eq!(go_duration("2562047h47m16.854775807s"), Some(i64::MAX));
        assert_eq!(go_duration("-2562047h47m16.854775808s"), Some(i64::MIN));
        for bad in ["", "1", "1d", "1sabc", "s", "-", "2562047h47m16.854775808s", "1 s"] {
            assert_eq!(go_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn openapi_durations_take_unit_words() {
        assert_eq!(openapi_duration("3 days"), Some(3 * 86_400_000_000_000));
        assert_eq!(openapi_duration("1 week 2h"), Some(604_800_000_000_000 + 7_200_000_000_000));
        assert_eq!(openapi_duration("10 minutes"), Some(600_000_000_000));
        assert_eq!(openapi_duration("forever"), None);
    }

    #[test]
    fn dates_and_date_times() {
        assert_eq!(date("2024-02-29").map(|t| t.to_rfc3339()), Some("2024-02-29T00:00:00+00:00".into()));
        assert_eq!(date("2023-02-29"), None);
        let t = date_time("2024-01-02T03:04:05.5+02:00").map(|t| t.timestamp_millis());
        assert_eq!(t, Some(1_704_157_445_500));
        assert_eq!(date_time("2024-01-02T03:04:05Z").map(|t| t.timestamp()), Some(1_704_164_645));
        assert_eq!(date_time("2024-01-02T03:04:05").map(|t| t.timestamp()), Some(1_704_164_645));
        assert_eq!(date_time("").map(|t| t.timestamp()), Some(0));
        for bad in ["2024-01-02", "2024-01-02 03:04:05Z", "2024-13-02T03:04:05Z", "2024-01-02T03:04:05+0200"] {
            assert_eq!(date_time(bad), None, "{bad}");
        }
    }
}
