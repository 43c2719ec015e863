//! API Priority and Fairness (kube's `k8s.io/apiserver/pkg/util/flowcontrol`), the parts that
//! need no IO: the configuration objects as kube reads them (`flowcontrol.apiserver.k8s.io/v1`
//! FlowSchemas and PriorityLevelConfigurations), kube's mandatory and suggested objects, the
//! classification of a request to a FlowSchema and flow, and how the server's concurrency is
//! shared among priority levels.
//!
//! The queues of a level (fair queuing over shuffle-sharded queues) are a state machine here
//! too; the filter that holds requests while they wait lives in the server, on top of these.

pub mod allocation;
pub mod bootstrap;
pub mod config;
pub mod demand;
pub mod matching;
pub mod queueset;

pub use allocation::{allocate, borrowing_limits, concurrency_allocation, list_seats, AllocItem, LevelLimits};
pub use demand::{DemandIntegrator, DemandObservation, SeatDemandStats};
pub use config::{Config, FlowSchema, PriorityLevel};
pub use matching::{classify, flow_hash, Classification, RequestDigest};
pub use queueset::{Arrival, QueueSet, Running};
