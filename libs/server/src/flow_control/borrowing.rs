//! kube's periodic rebalancing between priority levels (the config controller's
//! `updateBorrowing`, every 10 s): a level whose demand exceeds its nominal seats borrows
//! what idle levels may lend (`lendablePercent`), up to its own `borrowingLimitPercent`; a
//! lender gets its seats back at the next adjustment once its own demand rises, since every
//! level keeps at least its recent peak demand up to its nominal limit.

use std::sync::Weak;
use std::time::Duration;

use super::FlowControl;

/// kube's `borrowingAdjustmentPeriod`.
pub const PERIOD: Duration = Duration::from_secs(10);

/// Adjusts the levels of `fc` every [`PERIOD`] for as long as the server holds it.
pub async fn run(fc: Weak<FlowControl>) {
    let mut tick = tokio::time::interval(PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first tick is immediate: the first period starts now.
    tick.tick().await;
    loop {
        tick.tick().await;
        let Some(fc) = fc.upgrade() else { return };
        fc.rebalance();
    }
}
