//! etcd's answers as [`StorageError`]s.
//!
//! etcd reports revision problems as gRPC `OutOfRange` with fixed messages (`mvcc: required
//! revision has been compacted`, `mvcc: required revision is a future revision`); everything
//! else (no leader, timeouts, unreachable members, a request too large) is a backend failure,
//! which the API answers with a 5xx Status.

use crate::StorageError;

/// What an etcd error means for the caller.
#[derive(Debug)]
pub(crate) enum EtcdFailure {
    /// The revision asked for is older than etcd's compaction.
    Compacted,
    /// The revision asked for is newer than etcd's.
    FutureRevision,
    /// Anything else.
    Other,
}

pub(crate) fn classify(error: &etcd_client::Error) -> EtcdFailure {
    let message = match error {
        etcd_client::Error::GRpcStatus(status) => status.message(),
        _ => return EtcdFailure::Other,
    };
    if message.contains("required revision has been compacted") {
        EtcdFailure::Compacted
    } else if message.contains("required revision is a future revision") {
        EtcdFailure::FutureRevision
    } else {
        EtcdFailure::Other
    }
}

/// Whether the request never reached etcd: no connection to the member the balancer chose
/// could be made. Sending it again cannot apply it twice.
pub(crate) fn never_sent(error: &etcd_client::Error) -> bool {
    match error {
        etcd_client::Error::GRpcStatus(status) if status.code() == tonic::Code::Unavailable => {
            let message = status.message();
            message.contains("tcp connect error") || message.contains("error trying to connect") || message.contains("connection refused")
        }
        etcd_client::Error::TransportError(_) => true,
        _ => false,
    }
}

/// A backend error naming etcd, for failures that are not about revisions.
pub(crate) fn backend(error: &etcd_client::Error) -> StorageError {
    StorageError::Backend(describe(error))
}

fn describe(error: &etcd_client::Error) -> String {
    match error {
        etcd_client::Error::GRpcStatus(status) => format!("etcd: {} ({:?})", status.message(), status.code()),
        other => format!("etcd: {other}"),
    }
}

/// A malformed answer from etcd (a key outside the store, a negative revision).
pub(crate) fn unexpected(what: impl std::fmt::Display) -> StorageError {
    StorageError::Backend(format!("etcd: unexpected answer: {what}"))
}
