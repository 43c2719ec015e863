//! The writer's wait for another process's write lock.
//!
//! SQLite's own busy handler (`busy_timeout`) sleeps 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50
//! and then 100 ms between attempts. Replicas sharing one file hand the write lock to each
//! other every few milliseconds; a writer that lost a few rounds then slept far past the
//! moment the lock came free, and the create p99 through three replicas was 110-180 ms while a
//! write holds the lock for a few. Here the writer retries every millisecond at first, then
//! every 2 ms, until its budget (the store's busy timeout) is spent: p99 27-29 ms and more
//! creates per second (docs/perf.md, "SQLite writer's lock wait"). Waits of 50 µs to 1 ms
//! were tried too: p99 22 ms, but the polling cost a fifth of the create rate on 2 CPUs.
//!
//! rusqlite takes the handler as a plain function, so the budget and the start of the current
//! wait live in thread-locals of the writer thread, the only thread that writes.

use std::cell::Cell;
use std::time::{Duration, Instant};

use rusqlite::Connection;

thread_local! {
    /// How long one lock wait may last on this thread.
    static BUDGET: Cell<Duration> = const { Cell::new(Duration::from_secs(10)) };
    /// When the current lock wait began (set on the handler's first call for it).
    static WAITING_SINCE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Installs the short-wait handler on `conn` for waits of at most `budget`. Call it on the
/// thread that will use `conn`: the budget is kept per thread.
pub(super) fn install(conn: &Connection, budget: Duration) -> rusqlite::Result<()> {
    BUDGET.with(|b| b.set(budget));
    conn.busy_handler(Some(wait_briefly))
}

/// The pause before attempt `count + 1` of one lock wait.
fn pause(count: i32) -> Duration {
    match count {
        0..=9 => Duration::from_millis(1),
        _ => Duration::from_millis(2),
    }
}

/// SQLite calls this with the number of earlier calls for the same lock wait; `false` gives
/// up (the statement then fails with SQLITE_BUSY).
fn wait_briefly(count: i32) -> bool {
    let now = Instant::now();
    let since = if count == 0 {
        WAITING_SINCE.with(|w| w.set(Some(now)));
        now
    } else {
        WAITING_SINCE.with(Cell::get).unwrap_or(now)
    };
    if now.duration_since(since) >= BUDGET.with(Cell::get) {
        return false;
    }
    std::thread::sleep(pause(count));
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A write waits for another connection's transaction and gets the lock once it ends; with
    /// the lock held past its budget it gives up.
    #[test]
    fn waits_for_the_lock_then_gives_up_after_the_budget() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("busy.db");
        let holder = Connection::open(&path).expect("open holder");
        holder.execute_batch("PRAGMA journal_mode=WAL; CREATE TABLE t (x INTEGER);").expect("schema");
        holder.execute_batch("BEGIN IMMEDIATE; INSERT INTO t VALUES (1);").expect("hold the lock");

        let (gave_up, gave_up_rx) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn({
            let path = path.clone();
            move || {
                let conn = Connection::open(&path).expect("open waiter");
                install(&conn, Duration::from_millis(200)).expect("install");
                let started = Instant::now();
                let refused = conn.execute_batch("BEGIN IMMEDIATE");
                gave_up.send((refused.is_err(), started.elapsed())).expect("report");
                // The holder commits while this second wait is under way.
                install(&conn, Duration::from_secs(30)).expect("install");
                conn.execute_batch("BEGIN IMMEDIATE; INSERT INTO t VALUES (2); COMMIT;")
            }
        });
        let (refused, after) = gave_up_rx.recv().expect("first wait ends");
        assert!(refused, "a lock held past the budget is refused");
        assert!(after >= Duration::from_millis(200), "gave up after {after:?}");
        std::thread::sleep(Duration::from_millis(50));
        holder.execute_batch("COMMIT").expect("release");
        waiter.join().expect("waiter").expect("the lock is granted once released");
        let rows: i64 = holder.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).expect("count");
        assert_eq!(rows, 2);
    }
}
