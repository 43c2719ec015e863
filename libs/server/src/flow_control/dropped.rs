//! kube's `DroppedRequestsTracker`: the `Retry-After` of a priority level's 429 follows its
//! recent rejections, as TCP's congestion window does. Each level starts at 1 s. When the first
//! rejection of a new second arrives, the level's rejections of the seconds before it (the last
//! `Retry-After` seconds of them) are counted: at least three per second of `Retry-After`
//! doubles it (at most 32 s, and at most once per `Retry-After` seconds, so that one spike is
//! one step), fewer than one per second takes a second off. A level that rejects seldom keeps
//! answering 1; a level that keeps rejecting tells its clients to stay away longer, so they
//! stop piling onto it; once the load is gone it comes back down a second at a time.
//!
//! The tracker is on the rejection path only, under one lock held for a few operations on a
//! short history: no allocation beyond a level's first rejection and its 32 s of history.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// kube's `maxRetryAfter`: the longest wait a 429 asks for, and the history kept (seconds).
const MAX_RETRY_AFTER: i64 = 32;

/// One level's rejections, in whole seconds of Unix time.
#[derive(Debug)]
struct Stats {
    /// Earlier seconds with rejections: (second, count), oldest first, at most
    /// [`MAX_RETRY_AFTER`] seconds before the latest.
    history: VecDeque<(i64, i64)>,
    /// The second being counted and its rejections so far.
    current: Option<(i64, i64)>,
    retry_after: i64,
    /// When `retry_after` last grew (0: it may grow at once).
    grown_at: i64,
}

impl Stats {
    fn new() -> Stats {
        Stats { history: VecDeque::new(), current: None, retry_after: 1, grown_at: 0 }
    }

    fn record(&mut self, now: i64) {
        match &mut self.current {
            Some((second, count)) if *second == now => *count += 1,
            current => {
                // The first rejection of a new second closes the previous one, and only then is
                // `retry_after` reconsidered, from the seconds before this one.
                if let Some((second, count)) = current.replace((now, 1)) {
                    self.close(second, count);
                }
                self.adjust(now);
            }
        }
    }

    /// Files a finished second and forgets what is older than [`MAX_RETRY_AFTER`] before it.
    fn close(&mut self, second: i64, count: i64) {
        self.history.push_back((second, count));
        while self.history.front().is_some_and(|(s, _)| second - s > MAX_RETRY_AFTER) {
            self.history.pop_front();
        }
    }

    /// kube's `updateRetryAfterIfNeededLocked`: the rejections of [now - retry_after, now).
    fn adjust(&mut self, now: i64) {
        let window = self.retry_after;
        let recent: i64 = self.history.iter().rev().take_while(|(s, _)| now - s <= window).filter(|(s, _)| *s < now).map(|(_, n)| n).sum();
        if now - self.grown_at >= window && recent >= 3 * window {
            self.retry_after = (window * 2).min(MAX_RETRY_AFTER);
            self.grown_at = now;
        } else if recent < window && window > 1 {
            self.retry_after = window - 1;
        }
    }
}

/// The rejections of every priority level, for their 429s' `Retry-After`.
#[derive(Debug, Default)]
pub struct DroppedRequests {
    levels: Mutex<HashMap<String, Stats>>,
}

fn unix_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

impl DroppedRequests {
    /// Counts a rejection by `level` now and answers the `Retry-After` (seconds) to send with it,
    /// as kube's filter does: recorded first, so this rejection may already move the value.
    pub fn reject(&self, level: &str) -> u64 {
        self.reject_at(level, unix_now())
    }

    /// [`Self::reject`] at the Unix second `now`.
    pub fn reject_at(&self, level: &str, now: i64) -> u64 {
        let mut levels = self.levels.lock().unwrap_or_else(|e| e.into_inner());
        let stats = match levels.get_mut(level) {
            Some(stats) => stats,
            None => levels.entry(level.to_owned()).or_insert_with(Stats::new),
        };
        stats.record(now);
        stats.retry_after.unsigned_abs()
    }

    /// The `Retry-After` (seconds) `level` would answer now without a new rejection: 1 for a
    /// level that never rejected.
    pub fn retry_after(&self, level: &str) -> u64 {
        let levels = self.levels.lock().unwrap_or_else(|e| e.into_inner());
        levels.get(level).map_or(1, |s| s.retry_after.unsigned_abs())
    }
}

#[cfg(test)]
mod tests {
    use super::DroppedRequests;

    const T: i64 = 1_700_000_000;

    /// `n` rejections by `level` in second `at`, answering the last one's `Retry-After`.
    fn burst(d: &DroppedRequests, level: &str, at: i64, n: usize) -> u64 {
        (0..n).map(|_| d.reject_at(level, at)).last().unwrap_or(0)
    }

    #[test]
    fn a_level_starts_at_one_second_and_a_single_spike_is_answered_one() {
        let d = DroppedRequests::default();
        assert_eq!(d.retry_after("tiny"), 1);
        // The counting of a second happens when the next one starts: all of a spike's second
        // answers 1, however large.
        assert_eq!(burst(&d, "tiny", T, 100), 1);
        assert_eq!(d.retry_after("tiny"), 1);
    }

    #[test]
    fn sustained_rejections_double_it_at_most_once_per_retry_after_up_to_32() {
        let d = DroppedRequests::default();
        assert_eq!(burst(&d, "l", T, 3), 1);
        // Three in the second before: doubled by the first rejection of T+1.
        assert_eq!(d.reject_at("l", T + 1), 2);
        assert_eq!(burst(&d, "l", T + 1, 10), 2);
        // Grown at T+1 with a 2 s window: T+2 may not grow it again, even after 11 rejections.
        assert_eq!(burst(&d, "l", T + 2, 10), 2);
        // T+3: [T+1, T+3) held 21 >= 3 * 2, and 2 s have passed: 4.
        assert_eq!(d.reject_at("l", T + 3), 4);
        let mut now = T + 3;
        let mut seen = vec![4];
        while now < T + 200 {
            burst(&d, "l", now, 200);
            now += 1;
            let v = d.reject_at("l", now);
            if seen.last() != Some(&v) {
                seen.push(v);
            }
        }
        assert_eq!(seen, [4, 8, 16, 32], "doubling, capped at kube's 32 s");
    }

    #[test]
    fn too_few_rejections_do_not_grow_it() {
        let d = DroppedRequests::default();
        for s in 0..10 {
            // Two a second is below three per second of the 1 s window.
            assert_eq!(burst(&d, "l", T + s, 2), 1);
        }
    }

    #[test]
    fn it_decays_a_second_at_a_time_once_the_rejections_stop() {
        let d = DroppedRequests::default();
        for s in 0..8 {
            burst(&d, "l", T + s, 50);
        }
        assert_eq!(d.retry_after("l"), 8);
        // Quiet seconds change nothing until the next rejection, which finds its window (the
        // last 8 s) nearly empty: one second less each time.
        assert_eq!(d.reject_at("l", T + 30), 7);
        assert_eq!(d.reject_at("l", T + 31), 6);
        for (at, want) in [(T + 40, 5), (T + 50, 4), (T + 60, 3), (T + 70, 2), (T + 80, 1), (T + 90, 1)] {
            assert_eq!(d.reject_at("l", at), want, "at T+{}", at - T);
        }
        // A trickle counts: one rejection per second of the window holds the value.
        let d = DroppedRequests::default();
        for s in 0..4 {
            burst(&d, "l", T + s, 50);
        }
        assert_eq!(d.reject_at("l", T + 10), 3);
        assert_eq!(d.reject_at("l", T + 11), 2, "1 rejection in [T+8, T+11)");
        assert_eq!(d.reject_at("l", T + 12), 2, "2 in [T+10, T+12): not fewer than 2");
    }

    #[test]
    fn levels_are_tracked_apart() {
        let d = DroppedRequests::default();
        burst(&d, "busy", T, 10);
        assert_eq!(d.reject_at("busy", T + 1), 2);
        assert_eq!(d.reject_at("calm", T + 1), 1);
        assert_eq!(d.retry_after("calm"), 1);
        assert_eq!(d.retry_after("busy"), 2);
    }

    #[test]
    fn history_older_than_32_seconds_is_forgotten() {
        let d = DroppedRequests::default();
        for s in 0..100 {
            burst(&d, "l", T + s, 1);
        }
        let levels = d.levels.lock().unwrap();
        assert!(levels["l"].history.len() <= 33, "{}", levels["l"].history.len());
    }
}
