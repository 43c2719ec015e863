//! Query-string parsing with kube-apiserver's error shapes for bad values.

use kapi_apimachinery::ApiError;

/// Decoded `key=value` pairs of a query string, in order.
#[derive(Debug, Clone, Default)]
pub struct Query(Vec<(String, String)>);

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Query {
    /// Parses a raw query string.
    pub fn parse(raw: Option<&str>) -> Self {
        let pairs = raw
            .unwrap_or("")
            .split('&')
            .filter(|kv| !kv.is_empty())
            .map(|kv| match kv.split_once('=') {
                Some((k, v)) => (percent_decode(k), percent_decode(v)),
                None => (percent_decode(kv), String::new()),
            })
            .collect();
        Self(pairs)
    }

    /// The first value of a parameter.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// Whether the query has no parameter at all.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether a parameter is present at all (`?verbose`).
    pub fn has(&self, key: &str) -> bool {
        self.0.iter().any(|(k, _)| k == key)
    }

    /// Every value of a parameter (`?exclude=a&exclude=b`).
    pub fn all(&self, key: &str) -> Vec<&str> {
        self.0.iter().filter(|(k, _)| k == key).map(|(_, v)| v.as_str()).collect()
    }

    /// A boolean parameter: absent is `None`; `true`/`1` and `false`/`0` as kube's codec reads them.
    pub fn bool(&self, key: &str) -> Result<Option<bool>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some("true" | "1" | "") => Ok(Some(true)),
            Some("false" | "0") => Ok(Some(false)),
            Some(v) => Err(ApiError::bad_request(format!("invalid value for {key}: {v:?}: must be true or false"))),
        }
    }

    /// A non-negative integer parameter.
    pub fn u64(&self, key: &str) -> Result<Option<u64>, ApiError> {
        match self.get(key) {
            None | Some("") => Ok(None),
            Some(v) => v
                .parse::<u64>()
                .map(Some)
                .map_err(|_| ApiError::bad_request(format!("invalid value for {key}: {v:?}: must be a non-negative integer"))),
        }
    }

    /// A signed integer parameter.
    pub fn i64(&self, key: &str) -> Result<Option<i64>, ApiError> {
        match self.get(key) {
            None | Some("") => Ok(None),
            Some(v) => v
                .parse::<i64>()
                .map(Some)
                .map_err(|_| ApiError::bad_request(format!("invalid value for {key}: {v:?}: must be an integer"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_selectors() {
        let q = Query::parse(Some("labelSelector=app%3Dweb%2Ctier+in+(a%2Cb)&watch=1&limit=5"));
        assert_eq!(q.get("labelSelector"), Some("app=web,tier in (a,b)"));
        assert_eq!(q.bool("watch").unwrap(), Some(true));
        assert_eq!(q.u64("limit").unwrap(), Some(5));
        assert_eq!(Query::parse(Some("limit=x")).u64("limit").unwrap_err().code, 400);
        assert_eq!(Query::parse(Some("a=%zz%")).get("a"), Some("%zz%"));
    }
}
