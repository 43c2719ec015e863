//! kube's `resource.Quantity` as far as admission needs it: exact comparison and addition, and
//! the canonical `String()` that kube's messages and stored objects show (`2000m` is `2`,
//! `1024Mi` is `1Gi`), whatever spelling the client used.

use std::cmp::Ordering;

/// How a quantity was written, which decides how it is printed back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `m`, `k`, `M`, ... or no suffix.
    DecimalSI,
    /// `Ki`, `Mi`, ...
    BinarySI,
    /// `e3`, `E-2`.
    DecimalExponent,
}

/// An exact decimal `mant * 10^exp`, rounded up to nano units as kube parses it.
#[derive(Debug, Clone, Copy)]
pub struct Quantity {
    mant: i128,
    exp: i32,
    /// The spelling's family.
    pub format: Format,
}

const BINARY: &[(&str, u32)] = &[("Ki", 1), ("Mi", 2), ("Gi", 3), ("Ti", 4), ("Pi", 5), ("Ei", 6)];
const DECIMAL: &[(&str, i32)] =
    &[("n", -9), ("u", -6), ("m", -3), ("", 0), ("k", 3), ("M", 6), ("G", 9), ("T", 12), ("P", 15), ("E", 18)];

fn pow10(n: u32) -> Option<i128> {
    10i128.checked_pow(n)
}

impl Quantity {
    /// Zero, printed `0`.
    pub const ZERO: Quantity = Quantity { mant: 0, exp: 0, format: Format::DecimalSI };

    /// Parses a quantity (kube's syntax; the registry has already refused malformed ones).
    pub fn parse(text: &str) -> Option<Quantity> {
        let text = text.trim();
        let end = text.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-')).unwrap_or(text.len());
        let (number, suffix) = text.split_at(end);
        let (negative, digits) = match number.as_bytes().first() {
            Some(b'-') => (true, &number[1..]),
            Some(b'+') => (false, &number[1..]),
            _ => (false, number),
        };
        let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
        if int.len() + frac.len() == 0 || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
            return None;
        }
        let mut mant: i128 = 0;
        for b in int.bytes().chain(frac.bytes()) {
            mant = mant.checked_mul(10)?.checked_add(i128::from(b - b'0'))?;
        }
        let mut exp = -(frac.len() as i32);
        let format = if let Some(&(_, power)) = BINARY.iter().find(|(s, _)| *s == suffix) {
            mant = mant.checked_mul(1024i128.checked_pow(power)?)?;
            Format::BinarySI
        } else if let Some(&(_, e)) = DECIMAL.iter().find(|(s, _)| *s == suffix) {
            exp += e;
            Format::DecimalSI
        } else {
            let e: i32 = suffix.strip_prefix(['e', 'E'])?.parse().ok()?;
            exp = exp.checked_add(e)?;
            Format::DecimalExponent
        };
        if negative {
            mant = -mant;
        }
        Some(Quantity { mant, exp, format }.round_up_to_nano())
    }

    /// Parses a JSON value (a string, or a number some clients send).
    pub fn from_json(value: &serde_json::Value) -> Option<Quantity> {
        match value {
            serde_json::Value::String(s) => Quantity::parse(s),
            serde_json::Value::Number(n) => Quantity::parse(&n.to_string()),
            _ => None,
        }
    }

    fn round_up_to_nano(mut self) -> Quantity {
        if self.exp < -9 {
            let Some(div) = pow10((-9 - self.exp) as u32) else {
                return Quantity { mant: self.mant.signum().max(0), exp: -9, format: self.format };
            };
            let (q, r) = (self.mant / div, self.mant % div);
            self.mant = if r > 0 { q + 1 } else { q };
            self.exp = -9;
        }
        self
    }

    /// Whether the quantity is zero.
    pub fn is_zero(&self) -> bool {
        self.mant == 0
    }

    /// The two mantissas at a common exponent, when they fit.
    fn aligned(&self, other: &Quantity) -> Option<(i128, i128, i32)> {
        let exp = self.exp.min(other.exp);
        let a = self.mant.checked_mul(pow10((self.exp - exp) as u32)?)?;
        let b = other.mant.checked_mul(pow10((other.exp - exp) as u32)?)?;
        Some((a, b, exp))
    }

    fn as_f64(&self) -> f64 {
        self.mant as f64 * 10f64.powi(self.exp)
    }

    /// The sum; the format is this quantity's unless it is zero (as kube's `Add`).
    pub fn add(&self, other: &Quantity) -> Quantity {
        let format = if self.is_zero() { other.format } else { self.format };
        match self.aligned(other).and_then(|(a, b, exp)| Some((a.checked_add(b)?, exp))) {
            Some((mant, exp)) => Quantity { mant, exp, format },
            None => Quantity { mant: (self.as_f64() + other.as_f64()) as i128, exp: 0, format },
        }
    }

    /// Whether this quantity is larger than `request * ratio`, compared exactly when the
    /// numbers fit (kube's limit-to-request ratio check).
    pub fn exceeds_ratio(&self, request: &Quantity, ratio: &Quantity) -> bool {
        let product = request.mant.checked_mul(ratio.mant).map(|mant| Quantity { mant, exp: request.exp + ratio.exp, format: Format::DecimalSI });
        match product {
            Some(p) => self.compare(&p) == Ordering::Greater,
            None => self.as_f64() > request.as_f64() * ratio.as_f64(),
        }
    }

    /// `limit / request` with six decimals, as kube prints the ratio it refuses.
    pub fn ratio_text(limit: &Quantity, request: &Quantity) -> String {
        format!("{:.6}", limit.as_f64().abs() / request.as_f64().abs())
    }

    /// kube's `Quantity.Cmp`.
    pub fn compare(&self, other: &Quantity) -> Ordering {
        match self.aligned(other) {
            Some((a, b, _)) => a.cmp(&b),
            None => self.as_f64().partial_cmp(&other.as_f64()).unwrap_or(Ordering::Equal),
        }
    }

    /// The integer value when the quantity is whole and fits (`None` for `1500m`).
    fn integer(&self) -> Option<i128> {
        if self.exp >= 0 {
            self.mant.checked_mul(pow10(self.exp as u32)?)
        } else {
            let div = pow10((-self.exp) as u32)?;
            (self.mant % div == 0).then_some(self.mant / div)
        }
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Quantity) -> bool {
        self.compare(other) == Ordering::Equal
    }
}

impl std::fmt::Display for Quantity {
    /// kube's canonical form (`CanonicalizeBytes`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.mant == 0 {
            return f.write_str("0");
        }
        // Below 1024 in magnitude, binary quantities print as decimal ones (kube avoids `0.5Ki`).
        let kibi = Quantity { mant: 1024, exp: 0, format: Format::DecimalSI };
        let small = self.compare(&kibi) == Ordering::Less && self.compare(&Quantity { mant: -1024, ..kibi }) == Ordering::Greater;
        if self.format == Format::BinarySI && !small {
            if let Some(mut n) = self.integer() {
                let mut power = 0;
                while n % 1024 == 0 && power < BINARY.len() {
                    n /= 1024;
                    power += 1;
                }
                let suffix = if power == 0 { "" } else { BINARY[power - 1].0 };
                return write!(f, "{n}{suffix}");
            }
        }
        // Decimal: trailing zeros into the exponent, then the exponent down to a multiple of 3.
        let (mut mant, mut exp) = (self.mant, self.exp);
        while mant % 10 == 0 {
            mant /= 10;
            exp += 1;
        }
        while exp.rem_euclid(3) != 0 {
            mant *= 10;
            exp -= 1;
        }
        let suffix = match self.format {
            Format::DecimalExponent if exp == 0 => String::new(),
            Format::DecimalExponent => format!("e{exp}"),
            _ => match DECIMAL.iter().find(|(_, e)| *e == exp) {
                Some((s, _)) => (*s).to_owned(),
                None => format!("e{exp}"),
            },
        };
        write!(f, "{mant}{suffix}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    #[test]
    fn canonical_forms_are_kubes() {
        for (input, canonical) in [
            ("2000m", "2"),
            ("1500m", "1500m"),
            ("0.5", "500m"),
            ("1024Mi", "1Gi"),
            ("1536Mi", "1536Mi"),
            ("512Ki", "512Ki"),
            ("1000Ki", "1000Ki"),
            ("0.5Gi", "512Mi"),
            ("100", "100"),
            ("1k", "1k"),
            ("1000", "1k"),
            ("1e3", "1e3"),
            ("12e2", "1200"),
            ("1.5", "1500m"),
            ("0", "0"),
            ("0Mi", "0"),
            ("1n", "1n"),
            ("0.1n", "1n"),
            ("100M", "100M"),
            ("-2", "-2"),
        ] {
            assert_eq!(q(input).to_string(), canonical, "{input}");
        }
    }

    #[test]
    fn comparison_sum_and_ratio_are_exact() {
        assert_eq!(q("1Gi").compare(&q("1024Mi")), Ordering::Equal);
        assert_eq!(q("1G").compare(&q("1Gi")), Ordering::Less);
        assert_eq!(q("100m").compare(&q("0.1")), Ordering::Equal);
        assert_eq!(q("250m").add(&q("750m")).to_string(), "1");
        assert_eq!(q("1Gi").add(&q("1Gi")).to_string(), "2Gi");
        assert!(q("3").exceeds_ratio(&q("1"), &q("2")));
        assert!(!q("2").exceeds_ratio(&q("1"), &q("2")));
        assert!(q("2001m").exceeds_ratio(&q("1"), &q("2")));
        assert_eq!(Quantity::ratio_text(&q("3"), &q("1")), "3.000000");
        assert_eq!(Quantity::ratio_text(&q("1"), &q("300m")), "3.333333");
    }
}
