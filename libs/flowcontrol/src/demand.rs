//! A level's seat demand over time (kube's `fairqueuing.Integrator` and `seatDemandStats`):
//! the seats its requests hold or wait for, integrated between two borrowing adjustments, so
//! the adjustment sees the average, spread and peak of the demand over the whole period rather
//! than the value at the moment it runs.

/// What a period of demand looked like.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct DemandObservation {
    /// Seconds the period lasted.
    pub duration: f64,
    /// Time-weighted mean demand.
    pub average: f64,
    /// Time-weighted standard deviation of the demand.
    pub deviation: f64,
    /// The highest demand seen in the period.
    pub max: f64,
}

/// Integrates a piecewise-constant value over time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DemandIntegrator {
    start: f64,
    last_change: f64,
    value: f64,
    integral: f64,
    integral_of_squares: f64,
    max: f64,
}

impl DemandIntegrator {
    /// An integrator starting at `now` with demand 0.
    pub fn new(now: f64) -> DemandIntegrator {
        DemandIntegrator { start: now, last_change: now, value: 0.0, integral: 0.0, integral_of_squares: 0.0, max: 0.0 }
    }

    fn accumulate(&mut self, now: f64) {
        let elapsed = (now - self.last_change).max(0.0);
        self.integral += self.value * elapsed;
        self.integral_of_squares += self.value * self.value * elapsed;
        self.last_change = self.last_change.max(now);
    }

    /// The demand is `value` from `now` on.
    pub fn set(&mut self, now: f64, value: f64) {
        self.accumulate(now);
        self.value = value;
        self.max = self.max.max(value);
    }

    /// The period up to `now`; a new one starts then, at the current demand.
    pub fn reset(&mut self, now: f64) -> DemandObservation {
        self.accumulate(now);
        let duration = (now - self.start).max(0.0);
        let observation = if duration > 0.0 {
            let average = self.integral / duration;
            let variance = (self.integral_of_squares / duration - average * average).max(0.0);
            DemandObservation { duration, average, deviation: variance.sqrt(), max: self.max }
        } else {
            DemandObservation { duration, average: self.value, deviation: 0.0, max: self.max }
        };
        *self = DemandIntegrator { start: now, last_change: now, value: self.value, integral: 0.0, integral_of_squares: 0.0, max: self.value };
        observation
    }
}

/// kube's weight of the past in the smoothed demand: per 10 s adjustment, so a burst's
/// envelope fades over minutes while a rise is taken at once.
const SMOOTHING: f64 = 0.977;

/// The demand statistics a borrowing adjustment works from.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SeatDemandStats {
    /// The last period's average.
    pub average: f64,
    /// The last period's standard deviation.
    pub deviation: f64,
    /// The last period's peak.
    pub high_watermark: f64,
    /// average + deviation, smoothed: it follows a rise at once and a fall slowly.
    pub smoothed: f64,
}

impl SeatDemandStats {
    /// Takes in one more period.
    pub fn update(&mut self, obs: DemandObservation) {
        self.high_watermark = obs.max;
        if obs.duration <= 0.0 {
            return;
        }
        self.average = obs.average;
        self.deviation = if obs.deviation.is_nan() { 0.0 } else { obs.deviation };
        let envelope = self.average + self.deviation;
        self.smoothed = envelope.max(SMOOTHING * self.smoothed + (1.0 - SMOOTHING) * envelope);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_average_weighs_each_value_by_how_long_it_held() {
        let mut d = DemandIntegrator::new(0.0);
        d.set(0.0, 4.0);
        d.set(1.0, 0.0);
        let obs = d.reset(4.0);
        assert_eq!(obs.duration, 4.0);
        assert!((obs.average - 1.0).abs() < 1e-9);
        // E[x²] = 16/4 = 4, mean² = 1: deviation √3.
        assert!((obs.deviation - 3f64.sqrt()).abs() < 1e-9);
        assert_eq!(obs.max, 4.0);
        // The next period starts at the demand of the moment, with that as its peak.
        let next = d.reset(6.0);
        assert_eq!((next.average, next.max), (0.0, 0.0));
    }

    #[test]
    fn the_smoothed_demand_rises_at_once_and_falls_slowly() {
        let mut stats = SeatDemandStats::default();
        stats.update(DemandObservation { duration: 10.0, average: 20.0, deviation: 5.0, max: 30.0 });
        assert_eq!(stats.smoothed, 25.0);
        stats.update(DemandObservation { duration: 10.0, average: 0.0, deviation: 0.0, max: 0.0 });
        assert!(stats.smoothed > 24.0 && stats.smoothed < 25.0, "{}", stats.smoothed);
        assert_eq!(stats.high_watermark, 0.0);
    }
}
