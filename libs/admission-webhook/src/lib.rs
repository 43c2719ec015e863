//! Admission webhooks (kube's `k8s.io/apiserver/pkg/admission/plugin/webhook`).
