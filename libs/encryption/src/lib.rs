//! Encryption at rest as kube-apiserver's `--encryption-provider-config`
//! (EncryptionConfiguration, `apiserver.config.k8s.io/v1`): which resources are encrypted, with
//! which providers (`identity`, `aescbc`, `aesgcm`, `secretbox`, and `kms` with KMS v2 plugins
//! over gRPC: see [`kms`]), in kube's stored formats (`k8s:enc:<provider>:v1:<key name>:` then
//! the ciphertext, `k8s:enc:kms:v2:<name>:` then an `EncryptedObject`), so a store written by
//! one can be read by the other's configuration.
//!
//! [`EncryptedStore`] wraps any backend: values of encrypted resources are encrypted before
//! they reach it (its data, its change log, its snapshots) and decrypted when read back, so no
//! plaintext of them leaves the process. The first provider of a resource writes; every
//! provider listed reads (key rotation).

pub mod config;
pub mod kms;
pub mod providers;
pub mod store;

pub use config::{load, parse, ConfigError, EncryptionConfig};
pub use providers::{DecryptError, EncryptError, Transformer};
pub use store::{EncryptedStore, LiveConfig};
