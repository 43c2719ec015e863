//! kube-apiserver's built-in admission plugins that need no controller beside them
//! (`plugin/pkg/admission/...` and the apiserver's NamespaceLifecycle), one module per plugin,
//! each an [`kapi_admission::AdmissionPlugin`] with kube's name, operations, codes, reasons and
//! messages.
//!
//! Plugins read the objects they decide by (namespaces, LimitRanges, PriorityClasses, ...)
//! from the store's watch caches, as kube's plugins read them from informers; where kube falls
//! back to a live read (a namespace the cache has not seen yet), so do they. Objects are seen
//! in the request's version, which for every kind handled here is the only one kapi serves.

pub mod always_admit_deny;
pub mod always_pull_images;
pub mod certificates;
pub mod default_ingress_class;
pub mod default_storage_class;
pub mod default_toleration_seconds;
pub mod deny_service_external_ips;
pub mod extended_resource_toleration;
pub mod limit_pod_hard_anti_affinity;
pub mod limit_ranger;
mod lookup;
pub mod namespace_lifecycle;
pub mod node_restriction;
pub mod namespace_provisioning;
pub mod persistent_volume_claim_resize;
pub mod pod_security;
pub mod priority;
pub mod quantity;
pub mod resource_quota;
pub mod runtime_class;
pub mod service_account;
pub mod storage_object_in_use_protection;
pub mod taint_nodes_by_condition;

pub use always_admit_deny::{AlwaysAdmit, AlwaysDeny};
pub use always_pull_images::AlwaysPullImages;
pub use certificates::{CertificateApproval, CertificateSigning, CertificateSubjectRestriction};
pub use default_ingress_class::DefaultIngressClass;
pub use default_storage_class::DefaultStorageClass;
pub use default_toleration_seconds::DefaultTolerationSeconds;
pub use deny_service_external_ips::DenyServiceExternalIPs;
pub use extended_resource_toleration::ExtendedResourceToleration;
pub use limit_pod_hard_anti_affinity::LimitPodHardAntiAffinityTopology;
pub use limit_ranger::LimitRanger;
pub use namespace_lifecycle::NamespaceLifecycle;
pub use node_restriction::NodeRestriction;
pub use namespace_provisioning::{NamespaceAutoProvision, NamespaceExists};
pub use persistent_volume_claim_resize::PersistentVolumeClaimResize;
pub use pod_security::PodSecurity;
pub use priority::Priority;
pub use resource_quota::ResourceQuota;
pub use runtime_class::RuntimeClass;
pub use service_account::ServiceAccount;
pub use storage_object_in_use_protection::StorageObjectInUseProtection;
pub use taint_nodes_by_condition::TaintNodesByCondition;
