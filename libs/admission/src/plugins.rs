//! Which plugins run: kube's recommended order (`AllOrderedPlugins`), its default set, and
//! `--enable-admission-plugins` / `--disable-admission-plugins` over them, with kube's checks.

/// Every plugin kube-apiserver knows, in the order they run (webhooks, quota and AlwaysDeny
/// last).
pub const ORDER: &[&str] = &[
    "AlwaysAdmit",
    "NamespaceAutoProvision",
    "NamespaceLifecycle",
    "NamespaceExists",
    "LimitPodHardAntiAffinityTopology",
    "LimitRanger",
    "ServiceAccount",
    "NodeRestriction",
    "TaintNodesByCondition",
    "AlwaysPullImages",
    "ImagePolicyWebhook",
    "PodSecurity",
    "PodNodeSelector",
    "Priority",
    "DefaultTolerationSeconds",
    "PodTolerationRestriction",
    "EventRateLimit",
    "ExtendedResourceToleration",
    "DefaultStorageClass",
    "StorageObjectInUseProtection",
    "PodGroupProtection",
    "OwnerReferencesPermissionEnforcement",
    "PersistentVolumeClaimResize",
    "RuntimeClass",
    "CertificateApproval",
    "CertificateSigning",
    "ClusterTrustBundleAttest",
    "CertificateSubjectRestriction",
    "DefaultIngressClass",
    "DenyServiceExternalIPs",
    "PodTopologyLabels",
    "PodGroupWorkloadExists",
    "NodeDeclaredFeatureValidator",
    "JobValidation",
    "PodResizeValidator",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionWebhook",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionWebhook",
    "ResourceQuota",
    "AlwaysDeny",
];

/// The plugins kube-apiserver enables when no flag says otherwise.
pub const DEFAULT_ON: &[&str] = &[
    "NamespaceLifecycle",
    "LimitRanger",
    "ServiceAccount",
    "DefaultStorageClass",
    "PersistentVolumeClaimResize",
    "DefaultTolerationSeconds",
    "MutatingAdmissionWebhook",
    "ValidatingAdmissionWebhook",
    "ResourceQuota",
    "StorageObjectInUseProtection",
    "PodGroupProtection",
    "Priority",
    "TaintNodesByCondition",
    "RuntimeClass",
    "CertificateApproval",
    "CertificateSigning",
    "ClusterTrustBundleAttest",
    "CertificateSubjectRestriction",
    "DefaultIngressClass",
    "PodSecurity",
    "PodTopologyLabels",
    "MutatingAdmissionPolicy",
    "ValidatingAdmissionPolicy",
    "PodGroupWorkloadExists",
    "NodeDeclaredFeatureValidator",
    "JobValidation",
    "PodResizeValidator",
];

/// The enabled plugin names, in run order.
pub type PluginNames = Vec<&'static str>;

/// kube's `enabledPluginNames` after its flag validation: the default set, plus `enable`,
/// minus `disable`, in [`ORDER`]. Unknown names and names in both lists are refused with
/// kube's messages (all of them, joined as kube's aggregate error).
pub fn enabled_plugins(enable: &[String], disable: &[String]) -> Result<PluginNames, String> {
    let mut errors = Vec::new();
    for name in enable.iter().filter(|n| !ORDER.contains(&n.as_str())) {
        errors.push(format!("enable-admission-plugins plugin {name:?} is unknown"));
    }
    for name in disable.iter().filter(|n| !ORDER.contains(&n.as_str())) {
        errors.push(format!("disable-admission-plugins plugin {name:?} is unknown"));
    }
    let mut both: Vec<&String> = enable.iter().filter(|n| disable.contains(n)).collect();
    both.sort();
    both.dedup();
    if !both.is_empty() {
        let list = both.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" ");
        errors.push(format!("[{list}] in enable-admission-plugins and disable-admission-plugins overlapped"));
    }
    if !errors.is_empty() {
        return Err(match errors.len() {
            1 => errors.remove(0),
            _ => format!("[{}]", errors.join(", ")),
        });
    }
    Ok(ORDER
        .iter()
        .copied()
        .filter(|name| {
            let on = DEFAULT_ON.contains(name) && !disable.iter().any(|d| d == name);
            on || enable.iter().any(|e| e == name)
        })
        .collect())
}
