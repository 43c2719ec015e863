//! kube's order of API versions (`version.CompareKubeAwareVersionStrings`): GA before beta
//! before alpha, higher numbers first, then versions that do not look like kube's, by name.
//! Discovery lists a group's versions in this order (custom resource groups, APIServices of
//! equal version priority) and prefers the first.

use std::cmp::Ordering;

/// `v<major>[(alpha|beta)<minor>]`, as (major, stage, minor) with GA as stage 2.
fn parse(v: &str) -> Option<(u64, u8, u64)> {
    let rest = v.strip_prefix('v')?;
    let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    let major: u64 = rest[..digits].parse().ok().filter(|m| *m > 0 && !rest.starts_with('0'))?;
    let tail = &rest[digits..];
    if tail.is_empty() {
        return Some((major, 2, 0));
    }
    let (stage, minor) = if let Some(m) = tail.strip_prefix("beta") {
        (1, m)
    } else {
        (0, tail.strip_prefix("alpha")?)
    };
    if minor.is_empty() || minor.starts_with('0') || !minor.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((major, stage, minor.parse().ok()?))
}

/// Orders `a` before `b` when kube prefers it.
pub fn compare(a: &str, b: &str) -> Ordering {
    match (parse(a), parse(b)) {
        (Some((ma, sa, na)), Some((mb, sb, nb))) => sb.cmp(&sa).then(mb.cmp(&ma)).then(nb.cmp(&na)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_order() {
        let mut versions = vec!["foo1", "v1alpha1", "v2", "v1", "v11alpha2", "v3beta1", "v10beta3", "v12alpha1", "v11beta2", "v10", "foo10"];
        versions.sort_by(|a, b| compare(a, b));
        assert_eq!(versions, ["v10", "v2", "v1", "v11beta2", "v10beta3", "v3beta1", "v12alpha1", "v11alpha2", "v1alpha1", "foo1", "foo10"]);
    }
}
