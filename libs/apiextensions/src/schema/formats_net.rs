//! Network and address formats (`ipv4`, `ipv6`, `cidr`, `mac`, `email`, `uri`), with the
//! rules of the Go parsers kube-openapi calls (`k8s.io/utils/net.ParseIPSloppy`,
//! `net.ParseIP`, `net.ParseMAC`, `net/mail.ParseAddress`, `url.ParseRequestURI`).

use std::net::IpAddr;

/// Go's `dtoi`: decimal digits (at least one), capped.
fn dtoi(s: &str) -> Option<(u32, usize)> {
    let mut n: u32 = 0;
    let mut i = 0;
    for b in s.bytes() {
        if !b.is_ascii_digit() {
            break;
        }
        n = n * 10 + u32::from(b - b'0');
        if n >= 0xFF_FFFF {
            return None;
        }
        i += 1;
    }
    (i > 0).then_some((n, i))
}

/// `k8s.io/utils/net.ParseIPSloppy` for IPv4: leading zeros allowed.
fn parse_ipv4_sloppy(s: &str) -> Option<[u8; 4]> {
    let mut out = [0u8; 4];
    let mut rest = s;
    for (i, slot) in out.iter_mut().enumerate() {
        if i > 0 {
            rest = rest.strip_prefix('.')?;
        }
        let (n, used) = dtoi(rest)?;
        if n > 0xFF {
            return None;
        }
        *slot = n as u8;
        rest = &rest[used..];
    }
    rest.is_empty().then_some(out)
}

fn parse_ipv6_sloppy(s: &str) -> bool {
    if s.parse::<std::net::Ipv6Addr>().is_ok() {
        return true;
    }
    // An embedded IPv4 tail with leading zeros is accepted by the sloppy parser.
    match s.rfind(':') {
        Some(i) if s[i + 1..].contains('.') => match parse_ipv4_sloppy(&s[i + 1..]) {
            Some(v4) => format!(
                "{}{:x}:{:x}",
                &s[..=i],
                u16::from(v4[0]) << 8 | u16::from(v4[1]),
                u16::from(v4[2]) << 8 | u16::from(v4[3])
            )
            .parse::<std::net::Ipv6Addr>()
            .is_ok(),
            None => false,
        },
        _ => false,
    }
}

fn parse_ip_sloppy(s: &str) -> Option<usize> {
    let first = s.find(['.', ':'])?;
    if s.as_bytes()[first] == b'.' {
        parse_ipv4_sloppy(s).map(|_| 4)
    } else {
        parse_ipv6_sloppy(s).then_some(16)
    }
}

pub(crate) fn is_ipv4(s: &str) -> bool {
    parse_ip_sloppy(s).is_some() && s.contains('.')
}

pub(crate) fn is_ipv6(s: &str) -> bool {
    s.parse::<IpAddr>().is_ok() && s.contains(':')
}

pub(crate) fn is_cidr(s: &str) -> bool {
    let Some((ip, mask)) = s.split_once('/') else {
        return false;
    };
    let Some(len) = parse_ip_sloppy(ip) else {
        return false;
    };
    match dtoi(mask) {
        Some((n, used)) => used == mask.len() && n as usize <= 8 * len,
        None => false,
    }
}

/// Go's `net.ParseMAC`: 6, 8 or 20 octets as `xx:xx`, `xx-xx` or `xxxx.xxxx`.
pub(crate) fn is_mac(s: &str) -> bool {
    let hex2 = |p: &str, n: usize| p.len() == n && p.bytes().all(|b| b.is_ascii_hexdigit());
    let ok_count = |n: usize| n == 6 || n == 8 || n == 20;
    if s.len() < 14 {
        return false;
    }
    let b = s.as_bytes();
    if b[2] == b':' || b[2] == b'-' {
        let sep = b[2] as char;
        let parts: Vec<&str> = s.split(sep).collect();
        ok_count(parts.len()) && parts.iter().all(|p| hex2(p, 2))
    } else if b[4] == b'.' {
        let parts: Vec<&str> = s.split('.').collect();
        ok_count(parts.len() * 2) && parts.iter().all(|p| hex2(p, 4))
    } else {
        false
    }
}

fn is_atext(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-/=?^_`{|}~".contains(c) || !c.is_ascii()
}

fn is_dot_atom(s: &str) -> bool {
    !s.is_empty()
        && s.split('.')
            .all(|p| !p.is_empty() && p.chars().all(is_atext))
}

/// An approximation of Go's `net/mail.ParseAddress` (addr-spec, optionally `Name <addr>`).
pub(crate) fn is_email(s: &str) -> bool {
    let s = s.trim();
    let addr = match (s.rfind('<'), s.strip_suffix('>')) {
        (Some(i), Some(inner)) => &inner[i + 1..],
        (None, None) => s,
        _ => return false,
    };
    let Some(at) = addr.rfind('@') else {
        return false;
    };
    let (local, domain) = (&addr[..at], &addr[at + 1..]);
    let local_ok = if local.len() >= 2 && local.starts_with('"') && local.ends_with('"') {
        !local[1..local.len() - 1].contains('"')
    } else {
        is_dot_atom(local)
    };
    let domain_ok = if domain.starts_with('[') && domain.ends_with(']') {
        domain.len() > 2
    } else {
        is_dot_atom(domain)
    };
    local_ok && domain_ok
}

fn valid_percent(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            if !(b.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
            {
                return false;
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    true
}

fn valid_host(host: &str) -> bool {
    let host_part = if let Some(rest) = host.strip_prefix('[') {
        let Some(end) = rest.find(']') else {
            return false;
        };
        let port = &rest[end + 1..];
        if !(port.is_empty()
            || port
                .strip_prefix(':')
                .is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit())))
        {
            return false;
        }
        return valid_percent(&rest[..end]);
    } else if let Some(i) = host.rfind(':') {
        if !host[i + 1..].bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
        &host[..i]
    } else {
        host
    };
    valid_percent(host_part)
        && host_part.chars().all(|c| {
            !c.is_ascii() || c.is_ascii_alphanumeric() || "-_.~!$&'()*+,;=:[]<>\"%".contains(c)
        })
}

/// Go's `url.ParseRequestURI`: an absolute URI or an absolute path.
pub(crate) fn is_request_uri(s: &str) -> bool {
    if s.is_empty() || s.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return false;
    }
    if s == "*" {
        return true;
    }
    let mut scheme = "";
    let mut rest = s;
    for (i, c) in s.char_indices() {
        if c.is_ascii_alphabetic() {
            continue;
        }
        if (c.is_ascii_digit() || c == '+' || c == '-' || c == '.') && i > 0 {
            continue;
        }
        if c == ':' {
            if i == 0 {
                return false;
            }
            scheme = &s[..i];
            rest = &s[i + 1..];
        }
        break;
    }
    let rest = if rest.ends_with('?') && rest.matches('?').count() == 1 {
        &rest[..rest.len() - 1]
    } else {
        rest.split_once('?').map_or(rest, |(a, _)| a)
    };
    if !rest.starts_with('/') {
        return !scheme.is_empty();
    }
    let mut path = rest;
    if !scheme.is_empty() && rest.starts_with("//") {
        let authority_and_path = &rest[2..];
        let (authority, p) = match authority_and_path.find('/') {
            Some(i) => (&authority_and_path[..i], &authority_and_path[i..]),
            None => (authority_and_path, ""),
        };
        let host = match authority.rfind('@') {
            Some(i) => {
                let user = &authority[..i];
                if !valid_percent(user)
                    || !user.chars().all(|c| {
                        c.is_ascii_alphanumeric()
                            || "-._:~!$&'()*+,;=%@".contains(c)
                            || !c.is_ascii()
                    })
                {
                    return false;
                }
                &authority[i + 1..]
            }
            None => authority,
        };
        if !valid_host(host) {
            return false;
        }
        path = p;
    }
    valid_percent(path)
}

