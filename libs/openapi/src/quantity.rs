//! The syntax check `resource.ParseQuantity` does when kube decodes a Quantity, with its error
//! texts (decoding fails before validation, so these reach the client verbatim).

/// `resource.ErrFormatWrong`.
pub(crate) const FORMAT_WRONG: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
/// `resource.ErrSuffix`.
const SUFFIX: &str = "unable to parse quantity's suffix";

const SUFFIX_CHARS: &[u8] = b"eEinumkKMGTP";
const SUFFIXES: &[&str] = &[
    "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E",
];

/// Ok when `text` parses as a quantity.
pub fn check(text: &str) -> Result<(), &'static str> {
    let bytes = text.as_bytes();
    let mut i = 0;
    if matches!(bytes.first(), Some(b'+' | b'-')) {
        i += 1;
    }
    let mut digits = 0;
    while i < bytes.len() && bytes[i].is_ascii_digit() {
        i += 1;
        digits += 1;
    }
    if i < bytes.len() && bytes[i] == b'.' {
        i += 1;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return Err(FORMAT_WRONG);
    }
    let suffix_start = i;
    while i < bytes.len() && SUFFIX_CHARS.contains(&bytes[i]) {
        i += 1;
    }
    if i < bytes.len() && matches!(bytes[i], b'+' | b'-') {
        i += 1;
    }
    while i < bytes.len() && bytes[i].is_ascii_digit() {
        i += 1;
    }
    if i != bytes.len() {
        return Err(FORMAT_WRONG);
    }
    let suffix = &text[suffix_start..];
    let exponent_ok = suffix
        .strip_prefix(['e', 'E'])
        .is_some_and(|exp| !exp.is_empty() && exp.parse::<i32>().is_ok());
    if SUFFIXES.contains(&suffix) || exponent_ok {
        Ok(())
    } else {
        Err(SUFFIX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_kube_forms() {
        for ok in [
            "0",
            "1",
            "500m",
            "1.5Gi",
            "+3k",
            "-2",
            "1e3",
            "1E-3",
            ".5",
            "5.",
            "128974848",
        ] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn rejects_with_kube_errors() {
        assert_eq!(check(""), Err(FORMAT_WRONG));
        assert_eq!(check("lots"), Err(FORMAT_WRONG));
        assert_eq!(check("1 Gi"), Err(FORMAT_WRONG));
        assert_eq!(check("1Gb"), Err(FORMAT_WRONG));
        assert_eq!(check("1iK"), Err(SUFFIX));
        assert_eq!(check("1e"), Err(SUFFIX));
    }
}
