//! Borrowing between priority levels: kube's fair allocation of the levels' nominal seats by
//! their demand, within each level's lendable floor and borrowing ceiling, and the seat
//! demand a level's queues report for it.

use kapi_flowcontrol::config::Queuing;
use kapi_flowcontrol::{borrowing_limits, concurrency_allocation, AllocItem, LevelLimits, QueueSet, SeatDemandStats};

fn item(lower: f64, upper: f64, target: f64) -> AllocItem {
    AllocItem { lower, upper, target }
}

fn close(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6)
}

#[test]
fn seats_go_in_proportion_to_targets_within_the_bounds() {
    // No bound applies: 30 seats in proportion 1:2.
    let a = concurrency_allocation(30.0, &[item(0.0, 100.0, 10.0), item(0.0, 100.0, 20.0)]);
    assert!(close(&a, &[10.0, 20.0]), "{a:?}");
    // The first is capped at 5: the rest goes to the second.
    let a = concurrency_allocation(30.0, &[item(0.0, 5.0, 10.0), item(0.0, 100.0, 20.0)]);
    assert!(close(&a, &[5.0, 25.0]), "{a:?}");
    // A floor above the fair share is kept; the others share what is left by their targets.
    let a = concurrency_allocation(30.0, &[item(12.0, 40.0, 12.0), item(0.0, 40.0, 1.0), item(0.0, 40.0, 3.0)]);
    assert!((a.iter().sum::<f64>() - 30.0).abs() < 1e-6, "{a:?}");
    assert!(a[0] >= 12.0 && (a[2] / a[1] - 3.0).abs() < 1e-6, "{a:?}");
    // Idle levels (target 0) share what nobody asks for evenly.
    let a = concurrency_allocation(9.0, &[item(0.0, 10.0, 0.0), item(0.0, 10.0, 0.0), item(0.0, 10.0, 0.0)]);
    assert!(close(&a, &[3.0, 3.0, 3.0]), "{a:?}");
    // No room: every level at its bound.
    assert!(close(&concurrency_allocation(5.0, &[item(3.0, 4.0, 4.0), item(2.0, 9.0, 9.0)]), &[3.0, 2.0]));
    assert!(close(&concurrency_allocation(50.0, &[item(3.0, 4.0, 4.0), item(2.0, 9.0, 9.0)]), &[4.0, 9.0]));
}

fn limits(nominal: u32, min: u32, max: u32) -> LevelLimits {
    LevelLimits { nominal, min, max, max_seats: 1 }
}

fn demand(smoothed: f64, high_watermark: f64) -> SeatDemandStats {
    SeatDemandStats { smoothed, high_watermark, ..Default::default() }
}

#[test]
fn a_busy_level_borrows_what_idle_ones_may_lend() {
    // A (nominal 10, lends up to 5, borrows without limit) is flooded; B (nominal 20, lends
    // up to 15) is idle; C (nominal 10, lends nothing) is idle.
    let levels = [(limits(10, 5, 50), demand(100.0, 100.0)), (limits(20, 5, 40), demand(0.0, 0.0)), (limits(10, 10, 10), demand(0.0, 0.0))];
    let current = borrowing_limits(&levels);
    assert_eq!(current, vec![25, 5, 10], "A takes everything B may lend, C keeps all");
    assert_eq!(current.iter().sum::<u32>(), 40, "the nominal total is kept");
}

#[test]
fn a_borrowing_limit_caps_the_borrower_and_a_lender_keeps_its_recent_peak() {
    // A may borrow only 5 more; B had a peak of 12 seats in the last period.
    let levels = [(limits(10, 5, 15), demand(100.0, 100.0)), (limits(20, 5, 40), demand(2.0, 12.0))];
    let current = borrowing_limits(&levels);
    assert_eq!(current[0], 15, "{current:?}");
    assert!(current[1] >= 12, "B keeps its peak up to its nominal: {current:?}");
    assert_eq!(current.iter().sum::<u32>(), 30);
    // With no demand anywhere each level's target is its floor: the seats go in proportion
    // to the floors (as in kube), here evenly.
    let idle = borrowing_limits(&[(limits(10, 5, 50), demand(0.0, 0.0)), (limits(20, 5, 40), demand(0.0, 0.0))]);
    assert_eq!(idle, vec![15, 15]);
}

#[test]
fn the_queues_report_seats_running_and_waiting_as_demand() {
    let queuing = Queuing { queues: 8, hand_size: 2, queue_length_limit: 10 };
    let mut set = QueueSet::new(Some(queuing), 2, 0.0);
    // Two seats run from t=0; three more requests of 2 seats wait from t=1 to t=3.
    set.arrive(0.0, 1, 11, 1);
    set.arrive(0.0, 2, 12, 1);
    for id in 3..6 {
        set.arrive(1.0, id, 10 + id, 2);
    }
    assert_eq!(set.waiting(), 3);
    for id in 3..6 {
        assert!(set.cancel(id));
    }
    let running = set.take_dispatched();
    for r in running {
        set.finish(3.0, r);
    }
    // Demand: 2 seats for 1 s, then (the cancels count from the last event, t=1) back to 2
    // until both finish at t=3; then 0 until t=4. Peak 8.
    let stats = set.take_demand(4.0);
    assert_eq!(stats.high_watermark, 8.0);
    assert!((stats.average - 1.5).abs() < 1e-9, "{stats:?}");
    assert!(stats.smoothed >= stats.average);
    assert_eq!(set.take_demand(5.0).high_watermark, 0.0, "a new period starts at the demand of the moment");
}
