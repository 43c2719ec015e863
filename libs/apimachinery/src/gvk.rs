//! Group, version, kind and resource names, as kube-apiserver's `schema` package spells them.

use std::fmt;

/// An API group and version; the core group is the empty string.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupVersion {
    /// API group (`""` for core).
    pub group: String,
    /// API version, e.g. `v1`.
    pub version: String,
}

impl GroupVersion {
    /// Builds a group version from its parts.
    pub fn new(group: impl Into<String>, version: impl Into<String>) -> Self {
        Self { group: group.into(), version: version.into() }
    }

    /// Parses an `apiVersion` field (`v1`, `apps/v1`).
    pub fn parse_api_version(api_version: &str) -> Self {
        match api_version.split_once('/') {
            Some((g, v)) => Self::new(g, v),
            None => Self::new("", api_version),
        }
    }

    /// The `apiVersion` string of objects in this group version.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

impl fmt::Display for GroupVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.api_version())
    }
}

/// A kind within a group version.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupVersionKind {
    /// API group (`""` for core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind, e.g. `Deployment`.
    pub kind: String,
}

impl GroupVersionKind {
    /// Builds a GVK from its parts.
    pub fn new(group: impl Into<String>, version: impl Into<String>, kind: impl Into<String>) -> Self {
        Self { group: group.into(), version: version.into(), kind: kind.into() }
    }

    /// The group version part.
    pub fn group_version(&self) -> GroupVersion {
        GroupVersion::new(self.group.clone(), self.version.clone())
    }
}

/// A resource within a group version (`apps/v1/deployments`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupVersionResource {
    /// API group (`""` for core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Plural resource name, e.g. `deployments`.
    pub resource: String,
}

impl GroupVersionResource {
    /// Builds a GVR from its parts.
    pub fn new(group: impl Into<String>, version: impl Into<String>, resource: impl Into<String>) -> Self {
        Self { group: group.into(), version: version.into(), resource: resource.into() }
    }

    /// The group-qualified resource, as used in error messages.
    pub fn group_resource(&self) -> GroupResource {
        GroupResource::new(self.group.clone(), self.resource.clone())
    }
}

/// A resource qualified by its group, as kube-apiserver prints it in errors (`deployments.apps`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupResource {
    /// API group (`""` for core).
    pub group: String,
    /// Plural resource name.
    pub resource: String,
}

impl GroupResource {
    /// Builds a group resource from its parts.
    pub fn new(group: impl Into<String>, resource: impl Into<String>) -> Self {
        Self { group: group.into(), resource: resource.into() }
    }
}

impl fmt::Display for GroupResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}
