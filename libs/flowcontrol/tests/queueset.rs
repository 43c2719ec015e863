//! Fair queuing of one priority level: flows share the seats evenly however hard one pushes,
//! queues bound what waits, and levels without queues refuse at once.

use kapi_flowcontrol::config::Queuing;
use kapi_flowcontrol::queueset::deal;
use kapi_flowcontrol::{Arrival, QueueSet, Running};

#[test]
fn hands_are_distinct_queues_of_the_deck() {
    assert_eq!(deal(0, 64, 3), vec![0, 1, 2]);
    for hash in [1u64, 7, 12_345, u64::MAX, 0x9e37_79b9_7f4a_7c15] {
        let hand = deal(hash, 64, 6);
        assert_eq!(hand.len(), 6);
        assert!(hand.iter().all(|&c| c < 64), "{hand:?}");
        let mut sorted = hand.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 6, "distinct: {hand:?}");
    }
    assert_ne!(deal(1, 64, 6), deal(2, 64, 6));
}

/// Runs every dispatched request for `duration` and returns the ids in dispatch order.
fn drain(set: &mut QueueSet, mut now: f64, duration: f64) -> Vec<u64> {
    let mut order = Vec::new();
    let mut running: Vec<Running> = set.take_dispatched();
    while let Some(r) = running.pop() {
        order.push(r.id);
        now += duration;
        set.finish(now, r);
        running.extend(set.take_dispatched());
    }
    order
}

#[test]
fn a_flooding_flow_gets_its_share_not_the_level() {
    // One seat; the flood arrives first with 40 requests, then a quiet flow with 5.
    let queuing = Queuing { queues: 64, hand_size: 6, queue_length_limit: 50 };
    let mut set = QueueSet::new(Some(queuing), 1, 0.0);
    let (flood, quiet) = (0x1111_2222_3333_4444u64, 0x9999_8888_7777_6666u64);
    for id in 0..40 {
        let arrival = set.arrive(0.0, id, flood, 1);
        assert_ne!(arrival, Arrival::Rejected, "request {id}");
    }
    for id in 100..105 {
        assert_eq!(set.arrive(0.0, id, quiet, 1), Arrival::Queued);
    }
    let order = drain(&mut set, 0.0, 0.003);
    assert_eq!(order.len(), 45);
    // The quiet flow does not wait behind the flood: all of its 5 run within the first 12
    // dispatches (FIFO would run them last, at 41-45).
    let last_quiet = order.iter().rposition(|id| *id >= 100).expect("quiet ran");
    assert!(last_quiet < 12, "quiet flow's last request at {last_quiet}: {order:?}");
}

#[test]
fn a_full_queue_rejects_and_the_rest_wait_their_turn() {
    let queuing = Queuing { queues: 1, hand_size: 1, queue_length_limit: 2 };
    let mut set = QueueSet::new(Some(queuing), 1, 0.0);
    assert_eq!(set.arrive(0.0, 1, 7, 1), Arrival::Execute);
    let first = set.take_dispatched();
    assert_eq!(first.len(), 1);
    assert_eq!(set.arrive(0.0, 2, 7, 1), Arrival::Queued);
    assert_eq!(set.arrive(0.0, 3, 7, 1), Arrival::Queued);
    assert_eq!(set.arrive(0.0, 4, 7, 1), Arrival::Rejected);
    assert_eq!(set.waiting(), 2);
    // A waiting request may leave; the next finish dispatches the one that stayed.
    assert!(set.cancel(2));
    assert!(!set.cancel(2));
    set.finish(0.01, first[0]);
    let next = set.take_dispatched();
    assert_eq!(next.iter().map(|r| r.id).collect::<Vec<_>>(), vec![3]);
    assert_eq!((set.waiting(), set.seats_in_use()), (0, 1));
}

#[test]
fn levels_without_queues_reject_when_their_seats_are_taken() {
    let mut set = QueueSet::new(None, 2, 0.0);
    assert_eq!(set.arrive(0.0, 1, 1, 1), Arrival::Execute);
    assert_eq!(set.arrive(0.0, 2, 2, 1), Arrival::Execute);
    assert_eq!(set.arrive(0.0, 3, 3, 1), Arrival::Rejected);
    let running = set.take_dispatched();
    set.finish(0.1, running[0]);
    assert_eq!(set.arrive(0.1, 4, 4, 1), Arrival::Execute);
    // A request wider than the level runs only alone.
    let mut wide = QueueSet::new(None, 2, 0.0);
    assert_eq!(wide.arrive(0.0, 1, 1, 5), Arrival::Execute);
    assert_eq!(wide.arrive(0.0, 2, 1, 1), Arrival::Rejected);
}

#[test]
fn more_seats_dispatch_what_waits() {
    let queuing = Queuing { queues: 8, hand_size: 2, queue_length_limit: 10 };
    let mut set = QueueSet::new(Some(queuing), 1, 0.0);
    for id in 0..4 {
        set.arrive(0.0, id, id * 7919, 1);
    }
    assert_eq!(set.take_dispatched().len(), 1);
    set.set_limit(0.0, 3);
    assert_eq!(set.take_dispatched().len(), 2);
    assert_eq!((set.waiting(), set.seats_in_use()), (1, 3));
}

#[test]
fn wide_requests_leave_narrow_ones_a_place() {
    let queuing = Queuing { queues: 64, hand_size: 6, queue_length_limit: 50 };
    let (flood, quiet) = (0x1111_2222_3333_4444u64, 0x9999_8888_7777_6666u64);
    // kube's rule: one flow's 8-seat LISTs take every seat they fit in (6 of them in 48), and
    // another flow's GET waits until one of them finishes.
    let mut kube = QueueSet::new(Some(queuing), 48, 0.0);
    for id in 0..20 {
        assert_ne!(kube.arrive(0.0, id, flood, 8), Arrival::Rejected);
    }
    assert_eq!(kube.take_dispatched().len(), 6);
    assert_eq!(kube.arrive(0.0, 100, quiet, 1), Arrival::Queued);

    // With 8 seats of headroom the LISTs stop at 40 seats, and the other flow's GETs run at once.
    let mut set = QueueSet::new(Some(queuing), 48, 0.0);
    set.set_headroom(0.0, 8);
    for id in 0..20 {
        assert_ne!(set.arrive(0.0, id, flood, 8), Arrival::Rejected);
    }
    assert_eq!((set.take_dispatched().len(), set.seats_in_use()), (5, 40));
    for id in 100..105 {
        assert_eq!(set.arrive(0.0, id, quiet, 1), Arrival::Execute, "GET {id}");
    }
    assert_eq!(set.seats_in_use(), 45);

    // A wide request that cannot fit beside the headroom runs when nothing else does.
    let mut small = QueueSet::new(Some(queuing), 10, 0.0);
    small.set_headroom(0.0, 8);
    assert_eq!(small.arrive(0.0, 1, flood, 8), Arrival::Execute);
    assert_eq!(small.arrive(0.0, 2, flood, 8), Arrival::Queued);
    assert_eq!(small.arrive(0.0, 3, quiet, 1), Arrival::Execute);
    let first = small.take_dispatched();
    assert_eq!(first.iter().map(|r| r.id).collect::<Vec<_>>(), vec![1, 3]);
    small.finish(0.5, first[0]);
    assert!(small.take_dispatched().is_empty(), "the GET still runs: the second LIST waits to run alone");
    small.finish(0.6, first[1]);
    assert_eq!(small.take_dispatched().iter().map(|r| r.id).collect::<Vec<_>>(), vec![2]);

    // Levels that reject instead of queuing keep kube's rule.
    let mut reject = QueueSet::new(None, 16, 0.0);
    reject.set_headroom(0.0, 8);
    assert_eq!(reject.arrive(0.0, 1, flood, 8), Arrival::Execute);
    assert_eq!(reject.arrive(0.0, 2, flood, 8), Arrival::Execute);
}

#[test]
fn narrow_requests_pass_a_wide_one_that_waits_only_within_the_headroom() {
    // Two queues of one each: flow `a` (hash 0) in queue 0, flow `q` (hash 1) in queue 1.
    let queuing = Queuing { queues: 2, hand_size: 1, queue_length_limit: 50 };
    let (a, q) = (0u64, 1u64);
    let ids = |running: Vec<Running>| running.iter().map(|r| r.id).collect::<Vec<_>>();
    let mut set = QueueSet::new(Some(queuing), 10, 0.0);
    set.set_headroom(0.0, 2);
    for id in 1..=3 {
        assert_eq!(set.arrive(0.0, id, q, 1), Arrival::Execute);
    }
    // An 8-seat request sees 10 - 2 seats, 3 of them taken: it waits for q's to finish.
    assert_eq!(set.arrive(0.0, 10, a, 8), Arrival::Queued);
    let running = set.take_dispatched();
    for r in running {
        set.finish(1.0, r);
    }
    assert_eq!(ids(set.take_dispatched()), vec![10]);
    // a is owed service: its next request comes first in fair order, and does not fit. q's
    // requests pass it in the headroom, two at most.
    assert_eq!(set.arrive(1.0, 11, a, 8), Arrival::Queued);
    assert_eq!(set.arrive(1.0, 4, q, 1), Arrival::Execute);
    assert_eq!(set.arrive(1.0, 5, q, 1), Arrival::Execute);
    assert_eq!(set.arrive(1.0, 6, q, 1), Arrival::Queued);
    let in_headroom = set.take_dispatched();
    assert_eq!(ids(in_headroom.clone()), vec![4, 5]);
    // They never hold a's seats: once its first request ends, its second runs beside them.
    let first = in_headroom[0];
    set.finish(1.01, first);
    assert_eq!(ids(set.take_dispatched()), vec![6], "a freed headroom seat takes the next narrow one");
    let mut kube = QueueSet::new(Some(queuing), 10, 0.0);
    for id in 1..=3 {
        assert_eq!(kube.arrive(0.0, id, q, 1), Arrival::Execute);
    }
    // Without headroom (kube) the wide request runs beside q's, and q's next one waits its turn.
    assert_eq!(kube.arrive(0.0, 10, a, 8), Arrival::Queued);
    for r in kube.take_dispatched() {
        kube.finish(1.0, r);
    }
    assert_eq!(ids(kube.take_dispatched()), vec![10]);
    assert_eq!(kube.arrive(1.0, 11, a, 8), Arrival::Queued);
    assert_eq!(kube.arrive(1.0, 4, q, 1), Arrival::Queued, "kube's fair order: a's wide request first");
}

/// Two flows flood one level with equal-cost requests (0.1 s on a seat) arriving at fixed
/// rates, `light` per second for one and `light * ratio` for the other, for 60 s of simulated
/// time; answers the requests each flow got dispatched after the first second (the queues are
/// full by then) and the requests refused.
fn two_floods(queuing: Queuing, seats: u32, flows: [u64; 2], light: f64, ratio: f64) -> ([u32; 2], u32) {
    const SERVICE: f64 = 0.1;
    const END: f64 = 60.0;
    let mut set = QueueSet::new(Some(queuing), seats, 0.0);
    let period = [1.0 / light, 1.0 / (light * ratio)];
    let mut next_arrival = [0.0, 0.0];
    let mut running: Vec<(f64, Running)> = Vec::new();
    let mut flow_of = std::collections::HashMap::new();
    let (mut dispatched, mut refused, mut next_id) = ([0u32; 2], 0u32, 0u64);
    loop {
        let finish = running.iter().enumerate().min_by(|a, b| a.1 .0.total_cmp(&b.1 .0)).map(|(i, r)| (i, r.0));
        let arrival = if next_arrival[0] <= next_arrival[1] { 0 } else { 1 };
        let now = match finish {
            Some((i, at)) if at <= next_arrival[arrival] => {
                let (_, r) = running.swap_remove(i);
                set.finish(at, r);
                at
            }
            _ => {
                let now = next_arrival[arrival];
                next_arrival[arrival] += period[arrival];
                next_id += 1;
                flow_of.insert(next_id, arrival);
                if set.arrive(now, next_id, flows[arrival], 1) == Arrival::Rejected {
                    refused += 1;
                }
                now
            }
        };
        if now > END {
            return (dispatched, refused);
        }
        for r in set.take_dispatched() {
            if now >= 1.0 {
                dispatched[flow_of[&r.id]] += 1;
            }
            running.push((now + SERVICE, r));
        }
    }
}

#[test]
fn two_flooding_flows_share_a_level_evenly_however_hard_each_pushes() {
    // Two flows whose hands of queues do not overlap (fair queuing is fair among queues; flows
    // that share a queue share its share, as in kube): the first hash after `a` dealt apart.
    let kube_default = Queuing { queues: 64, hand_size: 8, queue_length_limit: 50 };
    let one_queue_each = Queuing { queues: 128, hand_size: 1, queue_length_limit: 50 };
    let a = 0x1111_2222_3333_4444u64;
    let apart = |b: &u64| [kube_default, one_queue_each].iter().all(|q| {
        let (n, h) = (q.queues as usize, q.hand_size as usize);
        deal(a, n, h).iter().all(|c| !deal(*b, n, h).contains(c))
    });
    let b = (a + 1..).find(apart).unwrap();
    for queuing in [kube_default, one_queue_each] {
        // 4 seats of 0.1 s serve 40 requests a second; each flow alone asks for at least that.
        for ratio in [1.0, 10.0] {
            let (dispatched, refused) = two_floods(queuing, 4, [a, b], 40.0, ratio);
            let total = dispatched[0] + dispatched[1];
            let (lo, hi) = (dispatched[0].min(dispatched[1]), dispatched[0].max(dispatched[1]));
            eprintln!("{queuing:?}, one flow sending {ratio}x the other: dispatched {dispatched:?}, {refused} refused");
            assert!((2300..=2400).contains(&total), "the level's 4 seats stay busy for 59 s: {total}");
            assert!(f64::from(hi - lo) <= 0.2 * f64::from(hi), "not within 20%: {dispatched:?} ({queuing:?}, ratio {ratio})");
            assert!(refused > 0, "the floods overflow their queues");
        }
    }
    // Without fair queuing (one FIFO queue for both) the flow sending 10x gets about 10x.
    let fifo = Queuing { queues: 1, hand_size: 1, queue_length_limit: 50 };
    let (dispatched, _) = two_floods(fifo, 4, [a, b], 40.0, 10.0);
    eprintln!("one FIFO queue, one flow sending 10x the other: dispatched {dispatched:?}");
    assert!(dispatched[1] > 5 * dispatched[0], "{dispatched:?}");
}
