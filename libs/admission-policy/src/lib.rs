//! CEL admission policies (kube's `k8s.io/apiserver/pkg/admission/plugin/policy`).
