//! The queues of one limited priority level (kube's `fairqueuing/queueset`): a request is dealt
//! a hand of queues by its flow's hash (shuffle sharding) and waits in the hand's queue with the
//! least waiting work; whenever seats are free, the queue whose head would finish first in
//! virtual time (fair queuing: each active queue advances at an equal share of the level's
//! seats) dispatches. A flow that floods the level fills its own few queues and waits there;
//! other flows keep their share.
//!
//! Beyond kube: a headroom of seats for narrow requests. kube lets wide requests (more than
//! one seat: LISTs of many objects) fill a level, and dispatches strictly in fair order, so
//! when one flow's big LISTs hold the seats and the next in order is another big LIST, every
//! other flow's GET waits for a LIST to finish (hundreds of milliseconds for a 50 MB LIST).
//! Here wide requests see the level less `headroom` seats, and while the request next in order
//! is a wide one that does not fit, narrow requests further back may run in the headroom (at
//! most `headroom` of them at once). Wide requests keep their fair order among themselves and
//! never wait for the headroom's seats; a wide request that cannot fit beside the headroom
//! still runs when the level is idle. Levels that reject instead of queuing keep kube's rule.
//!
//! A state machine without clocks or tasks: the caller passes the time (seconds since any
//! fixed origin) and runs the requests this answers as dispatched.

use std::collections::VecDeque;

use crate::config::Queuing;
use crate::demand::{DemandIntegrator, SeatDemandStats};

/// kube's estimate of a request's service time, until it finishes and the real one is known.
const ESTIMATED_SERVICE_SECONDS: f64 = 0.003;

/// A request waiting in or running through the set.
pub type RequestId = u64;

/// What becomes of a request on arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// Runs now.
    Execute,
    /// Waits in a queue until [`QueueSet::finish`] or [`QueueSet::set_limit`] dispatches it.
    Queued,
    /// Refused: its queue is full (or, without queues, no seats are free).
    Rejected,
}

#[derive(Debug)]
struct Waiting {
    id: RequestId,
    seats: u32,
    arrival_r: f64,
}

impl Waiting {
    fn work(&self) -> f64 {
        f64::from(self.seats) * ESTIMATED_SERVICE_SECONDS
    }
}

#[derive(Debug, Default)]
struct Queue {
    waiting: VecDeque<Waiting>,
    /// The virtual time at which the queue's next request may start.
    next_dispatch_r: f64,
    executing: u32,
    seats_in_use: u32,
}

impl Queue {
    fn idle(&self) -> bool {
        self.waiting.is_empty() && self.executing == 0
    }

    fn waiting_work(&self) -> f64 {
        self.waiting.iter().map(Waiting::work).sum()
    }
}

/// A running request: where its seats come from, for [`QueueSet::finish`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Running {
    /// The request.
    pub id: RequestId,
    seats: u32,
    queue: Option<usize>,
    started: f64,
    /// Dispatched into the headroom, past a wide request.
    in_headroom: bool,
}

/// The queues of one priority level.
#[derive(Debug)]
pub struct QueueSet {
    queues: Vec<Queue>,
    hand_size: usize,
    queue_length_limit: usize,
    /// Seats the level may use now (its nominal limit, moved by lending and borrowing).
    limit: u32,
    /// Seats that only narrow (one-seat) requests may take.
    headroom: u32,
    /// Narrow requests running in the headroom (dispatched past a wide one that did not fit).
    headroom_in_use: u32,
    seats_in_use: u32,
    executing: u32,
    waiting: usize,
    /// Seats the waiting requests will take.
    waiting_seats: u32,
    /// Seats in use plus seats waiting, over time (for borrowing between levels).
    demand: DemandIntegrator,
    demand_stats: SeatDemandStats,
    /// Virtual time, in seat-seconds.
    current_r: f64,
    last_time: f64,
    enqueues: usize,
    robin: usize,
    /// Requests dispatched from queues since the caller last took them.
    dispatched: Vec<Running>,
}

impl QueueSet {
    /// The queues of a level with `limit` seats; `queuing` None for levels that reject at
    /// once.
    pub fn new(queuing: Option<Queuing>, limit: u32, now: f64) -> QueueSet {
        let (queues, hand_size, queue_length_limit) = match queuing {
            Some(q) => (q.queues as usize, (q.hand_size as usize).clamp(1, (q.queues as usize).max(1)), q.queue_length_limit as usize),
            None => (0, 0, 0),
        };
        QueueSet {
            queues: (0..queues).map(|_| Queue::default()).collect(),
            hand_size,
            queue_length_limit,
            limit,
            headroom: 0,
            headroom_in_use: 0,
            seats_in_use: 0,
            executing: 0,
            waiting: 0,
            waiting_seats: 0,
            demand: DemandIntegrator::new(now),
            demand_stats: SeatDemandStats::default(),
            current_r: 0.0,
            last_time: now,
            enqueues: 0,
            robin: 0,
            dispatched: Vec::new(),
        }
    }

    /// Whether the level queues requests (else it rejects when its seats are taken).
    pub fn queues(&self) -> bool {
        !self.queues.is_empty()
    }

    /// Seats in use now.
    pub fn seats_in_use(&self) -> u32 {
        self.seats_in_use
    }

    /// Requests waiting now.
    pub fn waiting(&self) -> usize {
        self.waiting
    }

    /// Advances virtual time: each active queue progresses at an equal share of the seats the
    /// level can use for them.
    fn sync_time(&mut self, now: f64) {
        let elapsed = (now - self.last_time).max(0.0);
        self.last_time = now;
        let active = self.queues.iter().filter(|q| !q.idle()).count();
        if active == 0 {
            return;
        }
        let requested: u32 = self.queues.iter().map(|q| q.seats_in_use + q.waiting.iter().map(|w| w.seats).sum::<u32>()).sum();
        let ratio = f64::from(requested.min(self.limit)) / active as f64;
        self.current_r += ratio * elapsed;
    }

    /// A request of `seats` seats from the flow whose hash is `flow_hash` arrives. On
    /// `Execute` the request runs now; take its [`Running`] from [`QueueSet::take_dispatched`].
    pub fn arrive(&mut self, now: f64, id: RequestId, flow_hash: u64, seats: u32) -> Arrival {
        self.sync_time(now);
        let seats = seats.max(1);
        if self.queues.is_empty() {
            if !self.fits(seats) {
                return Arrival::Rejected;
            }
            self.start(Running { id, seats, queue: None, started: now, in_headroom: false });
            self.note_demand(now);
            return Arrival::Execute;
        }
        let queue = self.shuffle_shard(flow_hash);
        if self.seats_in_use >= self.limit && self.queues[queue].waiting.len() >= self.queue_length_limit {
            return Arrival::Rejected;
        }
        let q = &mut self.queues[queue];
        if q.idle() {
            q.next_dispatch_r = self.current_r;
        }
        q.waiting.push_back(Waiting { id, seats, arrival_r: self.current_r });
        self.waiting += 1;
        self.waiting_seats += seats;
        self.dispatch_as_much_as_possible(now);
        self.note_demand(now);
        if self.dispatched.iter().any(|r| r.id == id) {
            Arrival::Execute
        } else {
            Arrival::Queued
        }
    }

    /// Requests dispatched since the last call (the one that just arrived with `Execute`, and
    /// queued ones that may run now).
    pub fn take_dispatched(&mut self) -> Vec<Running> {
        std::mem::take(&mut self.dispatched)
    }

    /// A running request is done: its seats go to the queues.
    pub fn finish(&mut self, now: f64, running: Running) {
        self.sync_time(now);
        self.executing -= 1;
        self.seats_in_use -= running.seats;
        if running.in_headroom {
            self.headroom_in_use -= running.seats;
        }
        if let Some(index) = running.queue {
            let q = &mut self.queues[index];
            q.executing -= 1;
            q.seats_in_use -= running.seats;
            // The estimate charged at dispatch is replaced by what the request really took.
            let actual = (now - running.started).max(0.0);
            q.next_dispatch_r -= f64::from(running.seats) * (ESTIMATED_SERVICE_SECONDS - actual);
            Self::bound_next_dispatch(q);
        }
        self.dispatch_as_much_as_possible(now);
        self.note_demand(now);
    }

    /// A queued request gave up (its client left, or it waited too long): it leaves its
    /// queue. False when it is not waiting (already dispatched). (The demand changes as of the
    /// set's last event: the caller passes no time here.)
    pub fn cancel(&mut self, id: RequestId) -> bool {
        for q in &mut self.queues {
            if let Some(at) = q.waiting.iter().position(|w| w.id == id) {
                if let Some(gone) = q.waiting.remove(at) {
                    self.waiting_seats -= gone.seats;
                }
                self.waiting -= 1;
                let last = self.last_time;
                self.note_demand(last);
                return true;
            }
        }
        false
    }

    fn note_demand(&mut self, now: f64) {
        self.demand.set(now, f64::from(self.seats_in_use + self.waiting_seats));
    }

    /// Closes a period of seat demand (seats in use plus seats waiting) at `now` and folds it
    /// into the smoothed statistics that borrowing between levels works from.
    pub fn take_demand(&mut self, now: f64) -> SeatDemandStats {
        let obs = self.demand.reset(now);
        self.demand_stats.update(obs);
        self.demand_stats
    }

    /// The level's seats changed (borrowing and lending move them): more may run now.
    pub fn set_limit(&mut self, now: f64, limit: u32) {
        self.sync_time(now);
        self.limit = limit;
        self.dispatch_as_much_as_possible(now);
    }

    /// The seats that wide requests leave to narrow ones (the server gives each level its
    /// widest request's seats, `LevelLimits::headroom`).
    pub fn set_headroom(&mut self, now: f64, headroom: u32) {
        self.sync_time(now);
        self.headroom = headroom;
        self.dispatch_as_much_as_possible(now);
    }

    /// kube's `canAccommodateSeats`: a request wider than the whole level runs alone. A wide
    /// one sees the level less the headroom, and not the narrow requests running in it.
    fn fits(&self, seats: u32) -> bool {
        // (Levels without queues refuse what does not fit: no headroom there, as in kube.)
        let (limit, in_use) = if seats > 1 && !self.queues.is_empty() {
            (self.limit.saturating_sub(self.headroom), self.seats_in_use - self.headroom_in_use)
        } else {
            (self.limit, self.seats_in_use)
        };
        if seats > limit {
            return self.executing == 0;
        }
        in_use + seats <= limit
    }

    fn start(&mut self, running: Running) {
        self.executing += 1;
        self.seats_in_use += running.seats;
        self.dispatched.push(running);
    }

    /// Of the flow's hand, the queue with the least waiting work (ties: the first in a
    /// rotating order, so ties do not always favour one queue).
    fn shuffle_shard(&mut self, flow_hash: u64) -> usize {
        let hand = deal(flow_hash, self.queues.len(), self.hand_size);
        let offset = self.enqueues % hand.len();
        self.enqueues += 1;
        let mut best = hand[offset];
        let mut least = f64::INFINITY;
        for i in 0..hand.len() {
            let index = hand[(offset + i) % hand.len()];
            let work = self.queues[index].waiting_work();
            if work < least {
                least = work;
                best = index;
            }
        }
        best
    }

    fn dispatch_as_much_as_possible(&mut self, now: f64) {
        while self.waiting > 0 && self.seats_in_use < self.limit && self.dispatch_one(now) {}
    }

    /// Dispatches the head of the queue that would finish it first in virtual time, if its
    /// seats fit; if it is a wide request that does not, the first narrow head in that order
    /// may run in the headroom.
    fn dispatch_one(&mut self, now: f64) -> bool {
        let Some(index) = self.first_in_order(|_| true) else { return false };
        let seats = self.queues[index].waiting.front().map_or(1, |w| w.seats);
        let (index, in_headroom) = if self.fits(seats) {
            (index, false)
        } else if seats > 1 && self.headroom_in_use < self.headroom && self.seats_in_use < self.limit {
            match self.first_in_order(|w| w.seats == 1) {
                Some(narrow) => (narrow, true),
                None => return false,
            }
        } else {
            return false;
        };
        self.robin = index;
        let q = &mut self.queues[index];
        let Some(head) = q.waiting.pop_front() else { return false };
        self.waiting -= 1;
        self.waiting_seats -= head.seats;
        q.executing += 1;
        q.seats_in_use += head.seats;
        q.next_dispatch_r += head.work();
        Self::bound_next_dispatch(q);
        if in_headroom {
            self.headroom_in_use += head.seats;
        }
        self.start(Running { id: head.id, seats: head.seats, queue: Some(index), started: now, in_headroom });
        true
    }

    /// The queue whose head, among those `eligible`, would finish first in virtual time
    /// (ties: the first in a rotating order).
    fn first_in_order(&mut self, eligible: impl Fn(&Waiting) -> bool) -> Option<usize> {
        let n = self.queues.len();
        let mut best: Option<(usize, f64)> = None;
        for _ in 0..n {
            self.robin = (self.robin + 1) % n;
            let q = &self.queues[self.robin];
            if let Some(head) = q.waiting.front().filter(|h| eligible(h)) {
                let finish = q.next_dispatch_r + head.work();
                if best.is_none_or(|(_, f)| finish < f) {
                    best = Some((self.robin, finish));
                }
            }
        }
        best.map(|(index, _)| index)
    }

    /// A queue's next start is never before its oldest waiting request arrived.
    fn bound_next_dispatch(q: &mut Queue) {
        if let Some(oldest) = q.waiting.front() {
            q.next_dispatch_r = q.next_dispatch_r.max(oldest.arrival_r);
        }
    }

    /// Requests running now (dispatched and not finished).
    pub fn executing(&self) -> u32 {
        self.executing
    }

    /// kube's `IsIdle`: nothing waits and nothing runs.
    pub fn is_idle(&self) -> bool {
        self.waiting == 0 && self.executing == 0
    }

    /// Each queue as it stands, in index order (kube's queue dump, for the debug endpoints).
    pub fn queue_states(&self) -> Vec<QueueState> {
        self.queues
            .iter()
            .map(|q| QueueState {
                waiting: q.waiting.iter().map(|w| (w.id, w.seats)).collect(),
                executing: q.executing,
                seats_in_use: q.seats_in_use,
                next_dispatch_r: q.next_dispatch_r,
                waiting_work: q.waiting_work(),
            })
            .collect()
    }
}

/// One queue of a [`QueueSet`] at a moment.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueState {
    /// The waiting requests, oldest first, with their seats.
    pub waiting: Vec<(RequestId, u32)>,
    /// Requests dispatched from it and running.
    pub executing: u32,
    /// Their seats.
    pub seats_in_use: u32,
    /// The virtual time (seat-seconds) at which its next request may start.
    pub next_dispatch_r: f64,
    /// The estimated work of its waiting requests, in seat-seconds.
    pub waiting_work: f64,
}

impl Running {
    /// The queue it was dispatched from (None on a level that does not queue).
    pub fn queue(&self) -> Option<usize> {
        self.queue
    }
}

/// kube's shuffle-sharding dealer: `hand_size` distinct queues of `deck_size`, drawn from the
/// hash as a mixed-radix number (so flows with different hashes rarely share a whole hand).
pub fn deal(hash: u64, deck_size: usize, hand_size: usize) -> Vec<usize> {
    let hand_size = hand_size.min(deck_size);
    let mut value = hash;
    let mut remainders = Vec::with_capacity(hand_size);
    for i in 0..hand_size {
        let radix = (deck_size - i) as u64;
        remainders.push((value % radix) as usize);
        value /= radix;
    }
    let mut hand = Vec::with_capacity(hand_size);
    for i in 0..hand_size {
        let mut card = remainders[i];
        for j in (1..=i).rev() {
            if card >= remainders[j - 1] {
                card += 1;
            }
        }
        hand.push(card);
    }
    hand
}
