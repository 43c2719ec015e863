//! Latency samples and the numbers the report prints.

use std::time::Duration;

/// Samples of one measurement.
#[derive(Default, Clone)]
pub struct Samples {
    values: Vec<Duration>,
    pub elapsed: Duration,
}

impl Samples {
    pub fn with(values: Vec<Duration>, elapsed: Duration) -> Self {
        let mut values = values;
        values.sort();
        Self { values, elapsed }
    }

    /// The samples, sorted.
    pub fn values(&self) -> &[Duration] {
        &self.values
    }

    pub fn count(&self) -> usize {
        self.values.len()
    }

    pub fn per_second(&self) -> f64 {
        self.count() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub fn percentile(&self, p: f64) -> Duration {
        if self.values.is_empty() {
            return Duration::ZERO;
        }
        let idx = ((self.values.len() as f64 - 1.0) * p).round() as usize;
        self.values[idx.min(self.values.len() - 1)]
    }
}

/// The median of repeated measurements (rounds of one configuration); 0 for none.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

pub fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_sorted_samples() {
        let s = Samples::with(
            (1..=100).rev().map(Duration::from_millis).collect(),
            Duration::from_secs(2),
        );
        assert_eq!(s.percentile(0.5), Duration::from_millis(51));
        assert_eq!(s.percentile(0.99), Duration::from_millis(99));
        assert_eq!(s.per_second(), 50.0);
    }
}
