//! One limited priority level at run time: its [`QueueSet`] behind a `std::sync::Mutex` (held
//! for a few microseconds, never across an await) and the waiters of its queued requests.
//!
//! Every request that arrives gets a oneshot channel before it enters the set; whatever the
//! set dispatches (at arrival, or when a running request finishes) is sent to its channel while
//! the lock is still held, so a waiter that gives up can tell, under the same lock, whether it
//! left its queue or was dispatched meanwhile (and then finishes the seat it did not use).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use kapi_flowcontrol::config::Queuing;
use kapi_flowcontrol::queueset::{QueueState, RequestId};
use kapi_flowcontrol::{Arrival, QueueSet, Running};
use tokio::sync::oneshot;

/// A limited level's queues and waiters.
pub struct Level {
    /// The time origin of the set's clock.
    origin: Instant,
    /// The level's name, for its `current_limit_seats` series ("" for none).
    name: String,
    inner: Mutex<Inner>,
}

struct Inner {
    set: QueueSet,
    waiters: HashMap<RequestId, oneshot::Sender<Running>>,
    /// What the debug dumps show of the described requests, from arrival until they finish.
    described: HashMap<RequestId, Described>,
    /// kube's per-level totals of its `dump_priority_levels`.
    totals: Totals,
}

/// What kube's `dump_requests` shows of a request. The filter writes it once per request of a
/// limited level; the level keeps it beside the request's waiter while it waits and runs.
#[derive(Debug, Clone)]
pub struct RequestDescription {
    /// The matching FlowSchema.
    pub flow_schema: String,
    /// The requester.
    pub user: String,
    /// kube's request info: verb, path, namespace, name, group, version, resource, subresource.
    pub verb: String,
    /// The URL path.
    pub path: String,
    /// Namespace ("" for none).
    pub namespace: String,
    /// Object name ("" for none).
    pub name: String,
    /// API group ("" for the core group).
    pub api_group: String,
    /// API version ("" for non-resource requests).
    pub api_version: String,
    /// Resource.
    pub resource: String,
    /// Subresource.
    pub subresource: String,
    /// When it reached the filter.
    pub arrived: SystemTime,
    /// The seats it takes while it runs.
    pub initial_seats: u32,
    /// The seats it keeps after its answer (kube's final seats; 0 when it keeps none).
    pub final_seats: u32,
    /// How long it keeps them (kube's additional latency).
    pub additional_latency: Duration,
}

#[derive(Debug)]
struct Described {
    description: Box<RequestDescription>,
    /// When it was dispatched, and from which queue.
    started: Option<(SystemTime, Option<usize>)>,
}

/// kube's counts of a level's requests since it was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Dispatched (at arrival or from a queue).
    pub dispatched: u64,
    /// Refused at arrival (queue full, or no seats on a level that does not queue).
    pub rejected: u64,
    /// Left their queue when their wait ran out.
    pub timed_out: u64,
    /// Left their queue because their client went away.
    pub cancelled: u64,
}

/// A level as kube's debug endpoints show it.
#[derive(Debug, Clone)]
pub struct LevelDump {
    /// Its queues, by index (none for a level that does not queue).
    pub queues: Vec<QueueState>,
    /// Requests waiting.
    pub waiting: usize,
    /// Requests running.
    pub executing: u32,
    /// Nothing waits and nothing runs.
    pub idle: bool,
    /// Its totals.
    pub totals: Totals,
    /// The described requests: waiting ones queue by queue in queue order, then running ones.
    pub requests: Vec<RequestDump>,
}

/// One described request of a [`LevelDump`].
#[derive(Debug, Clone)]
pub struct RequestDump {
    /// The queue it waits in or was dispatched from (None on a level that does not queue).
    pub queue: Option<usize>,
    /// Its place in its queue; None once it runs.
    pub position: Option<usize>,
    /// When it was dispatched (None while it waits).
    pub started: Option<SystemTime>,
    /// What it is.
    pub description: RequestDescription,
}

impl std::fmt::Debug for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.lock();
        f.debug_struct("Level").field("seats_in_use", &inner.set.seats_in_use()).field("waiting", &inner.set.waiting()).finish()
    }
}

/// What becomes of an arriving request.
#[derive(Debug)]
pub enum Admission {
    /// It holds a place: at once, or once dispatched ([`Ticket::wait`]).
    Admitted(Ticket),
    /// Its queue is full, or the level rejects when its seats are taken.
    Rejected,
}

impl Level {
    /// A level with `limit` seats, of which wide requests leave `headroom` to narrow ones;
    /// `queuing` None for levels that reject at once.
    pub fn new(queuing: Option<Queuing>, limit: u32, headroom: u32) -> Arc<Level> {
        Level::named("", queuing, limit, headroom)
    }

    /// As [`Level::new`], for the level called `name`, whose limit is exported as kube's
    /// `apiserver_flowcontrol_current_limit_seats` whenever it is set.
    pub fn named(name: &str, queuing: Option<Queuing>, limit: u32, headroom: u32) -> Arc<Level> {
        let mut set = QueueSet::new(queuing, limit, 0.0);
        set.set_headroom(0.0, headroom);
        if !name.is_empty() {
            crate::metrics::flowcontrol_current_limit(name, limit);
        }
        let inner = Inner { set, waiters: HashMap::new(), described: HashMap::new(), totals: Totals::default() };
        Arc::new(Level { origin: Instant::now(), name: name.to_owned(), inner: Mutex::new(inner) })
    }

    fn now(&self) -> f64 {
        self.origin.elapsed().as_secs_f64()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The set's invariants hold between calls: a panic elsewhere does not break them.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The level's seats changed (the configuration changed the server's shares).
    pub fn set_limit(&self, limit: u32, headroom: u32) {
        let now = self.now();
        let mut inner = self.lock();
        inner.set.set_headroom(now, headroom);
        inner.set.set_limit(now, limit);
        inner.deliver(now);
        if !self.name.is_empty() {
            crate::metrics::flowcontrol_current_limit(&self.name, limit);
        }
    }

    /// Closes the level's seat-demand period and returns its smoothed statistics (for
    /// borrowing between levels).
    pub fn take_demand(&self) -> kapi_flowcontrol::SeatDemandStats {
        let now = self.now();
        self.lock().set.take_demand(now)
    }

    /// Whether the level queues requests (kube's `Queue` limit response) or rejects at once.
    pub fn queues(&self) -> bool {
        self.lock().set.queues()
    }

    /// Seats in use and requests waiting now.
    pub fn load(&self) -> (u32, usize) {
        let inner = self.lock();
        (inner.set.seats_in_use(), inner.set.waiting())
    }

    /// Request `id` of the flow hashed `flow_hash` arrives, needing `seats`.
    pub fn arrive(self: &Arc<Self>, id: RequestId, flow_hash: u64, seats: u32) -> Admission {
        self.admit(id, flow_hash, seats, None)
    }

    /// As [`Level::arrive`], keeping `description` for the debug dumps while it waits and runs.
    pub fn arrive_described(self: &Arc<Self>, id: RequestId, flow_hash: u64, seats: u32, description: RequestDescription) -> Admission {
        self.admit(id, flow_hash, seats, Some(Box::new(description)))
    }

    fn admit(self: &Arc<Self>, id: RequestId, flow_hash: u64, seats: u32, description: Option<Box<RequestDescription>>) -> Admission {
        let now = self.now();
        let (tx, rx) = oneshot::channel();
        let mut inner = self.lock();
        inner.waiters.insert(id, tx);
        if let Some(description) = description {
            inner.described.insert(id, Described { description, started: None });
        }
        let arrival = inner.set.arrive(now, id, flow_hash, seats);
        inner.deliver(now);
        if arrival == Arrival::Rejected {
            inner.waiters.remove(&id);
            inner.described.remove(&id);
            inner.totals.rejected += 1;
            return Admission::Rejected;
        }
        Admission::Admitted(Ticket { level: self.clone(), id, rx: Some(rx), queued: arrival == Arrival::Queued })
    }

    /// A seat is free again: dispatch what waits.
    fn finish(&self, running: Running) {
        let now = self.now();
        let mut inner = self.lock();
        inner.described.remove(&running.id);
        inner.set.finish(now, running);
        inner.deliver(now);
    }

    /// The level as kube's debug endpoints show it, taken under one lock.
    pub fn dump(&self) -> LevelDump {
        let inner = self.lock();
        let queues = inner.set.queue_states();
        let mut requests = Vec::new();
        for (index, queue) in queues.iter().enumerate() {
            for (position, (id, _)) in queue.waiting.iter().enumerate() {
                if let Some(d) = inner.described.get(id) {
                    requests.push(RequestDump { queue: Some(index), position: Some(position), started: None, description: (*d.description).clone() });
                }
            }
        }
        let mut running: Vec<RequestDump> = inner
            .described
            .values()
            .filter_map(|d| d.started.map(|(at, queue)| RequestDump { queue, position: None, started: Some(at), description: (*d.description).clone() }))
            .collect();
        // Queue by queue (queueless last), each in order of arrival.
        running.sort_by_key(|r| (r.queue.is_none(), r.queue, r.description.arrived));
        requests.extend(running);
        LevelDump { waiting: inner.set.waiting(), executing: inner.set.executing(), idle: inner.set.is_idle(), totals: inner.totals, queues, requests }
    }
}

impl Inner {
    /// Hands every dispatched request to its waiter. One whose waiter is gone (it gave up
    /// without being able to cancel, which the locking rules out, or the channel closed)
    /// frees its seat at once, which may dispatch more.
    fn deliver(&mut self, now: f64) {
        loop {
            let dispatched = self.set.take_dispatched();
            if dispatched.is_empty() {
                return;
            }
            for running in dispatched {
                self.totals.dispatched += 1;
                if let Some(d) = self.described.get_mut(&running.id) {
                    d.started = Some((SystemTime::now(), running.queue()));
                }
                let unclaimed = match self.waiters.remove(&running.id) {
                    Some(tx) => tx.send(running).err(),
                    None => Some(running),
                };
                if let Some(running) = unclaimed {
                    self.described.remove(&running.id);
                    self.set.finish(now, running);
                }
            }
        }
    }
}

/// A request's place in its level: dispatched already, or waiting in a queue. Dropping it
/// while it waits takes it out of its queue (the client went away).
#[derive(Debug)]
pub struct Ticket {
    level: Arc<Level>,
    id: RequestId,
    /// None once the ticket turned into a seat or left its queue.
    rx: Option<oneshot::Receiver<Running>>,
    /// It went into a queue on arrival (else it was dispatched at once).
    queued: bool,
}

impl Ticket {
    /// Whether the request waits in a queue (it was not dispatched on arrival).
    pub fn queued(&self) -> bool {
        self.queued
    }

    /// Waits until the request is dispatched, at most `limit`; None when it timed out and left
    /// its queue.
    pub async fn wait(mut self, limit: Duration) -> Option<Seat> {
        let rx = self.rx.as_mut()?;
        if let Ok(running) = rx.try_recv() {
            return Some(self.seat(running));
        }
        match tokio::time::timeout(limit, rx).await {
            Ok(Ok(running)) => Some(self.seat(running)),
            // The sender is only dropped after a send (or a rejection, which never makes a ticket).
            Ok(Err(_)) => None,
            Err(_) => self.leave(true).map(|running| self.seat(running)),
        }
    }

    fn seat(&mut self, running: Running) -> Seat {
        self.rx = None;
        Seat { level: self.level.clone(), running: Some(running), linger: Duration::ZERO }
    }

    /// Leaves the queue (its wait ran out, or its client left); when the request was
    /// dispatched meanwhile, its place instead.
    fn leave(&mut self, timed_out: bool) -> Option<Running> {
        let mut rx = self.rx.take()?;
        let mut inner = self.level.lock();
        if inner.set.cancel(self.id) {
            inner.waiters.remove(&self.id);
            inner.described.remove(&self.id);
            if timed_out {
                inner.totals.timed_out += 1;
            } else {
                inner.totals.cancelled += 1;
            }
            return None;
        }
        // Not waiting any more: it was dispatched, and its place was sent under this lock.
        inner.waiters.remove(&self.id);
        rx.try_recv().ok()
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let Some(running) = self.leave(false) {
            self.level.finish(running);
        }
    }
}

/// A running request's seats, given back when dropped (once its answer is sent), or
/// `linger` later.
#[derive(Debug)]
pub struct Seat {
    level: Arc<Level>,
    running: Option<Running>,
    linger: Duration,
}

impl Seat {
    /// Keeps the seats taken for `linger` after the answer (kube's final phase of a write:
    /// the work of its watch notifications, which go out after the client has its answer).
    pub fn linger(mut self, linger: Duration) -> Seat {
        self.linger = linger;
        self
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        let Some(running) = self.running.take() else { return };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) if !self.linger.is_zero() => {
                let (level, linger) = (self.level.clone(), self.linger);
                runtime.spawn(async move {
                    tokio::time::sleep(linger).await;
                    level.finish(running);
                });
            }
            _ => self.level.finish(running),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use kapi_flowcontrol::config::Queuing;

    use super::{Admission, Level};

    const ONE_QUEUE: Queuing = Queuing { queues: 1, hand_size: 1, queue_length_limit: 2 };

    fn admitted(a: Admission) -> super::Ticket {
        match a {
            Admission::Admitted(t) => t,
            Admission::Rejected => panic!("rejected"),
        }
    }

    #[tokio::test]
    async fn a_finished_seat_dispatches_the_next_waiter() {
        let level = Level::new(Some(ONE_QUEUE), 1, 0);
        let first = admitted(level.arrive(1, 7, 1)).wait(Duration::from_secs(1)).await.expect("runs at once");
        let second = admitted(level.arrive(2, 7, 1));
        assert_eq!(level.load(), (1, 1));
        let waiter = tokio::spawn(second.wait(Duration::from_secs(5)));
        tokio::task::yield_now().await;
        drop(first);
        let seat = waiter.await.unwrap().expect("dispatched when the first finished");
        assert_eq!(level.load(), (1, 0));
        drop(seat);
        assert_eq!(level.load(), (0, 0));
    }

    #[tokio::test]
    async fn full_queues_reject_and_timed_out_waiters_leave() {
        let level = Level::new(Some(ONE_QUEUE), 1, 0);
        let running = admitted(level.arrive(1, 7, 1)).wait(Duration::from_secs(1)).await.unwrap();
        let a = admitted(level.arrive(2, 7, 1));
        let b = admitted(level.arrive(3, 7, 1));
        assert!(matches!(level.arrive(4, 7, 1), Admission::Rejected), "the queue holds two");
        assert!(a.wait(Duration::from_millis(20)).await.is_none(), "timed out in its queue");
        assert_eq!(level.load(), (1, 1));
        drop(b);
        assert_eq!(level.load(), (1, 0), "a dropped ticket leaves its queue");
        drop(running);
        assert_eq!(level.load(), (0, 0), "nobody was left to dispatch");
    }

    #[tokio::test]
    async fn a_dispatched_ticket_dropped_unused_gives_its_seat_on() {
        let level = Level::new(Some(ONE_QUEUE), 1, 0);
        let running = admitted(level.arrive(1, 7, 1)).wait(Duration::from_secs(1)).await.unwrap();
        let dropped = admitted(level.arrive(2, 7, 1));
        let last = admitted(level.arrive(3, 7, 1));
        drop(running);
        // 2 holds the seat now, without having claimed it; dropping it passes it to 3.
        assert_eq!(level.load(), (1, 1));
        drop(dropped);
        assert_eq!(level.load(), (1, 0));
        assert!(last.wait(Duration::from_millis(10)).await.is_some());
        assert_eq!(level.load(), (0, 0));
    }

    #[tokio::test]
    async fn the_dump_counts_what_became_of_each_request() {
        let level = Level::new(Some(ONE_QUEUE), 1, 0);
        let running = admitted(level.arrive(1, 7, 1)).wait(Duration::from_secs(1)).await.unwrap();
        let timed_out = admitted(level.arrive(2, 7, 1));
        let cancelled = admitted(level.arrive(3, 7, 1));
        assert!(timed_out.queued() && cancelled.queued());
        assert!(matches!(level.arrive(4, 7, 1), Admission::Rejected));
        let dump = level.dump();
        assert_eq!((dump.waiting, dump.executing, dump.idle), (2, 1, false));
        assert_eq!(dump.queues.len(), 1);
        assert_eq!((dump.queues[0].waiting.clone(), dump.queues[0].executing, dump.queues[0].seats_in_use), (vec![(2, 1), (3, 1)], 1, 1));
        assert!(dump.requests.is_empty(), "nothing was described");
        assert!(timed_out.wait(Duration::from_millis(10)).await.is_none());
        drop(cancelled);
        drop(running);
        let dump = level.dump();
        assert!(dump.idle);
        assert_eq!(dump.totals, super::Totals { dispatched: 1, rejected: 1, timed_out: 1, cancelled: 1 });
    }

    #[tokio::test]
    async fn levels_without_queues_reject_beyond_their_seats() {
        let level = Level::new(None, 1, 0);
        let seat = admitted(level.arrive(1, 1, 1)).wait(Duration::ZERO).await.unwrap();
        assert!(matches!(level.arrive(2, 2, 1), Admission::Rejected));
        drop(seat);
        assert!(matches!(level.arrive(3, 3, 1), Admission::Admitted(_)));
    }
}
