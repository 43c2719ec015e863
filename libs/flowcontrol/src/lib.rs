//! API Priority and Fairness (kube's `k8s.io/apiserver/pkg/util/flowcontrol`), the parts that
//! need no IO: the configuration objects as kube reads them (`flowcontrol.apiserver.k8s.io/v1`
//! FlowSchemas and PriorityLevelConfigurations), kube's mandatory and suggested objects, the
//! classification of a request to a FlowSchema and flow, and how the server's concurrency is
//! shared among priority levels.
//!
//! The filter that queues and dispatches requests (fair queuing over shuffle-sharded queues)
//! lives in the server, on top of these.

pub mod allocation;
pub mod bootstrap;
pub mod config;
pub mod matching;

pub use allocation::{allocate, LevelLimits};
pub use config::{Config, FlowSchema, PriorityLevel};
pub use matching::{classify, Classification, RequestDigest};
