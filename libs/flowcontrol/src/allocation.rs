//! How the server's concurrency limit is shared among priority levels (kube's config
//! controller): each level's nominal limit is its share of the whole, rounded up; it may lend
//! `lendablePercent` of it to others and borrow up to `borrowingLimitPercent` of it (without
//! limit when unset). The dynamic part (how much each level holds at a moment) is the
//! dispatcher's; these are its bounds.

use crate::config::PriorityLevel;

/// A level's concurrency bounds, in seats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LevelLimits {
    /// Its share of the server's limit.
    pub nominal: u32,
    /// What it keeps when it lends all it may (nominal less lendable).
    pub min: u32,
    /// What it may reach by borrowing (nominal plus borrowable).
    pub max: u32,
    /// The most seats one request may take: kube's MAX(1, MIN(ceil(15% of nominal),
    /// nominal / handSize)) for queuing levels, never over the estimator's 10.
    pub max_seats: u32,
}

impl LevelLimits {
    /// The seats wide requests leave free for narrow ones (kapi's, not kube's): as many as
    /// the widest request may take, none where every request is narrow.
    pub fn headroom(&self) -> u32 {
        if self.max_seats > 1 {
            self.max_seats
        } else {
            0
        }
    }
}

/// kube's share of a level's nominal limit that one request may occupy at most.
const MAX_SEATS_PERCENT: f64 = 0.15;
/// The work estimator's own ceiling on one request's seats (and the bound of levels that do
/// not queue).
pub const ESTIMATOR_MAX_SEATS: u32 = 10;

/// The bounds of every level (in the order given) for a server concurrency limit of
/// `server_limit` seats (kube: `--max-requests-inflight` + `--max-mutating-requests-inflight`).
pub fn allocate(server_limit: u32, levels: &[PriorityLevel]) -> Vec<LevelLimits> {
    let share_sum: f64 = levels.iter().map(|l| f64::from(l.nominal_concurrency_shares)).sum();
    levels
        .iter()
        .map(|level| {
            let nominal = if share_sum > 0.0 {
                (f64::from(server_limit) * f64::from(level.nominal_concurrency_shares) / share_sum).ceil() as u32
            } else {
                0
            };
            let lendable = (f64::from(nominal) * f64::from(level.lendable_percent) / 100.0).round() as u32;
            let borrowable = match level.borrowing_limit_percent {
                Some(percent) => (f64::from(nominal) * f64::from(percent) / 100.0).round() as u32,
                None => server_limit,
            };
            let max_seats = match level.queuing {
                Some(q) if q.hand_size > 0 => {
                    let by_share = (f64::from(nominal) * MAX_SEATS_PERCENT).ceil();
                    (by_share.min(f64::from(nominal / q.hand_size)).max(1.0) as u32).min(ESTIMATOR_MAX_SEATS)
                }
                _ => ESTIMATOR_MAX_SEATS,
            };
            LevelLimits { nominal, min: nominal.saturating_sub(lendable), max: nominal + borrowable, max_seats }
        })
        .collect()
}

/// kube's work estimate of a LIST: one seat per 100 objects it processes, between 1 and the
/// level's `max_seats`. A list served from the watch cache walks every stored object of the
/// resource; one from storage reads twice its page, or the whole resource plus the page when
/// a selector filters it.
pub fn list_seats(stored: u64, limit: Option<u64>, from_cache: bool, selector: bool, max_seats: u32) -> u32 {
    const OBJECTS_PER_SEAT: u64 = 100;
    let page = limit.filter(|l| *l > 0 && *l < stored).unwrap_or(stored);
    let processed = if from_cache {
        stored
    } else if selector {
        stored + page
    } else {
        2 * page
    };
    let seats = processed.div_ceil(OBJECTS_PER_SEAT).max(1);
    u32::try_from(seats).unwrap_or(u32::MAX).min(max_seats.max(1))
}

/// One level in a borrowing adjustment: the seats it must keep, may reach, and would use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AllocItem {
    /// The least it gets.
    pub lower: f64,
    /// The most it gets.
    pub upper: f64,
    /// What it asks for (at least `lower`).
    pub target: f64,
}

/// Below this a target counts as this, so an idle level still has a direction to grow in.
const MIN_TARGET: f64 = 0.001;

/// kube's `computeConcurrencyAllocation`: shares `required` seats so that every level gets
/// the same fraction `p` of its target, clamped to its bounds (`clamp(p × target)` summing to
/// `required`). When the bounds leave no choice, every level gets its lower (or upper) bound.
///
/// The sum is piecewise linear and non-decreasing in `p`, with breaks where a level reaches
/// one of its bounds: the answer is found on the segment between the two breaks that enclose
/// `required`.
pub fn concurrency_allocation(required: f64, items: &[AllocItem]) -> Vec<f64> {
    let target = |item: &AllocItem| item.target.max(MIN_TARGET);
    let at = |p: f64| -> Vec<f64> { items.iter().map(|i| (p * target(i)).clamp(i.lower, i.upper.max(i.lower))).collect() };
    let sum = |p: f64| -> f64 { at(p).iter().sum() };
    let low: f64 = items.iter().map(|i| i.lower).sum();
    let high: f64 = items.iter().map(|i| i.upper.max(i.lower)).sum();
    if required <= low {
        return items.iter().map(|i| i.lower).collect();
    }
    if required >= high {
        return items.iter().map(|i| i.upper.max(i.lower)).collect();
    }
    let mut breaks: Vec<f64> = items.iter().flat_map(|i| [i.lower / target(i), i.upper.max(i.lower) / target(i)]).collect();
    breaks.sort_by(f64::total_cmp);
    let mut previous = 0.0;
    for p in breaks {
        let reached = sum(p);
        if reached >= required {
            let before = sum(previous);
            let p = if reached > before { previous + (p - previous) * (required - before) / (reached - before) } else { p };
            return at(p);
        }
        previous = p;
    }
    items.iter().map(|i| i.upper.max(i.lower)).collect()
}

/// kube's borrowing adjustment (every 10 s): each limited level keeps at least its lendable
/// floor and, up to its nominal limit, the peak demand it just had; beyond that the levels'
/// nominal seats go where the smoothed demand is, each within `[min, max]`. Returns the
/// current limit of each level, in the order given.
pub fn borrowing_limits(levels: &[(LevelLimits, crate::demand::SeatDemandStats)]) -> Vec<u32> {
    let required: f64 = levels.iter().map(|(l, _)| f64::from(l.nominal)).sum();
    let items: Vec<AllocItem> = levels
        .iter()
        .map(|(limits, demand)| {
            let lower = f64::from(limits.min).max(f64::from(limits.nominal).min(demand.high_watermark));
            AllocItem { lower, upper: f64::from(limits.max), target: lower.max(demand.smoothed) }
        })
        .collect();
    concurrency_allocation(required, &items).into_iter().map(|a| a.round().max(0.0) as u32).collect()
}
