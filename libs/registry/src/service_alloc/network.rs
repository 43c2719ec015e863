//! The service network as kube-apiserver's flags give it: `--service-cluster-ip-range` (one
//! CIDR, or two of different families for dual-stack) and `--service-node-port-range`.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ops::RangeInclusive;

/// An IP family, as `spec.ipFamilies` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// `IPv4`.
    V4,
    /// `IPv6`.
    V6,
}

impl Family {
    /// The API's name of the family.
    pub fn as_str(self) -> &'static str {
        match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        }
    }

    /// The family an API name stands for.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "IPv4" => Some(Family::V4),
            "IPv6" => Some(Family::V6),
            _ => None,
        }
    }

    /// The family of an address.
    pub fn of(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(_) => Family::V4,
            IpAddr::V6(_) => Family::V6,
        }
    }

    /// The other family (what a dual-stack Service adds).
    pub fn other(self) -> Self {
        match self {
            Family::V4 => Family::V6,
            Family::V6 => Family::V4,
        }
    }
}

/// A CIDR block, masked to its network address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Parses `a.b.c.d/n` or `x::y/n`; host bits are masked off, as Go's `ParseCIDR` does.
    pub fn parse(s: &str) -> Result<Self, String> {
        let (ip, prefix) = s.split_once('/').ok_or_else(|| format!("invalid CIDR address: {s}"))?;
        let ip: IpAddr = ip.parse().map_err(|_| format!("invalid CIDR address: {s}"))?;
        let bits = match ip {
            IpAddr::V4(_) => 32,
            IpAddr::V6(_) => 128,
        };
        let prefix: u8 = prefix.parse().ok().filter(|p| *p <= bits).ok_or_else(|| format!("invalid CIDR address: {s}"))?;
        let network = match ip {
            IpAddr::V4(v4) => IpAddr::V4(Ipv4Addr::from(u32::from(v4) & mask32(prefix))),
            IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask128(prefix))),
        };
        Ok(Cidr { network, prefix })
    }

    /// The block's family.
    pub fn family(&self) -> Family {
        Family::of(self.network)
    }

    /// The prefix length.
    pub fn prefix_len(&self) -> u8 {
        self.prefix
    }

    /// Whether `ip` lies in the block at all (network and broadcast addresses included).
    fn covers(&self, ip: IpAddr) -> bool {
        match (self.network, ip) {
            (IpAddr::V4(n), IpAddr::V4(ip)) => u32::from(ip) & mask32(self.prefix) == u32::from(n),
            (IpAddr::V6(n), IpAddr::V6(ip)) => u128::from(ip) & mask128(self.prefix) == u128::from(n),
            _ => false,
        }
    }

    /// Whether `other` lies wholly inside this block (kube's `ContainsPrefix`: same or shorter
    /// prefix, overlapping).
    pub fn contains_cidr(&self, other: &Cidr) -> bool {
        self.prefix <= other.prefix && self.covers(other.network)
    }

    /// Whether the two blocks share an address (one then holds the other).
    pub fn overlaps(&self, other: &Cidr) -> bool {
        self.contains_cidr(other) || other.contains_cidr(self)
    }

    /// How many addresses the allocator may hand out: the block without its network address,
    /// and for IPv4 without its broadcast address (kube's allocator leaves both out).
    pub fn size(&self) -> u128 {
        let bits = match self.network {
            IpAddr::V4(_) => 32 - u32::from(self.prefix),
            IpAddr::V6(_) => 128 - u32::from(self.prefix),
        };
        let all = if bits >= 128 { u128::MAX } else { 1u128 << bits };
        let reserved = if self.family() == Family::V4 { 2 } else { 1 };
        all.saturating_sub(reserved)
    }

    /// The `index`th allocatable address (0 is the first after the network address: the
    /// `kubernetes` Service's).
    pub fn nth(&self, index: u128) -> IpAddr {
        match self.network {
            IpAddr::V4(v4) => IpAddr::V4(Ipv4Addr::from(u32::from(v4).wrapping_add(1).wrapping_add(index as u32))),
            IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6).wrapping_add(1).wrapping_add(index))),
        }
    }

    /// The index of `ip` among the allocatable addresses, if it is one.
    pub fn index_of(&self, ip: IpAddr) -> Option<u128> {
        let offset = match (self.network, ip) {
            (IpAddr::V4(n), IpAddr::V4(ip)) if u32::from(ip) & mask32(self.prefix) == u32::from(n) => u128::from(u32::from(ip) - u32::from(n)),
            (IpAddr::V6(n), IpAddr::V6(ip)) if u128::from(ip) & mask128(self.prefix) == u128::from(n) => u128::from(ip) - u128::from(n),
            _ => return None,
        };
        (offset >= 1 && offset - 1 < self.size()).then(|| offset - 1)
    }

    /// kube's `calculateRangeOffset`: the lower band of a range is kept for addresses users ask
    /// for, so dynamic allocation tries the addresses above it first.
    pub fn static_band(&self) -> u128 {
        const MIN: u128 = 16;
        const MAX: u128 = 256;
        const STEP: u128 = 16;
        let size = self.size();
        if size < MIN {
            return 0;
        }
        (size / STEP).clamp(MIN, MAX)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

fn mask32(prefix: u8) -> u32 {
    if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(prefix))
    }
}

fn mask128(prefix: u8) -> u128 {
    if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(prefix))
    }
}

/// kube-apiserver's `--service-cluster-ip-range` and `--service-node-port-range`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceNetwork {
    /// The primary range, then the secondary one of a dual-stack cluster.
    pub cluster_ips: Vec<Cidr>,
    /// Node ports (inclusive).
    pub node_ports: RangeInclusive<u16>,
}

impl Default for ServiceNetwork {
    /// kubeadm's `10.96.0.0/12` (the `kubernetes` Service at 10.96.0.1) and kube's
    /// `30000-32767`.
    fn default() -> Self {
        ServiceNetwork { cluster_ips: vec![Cidr::parse("10.96.0.0/12").expect("valid default")], node_ports: 30000..=32767 }
    }
}

impl ServiceNetwork {
    /// Parses the two flags' values with kube-apiserver's checks.
    pub fn parse(cluster_ip_range: &str, node_port_range: &str) -> Result<Self, String> {
        let cidrs: Vec<&str> = cluster_ip_range.split(',').map(str::trim).collect();
        if cidrs.len() > 2 {
            return Err("--service-cluster-ip-range must not contain more than two entries".into());
        }
        let mut cluster_ips = Vec::new();
        for (i, text) in cidrs.iter().enumerate() {
            let cidr = Cidr::parse(text).map_err(|e| format!("service-cluster-ip-range[{i}] is not a valid cidr: {e}"))?;
            match cidr.family() {
                Family::V4 if cidr.prefix < 12 => {
                    return Err(format!("specified service-cluster-ip-range[{i}] is too large; for 32-bit addresses, the mask must be >= 12"))
                }
                Family::V6 if cidr.prefix < 64 => {
                    return Err(format!("specified service-cluster-ip-range[{i}] is too large; for 128-bit addresses, the mask must be >= 64"))
                }
                _ => {}
            }
            if cidr.size() < 2 {
                return Err(format!("specified service-cluster-ip-range[{i}] is too small to hold the kubernetes Service and one more"));
            }
            cluster_ips.push(cidr);
        }
        if cluster_ips.len() == 2 && cluster_ips[0].family() == cluster_ips[1].family() {
            return Err("service-cluster-ip-range[0] and service-cluster-ip-range[1] must be of different IP family".into());
        }
        Ok(ServiceNetwork { cluster_ips, node_ports: parse_port_range(node_port_range)? })
    }

    /// The range of `family`, if the cluster has one.
    pub fn range(&self, family: Family) -> Option<&Cidr> {
        self.cluster_ips.iter().find(|c| c.family() == family)
    }

    /// The primary family (the first range's).
    pub fn primary(&self) -> Family {
        self.cluster_ips[0].family()
    }

    /// The `kubernetes` Service's address: the first of the primary range.
    pub fn kubernetes_service_ip(&self) -> IpAddr {
        self.cluster_ips[0].nth(0)
    }

    /// `--service-node-port-range` as kube prints it in its errors.
    pub fn node_port_range_text(&self) -> String {
        format!("{}-{}", self.node_ports.start(), self.node_ports.end())
    }
}

/// kube's `net.ParsePortRange`: `min-max`, `base+offset` or a single port.
fn parse_port_range(text: &str) -> Result<RangeInclusive<u16>, String> {
    let bad = || format!("invalid port range {text:?} for --service-node-port-range");
    let text = text.trim();
    let port = |s: &str| s.trim().parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(bad);
    let range = if let Some((lo, hi)) = text.split_once('-') {
        port(lo)?..=port(hi)?
    } else if let Some((base, offset)) = text.split_once('+') {
        let base = port(base)?;
        let offset: u16 = offset.trim().parse().map_err(|_| bad())?;
        base..=base.checked_add(offset).ok_or_else(bad)?
    } else {
        let p = port(text)?;
        p..=p
    };
    if range.start() > range.end() {
        return Err(bad());
    }
    Ok(range)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_sizes_and_indexes() {
        let c = Cidr::parse("10.96.0.7/12").unwrap();
        assert_eq!(c.to_string(), "10.96.0.0/12");
        assert_eq!(c.size(), (1 << 20) - 2);
        assert_eq!(c.nth(0).to_string(), "10.96.0.1");
        assert_eq!(c.index_of("10.96.0.1".parse().unwrap()), Some(0));
        assert_eq!(c.index_of("10.96.0.0".parse().unwrap()), None);
        assert_eq!(c.index_of("10.111.255.255".parse().unwrap()), None, "broadcast");
        assert_eq!(c.index_of("10.111.255.254".parse().unwrap()), Some(c.size() - 1));
        assert_eq!(c.index_of("10.112.0.1".parse().unwrap()), None);
        assert_eq!(c.static_band(), 256);
        let v6 = Cidr::parse("fd00:10:96::/112").unwrap();
        assert_eq!(v6.size(), 65535);
        assert_eq!(v6.nth(9).to_string(), "fd00:10:96::a");
        assert_eq!(v6.index_of("fd00:10:96::ffff".parse().unwrap()), Some(65534));
        assert_eq!(Cidr::parse("10.0.0.0/28").unwrap().static_band(), 0);
        assert_eq!(Cidr::parse("10.0.0.0/24").unwrap().static_band(), 16);
    }

    #[test]
    fn containment_and_overlap() {
        let big = Cidr::parse("10.0.0.0/16").unwrap();
        let small = Cidr::parse("10.0.3.0/24").unwrap();
        let other = Cidr::parse("10.1.0.0/24").unwrap();
        assert!(big.contains_cidr(&small) && !small.contains_cidr(&big) && big.contains_cidr(&big));
        assert!(big.overlaps(&small) && small.overlaps(&big));
        assert!(!big.overlaps(&other) && !other.contains_cidr(&small));
        assert!(!big.overlaps(&Cidr::parse("fd00::/64").unwrap()));
        assert_eq!(small.prefix_len(), 24);
    }

    #[test]
    fn flags_are_checked() {
        let n = ServiceNetwork::parse("10.0.0.0/16,fd00::/108", "30000-30100").unwrap();
        assert_eq!(n.primary(), Family::V4);
        assert_eq!(n.range(Family::V6).unwrap().to_string(), "fd00::/108");
        assert_eq!(n.kubernetes_service_ip().to_string(), "10.0.0.1");
        assert_eq!(n.node_ports, 30000..=30100);
        assert_eq!(ServiceNetwork::parse("10.0.0.0/16", "30000+10").unwrap().node_ports, 30000..=30010);
        assert!(ServiceNetwork::parse("10.0.0.0/8", "30000-32767").unwrap_err().contains("mask must be >= 12"));
        assert!(ServiceNetwork::parse("10.0.0.0/16,10.1.0.0/16", "30000-32767").unwrap_err().contains("different IP family"));
        assert!(ServiceNetwork::parse("10.0.0.0/16", "32767-30000").is_err());
        assert!(ServiceNetwork::parse("nope", "30000-32767").is_err());
    }
}
