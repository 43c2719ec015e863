//! kube's webhook client (`k8s.io/apiserver/pkg/util/webhook`), shared by admission webhooks
//! and CRD conversion webhooks.
